"""Bytes per weight as a checkpoint stores them, per quantization scheme and per component.

A scheme quantizes the linear layers of the language model's decoder; some components stay
16-bit. Which ones is a property of how the checkpoint was made, so every choice carries its
source. Scale overheads: FP8 per-channel keeps one 4-byte scale per output channel (about
4 / in_features bytes per weight); W4A16 group-128 keeps one 16-bit scale per 128 weights
(2 / 128 bytes per weight), symmetric, so no zero points.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from catalog.model.packet import Packet
from catalog.recipes.recipe import Recipe

_LLMC_LINEAR_ATTN = (
    "assumed: published Qwen3.5 FP8 and INT4 recipes made with llm-compressor keep `re:.*linear_attn.*` "
    "in BF16 (llm-compressor examples/quantization_w8a8_fp8/qwen3_5_moe.py; the Qwen3.5-9B-FP8-Dynamic "
    "cards of tcotter and depop-ml); RedHatAI's own ignore list for these repos was not read"
)
_LLMC_LM_HEAD = (
    "llm-compressor recipes ignore `lm_head`"
    " (RedHatAI model cards: only linear operators inside the transformer blocks are quantized)"
)
_LLMC_EMBEDDING = "embeddings are not Linear modules, so llm-compressor leaves them 16-bit"
_LLMC_MTP = (
    "assumed: llm-compressor quantizes through transformers, which has no MTP module, so the MTP head "
    "ships unquantized from the base checkpoint (the seed page calls it 'the publisher MTP head')"
)
_LLMC_VISION = "llm-compressor recipes for Qwen VL models ignore `re:.*visual.*`"


@dataclass(frozen=True)
class QuantScheme:
    id: str
    label: str
    weight_bits: int
    group_size: int | None  # None: one scale per output channel (or no scales for 16-bit)
    scale_bytes: int
    activation_bits: int
    kept_16bit: dict[str, str] = field(default_factory=dict)  # component -> why it stays 16-bit
    source: str = ""

    def bytes_per_weight(self, component: str, in_features: int) -> float:
        """Stored bytes per weight of one component, scales included."""
        if self.weight_bits >= 16 or component in self.kept_16bit:
            return 2.0
        base = self.weight_bits / 8
        if self.group_size is not None:
            return base + self.scale_bytes / self.group_size
        return base + self.scale_bytes / in_features

    def describe(self, component: str) -> str:
        if self.weight_bits >= 16:
            return "16-bit checkpoint"
        if component in self.kept_16bit:
            return f"kept 16-bit: {self.kept_16bit[component]}"
        if self.group_size is not None:
            return f"{self.weight_bits}-bit weights + one {self.scale_bytes}-byte scale per {self.group_size} weights"
        return f"{self.weight_bits}-bit weights + one {self.scale_bytes}-byte scale per output channel"


_LLMC_KEPT = {
    "lm_head": _LLMC_LM_HEAD,
    "embedding": _LLMC_EMBEDDING,
    "linear_attn": _LLMC_LINEAR_ATTN,
    "mtp": _LLMC_MTP,
    "vision": _LLMC_VISION,
}

BF16 = QuantScheme("bf16", "BF16", 16, None, 0, 16, source="16-bit checkpoint: 2 bytes per weight")
FP8_DYNAMIC = QuantScheme(
    "fp8-dynamic",
    "FP8-dynamic",
    8,
    None,
    4,
    8,
    dict(_LLMC_KEPT),
    "llm-compressor FP8_DYNAMIC: FP8 E4M3 weights with per-channel scales, activations quantized per token at run time",
)
W8A8_INT8 = QuantScheme(
    "w8a8", "W8A8 INT8", 8, None, 4, 8, dict(_LLMC_KEPT), "llm-compressor W8A8: INT8 weights with per-channel scales"
)
W4A16 = QuantScheme(
    "w4a16",
    "W4A16",
    4,
    128,
    2,
    16,
    dict(_LLMC_KEPT),
    "llm-compressor W4A16 (GPTQ): INT4 weights, group size 128, symmetric, 16-bit scales; 16-bit activations",
)
# The draft-only INT4 lm_head of the XPU stack (VLLM_XPU_DRAFT_LM_HEAD_INT4=1) quantizes the draft's
# copy of lm_head at load time; its grouping is not published, so group 128 with 16-bit scales is assumed.
DRAFT_LM_HEAD_INT4 = QuantScheme(
    "draft-int4",
    "draft INT4 lm_head",
    4,
    128,
    2,
    16,
    source="assumed: INT4 with one 16-bit scale per 128 weights, like W4A16"
    " (the XPU stack does not publish its grouping)",
)

SCHEMES: dict[str, QuantScheme] = {
    "bf16": BF16,
    "fp16": BF16,
    "default": BF16,
    "fp8": FP8_DYNAMIC,
    "fp8-dynamic": FP8_DYNAMIC,
    "fp8_dynamic": FP8_DYNAMIC,
    "w8a8-fp8": FP8_DYNAMIC,
    "w8a8": W8A8_INT8,
    "int8": W8A8_INT8,
    "w4a16": W4A16,
    "int4": W4A16,
    "gptq-int4": W4A16,
    "awq": W4A16,
}

DRAFT_INT4_ENV = "VLLM_XPU_DRAFT_LM_HEAD_INT4"


def scheme_for(quantization: str) -> QuantScheme | None:
    return SCHEMES.get(quantization.lower())


def packet_scheme(packet: Packet, recipe: Recipe | None) -> tuple[QuantScheme | None, str]:
    """The packet's quantization slug first, then its recipe variant's precision."""
    model = packet.identity.model
    scheme = scheme_for(model.quantization)
    if scheme is not None:
        return scheme, f"packet identity.model.quantization = {model.quantization!r}"
    if recipe is not None and model.variant and model.variant in recipe.variants:
        precision = recipe.variants[model.variant].precision
        scheme = scheme_for(precision)
        if scheme is not None:
            return scheme, f"recipe variants.{model.variant}.precision = {precision!r}"
    return None, f"unknown quantization {model.quantization!r}"


def kv_cache_bytes(dtype: str) -> float:
    """Bytes a KV cache value takes under a `--kv-cache-dtype`: fp8 (fp8, fp8_e4m3, fp8_e5m2) and
    int8 kinds take one; "auto" (vLLM's default, the model's own dtype) and the rest take two."""
    lowered = dtype.lower()
    return 1.0 if ("fp8" in lowered or "int8" in lowered) else 2.0


def variant_kv_cache_dtype(recipe: Recipe, variant: str) -> str | None:
    """The `--kv-cache-dtype` a recipe variant's arguments set, read as vLLM reads a command; None
    where they set none."""
    # imported here: catalog.recipes.command_facts reads this module's schemes
    from catalog.recipes.command_facts import KV_CACHE_DTYPE_FLAG, option_value
    from catalog.recipes.compose import split_joined

    return option_value(split_joined(recipe.variants[variant].extra_args), KV_CACHE_DTYPE_FLAG)
