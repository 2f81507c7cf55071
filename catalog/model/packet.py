"""Evidence packets, schema 2: one JSON file per campaign in `packets/`.

A packet holds one or more *arms* (a configuration: TP size, speculative method and depth,
draft head) measured on fresh servers, the gates comparing their token arrays, and ladders.
The file's bytes are its canonical form: its sha256 is the packet's digest, its id is
`<model>-<quant>-<digest[:8]>`, and a signature beside it (`<id>.dsse.json`) signs that digest
(catalog/packets/seal.py seals, reads and writes; catalog/packets/signing.py signs). States are derived
from the gates by the rules below; the validators refuse a file whose stored values disagree.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, StringConstraints, model_validator

from catalog.model.arrays import UInt32Array
from catalog.model.base import EnvName, FieldError, Sha256, Slug, StrictModel
from catalog.model.energy import EnergySetup, EnergyWindow
from catalog.model.load_sweep import LoadSweep
from catalog.model.secrets import REDACTED, is_secret_env, redact_argv

SCHEMA_VERSION = 2


# A field a schema-2 model gained after packets were published is left out of the canonical form
# while it holds its default (`exclude_if=_absent` or `_empty`), so every packet written before it
# existed keeps its exact bytes (and its digest and signature) when read and re-encoded.


def _absent(value: object) -> bool:
    return value is None


def _empty(value: object) -> bool:
    return value == []


class State(StrEnum):
    """The one home of what each state means, which ones publish a figure, and their order."""

    MEASURED = "measured"
    WITHHELD = "withheld"
    SCREENED = "screened"
    IMPORTED = "imported"
    ESTIMATED = "estimated"

    # These compare plain values: on Python 3.11 each `State.X` lookup is a descriptor call, and
    # pages ask these of every arm many times.
    @property
    def published(self) -> bool:
        """A figure that may lead a page: measured here, or imported from a named source."""
        return self._value_ in _PUBLISHED

    @property
    def has_speed(self) -> bool:
        """A speed figure exists and may be drawn (screened is speed only); withheld never is."""
        return self._value_ in _HAS_SPEED

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

_PUBLISHED = frozenset({State.MEASURED.value, State.IMPORTED.value})
_HAS_SPEED = _PUBLISHED | {State.SCREENED.value}
_STATE_ORDER = [State.MEASURED, State.IMPORTED, State.SCREENED, State.ESTIMATED, State.WITHHELD]
_STATE_MEANINGS = {
    State.MEASURED: "measured by this runner on fresh servers; every gate it carries passed",
    State.IMPORTED: "taken from a named published source; not measured by this runner",
    # One meaning for every provenance: a withheld arm may be this runner's or a named source's (whose
    # gates carry the outcomes it printed), so the words say what failed, never who measured it.
    State.WITHHELD: "an identity gate was not passed: speculative output was not identical to the oracle (or the "
    "oracle itself was not repeat-exact), by this runner's gates or by the outcomes its named source printed; its "
    "speed is not published",
    State.SCREENED: "a speed check only, with no identity gate",
    State.ESTIMATED: "derived, not measured",
}


class SourceRef(StrictModel):
    """A published source an imported or screened result is taken from. An imported packet is
    judged as of its source: `published` (the day the source published its figures) and `retrieved`
    (the day the importer read it, which its key vouches for) are required of it
    (catalog/checks/dates.py)."""

    name: str = Field(
        min_length=1, description="Name of the published source (a paper, a blog post, a benchmark table)."
    )
    url: str | None = Field(default=None, description="Address of the source.")
    reference: str | None = Field(
        default=None, description="Where in the source the figure is (a table, a section, a commit)."
    )
    retrieved: date | None = Field(
        default=None, description="Day the importer read the source: the day its signature vouches for."
    )
    note: str | None = Field(default=None, description="Free text about the source or how its figure was read.")
    published: date | None = Field(
        default=None,
        exclude_if=_absent,
        description="Day the source published its figures (the latest it can have, when it prints none): the day"
        " an imported packet is judged as of.",
    )


class Provenance(StrictModel):
    kind: Literal["measured", "imported", "screened"] = Field(
        description="measured here, imported from a published source, or screened (speed only, no identity gate)."
    )
    source: SourceRef | None = Field(
        default=None, description="The published source; required unless kind is measured."
    )
    tool: str | None = Field(
        default=None,
        description="The program that wrote the packet (runner, importer or benchmark generator) and its version.",
    )

    @model_validator(mode="after")
    def _source_named(self) -> Provenance:
        if self.kind != "measured" and self.source is None:
            raise ValueError(f"an {self.kind} packet must name its source")
        return self

    @property
    def taken_from(self) -> str | None:
        """The source an imported or screened result was taken from (None: measured here)."""
        return self.source.name if self.kind != "measured" and self.source is not None else None


class FileHash(StrictModel):
    name: str = Field(description="File name inside the checkpoint repository.")
    bytes: int = Field(ge=0, description="File size in bytes.")
    sha256: Sha256 = Field(description="sha256 of the file's bytes, hex.")


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
"""The files of a checkpoint that hold weights: `weight_bytes` is the sum of their sizes."""


def weight_file_bytes(files: list[FileHash]) -> int:
    return sum(f.bytes for f in files if f.name.endswith(WEIGHT_SUFFIXES))


class ModelConfigFacts(StrictModel):
    """What the projection and the fine print need from the model's config.json."""

    architecture: str | None = Field(
        default=None, description="The architectures entry of config.json (e.g. Qwen3_5ForConditionalGeneration)."
    )
    num_layers: int | None = Field(default=None, gt=0, description="Number of transformer layers.")
    hidden_size: int | None = Field(default=None, gt=0, description="Width of the hidden state.")
    num_attention_heads: int | None = Field(
        default=None, gt=0, description="Number of query heads per attention layer."
    )
    num_kv_heads: int | None = Field(
        default=None, gt=0, description="Number of key/value heads per attention layer (grouped-query attention)."
    )
    head_dim: int | None = Field(default=None, gt=0, description="Width of one attention head.")
    vocab_size: int | None = Field(default=None, gt=0, description="Number of tokens in the vocabulary.")
    full_attention_layers: int | None = Field(
        default=None, ge=0, description="Layers with full (softmax) attention, whose KV cache grows with context."
    )
    linear_attention_layers: int | None = Field(
        default=None, ge=0, description="Layers with linear attention, whose state does not grow with context."
    )
    tie_word_embeddings: bool | None = Field(
        default=None, description="Whether the output head shares the input embedding's weights."
    )
    parameters: int | None = Field(default=None, gt=0, description="Total parameter count.")
    config_sha256: Sha256 | None = Field(
        default=None, description="sha256 of the config.json bytes the facts were read from, hex."
    )


