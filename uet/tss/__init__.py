"""uet/tss."""
