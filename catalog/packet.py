"""Evidence packets: one JSON file per campaign in `packets/`, sealed by a canonical sha256.

A packet holds one or more *arms* (a configuration: TP size, speculative method and depth,
draft head) measured on fresh servers, the gates comparing their token arrays, and ladders.
States and the packet id are derived; the validators refuse a file whose stored values
disagree with what they derive from.
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from catalog.base import EnvName, FieldError, Sha256, Slug, StrictModel
from catalog.canonical import canonical_sha256
from catalog.secrets import REDACTED, is_secret_env, redact_argv

HASH_EXCLUDED = frozenset({"id", "sha256"})


class State(StrEnum):
    MEASURED = "measured"
    WITHHELD = "withheld"
    SCREENED = "screened"
    IMPORTED = "imported"
    ESTIMATED = "estimated"


class SourceRef(StrictModel):
    """A published source an imported or screened result is taken from."""

    name: str = Field(min_length=1)
    url: str | None = None
    reference: str | None = None
    retrieved: date | None = None
    note: str | None = None


class Provenance(StrictModel):
    kind: Literal["measured", "imported", "screened"]
    source: SourceRef | None = None
    tool: str | None = None

    @model_validator(mode="after")
    def _source_named(self) -> Provenance:
        if self.kind != "measured" and self.source is None:
            raise ValueError(f"an {self.kind} packet must name its source")
        return self


class FileHash(StrictModel):
    name: str
    bytes: int = Field(ge=0)
    sha256: Sha256


class ModelConfigFacts(StrictModel):
    """What the projection and the fine print need from the model's config.json."""

    architecture: str | None = None
    num_layers: int | None = Field(default=None, gt=0)
    hidden_size: int | None = Field(default=None, gt=0)
    num_attention_heads: int | None = Field(default=None, gt=0)
    num_kv_heads: int | None = Field(default=None, gt=0)
    head_dim: int | None = Field(default=None, gt=0)
    vocab_size: int | None = Field(default=None, gt=0)
    full_attention_layers: int | None = Field(default=None, ge=0)
    linear_attention_layers: int | None = Field(default=None, ge=0)
    tie_word_embeddings: bool | None = None
    parameters: int | None = Field(default=None, gt=0)
    config_sha256: Sha256 | None = None


class ModelIdentity(StrictModel):
    slug: Slug
    # None only for an imported result whose checkpoint the recipe does not list as a variant.
    variant: str | None
    repo: str
    revision: str | None = None
    quantization: Slug
    quantization_label: str
    weight_bytes: int | None = Field(default=None, ge=0)
    weight_files: list[FileHash] = []
    config: ModelConfigFacts | None = None
    synthetic: bool = False
    synthetic_note: str | None = None


class RuntimeIdentity(StrictModel):
    name: str = "vLLM"
    platform: Literal["xpu", "cuda", "cpu"]
    version: str
    label: str
    torch_version: str | None = None
    image: str | None = None
    image_digest: str | None = None
    package_set_sha256: Sha256 | None = None


class HostIdentity(StrictModel):
    hardware: Slug
    card_count: int = Field(ge=1)
    device_name: str | None = None
    driver: str | None = None
    boot_id: str | None = None
    cpu: str | None = None
    os: str | None = None
    repo_revision: str | None = None


class Identity(StrictModel):
    model: ModelIdentity
    runtime: RuntimeIdentity
    host: HostIdentity


class Workload(StrictModel):
    suite_id: str
    suite_sha256: Sha256 | None = None
    canary_set_id: str | None = None
    canary_set_sha256: Sha256 | None = None
    max_tokens: int = Field(gt=0)
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    api: Literal["completions"] = "completions"


