"""uet/pds."""
