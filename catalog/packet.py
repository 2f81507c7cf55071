"""Evidence packets, schema 2: one JSON file per campaign in `packets/`.

A packet holds one or more *arms* (a configuration: TP size, speculative method and depth,
draft head) measured on fresh servers, the gates comparing their token arrays, and ladders.
The file's bytes are its canonical form: its sha256 is the packet's digest, its id is
`<model>-<quant>-<digest[:8]>`, and a signature beside it (`<id>.dsse.json`) signs that digest
(catalog/packet_io.py seals, reads and writes; catalog/signing.py signs). States are derived
from the gates by the rules below; the validators refuse a file whose stored values disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, SerializerFunctionWrapHandler, model_serializer, model_validator

from catalog.arrays import UInt32Array
from catalog.base import EnvName, FieldError, Sha256, Slug, StrictModel
from catalog.load import LoadSweep
from catalog.secrets import REDACTED, is_secret_env, redact_argv

SCHEMA_VERSION = 2


class _Additions(StrictModel):
    """A schema-2 model that gained optional fields after packets were published: a field named in
    ADDED is left out of the canonical form while it holds its default, so every packet written
    before it existed keeps its exact bytes (and its digest and signature) when read and re-encoded."""

    ADDED: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_unset_additions(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        fields = type(self).model_fields
        for name in self.ADDED:
            if name in out and out[name] == fields[name].get_default(call_default_factory=True):
                del out[name]
        return out


class State(StrEnum):
    """The one home of what each state means, which ones publish a figure, and their order."""

    MEASURED = "measured"
    WITHHELD = "withheld"
    SCREENED = "screened"
    IMPORTED = "imported"
    ESTIMATED = "estimated"

    @property
    def published(self) -> bool:
        """A figure that may lead a page: measured here, or imported from a named source."""
        return self in (State.MEASURED, State.IMPORTED)

    @property
    def has_speed(self) -> bool:
        """A speed figure exists and may be drawn (screened is speed only); withheld never is."""
        return self.published or self == State.SCREENED

    @property
    def rank(self) -> int:
        """Best evidence first: the order a family's best state is chosen in."""
        return _STATE_ORDER.index(self)

    @property
    def label(self) -> str:
        return self.value.capitalize()

    @property
    def meaning(self) -> str:
        return _STATE_MEANINGS[self]


# What a page says of a screened arm taken from a source that printed its speed but no identity
# outcome (runner/import_reference.py seals such arms as screened, never with a borrowed count).
IDENTITY_NOT_PUBLISHED = "identity not published by the source"

_STATE_ORDER = [State.MEASURED, State.IMPORTED, State.SCREENED, State.ESTIMATED, State.WITHHELD]
_STATE_MEANINGS = {
    State.MEASURED: "measured by this runner on fresh servers; every gate it carries passed",
    State.IMPORTED: "taken from a named published source; not measured by this runner",
    State.WITHHELD: "measured, but speculative output was not identical to the oracle (or the oracle itself "
    "was not repeat-exact): its speed is not published",
    State.SCREENED: "a speed check only, with no identity gate",
    State.ESTIMATED: "derived, not measured",
}


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


class RuntimeIdentity(_Additions):
    name: str = "vLLM"
    platform: Literal["xpu", "cuda", "cpu"]
    version: str
    label: str
    torch_version: str | None = None
    image: str | None = None
    image_digest: str | None = None
    package_set_sha256: Sha256 | None = None
    # The image as the servers were started: `repo@sha256:...`, so a replay pulls the same bytes.
    image_pinned: str | None = None

    ADDED: ClassVar[frozenset[str]] = frozenset({"image_pinned"})


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


class ArmConfig(_Additions):
    tensor_parallel_size: int = Field(ge=1)
    spec_method: str | None = None
    spec_depth: int = Field(default=0, ge=0)
    draft_head: str | None = None
    graph_capture: str | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = Field(default=None, gt=0)
    argv: list[str] = []
    env: dict[EnvName, str] = {}
    # Where max_model_len came from: "recipe" (a flag the recipe or overlay sets for this card) or
    # "runner default" (the runner's own cap, without which vLLM sizes for the model's full context).
    max_model_len_source: Literal["recipe", "runner default"] | None = None
    # The exact command the servers ran (`docker run ... image@sha256:... ARGS` or the local python),
    # with the per-server port and container name as placeholders; `argv` is the portable form.
    launch_argv: list[str] = []
    # Variables handed through from the host environment (HF_TOKEN, HF_HUB_OFFLINE): names only,
    # their values are never recorded.
    passed_env: list[EnvName] = []

    ADDED: ClassVar[frozenset[str]] = frozenset({"max_model_len_source", "launch_argv", "passed_env"})

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
        for field in ("argv", "launch_argv"):
            argv = getattr(self, field)
            for index, (arg, shown) in enumerate(zip(argv, redact_argv(argv), strict=True)):
                if arg != shown:
                    raise FieldError(f"holds a credential: record it as {shown!r}", field, index)
            for index, arg in enumerate(argv):
                name, eq, value = arg.partition("=")
                if eq and is_secret_env(name) and value != REDACTED and index and argv[index - 1] == "-e":
                    raise FieldError(f"{name} holds a credential: pass it by name (-e {name})", field, index)
        return self


class PromptRow(StrictModel):
    """One strict-suite prompt on one server. Token times are integer microseconds after the
    request was sent (client perf_counter), one per token id: a chunk carrying k tokens gives k
    equal times. TTFT is the first token's time; rates are derived, never stored."""

    prompt_id: str
    class_id: str
    token_ids: UInt32Array
    token_times_us: UInt32Array
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    finish_reason: str | None = None

    @model_validator(mode="after")
    def _counts_agree(self) -> PromptRow:
        if len(self.token_ids) != self.completion_tokens:
            raise FieldError("token_ids length differs from completion_tokens", "token_ids")
        if len(self.token_times_us) != len(self.token_ids):
            raise FieldError("needs one time per token id", "token_times_us")
        return self

    @property
    def ttft_ms(self) -> float | None:
        return self.token_times_us[0] / 1000.0 if self.token_times_us else None


