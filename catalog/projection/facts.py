"""Architecture facts a projection needs, each with the place it comes from.

Order of preference for every number: the packet (`identity.model.config`, written from the
config.json the server loaded), then the table below (facts about public models, each with its
source), then nothing. The table exists because the packet's `ModelConfigFacts` has no room for
intermediate size, linear-attention state sizes, the MTP head or the vision tower, and the
community recipe format (`data/models/*.yaml`) cannot take new keys. Quantized builds share the
architecture of their base model, so the table is keyed by the base repository with aliases.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
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


@dataclass(frozen=True)
class KnownModel:
    repos: tuple[str, ...]  # base repository first, then builds with the same architecture
    facts: ArchitectureFacts


def _t(value: T, source: str) -> Fact[T]:
    return Fact(value, source, "model-table")


_QWEN35_CARD_9B = "Qwen/Qwen3.5-9B model card (huggingface.co/Qwen/Qwen3.5-9B)"
_QWEN35_CONFIG_9B = "Qwen/Qwen3.5-9B config.json text_config"
_MILES_9B = "Megatron args for Qwen3.5-9B (github.com/radixark/miles scripts/models/qwen3.5-9B.sh)"
_MILES_4B = "Megatron args for Qwen3.5-4B (github.com/radixark/miles scripts/models/qwen3.5-4B.sh)"
_APX_4B = "Qwen3.5-4B specification (apxml.com/models/qwen35-4b)"

# Qwen3.5 vision tower: Qwen3.5 configs publish vision_config {depth 27, hidden_size 1152,
# intermediate_size 4304, patch_size 16, temporal_patch_size 2, in_channels 3, spatial_merge_size 2,
# num_position_embeddings 2304}; out_hidden_size is the text hidden size.
_VISION_SOURCE = (
    "Qwen3.5 vision_config (depth 27, hidden_size 1152, intermediate_size 4304, patch 16x16x2, "
    "spatial_merge_size 2, 2304 position embeddings; out_hidden_size = text hidden size), as in the "
    "published Qwen3.5 configs and the Qwen3.5-9B GPTQ card's 'DeepStack ViT, 27 layers, hidden_size 1,152'"
)


def _qwen35_vision(out_hidden: int) -> VisionTower:
    return VisionTower(27, 1152, 4304, out_hidden, 16, 2, 3, 2, 2304)


KNOWN_MODELS: tuple[KnownModel, ...] = (
    KnownModel(
        repos=("Qwen/Qwen3.5-9B", "RedHatAI/Qwen3.5-9B-FP8-dynamic", "RedHatAI/Qwen3.5-9B-quantized.w4a16"),
        facts=ArchitectureFacts(
            architecture=_t("Qwen3_5ForConditionalGeneration", f"{_QWEN35_CONFIG_9B} architectures"),
            num_layers=_t(32, f"{_QWEN35_CARD_9B}: 'Number of Layers: 32'"),
            hidden_size=_t(4096, f"{_QWEN35_CARD_9B}: 'Hidden Dimension: 4096'"),
            intermediate_size=_t(12288, f"{_QWEN35_CARD_9B}: 'Intermediate Dimension: 12288'; {_MILES_9B}"),
            num_attention_heads=_t(16, f"{_QWEN35_CARD_9B}: 'Gated Attention: 16 for Q and 4 for KV'"),
            num_kv_heads=_t(4, f"{_QWEN35_CARD_9B}: 'Gated Attention: 16 for Q and 4 for KV'"),
            head_dim=_t(256, f"{_QWEN35_CARD_9B}: 'Gated Attention ... Head Dimension: 256'"),
            attn_output_gate=_t(True, f"{_QWEN35_CONFIG_9B}.attn_output_gate (q_proj also emits the gate)"),
            vocab_size=_t(248320, f"{_QWEN35_CARD_9B}: 'Token Embedding: 248320 (Padded)'"),
            tie_word_embeddings=_t(False, f"{_MILES_9B} passes --untie-embeddings-and-output-weights"),
            full_attention_layers=_t(
                8, f"{_QWEN35_CARD_9B}: 'Hidden Layout: 8 × (3 × Gated DeltaNet → 1 × Gated Attention)'"
            ),
            linear_attention_layers=_t(
                24, f"{_QWEN35_CARD_9B}: 'Hidden Layout: 8 × (3 × Gated DeltaNet → 1 × Gated Attention)'"
            ),
            linear_num_key_heads=_t(16, f"{_QWEN35_CARD_9B}: 'Linear Attention Heads: 32 for V and 16 for QK'"),
            linear_num_value_heads=_t(32, f"{_QWEN35_CARD_9B}: 'Linear Attention Heads: 32 for V and 16 for QK'"),
            linear_key_head_dim=_t(128, f"{_QWEN35_CARD_9B}: 'Gated DeltaNet ... Head Dimension: 128'"),
            linear_value_head_dim=_t(128, f"{_QWEN35_CARD_9B}: 'Gated DeltaNet ... Head Dimension: 128'"),
            linear_conv_kernel_dim=_t(4, f"{_QWEN35_CONFIG_9B}.linear_conv_kernel_dim"),
            mtp_layers=_t(
                1, f"{_QWEN35_CONFIG_9B}.mtp_num_hidden_layers (one MTP decoder layer sharing embeddings and lm_head)"
            ),
            vision=_t(_qwen35_vision(4096), _VISION_SOURCE),
            bf16_checkpoint_bytes=_t(
                19_300_000_000,
                "BF16 checkpoint of Qwen/Qwen3.5-9B: 19.3 GB, as quoted by davidyu-nv/Qwen3.5-9B-NVFP4-MSE "
                "('12.38 GB vs 19.3 GB BF16'); used only as a cross-check of the parameter count",
            ),
        ),
    ),
    KnownModel(
        repos=("Qwen/Qwen3.5-4B", "RedHatAI/Qwen3.5-4B-FP8-dynamic", "RedHatAI/Qwen3.5-4B-quantized.w4a16"),
        facts=ArchitectureFacts(
            architecture=_t("Qwen3_5ForConditionalGeneration", "Qwen/Qwen3.5-4B config.json architectures"),
            num_layers=_t(32, f"{_MILES_4B} --num-layers 32; {_APX_4B}"),
            hidden_size=_t(2560, f"{_MILES_4B} --hidden-size 2560; {_APX_4B}"),
            intermediate_size=_t(9216, f"{_MILES_4B} --ffn-hidden-size 9216; {_APX_4B}"),
            num_attention_heads=_t(16, f"{_MILES_4B} --num-attention-heads 16"),
            num_kv_heads=_t(4, f"{_MILES_4B} --num-query-groups 4"),
            head_dim=_t(256, f"{_MILES_4B} --kv-channels 256"),
            attn_output_gate=_t(True, f"{_MILES_4B} --attention-output-gate"),
            vocab_size=_t(248320, f"{_MILES_4B} --vocab-size 248320"),
            tie_word_embeddings=_t(
                True,
                f"{_MILES_4B} has no --untie-embeddings-and-output-weights (the 9B's args do):"
                f" lm_head is the embedding table",
            ),
            full_attention_layers=_t(8, "Qwen3.5 full_attention_interval 4: every 4th of 32 layers is full attention"),
            linear_attention_layers=_t(24, "Qwen3.5 full_attention_interval 4: 24 of 32 layers are Gated DeltaNet"),
            linear_num_key_heads=_t(
                16,
                "assumed: transformers Qwen3_5TextConfig default linear_num_key_heads 16"
                " (third-party Qwen3.5 configs with hidden_size 2560 show 16)",
            ),
            linear_num_value_heads=_t(
                32,
                "assumed: transformers Qwen3_5TextConfig default linear_num_value_heads 32"
                " (third-party Qwen3.5 configs with hidden_size 2560 show 32)",
            ),
            linear_key_head_dim=_t(128, "assumed: transformers Qwen3_5TextConfig default linear_key_head_dim 128"),
            linear_value_head_dim=_t(128, "assumed: transformers Qwen3_5TextConfig default linear_value_head_dim 128"),
            linear_conv_kernel_dim=_t(4, "assumed: transformers Qwen3_5TextConfig default linear_conv_kernel_dim 4"),
            mtp_layers=_t(1, f"{_APX_4B}: 'Multi-Token Prediction Heads: 1'"),
            vision=_t(_qwen35_vision(2560), f"assumed: the 9B's tower; {_VISION_SOURCE}"),
        ),
    ),
)


@cache  # KNOWN_MODELS is constant; every projection asks, twice, for the same few repos
def known_model(*repos: str | None) -> KnownModel | None:
    wanted = [r.lower() for r in repos if r]
    for repo in wanted:
        for model in KNOWN_MODELS:
            if repo in (r.lower() for r in model.repos):
                return model
    return None


_PACKET_FIELDS = (
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


def resolve_architecture(packet: Packet | None, recipe: Recipe | None, repo: str | None = None) -> ArchitectureFacts:
    """Packet facts where recorded, the table for the rest. Conflicts keep the packet's value."""
    repos: list[str | None] = [repo]
    if packet is not None:
        repos.append(packet.identity.model.repo)
    if recipe is not None:
        variant = packet.identity.model.variant if packet is not None else None
        if variant and variant in recipe.variants:
            repos.append(recipe.variant_model_id(variant))
        repos.append(recipe.model.model_id)
    table = known_model(*repos)
    merged: dict[str, object] = dict(table.facts.known()) if table else {}
    config: ModelConfigFacts | None = packet.identity.model.config if packet is not None else None
    if config is not None:
        for name in _PACKET_FIELDS:
            value = getattr(config, name)
            if value is not None:
                merged[name] = Fact(value, f"packet identity.model.config.{name}", "packet")
    return ArchitectureFacts(**merged)  # type: ignore[arg-type]


def conflicts(packet: Packet | None, table: KnownModel | None) -> list[str]:
    """Where the packet's recorded config and the table disagree (the packet wins; say so)."""
    if packet is None or table is None or packet.identity.model.config is None:
        return []
    out = []
    for name in _PACKET_FIELDS:
        recorded = getattr(packet.identity.model.config, name)
        tabled = getattr(table.facts, name)
        if recorded is not None and tabled is not None and recorded != tabled.value:
            out.append(
                f"packet records {name}={recorded!r}, the model table says {tabled.value!r}"
                f" ({tabled.source}); the packet's value is used"
            )
    return out