class ModelIdentity(StrictModel):
    slug: Slug = Field(description="The recipe's slug (data/models/<slug>.yaml).")
    # None only for an imported result whose checkpoint the recipe does not list as a variant.
    variant: str | None = Field(
        description="The recipe variant; null only for an imported result whose checkpoint the recipe does not list."
    )
    repo: str = Field(description="Hugging Face repository of the checkpoint served.")
    revision: str | None = Field(default=None, description="Commit of the checkpoint repository.")
    quantization: Slug = Field(description="Quantisation id, part of the packet id (e.g. bf16, w4a16, fp8).")
    quantization_label: str = Field(description="Quantisation as pages show it.")
    weight_bytes: int | None = Field(default=None, ge=0, description="Total bytes of the weight files.")
    weight_files: list[FileHash] = Field(default=[], description="Every weight file with its size and sha256.")
    config: ModelConfigFacts | None = Field(default=None, description="Facts read from the checkpoint's config.json.")
    synthetic: bool = Field(
        default=False, description="A locally made model (the demo): its speeds say nothing about real models."
    )
    synthetic_note: str | None = Field(default=None, description="What the synthetic model is and how it was made.")


class RuntimeIdentity(StrictModel):
    name: str = Field(default="vLLM", description="Serving engine.")
    platform: Literal["xpu", "cuda", "cpu"] = Field(description="Accelerator platform the engine ran on.")
    version: str = Field(description="Engine version (vLLM's __version__).")
    label: str = Field(description="Engine and version as pages show them.")
    torch_version: str | None = Field(default=None, description="PyTorch version inside the engine's environment.")
    image: str | None = Field(default=None, description="Docker image the servers ran, as named (repository:tag).")
    image_digest: str | None = Field(default=None, description="Content digest of that image (sha256:...).")
    package_set_sha256: Sha256 | None = Field(
        default=None, description="sha256 of the engine environment's installed package list, hex."
    )
    # The image as the servers were started: `repo@sha256:...`, so a replay pulls the same bytes.
    image_pinned: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="The image as the servers were started (repo@sha256:...), so a replay pulls the same bytes.",
    )


