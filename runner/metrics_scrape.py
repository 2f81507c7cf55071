"""Scrape a vLLM server's Prometheus `/metrics` and extract the counters the protocol needs.

Counters are cumulative since server start, so a measurement scrapes before and after a run
and takes `after - before` (see `VllmCounters.minus`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import httpx

GENERATION_TOKENS = "vllm:generation_tokens_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
SPEC_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# Counters of prefix-cache lookups and hits, in tokens (vllm/v1/metrics/loggers.py registers
# `vllm:prefix_cache_queries` and `vllm:prefix_cache_hits`; prometheus_client exposes a counter
# with `_total`). They prove "cache zero" where a server's usage has no prompt_tokens_details.
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"


class MetricsError(Exception):
    """The /metrics endpoint could not be read or its text could not be parsed."""


@dataclass(frozen=True)
class Sample:
    """One exposition line: `name{label="value",...} value`."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class VllmCounters:
    """Cumulative counters summed over every engine/model label set.

    `spec_*` fields are None when the server exposes no spec-decode metrics at all (plain
    decoding); they are 0.0 when speculation is configured but nothing was drafted yet.
    `prefix_cache_*` are None when the server exposes no prefix-cache counters.
    """

    generation_tokens: float
    prompt_tokens: float
    spec_drafts: float | None = None
    spec_draft_tokens: float | None = None
    spec_accepted_tokens: float | None = None
    spec_accepted_per_position: dict[int, float] = field(default_factory=dict)
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None

    @property
    def acceptance_rate(self) -> float | None:
        if not self.spec_draft_tokens or self.spec_accepted_tokens is None:
            return None
        return self.spec_accepted_tokens / self.spec_draft_tokens

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted / drafts: tokens emitted per verification step."""
        if not self.spec_drafts or self.spec_accepted_tokens is None:
            return None
        return 1.0 + self.spec_accepted_tokens / self.spec_drafts

    def minus(self, earlier: VllmCounters) -> VllmCounters:
        """Counter increase since `earlier` (a scrape of the same server taken before)."""
        positions = set(self.spec_accepted_per_position) | set(earlier.spec_accepted_per_position)
        return VllmCounters(
            generation_tokens=self.generation_tokens - earlier.generation_tokens,
            prompt_tokens=self.prompt_tokens - earlier.prompt_tokens,
            spec_drafts=_optional_minus(self.spec_drafts, earlier.spec_drafts),
            spec_draft_tokens=_optional_minus(self.spec_draft_tokens, earlier.spec_draft_tokens),
            spec_accepted_tokens=_optional_minus(self.spec_accepted_tokens, earlier.spec_accepted_tokens),
            spec_accepted_per_position={
                pos: self.spec_accepted_per_position.get(pos, 0.0) - earlier.spec_accepted_per_position.get(pos, 0.0)
                for pos in sorted(positions)
            },
            prefix_cache_queries=_optional_minus(self.prefix_cache_queries, earlier.prefix_cache_queries),
            prefix_cache_hits=_optional_minus(self.prefix_cache_hits, earlier.prefix_cache_hits),
        )


def _optional_minus(later: float | None, earlier: float | None) -> float | None:
    if later is None:
        return None
    return later - (earlier or 0.0)


def fetch_metrics_text(base_url: str, timeout_s: float = 10.0) -> str:
    """GET /metrics of one of our own servers: never through a proxy the environment names
    (http_proxy would send a loopback scrape to the proxy, which cannot reach it)."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as http:
            response = http.get(url)
    except httpx.HTTPError as exc:
        raise MetricsError(f"GET {url} failed: {type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        raise MetricsError(f"GET {url} returned HTTP {response.status_code}")
    return response.text


def scrape_counters(base_url: str, timeout_s: float = 10.0) -> VllmCounters:
    return counters_from_samples(parse_exposition(fetch_metrics_text(base_url, timeout_s)))


def counters_from_samples(samples: list[Sample]) -> VllmCounters:
    totals: dict[str, float] = {}
    per_position: dict[int, float] = {}
    for sample in samples:
        if sample.name == SPEC_ACCEPTED_PER_POS:
            position = int(sample.labels.get("position", "-1"))
            per_position[position] = per_position.get(position, 0.0) + sample.value
        else:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    if GENERATION_TOKENS not in totals:
        raise MetricsError(
            f"/metrics has no {GENERATION_TOKENS}: the server keeps no engine statistics (started with "
            "--disable-log-stats?) or is not a vLLM server"
        )
    return VllmCounters(
        generation_tokens=totals[GENERATION_TOKENS],
        prompt_tokens=totals.get(PROMPT_TOKENS, 0.0),
        spec_drafts=totals.get(SPEC_DRAFTS),
        spec_draft_tokens=totals.get(SPEC_DRAFT_TOKENS),
        spec_accepted_tokens=totals.get(SPEC_ACCEPTED_TOKENS),
        spec_accepted_per_position=dict(sorted(per_position.items())),
        prefix_cache_queries=totals.get(PREFIX_CACHE_QUERIES),
        prefix_cache_hits=totals.get(PREFIX_CACHE_HITS),
    )


def parse_exposition(text: str) -> list[Sample]:
    """Parse Prometheus text exposition format (version 0.0.4) sample lines.

    Comments (`# HELP`, `# TYPE`) and blank lines are skipped; a trailing timestamp is ignored.
    """
    samples = []
    for line_number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            samples.append(_parse_sample_line(line))
        except ValueError as exc:
            raise MetricsError(f"/metrics line {line_number} unparseable ({exc}): {line[:200]!r}") from None
    return samples


def _parse_sample_line(line: str) -> Sample:
    brace = line.find("{")
    space = line.find(" ")
    labels: dict[str, str] = {}
    if brace != -1 and (space == -1 or brace < space):
        name = line[:brace]
        labels, rest = _parse_labels(line, brace + 1)
    else:
        if space == -1:
            raise ValueError("no value")
        name, rest = line[:space], line[space:]
    fields = rest.split()
    if not name or not fields:
        raise ValueError("missing name or value")
    return Sample(name=name, labels=labels, value=_parse_value(fields[0]))


def _parse_labels(line: str, start: int) -> tuple[dict[str, str], str]:
    """Parse `a="x",b="y"}` starting at `start`; return labels and the text after `}`."""
    labels: dict[str, str] = {}
    index = start
    while True:
        while index < len(line) and line[index] in " ,":
            index += 1
        if index >= len(line):
            raise ValueError("unterminated label set")
        if line[index] == "}":
            return labels, line[index + 1 :]
        equals = line.find("=", index)
        if equals == -1 or equals + 1 >= len(line) or line[equals + 1] != '"':
            raise ValueError("label without quoted value")
        key = line[index:equals].strip()
        value_chars: list[str] = []
        index = equals + 2
        while True:
            if index >= len(line):
                raise ValueError("unterminated label value")
            char = line[index]
            if char == "\\" and index + 1 < len(line):
                escaped = line[index + 1]
                value_chars.append("\n" if escaped == "n" else escaped)
                index += 2
            elif char == '"':
                index += 1
                break
            else:
                value_chars.append(char)
                index += 1
        labels[key] = "".join(value_chars)


def _parse_value(token: str) -> float:
    special = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
    if token in special:
        return special[token]
    return float(token)
