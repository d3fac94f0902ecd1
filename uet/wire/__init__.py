"""uet/wire."""