class HostIdentity(StrictModel):
    hardware: Slug = Field(description="Card id in data/hardware.yaml.")
    card_count: int = Field(ge=1, description="Number of cards the servers used.")
    device_name: str | None = Field(default=None, description="Device name the vendor tool reported.")
    driver: str | None = Field(default=None, description="Accelerator driver version.")
    boot_id: str | None = Field(default=None, description="The host's boot id: arms measured in one boot share it.")
    cpu: str | None = Field(default=None, description="Host CPU model.")
    os: str | None = Field(default=None, description="Host operating system and kernel.")
    repo_revision: str | None = Field(default=None, description="Commit of this repository the runner ran from.")


class Identity(StrictModel):
    model: ModelIdentity = Field(description="The checkpoint served.")
    runtime: RuntimeIdentity = Field(description="The serving engine and its environment.")
    host: HostIdentity = Field(description="The machine and cards measured on.")


class Workload(StrictModel):
    suite_id: str = Field(description="Prompt suite id (data/suites/<id>.json).")
    suite_sha256: Sha256 | None = Field(default=None, description="Canonical hash of the suite's content, hex.")
    canary_set_id: str | None = Field(default=None, description="Canary set id (data/suites/<id>.json).")
    canary_set_sha256: Sha256 | None = Field(
        default=None, description="Canonical hash of the canary set's content, hex."
    )
    max_tokens: int = Field(gt=0, description="Completion tokens requested per prompt.")
    temperature: float = Field(
        default=0.0, description="Sampling temperature (0: greedy, so outputs can be compared token for token)."
    )
    top_p: float = Field(default=1.0, description="Nucleus sampling threshold.")
    seed: int | None = Field(default=None, description="Sampling seed sent with each request.")
    api: Literal["completions"] = Field(
        default="completions", description="OpenAI-compatible endpoint the prompts went through."
    )


def refuse_credentials(argv: list[str], field: str) -> None:
    """A recorded command is published byte for byte: an argument holding a credential is refused,
    naming the form it must be recorded in (catalog/model/secrets.py redact_argv)."""
    for index, (arg, shown) in enumerate(zip(argv, redact_argv(argv), strict=True)):
        if arg != shown:
            raise FieldError(f"holds a credential: record it as {shown!r}", field, index)


