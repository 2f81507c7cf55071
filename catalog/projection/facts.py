"""Architecture facts a projection needs, each with the place it comes from.

The catalog's facts come first and alone: the recipe's `facts` (an overlay's sourced table,
catalog/recipes/model_facts.py). What a packet declares about its model (`identity.model.config`)
is never used for a real model: catalog/checks/facts.py refuses a packet whose declared facts
disagree with the catalog's, so a packet cannot raise its own ceiling by shrinking its model. Only
a synthetic model (the CPU demo, made locally) has no facts but its own, and its packet's are used.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Generic, Literal, TypeVar

from catalog.model.packet import ModelConfigFacts, Packet
from catalog.recipes.recipe import Recipe

T = TypeVar("T")
# Covariant: a Fact[int] is a Fact[object], so code that only reads a fact takes any of them.
T_co = TypeVar("T_co", covariant=True)
Origin = Literal["packet", "recipe", "hardware", "model-table", "assumed", "derived"]


@dataclass(frozen=True)
class Fact(Generic[T_co]):
    value: T_co
    source: str
    origin: Origin


@dataclass(frozen=True)
class VisionTower:
    """A ViT tower as Qwen3-VL / Qwen3.5 configs describe it (`vision_config`)."""

    depth: int
    hidden_size: int
    intermediate_size: int
    out_hidden_size: int
    patch_size: int
    temporal_patch_size: int
    in_channels: int
    spatial_merge_size: int
    num_position_embeddings: int

    @property
    def parameters(self) -> int:
        h, i = self.hidden_size, self.intermediate_size
        block = (h * 3 * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h) + 4 * h  # qkv, proj, fc1, fc2, 2 LN
        patch = self.in_channels * self.temporal_patch_size * self.patch_size**2 * h + h
        merged = h * self.spatial_merge_size**2
        merger = 2 * h + (merged * merged + merged) + (merged * self.out_hidden_size + self.out_hidden_size)
        return self.depth * block + patch + self.num_position_embeddings * h + merger


@dataclass(frozen=True)
class ArchitectureFacts:
    """Everything the byte and FLOP model reads. A None field is unknown."""

    architecture: Fact[str] | None = None
    num_layers: Fact[int] | None = None
    hidden_size: Fact[int] | None = None
    intermediate_size: Fact[int] | None = None
    num_attention_heads: Fact[int] | None = None
    num_kv_heads: Fact[int] | None = None
    head_dim: Fact[int] | None = None
    attn_output_gate: Fact[bool] | None = None
    vocab_size: Fact[int] | None = None
    tie_word_embeddings: Fact[bool] | None = None
    full_attention_layers: Fact[int] | None = None
    linear_attention_layers: Fact[int] | None = None
    linear_num_key_heads: Fact[int] | None = None
    linear_num_value_heads: Fact[int] | None = None
    linear_key_head_dim: Fact[int] | None = None
    linear_value_head_dim: Fact[int] | None = None
    linear_conv_kernel_dim: Fact[int] | None = None
    mtp_layers: Fact[int] | None = None
    vision: Fact[VisionTower] | None = None
    bf16_checkpoint_bytes: Fact[int] | None = None

    def known(self) -> dict[str, Fact[object]]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


# The table's scalar facts, read by name (the vision tower is converted on its own).
_TABLE_FIELDS = tuple(f.name for f in fields(ArchitectureFacts) if f.name != "vision")


PACKET_FIELDS = (
    # what identity.model.config may declare, each a fact of the catalog's too
    "architecture",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "vocab_size",
    "full_attention_layers",
    "linear_attention_layers",
    "tie_word_embeddings",
)


def catalog_facts(recipe: Recipe | None) -> ArchitectureFacts:
    """The recipe's sourced facts as the projection reads them; empty when the catalog has none."""
    table = recipe.facts if recipe is not None else None
    if table is None:
        return ArchitectureFacts()
    known: dict[str, object] = {}
    for name in _TABLE_FIELDS:
        entry = getattr(table, name)
        if entry is not None:
            known[name] = Fact(entry.value, entry.source, "model-table")
    if table.vision is not None:
        known["vision"] = Fact(VisionTower(**table.vision.value.model_dump()), table.vision.source, "model-table")
    return ArchitectureFacts(**known)  # type: ignore[arg-type]


def declared_facts(packet: Packet) -> ArchitectureFacts:
    """What a packet declares about its model: the facts of a synthetic model only."""
    config: ModelConfigFacts | None = packet.identity.model.config
    if config is None:
        return ArchitectureFacts()
    known = {
        name: Fact(getattr(config, name), f"packet identity.model.config.{name}", "packet")
        for name in PACKET_FIELDS
        if getattr(config, name) is not None
    }
    return ArchitectureFacts(**known)


def resolve_architecture(packet: Packet | None, recipe: Recipe | None) -> ArchitectureFacts:
    """The catalog's facts for the packet's model; a synthetic packet's own facts where the catalog
    has none (a locally made model has no published facts)."""
    facts = catalog_facts(recipe)
    if not facts.known() and packet is not None and packet.identity.model.synthetic:
        return declared_facts(packet)
    return facts
