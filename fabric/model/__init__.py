"""fabric/model."""
