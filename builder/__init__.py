"""The static catalog builder: load and validate everything, build view models, render, write.

`python -m builder build` (or `make site`) turns `data/` and `packets/` into `site/`.
"""
