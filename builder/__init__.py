"""The static catalog builder: load and validate everything, build view models, render, write.

`python -m builder build` (or `make site`) turns `data/` and `packets/` into `site/`.
"""

from pathlib import Path

# Here, not in builder.render, so the command line can name it without importing Jinja.
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