class ArmConfig(StrictModel):
    tensor_parallel_size: int = Field(ge=1)
    spec_method: str | None = None
    spec_depth: int = Field(default=0, ge=0)
    draft_head: str | None = None
    graph_capture: str | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = Field(default=None, gt=0)
    argv: list[str] = []
    env: dict[EnvName, str] = {}

    @model_validator(mode="after")
    def _depth_needs_method(self) -> ArmConfig:
        if (self.spec_depth > 0) != (self.spec_method is not None):
            raise ValueError("spec_method is set exactly when spec_depth > 0")
        return self

    @model_validator(mode="after")
    def _no_credentials(self) -> ArmConfig:
        """A packet is published byte for byte: a credential in it would be on the site."""
        for name, value in self.env.items():
            if is_secret_env(name) and value != REDACTED:
                raise FieldError(f"{name} holds a credential: record it as {REDACTED}", "env", name)
        for index, (arg, shown) in enumerate(zip(self.argv, redact_argv(self.argv), strict=True)):
            if arg != shown:
                raise FieldError(f"holds a credential: record it as {shown!r}", "argv", index)
        return self


class PromptRow(StrictModel):
    """One strict-suite prompt on one server. Times are client perf_counter offsets from send."""

    prompt_id: str
    class_id: str
    token_ids: list[int]
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    ttft_ms: float = Field(ge=0)
    token_times_ms: list[float]
    finish_reason: str | None = None
    decode_tok_s: float | None = None

    @model_validator(mode="after")
    def _counts_agree(self) -> PromptRow:
        if len(self.token_ids) != self.completion_tokens:
            raise ValueError("token_ids length differs from completion_tokens")
        if len(self.token_times_ms) != len(self.token_ids):
            raise ValueError("token_times_ms needs one time per token")
        return self


class CanaryResult(StrictModel):
    id: str
    passed: bool
    detail: str = ""


class SpecMetrics(StrictModel):
    """Differences of vLLM's /metrics counters over the strict suite."""

    drafts: int = Field(ge=0)
    draft_tokens: int = Field(ge=0)
    accepted_tokens: int = Field(ge=0)
    accepted_per_position: list[int] = []

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        return 1 + self.accepted_tokens / self.drafts if self.drafts else None


class ServerRun(StrictModel):
    """One fresh server. Imported results carry only the published values; rows stay empty."""

    label: str
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    decode_tok_s: float | None = Field(default=None, gt=0)
    ttft_ms: float | None = Field(default=None, ge=0)
    rows: list[PromptRow] = []
    canaries: list[CanaryResult] = []
    cache_zero: bool | None = None
    spec_metrics: SpecMetrics | None = None
    log: str | None = None
    startup_s: float | None = Field(default=None, ge=0)


class GateResult(StrictModel):
    gate: Literal["G1", "G2", "G3"]
    against: str
    server: str | None = None
    exact: int | None = Field(default=None, ge=0)
    total: int = Field(gt=0)
    passed: bool
    first_divergence: list[int | None] = []
    note: str | None = None

    @model_validator(mode="after")
    def _passed_matches_count(self) -> GateResult:
        if self.exact is not None:
            if self.exact > self.total:
                raise ValueError("exact exceeds total")
            if self.passed != (self.exact == self.total):
                raise ValueError("passed must equal exact == total")
        if self.first_divergence and len(self.first_divergence) != self.total:
            raise ValueError("first_divergence needs one entry per prompt")
        return self

    @property
    def summary(self) -> str:
        count = f"{self.exact}/{self.total}" if self.exact is not None else "failed"
        who = f" server {self.server}" if self.server else ""
        return f"{self.gate}{who} {count} vs {self.against}"


class Arm(StrictModel):
    id: Slug
    label: str
    config: ArmConfig
    servers: list[ServerRun] = []
    oracle_decode_tok_s: list[float] = []
    gates: list[GateResult] = []
    state: State
    withheld_reason: str | None = None
    published_figure: float | None = None
    published_ttft_ms: list[float] = []
    note: str | None = None

    @property
    def server_values(self) -> list[float]:
        return [s.decode_tok_s for s in self.servers if s.decode_tok_s is not None]

    @property
    def decode_tok_s(self) -> float | None:
        """The centre of the fresh-server pair: the one value the catalog publishes for an arm."""
        values = self.server_values
        return sum(values) / len(values) if values else None

    @property
    def ttft_ms(self) -> float | None:
        values = [s.ttft_ms for s in self.servers if s.ttft_ms is not None] or self.published_ttft_ms
        return sum(values) / len(values) if values else None

    @property
    def failed_gates(self) -> list[GateResult]:
        return [g for g in self.gates if not g.passed]