class ArmConfig(StrictModel):
    tensor_parallel_size: int = Field(ge=1, description="Cards one server spans (vLLM --tensor-parallel-size).")
    spec_method: str | None = Field(
        default=None, description="Speculative decoding method (e.g. mtp, eagle3); null without speculation."
    )
    spec_depth: int = Field(default=0, ge=0, description="Speculative tokens proposed per step; 0 without speculation.")
    draft_head: str | None = Field(default=None, description="Which draft head proposed tokens, as pages name it.")
    graph_capture: str | None = Field(default=None, description="Graph capture mode (CUDA/XPU graphs or eager).")
    kv_cache_dtype: str | None = Field(default=None, description="KV cache data type.")
    max_model_len: int | None = Field(default=None, gt=0, description="Context length the server was sized for.")
    argv: list[str] = Field(default=[], description="The vllm serve arguments, in the portable form a reader can run.")
    env: dict[EnvName, str] = Field(
        default={}, description="Environment variables set for the server (credentials recorded redacted)."
    )
    # Where max_model_len came from: "recipe" (a flag the recipe or overlay sets for this card) or
    # "runner default" (the runner's own cap, without which vLLM sizes for the model's full context).
    max_model_len_source: Literal["recipe", "runner default"] | None = Field(
        default=None,
        description="Where max_model_len came from: a recipe or overlay flag, or the runner's own cap.",
        exclude_if=_absent,
    )
    # The exact command the servers ran (`docker run ... image@sha256:... ARGS` or the local python),
    # with the per-server port and container name as placeholders; `argv` is the portable form.
    launch_argv: list[str] = Field(
        default=[],
        exclude_if=_empty,
        description="The exact command the servers ran, with the per-server port and container name as placeholders.",
    )
    # Variables handed through from the host environment (HF_TOKEN, HF_HUB_OFFLINE): names only,
    # their values are never recorded.
    passed_env: list[EnvName] = Field(
        default=[],
        exclude_if=_empty,
        description="Variables handed through from the host environment: names only, values are never recorded.",
    )

    entrypoint: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="How the servers were started: `vllm serve`, the image's entrypoint, or the API server module "
        "run where the install has no working `vllm serve`.",
    )

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
            refuse_credentials(argv, field)
            for index, arg in enumerate(argv):
                name, eq, value = arg.partition("=")
                if eq and is_secret_env(name) and value != REDACTED and index and argv[index - 1] == "-e":
                    raise FieldError(f"{name} holds a credential: pass it by name (-e {name})", field, index)
        return self


class PromptRow(StrictModel):
    """One strict-suite prompt on one server. Token times are integer microseconds after the
    request was sent (client perf_counter), one per token id: a chunk carrying k tokens gives k
    equal times. TTFT is the first token's time; rates are derived, never stored."""

    prompt_id: str = Field(description="Prompt id in the suite.")
    class_id: str = Field(description="The prompt's class in the suite.")
    token_ids: UInt32Array = Field(description="Completion token ids, base64 of little-endian uint32.")
    token_times_us: UInt32Array = Field(
        description="Microseconds from the request to each token's arrival, base64 of little-endian uint32."
    )
    prompt_tokens: int = Field(ge=0, description="Prompt tokens the server counted.")
    completion_tokens: int = Field(ge=0, description="Completion tokens returned; equals the number of token ids.")
    cached_tokens: int | None = Field(
        default=None, ge=0, description="Prompt tokens the server reported served from its prefix cache."
    )
    finish_reason: str | None = Field(default=None, description="Why generation stopped (length, stop).")

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


class CanaryResult(StrictModel):
    """A canary's raw answers (one, or one per repeat) and the verdict judged from them; verify
    judges the answers again, so the verdict is never taken on trust.

    An answer whose content was null is recorded as "" (and judged failed). `reasoning` holds
    what a reasoning parser returned beside each answer ("" where nothing), and is left out of
    the file when no answer had any: packets written before it existed keep their bytes."""

    id: str = Field(description="Canary id in the canary set.")
    outputs: list[str] = Field(min_length=1, description="The raw answers: one, or one per repeat.")
    passed: bool = Field(description="The verdict judged from the outputs (verify judges them again).")
    detail: str = Field(default="", description="Why the canary failed, when it did.")
    reasoning: list[str] | None = Field(
        default=None,
        exclude_if=_absent,
        description="What a reasoning parser returned beside each answer; absent when no answer had any.",
    )

    @model_validator(mode="after")
    def _one_reasoning_per_output(self) -> CanaryResult:
        if self.reasoning is not None and len(self.reasoning) != len(self.outputs):
            raise FieldError("needs one entry per output", "reasoning")
        return self


class SpecMetrics(StrictModel):
    """Differences of vLLM's /metrics counters over the strict suite."""

    drafts: int = Field(ge=0, description="Speculative drafts proposed over the suite.")
    draft_tokens: int = Field(ge=0, description="Tokens proposed over the suite.")
    accepted_tokens: int = Field(ge=0, description="Proposed tokens accepted over the suite.")
    accepted_per_position: list[int] = Field(default=[], description="Accepted tokens at each draft position.")

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        return 1 + self.accepted_tokens / self.drafts if self.drafts else None


