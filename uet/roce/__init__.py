"""uet/roce."""
