"""uet/cc."""
