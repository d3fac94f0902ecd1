"""fabric."""