class CacheCheck(StrictModel):
    """How "cache zero" was shown for a server: `usage` when every row's
    usage.prompt_tokens_details.cached_tokens was 0; `metrics` when a server that leaves
    prompt_tokens_details out (vLLM before the fix for issue #44377) kept vllm:prefix_cache_hits
    at 0 over the suite. The counters' increase over the suite is kept when the server exposes them."""

    source: Literal["usage", "metrics"] = Field(
        description="How cache zero was shown: usage.cached_tokens on every row, or the server's /metrics counters."
    )
    prefix_cache_queries: int | None = Field(
        default=None, ge=0, description="Increase of vllm:prefix_cache_queries over the suite."
    )
    prefix_cache_hits: int | None = Field(
        default=None, ge=0, description="Increase of vllm:prefix_cache_hits over the suite."
    )

    @model_validator(mode="after")
    def _metrics_need_the_counter(self) -> CacheCheck:
        if self.source == "metrics" and self.prefix_cache_hits is None:
            raise FieldError("a cache check from /metrics needs the prefix_cache_hits increase", "prefix_cache_hits")
        return self


class ServerFacts(StrictModel):
    """What vLLM resolved for one server, as the server itself reported it: GET /server_info
    (vLLM 0.32 with VLLM_SERVER_DEV_MODE=1: the resolved config and every VLLM_* variable as read),
    else its startup log ("Initializing a V1 LLM engine ... with config: ..."). These settings
    change the numbers or the bits: async scheduling, graph capture (or eager), batch-invariant
    kernels, and how many tokens one streamed chunk holds. Null: the server did not say."""

    source: Literal["server_info", "log"] = Field(description="Where the facts were read.")
    async_scheduling: bool | None = Field(default=None, description="Whether the scheduler ran asynchronously.")
    enforce_eager: bool | None = Field(default=None, description="Whether torch.compile and graph capture were off.")
    compilation_mode: str | None = Field(
        default=None,
        description="vLLM's compilation mode (NONE, STOCK_TORCH_COMPILE, DYNAMO_TRACE_ONCE, VLLM_COMPILE).",
    )
    cudagraph_mode: str | None = Field(
        default=None,
        description="Graph capture mode (NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE); XPU graphs too.",
    )
    batch_invariant: bool | None = Field(
        default=None, description="Whether batch-invariant kernels were on (VLLM_BATCH_INVARIANT as vLLM read it)."
    )
    stream_interval: int | None = Field(default=None, ge=1, description="Tokens buffered per streamed chunk at most.")
    env: dict[EnvName, str] = Field(
        default={}, description="The arm's VLLM_* switches as vLLM read them (credentials recorded redacted)."
    )
    unknown_env: list[EnvName] = Field(
        default=[], description="VLLM_* variables the server reported it does not know (and so ignored)."
    )


class ServerRun(StrictModel):
    """One fresh server. Imported results carry only the published values; rows stay empty."""

    label: str = Field(description="Which of the arm's fresh servers this was (A, B).")
    status: Literal["ok", "failed"] = Field(default="ok", description="Whether the server ran the suite to the end.")
    error: str | None = Field(default=None, description="What went wrong, when status is failed.")
    decode_tok_s: float | None = Field(
        default=None, gt=0, description="Decode speed over the suite, tokens per second per request."
    )
    ttft_ms: float | None = Field(default=None, ge=0, description="Time to first token, milliseconds.")
    rows: list[PromptRow] = Field(default=[], description="One row per suite prompt; empty for imported results.")
    canaries: list[CanaryResult] = Field(default=[], description="Canary results on this server.")
    cache_zero: bool | None = Field(
        default=None, description="Whether no prompt token was served from the prefix cache."
    )
    # left out of the file when absent: packets written before it existed keep their bytes
    cache_check: CacheCheck | None = Field(
        default=None, exclude_if=_absent, description="How cache zero was shown; absent in older packets."
    )
    spec_metrics: SpecMetrics | None = Field(default=None, description="Speculative decoding counters over the suite.")
    log: str | None = Field(default=None, description="Server log file name under runs/<campaign>/.")
    startup_s: float | None = Field(default=None, ge=0, description="Seconds from start to the server answering.")
    # What the server itself answered on GET /version (None: not asked, or an older server).
    server_version: str | None = Field(
        default=None,
        description="What the server answered on GET /version (null: not asked, or an older server).",
        exclude_if=_absent,
    )
    energy: EnergyWindow | None = Field(
        default=None,
        exclude_if=_absent,
        description="The cards' power and energy counter over the strict suite (catalog/model/energy.py); "
        "absent when not measured.",
    )
    resolved: ServerFacts | None = Field(
        default=None,
        description="What vLLM resolved for this server, as it reported it; absent in older packets.",
        exclude_if=_absent,
    )