def _absent(value: object) -> bool:
    return value is None


class CanaryResult(StrictModel):
    """A canary's raw answers (one, or one per repeat) and the verdict judged from them; verify
    judges the answers again, so the verdict is never taken on trust.

    An answer whose content was null is recorded as "" (and judged failed). `reasoning` holds
    what a reasoning parser returned beside each answer ("" where nothing), and is left out of
    the file when no answer had any: packets written before it existed keep their bytes."""

    id: str
    outputs: list[str] = Field(min_length=1)
    passed: bool
    detail: str = ""
    reasoning: list[str] | None = Field(default=None, exclude_if=_absent)

    @model_validator(mode="after")
    def _one_reasoning_per_output(self) -> CanaryResult:
        if self.reasoning is not None and len(self.reasoning) != len(self.outputs):
            raise FieldError("needs one entry per output", "reasoning")
        return self


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


class CacheCheck(StrictModel):
    """How "cache zero" was shown for a server: `usage` when every row's
    usage.prompt_tokens_details.cached_tokens was 0; `metrics` when a server that leaves
    prompt_tokens_details out (vLLM before PR #44383) kept vllm:prefix_cache_hits at 0 over the
    suite. The counters' increase over the suite is kept when the server exposes them."""

    source: Literal["usage", "metrics"]
    prefix_cache_queries: int | None = Field(default=None, ge=0)
    prefix_cache_hits: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _metrics_need_the_counter(self) -> CacheCheck:
        if self.source == "metrics" and self.prefix_cache_hits is None:
            raise FieldError("a cache check from /metrics needs the prefix_cache_hits increase", "prefix_cache_hits")
        return self


class ServerRun(_Additions):
    """One fresh server. Imported results carry only the published values; rows stay empty."""

    label: str
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    decode_tok_s: float | None = Field(default=None, gt=0)
    ttft_ms: float | None = Field(default=None, ge=0)
    rows: list[PromptRow] = []
    canaries: list[CanaryResult] = []
    cache_zero: bool | None = None
    # left out of the file when absent: packets written before it existed keep their bytes
    cache_check: CacheCheck | None = Field(default=None, exclude_if=_absent)
    spec_metrics: SpecMetrics | None = None
    log: str | None = None
    startup_s: float | None = Field(default=None, ge=0)
    # What the server itself answered on GET /version (None: not asked, or an older server).
    server_version: str | None = None

    ADDED: ClassVar[frozenset[str]] = frozenset({"server_version"})


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


class ArmParts(StrictModel):
    """What a writer supplies for an arm; `seal` derives its state (catalog/packet_io.py)."""

    id: Slug
    label: str
    config: ArmConfig
    servers: list[ServerRun] = []
    oracle_decode_tok_s: list[float] = []
    gates: list[GateResult] = []
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


class Arm(ArmParts):
    state: State


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


class Ladder(_Additions):
    """One ladder of one arm, on its own fresh server: concurrency (users released together),
    context depth, or a load sweep (catalog/load.py)."""

    ADDED: ClassVar[frozenset[str]] = frozenset({"load"})

    arm: Slug
    kind: Literal["concurrency", "context", "load"]
    concurrency: list[ConcurrencyPoint] = []
    context: list[ContextPoint] = []
    load: LoadSweep | None = None

    @model_validator(mode="after")
    def _load_matches_kind(self) -> Ladder:
        if (self.kind == "load") != (self.load is not None):
            raise FieldError("a load ladder carries its sweep in `load`, and only a load ladder does", "load")
        return self


class PacketBody(StrictModel):
    title: str
    created: datetime | None = None
    provenance: Provenance
    identity: Identity
    workload: Workload
    ladders: list[Ladder] = []
    reproduces: str | None = None


class PacketParts(PacketBody):
    """Everything a writer supplies; `seal` turns it into a Packet with its states, bytes,
    digest, id and signature. The runner, the importers and the benchmark generator all do."""

    arms: list[ArmParts] = Field(min_length=1)


@dataclass(frozen=True)
class PacketSeal:
    """Facts about a packet's file, set when it is sealed or read: never stored in the file."""

    sha256: str
    id: str
    signed_by: str | None  # key id, None for an unsigned local packet


class Packet(PacketBody):
    schema_version: Literal[2]
    arms: list[Arm] = Field(min_length=1)
    state: State
    _seal: PacketSeal | None = PrivateAttr(default=None)

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

    @property
    def seal(self) -> PacketSeal:
        if self._seal is None:
            raise RuntimeError("an unsealed packet has no digest or id: seal it or read it from its file")
        return self._seal

    @property
    def sha256(self) -> str:
        return self.seal.sha256

    @property
    def id(self) -> str:
        return self.seal.id

    @property
    def signed(self) -> bool:
        return self.seal.signed_by is not None

    def arm(self, arm_id: str) -> Arm:
        return next(a for a in self.arms if a.id == arm_id)


def arm_state(provenance: str, arm: ArmParts) -> State:
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


def packet_id(model_slug: str, quantization: str, sha256: str) -> str:
    return f"{model_slug}-{quantization}-{sha256[:8]}"


def _check_unique(ids: list[str], what: str, *loc: str | int) -> None:
    if len(set(ids)) != len(ids):
        raise FieldError(f"duplicate {what}", *loc)
