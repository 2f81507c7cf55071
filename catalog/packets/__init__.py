"""A packet's bytes: the canonical form, sealing and signing, reading a file back, and the keys
whose signatures the catalog trusts."""