class Divergence(StrictModel):
    """Where one prompt's two outputs part: the first differing index and the token each side had
    there (null: that side had already ended)."""

    index: int = Field(ge=0, description="The first token index where the outputs differ.")
    token: int | None = Field(default=None, ge=0, description="This side's token at that index (null: it ended).")
    other: int | None = Field(default=None, ge=0, description="The compared side's token there (null: it ended).")


DivergenceCause = Literal["repeat", "speculative", "batch shape"]
DIVERGENCE_CAUSES: dict[str, str] = {
    "repeat": "the same configuration on two fresh servers: a difference is the stack's own nondeterminism",
    "speculative": "speculative decoding against the oracle at the same batch shape (one sequence at a time): "
    "a difference is the speculative path's numerics",
    "batch shape": "the same model at another batch shape (a ladder's 64 sequences) against the oracle at one: "
    "batch shape changes the floating-point reductions, and with them the bits",
}


class GateResult(StrictModel):
    gate: Literal["G1", "G2", "G3"] = Field(
        description="G1: the oracle arm's two fresh servers identical; G2: an arm's two fresh servers identical; "
        "G3: each server of a speculative arm identical to the oracle."
    )
    against: str = Field(description="What the outputs were compared with.")
    server: str | None = Field(default=None, description="The server compared, when the gate is per server.")
    exact: int | None = Field(
        default=None,
        ge=0,
        description="Prompts whose token arrays were identical; null when the comparison could not run.",
    )
    total: int = Field(gt=0, description="Prompts compared.")
    passed: bool = Field(description="Whether every prompt was identical (exact == total).")
    first_divergence: list[int | None] = Field(
        default=[], description="Per prompt, the first token index where outputs differ (null: identical)."
    )
    note: str | None = Field(default=None, description="Free text about the gate.")
    divergences: list[Divergence | None] = Field(
        default=[],
        exclude_if=_empty,
        description="Per prompt, where the outputs part and the token on each side (null: identical); "
        "absent in older packets.",
    )
    cause: DivergenceCause | None = Field(
        default=None,
        exclude_if=_absent,
        description="What the comparison isolates, so a divergence reads as repeat (nondeterminism), speculative "
        "(same batch shape) or batch shape; absent in older packets.",
    )

    @model_validator(mode="after")
    def _divergences_match(self) -> GateResult:
        if self.divergences:
            if len(self.divergences) != self.total:
                raise FieldError("needs one entry per prompt", "divergences")
            indices = [d.index if d is not None else None for d in self.divergences]
            if self.first_divergence and indices != self.first_divergence:
                raise FieldError("differs from first_divergence", "divergences")
        return self

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
    """What a writer supplies for an arm; `seal` derives its state (catalog/packets/seal.py)."""

    id: Slug = Field(description="Arm id, unique in the packet.")
    label: str = Field(description="Arm as pages name it.")
    config: ArmConfig = Field(description="The configuration the arm's servers ran.")
    servers: list[ServerRun] = Field(default=[], description="The fresh servers the arm ran on.")
    oracle_decode_tok_s: list[float] = Field(
        default=[], description="Decode speeds of the no-speculation oracle servers, for the speed-up."
    )
    gates: list[GateResult] = Field(default=[], description="Identity gates comparing the arm's token arrays.")
    withheld_reason: str | None = Field(
        default=None, description="Why the arm's speed is not published; required when withheld."
    )
    published_figure: float | None = Field(
        default=None, description="The figure an imported source printed, in tokens per second."
    )
    published_ttft_ms: list[float] = Field(
        default=[], description="Time-to-first-token figures an imported source printed, milliseconds."
    )
    note: str | None = Field(default=None, description="Free text about the arm.")

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
    state: State = Field(description="Derived from provenance and gates: measured, imported, screened or withheld.")


