"""uet/ses."""
