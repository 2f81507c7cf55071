"""View models: plain dataclasses prepared from the catalog; templates only display them."""
