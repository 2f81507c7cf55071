"""Overlays (`data/overlays/<slug>.yaml`): what the catalog measured that the upstream recipe does
not list, kept beside the upstream file instead of editing it.

An overlay adds variants (a build such as Qwen3.5 9B W4A16), hardware overrides appended after the
recipe's own (the recipe guide's B70 `--max-model-len 8192`), measured configurations (a
variant on a card with its env switches and speculative config), and the model's sourced facts
(catalog/recipes/model_facts.py) every packet of the recipe is checked against. The loader merges
it into the recipe with the same strictness as the recipe itself: an unknown key, a variant the
recipe already has, or a reference to a variant, card or feature that does not exist fails with
the overlay's file, line and field. The upstream file stays byte for byte what upstream publishes.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import Field

from catalog.errors import CatalogError
from catalog.model.base import Slug, StrictModel
from catalog.recipes.hardware import Hardware
from catalog.recipes.model_facts import ModelFacts
from catalog.recipes.recipe import Configuration, HardwareOverride, Recipe, Variant
from catalog.recipes.vllm_serve_options import SPECULATIVE_CONFIG_KEYS
from catalog.store.documents import Loc, dotted, line_of, read_document, validate_as


class Overlay(StrictModel):
    schema_version: Literal[1] = Field(description="Overlay format version.")
    recipe: Slug = Field(description="Slug of the recipe laid over; must match the file name.")
    note: str | None = Field(default=None, description="Free text about the overlay.")
    variants: dict[Slug, Variant] = Field(
        default={}, description="Variants the recipe does not list; never one it has."
    )
    hardware_overrides: dict[str, HardwareOverride] = Field(
        default={}, description="Arguments and environment appended after the recipe's own on a hardware key."
    )
    configurations: dict[Slug, Configuration] = Field(
        default={}, description="Configurations the catalog measured, by name."
    )
    facts: ModelFacts | None = Field(
        default=None,
        description="The model's facts, each with its source: packets are checked against them, never the reverse.",
    )


def _error(message: str, path: Path, text: str, *loc: str | int) -> CatalogError:
    where: Loc = tuple(loc)
    return CatalogError(message, file=path, field=dotted(where), line=line_of(text, where))


def load_overlay(path: Path, recipes: dict[str, Recipe], hardware: Iterable[Hardware]) -> Recipe:
    """The recipe the overlay names, with the overlay merged in; CatalogError with file and line."""
    text, data = read_document(path)
    overlay = validate_as(Overlay, data, path, text)
    if overlay.recipe != path.stem:
        raise _error(f"recipe {overlay.recipe!r} must match the file name {path.stem!r}", path, text, "recipe")
    recipe = recipes.get(overlay.recipe)
    if recipe is None:
        raise _error(f"no recipe data/models/{overlay.recipe}.yaml to lay this over", path, text, "recipe")
    cards = {card.id: card for card in hardware}
    keys = {k for card in cards.values() for k in (card.vendor.lower(), card.generation, card.id)}
    for name in overlay.variants:
        if name in recipe.variants:
            raise _error(
                f"the recipe already has variant {name!r}: overlays add, never replace", path, text, "variants", name
            )
    for key in overlay.hardware_overrides:
        if key not in keys:
            raise _error(
                f"{key!r} names no card, vendor or generation in data/hardware.yaml",
                path,
                text,
                "hardware_overrides",
                key,
            )
    variants = {**recipe.variants, **overlay.variants}
    for name, config in overlay.configurations.items():
        if config.variant not in variants:
            raise _error(
                f"unknown variant {config.variant!r} (choose from {', '.join(variants)})",
                path,
                text,
                "configurations",
                name,
                "variant",
            )
        if config.hardware not in cards:
            raise _error(f"unknown hardware {config.hardware!r}", path, text, "configurations", name, "hardware")
        for index, feature in enumerate(config.features or []):
            if feature not in recipe.features:
                raise _error(f"unknown feature {feature!r}", path, text, "configurations", name, "features", index)
        if config.speculative_config is not None and "method" not in config.speculative_config:
            raise _error(
                "a speculative config names its method", path, text, "configurations", name, "speculative_config"
            )
        for key in config.speculative_config or {}:
            if key.replace("-", "_") not in SPECULATIVE_CONFIG_KEYS:
                raise _error(
                    f"{key!r} is no key of vLLM's SpeculativeConfig: vLLM would refuse the command",
                    path,
                    text,
                    "configurations",
                    name,
                    "speculative_config",
                    key,
                )
    overrides = dict(recipe.hardware_overrides)
    for key, extra in overlay.hardware_overrides.items():
        base = overrides.get(key, HardwareOverride())
        overrides[key] = HardwareOverride(
            extra_args=[*base.extra_args, *extra.extra_args], extra_env={**base.extra_env, **extra.extra_env}
        )
    return recipe.model_copy(
        update={
            "variants": variants,
            "hardware_overrides": overrides,
            "configurations": {**recipe.configurations, **overlay.configurations},
            "facts": overlay.facts or recipe.facts,
        }
    )
