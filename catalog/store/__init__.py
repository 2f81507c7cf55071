"""Loading a whole catalog from disk: documents with errors naming file, line and field, the
repository of recipes and packets, and the cache that keeps verified packets per content."""
