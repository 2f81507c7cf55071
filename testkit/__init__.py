"""Support shared by tests/ and bench/: neither imports the other, both import this."""