# The protocol's ladders end at 64 users (c1, c2, c4 ... c64), and runner/plan.py gives a ladder's
# server 64 sequences. An imported run may have had more (`vllm bench serve` releases all its prompts
# at once), so the schema leaves it open and a measured packet is held to it (catalog/checks/workload.py).
LADDER_MOST_USERS = 64


class ConcurrencyPoint(StrictModel):
    users: int = Field(ge=1, description="Concurrent requests.")
    completion_tokens: int = Field(ge=0, description="Completion tokens generated across all requests.")
    wall_s: float = Field(gt=0, description="Wall-clock seconds for all requests.")
    identical_to_oracle: bool | None = Field(default=None, description="Whether every output matched the oracle's.")
    energy: EnergyWindow | None = Field(
        default=None,
        exclude_if=_absent,
        description="The cards' power and energy counter over the level (catalog/model/energy.py); "
        "absent when not measured.",
    )
    divergence: Literal["batch shape", "speculative"] | None = Field(
        default=None,
        exclude_if=_absent,
        description="Why outputs differ from the sequential oracle's: batch shape (the plain model at this level "
        "gave the same outputs), or speculative (they differ from the plain model's at the same level); absent "
        "when identical, or in older packets.",
    )

    @model_validator(mode="after")
    def _divergence_needs_a_difference(self) -> ConcurrencyPoint:
        """runner/ladders.py names a cause only for a level whose outputs differ from the oracle's."""
        if self.divergence is not None and self.identical_to_oracle is not False:
            raise FieldError("a divergence cause needs identical_to_oracle false", "divergence")
        return self

    @property
    def aggregate_tok_s(self) -> float:
        return self.completion_tokens / self.wall_s

    def prompt_sends(self, prompts: int) -> list[int]:
        """How many of the level's users sent each of a suite's `prompts` prompts: runner/ladders.py
        sends user i the prompt i mod their count. Counted per prompt, never user by user, so a level
        claiming 10⁹ users costs its reader no more than one of 64."""
        rounds, rest = divmod(self.users, prompts)
        return [rounds + (j < rest) for j in range(prompts)]


class ContextPoint(StrictModel):
    depth_tokens: int = Field(ge=1, description="Prompt context depth in tokens.")
    content_class: str = Field(description="What the filler context was made of.")
    decode_tok_s: float | None = Field(default=None, gt=0, description="Decode speed at this depth, tokens per second.")
    ttft_ms: float | None = Field(default=None, ge=0, description="Time to first token at this depth, milliseconds.")
    identical_to_oracle: bool | None = Field(default=None, description="Whether the output matched the oracle's.")


class Ladder(StrictModel):
    """One ladder of one arm, on its own fresh server: concurrency (users released together),
    context depth, or a load sweep (catalog/model/load_sweep.py)."""

    arm: Slug = Field(description="The arm the ladder ran on.")
    kind: Literal["concurrency", "context", "load"] = Field(
        description="What the ladder varies: concurrent users, context depth, or load (users and arrival rates)."
    )
    concurrency: list[ConcurrencyPoint] = Field(default=[], description="Points of a concurrency ladder.")
    context: list[ContextPoint] = Field(default=[], description="Points of a context ladder.")
    load: LoadSweep | None = Field(
        default=None,
        description="The levels of a load sweep (catalog/model/load_sweep.py).",
        exclude_if=_absent,
    )
    # The ladder's own server ran the arm's command with room for many sequences
    # (runner/plan.py ladder_command): left out while empty, so packets sealed before it keep their bytes.
    argv: list[str] = Field(
        default=[],
        exclude_if=_empty,
        description="The vllm serve arguments of the ladder's own server, in the portable form a reader can run "
        "(the arm's command, as config.argv, with the ladder's --max-num-seqs); empty in packets measured before "
        "it was recorded.",
    )

    @model_validator(mode="after")
    def _load_matches_kind(self) -> Ladder:
        if (self.kind == "load") != (self.load is not None):
            raise FieldError("a load ladder carries its sweep in `load`, and only a load ladder does", "load")
        return self

    @model_validator(mode="after")
    def _no_credentials(self) -> Ladder:
        """Published byte for byte, as an arm's command is (ArmConfig._no_credentials)."""
        refuse_credentials(self.argv, "argv")
        return self