class ConcurrencyPoint(StrictModel):
    users: int = Field(ge=1)
    completion_tokens: int = Field(ge=0)
    wall_s: float = Field(gt=0)
    identical_to_oracle: bool | None = None

    @property
    def aggregate_tok_s(self) -> float:
        return self.completion_tokens / self.wall_s


class ContextPoint(StrictModel):
    depth_tokens: int = Field(ge=1)
    content_class: str
    decode_tok_s: float | None = Field(default=None, gt=0)
    ttft_ms: float | None = Field(default=None, ge=0)
    identical_to_oracle: bool | None = None


class Ladder(StrictModel):
    arm: Slug
    kind: Literal["concurrency", "context"]
    concurrency: list[ConcurrencyPoint] = []
    context: list[ContextPoint] = []


class Packet(StrictModel):
    schema_version: Literal[1]
    id: str
    sha256: Sha256
    title: str
    created: datetime | None = None
    provenance: Provenance
    identity: Identity
    workload: Workload
    arms: list[Arm] = Field(min_length=1)
    ladders: list[Ladder] = []
    reproduces: str | None = None
    state: State

    @model_validator(mode="after")
    def _derived_values_agree(self) -> Packet:
        _check_unique([a.id for a in self.arms], "arm id", "arms")
        arm_ids = {a.id for a in self.arms}
        for index, ladder in enumerate(self.ladders):
            if ladder.arm not in arm_ids:
                raise FieldError(f"ladder names unknown arm {ladder.arm!r}", "ladders", index, "arm")
        for index, arm in enumerate(self.arms):
            expected = arm_state(self.provenance.kind, arm)
            if arm.state != expected:
                raise FieldError(
                    f"arm {arm.id!r}: state is {arm.state.value}, its gates make it {expected.value}",
                    "arms",
                    index,
                    "state",
                )
            if arm.state == State.WITHHELD and not arm.withheld_reason:
                raise FieldError(
                    f"arm {arm.id!r}: a withheld arm needs withheld_reason", "arms", index, "withheld_reason"
                )
        if self.state != packet_state(self.provenance.kind, self.arms):
            raise FieldError(
                f"state is {self.state.value}, its arms make it {packet_state(self.provenance.kind, self.arms).value}",
                "state",
            )
        return self

    def content_hash(self) -> str:
        return packet_hash(self.model_dump(mode="json"))

    def expected_id(self) -> str:
        return packet_id(self.identity.model.slug, self.identity.model.quantization, self.sha256)

    def arm(self, arm_id: str) -> Arm:
        return next(a for a in self.arms if a.id == arm_id)


def arm_state(provenance: str, arm: Arm) -> State:
    """Screened stays screened; a failed gate withholds; otherwise measured or imported."""
    if provenance == "screened":
        return State.SCREENED
    if arm.failed_gates:
        return State.WITHHELD
    return State.MEASURED if provenance == "measured" else State.IMPORTED


def packet_state(provenance: str, arms: list[Arm]) -> State:
    if provenance == "screened":
        return State.SCREENED
    if all(a.state == State.WITHHELD for a in arms):
        return State.WITHHELD
    return State.MEASURED if provenance == "measured" else State.IMPORTED


def packet_hash(dumped: dict[str, object]) -> str:
    """sha256 of the canonical JSON of everything but the id and the hash itself."""
    return canonical_sha256({k: v for k, v in dumped.items() if k not in HASH_EXCLUDED})


def packet_id(model_slug: str, quantization: str, sha256: str) -> str:
    return f"{model_slug}-{quantization}-{sha256[:8]}"


def _check_unique(ids: list[str], what: str, *loc: str | int) -> None:
    if len(set(ids)) != len(ids):
        raise FieldError(f"duplicate {what}", *loc)
