"""What the catalog knows about a model, each fact with its source: the `facts` of an overlay
(data/overlays/<slug>.yaml).

A packet names its model (recipe slug and variant); the architecture, vocabulary and release date
of that model are these facts, never what the packet declares about itself. A packet's declared
config must agree with them (catalog/checks/facts.py), and the physical ceiling and floors are
computed from them (catalog/projection/facts.py turns them into the projection's inputs). A
quantized build shares its base model's architecture, so one table serves every variant of a
recipe; what differs per variant (precision) is the recipe's own `variants[].precision`.

A value whose source is an assumption says so: its source starts with "assumed:".
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Generic, TypeVar

from pydantic import Field, NonNegativeInt, PositiveInt, StringConstraints, model_validator

from catalog.model.base import FieldError, StrictModel

T = TypeVar("T")
Source = Annotated[str, StringConstraints(min_length=1)]


class Sourced(StrictModel, Generic[T]):
    """A value and the place it comes from (a model card, a config.json, a paper)."""

    value: T = Field(description="The fact.")
    source: Source = Field(description="Where the fact comes from; an assumption starts with 'assumed:'.")


class VisionTowerFacts(StrictModel):
    """A ViT tower as Qwen3-VL / Qwen3.5 configs describe it (`vision_config`)."""

    depth: PositiveInt = Field(description="Transformer blocks of the tower.")
    hidden_size: PositiveInt = Field(description="Width of the tower's hidden state.")
    intermediate_size: PositiveInt = Field(description="Width of the tower's MLP.")
    out_hidden_size: PositiveInt = Field(description="Width the merger projects to (the text hidden size).")
    patch_size: PositiveInt = Field(description="Spatial patch size, pixels.")
    temporal_patch_size: PositiveInt = Field(description="Frames per temporal patch.")
    in_channels: PositiveInt = Field(description="Input channels (3 for RGB).")
    spatial_merge_size: PositiveInt = Field(description="Patches merged per side before the projection.")
    num_position_embeddings: PositiveInt = Field(description="Learned position embeddings.")


class ModelFacts(StrictModel):
    """The model's facts. Those every check needs are required; the rest refine the projection."""

    released: Sourced[date] = Field(
        description="First day the model was public: no packet of it can be dated before (UTC day)."
    )
    architecture: Sourced[Annotated[str, StringConstraints(min_length=1)]] = Field(
        description="The architectures entry of config.json."
    )
    num_layers: Sourced[PositiveInt] = Field(description="Decoder layers.")
    hidden_size: Sourced[PositiveInt] = Field(description="Width of the hidden state.")
    num_attention_heads: Sourced[PositiveInt] = Field(description="Query heads per attention layer.")
    vocab_size: Sourced[PositiveInt] = Field(
        description="Tokens in the vocabulary (padded): every token id is below it."
    )
    intermediate_size: Sourced[PositiveInt] | None = Field(default=None, description="Width of the MLP.")
    num_kv_heads: Sourced[PositiveInt] | None = Field(default=None, description="Key/value heads per attention layer.")
    head_dim: Sourced[PositiveInt] | None = Field(default=None, description="Width of one attention head.")
    attn_output_gate: Sourced[bool] | None = Field(
        default=None, description="Whether q_proj also emits an output gate (gated attention)."
    )
    tie_word_embeddings: Sourced[bool] | None = Field(
        default=None, description="Whether lm_head shares the input embedding's weights."
    )
    full_attention_layers: Sourced[NonNegativeInt] | None = Field(
        default=None, description="Layers with full attention, whose KV cache grows with context."
    )
    linear_attention_layers: Sourced[NonNegativeInt] | None = Field(
        default=None, description="Layers with linear attention, whose state does not grow with context."
    )
    linear_num_key_heads: Sourced[PositiveInt] | None = Field(default=None, description="Linear-attention key heads.")
    linear_num_value_heads: Sourced[PositiveInt] | None = Field(
        default=None, description="Linear-attention value heads."
    )
    linear_key_head_dim: Sourced[PositiveInt] | None = Field(
        default=None, description="Width of one linear-attention key head."
    )
    linear_value_head_dim: Sourced[PositiveInt] | None = Field(
        default=None, description="Width of one linear-attention value head."
    )
    linear_conv_kernel_dim: Sourced[PositiveInt] | None = Field(
        default=None, description="Depthwise convolution kernel of the linear-attention layers."
    )
    mtp_layers: Sourced[NonNegativeInt] | None = Field(
        default=None, description="Multi-token-prediction decoder layers the checkpoint ships."
    )
    vision: Sourced[VisionTowerFacts] | None = Field(default=None, description="The vision tower, if any.")
    bf16_checkpoint_bytes: Sourced[PositiveInt] | None = Field(
        default=None, description="Bytes of the 16-bit checkpoint, where published: a cross-check of the layout."
    )

    @model_validator(mode="after")
    def _layers_add_up(self) -> ModelFacts:
        full, linear = self.full_attention_layers, self.linear_attention_layers
        if full is not None and linear is not None and full.value + linear.value != self.num_layers.value:
            raise FieldError(
                f"full ({full.value}) and linear ({linear.value}) attention layers do not add up to"
                f" num_layers {self.num_layers.value}",
                "linear_attention_layers",
            )
        return self
