"""What a packet claims, checked against itself, its raw rows, physics and `data/`; and the rules
read from checked packets (evidence grade, headline, data warnings)."""