class CampaignRef(StrictModel):
    """The cell of a fleet campaign (runner/fleet) this packet measured: a re-run of the plan finds
    the cells already done by it, and pages count a cell's repeats as designed to be independent.
    Its cell is the one the packet's own contents describe (catalog/checks/campaign.py)."""

    name: Slug = Field(description="The campaign plan's name (campaigns/<name>.yaml).")
    round: Slug | None = Field(
        default=None, description="Which run of the plan (e.g. a date): a new round measures every cell again."
    )
    cell: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{12}$")] = Field(
        description="The cell: 12 hex digits of the hash of the configuration it measures, as the packet "
        "records it (catalog/model/campaign.py)."
    )
    repeat: int = Field(ge=1, description="Which independent repeat of the cell this is (1 to repeats).")
    repeats: int = Field(ge=1, description="How many independent repeats the plan asks of the cell.")

    @model_validator(mode="after")
    def _repeat_within(self) -> CampaignRef:
        if self.repeat > self.repeats:
            raise FieldError(f"repeat {self.repeat} of {self.repeats}", "repeat")
        return self


class PacketBody(StrictModel):
    title: str = Field(description="Title pages show.")
    created: datetime | None = Field(default=None, description="When the campaign finished.")
    provenance: Provenance = Field(description="Where the results come from.")
    identity: Identity = Field(description="What was measured: model, runtime and host.")
    workload: Workload = Field(description="The prompts and sampling settings.")
    ladders: list[Ladder] = Field(default=[], description="Concurrency and context ladders.")
    reproduces: str | None = Field(default=None, description="Id of the packet this campaign measured again.")
    # left out of the file when absent: packets written before it existed keep their bytes
    campaign: CampaignRef | None = Field(
        default=None, exclude_if=_absent, description="The fleet campaign cell measured; absent for a single run."
    )
    energy: EnergySetup | None = Field(
        default=None,
        exclude_if=_absent,
        description="How the cards' energy was read (or why it was not) and the idle baseline; absent in packets "
        "measured before energy was.",
    )


class PacketParts(PacketBody):
    """Everything a writer supplies; `seal` turns it into a Packet with its states, bytes,
    digest, id and signature. The runner, the importers and the benchmark generator all do."""

    arms: list[ArmParts] = Field(min_length=1, description="The configurations measured.")


@dataclass(frozen=True)
class PacketSeal:
    """Facts about a packet's file, set when it is sealed or read: never stored in the file."""

    sha256: str
    id: str
    signed_by: str | None  # key id, None for an unsigned local packet
    # This host's own key, not listed in data/keys.yaml (a local build only): signed_by stays None,
    # so the packet counts as unsigned everywhere (grade, publication), and pages say whose it is.
    host_key: str | None = None
    # Who holds the signing key, as data/keys.yaml lists it (catalog/packets/keys.py `owner_key`):
    # one owner's two keys are one voice (catalog/checks/grade.py). None: unsigned, or sealed here.
    # Known only from the key ring a reader loaded, so not part of what makes two packets equal.
    signed_owner: str | None = dataclasses.field(default=None, compare=False)


class Packet(PacketBody):
    schema_version: Literal[2] = Field(description="Packet format version.")
    arms: list[Arm] = Field(min_length=1, description="The configurations measured, each with its derived state.")
    state: State = Field(description="Derived from the arms: the packet's best evidence.")
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
        # Read from pydantic's documented private-value dict: `self._seal` goes through
        # BaseModel.__getattr__ (microseconds), and a catalog page asks for packet ids thousands of times.
        seal: PacketSeal | None = self.__pydantic_private__["_seal"] if self.__pydantic_private__ else None
        if seal is None:
            raise RuntimeError("an unsealed packet has no digest or id: seal it or read it from its file")
        return seal

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
