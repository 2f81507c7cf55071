"""A recipe's `default_frontend: rust` is said on its page not to be applied (issue 29, item 10):
vLLM 0.32 selects the Rust frontend with VLLM_USE_RUST_FRONTEND=1 under `vllm serve` only
(vllm/entrypoints/cli/serve.py), and no composed command or measured server here uses it."""

from __future__ import annotations

from pathlib import Path

from builder.views.recipe import NO_EVIDENCE, recipe_view
from catalog.recipes.compose import Selection, compose
from catalog.store.repository import load_catalog
from tests.builder.factory import write_catalog
from tests.builder.made import site_context


def test_the_recipe_page_says_the_rust_frontend_is_not_applied(tmp_path: Path) -> None:
    catalog = load_catalog(*write_catalog(tmp_path))
    ctx = site_context(catalog)
    recipe = catalog.recipes["fixture-7b"]
    rust = recipe.model_copy(update={"model": recipe.model.model_copy(update={"default_frontend": "rust"})})
    fact = next(f for f in recipe_view(rust, ctx, NO_EVIDENCE).facts if f.label == "default frontend")
    assert fact.value == "rust" and fact.note.startswith("not applied by this catalog")
    assert "VLLM_USE_RUST_FRONTEND" not in compose(rust, Selection()).env  # and indeed not composed
    assert not any(f.label == "default frontend" for f in recipe_view(recipe, ctx, NO_EVIDENCE).facts)
