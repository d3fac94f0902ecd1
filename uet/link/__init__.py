"""uet/link."""
