"""The fixture catalog (built once per session as the `built` fixture, tests/conftest.py):
recipes written here, packets sealed by tests/catalog/factories.py's seal_parts (signed with the
test session's keys) from the rows, servers and arms of testkit.samples (every figure computed by
catalog.model.metrics), so
load_catalog accepts them exactly as it accepts the runner's. The data dir's keys.yaml lists the
test keys; `signed=False` writes packets without a signature (a local build's)."""

from __future__ import annotations

import shutil
from pathlib import Path

from catalog.model.metrics import compare_rows
from catalog.model.packet import ArmParts, GateResult, Packet, PacketParts, PromptRow, ServerRun
from catalog.packets.seal import write_packet
from catalog.recipes.compose import merge_args
from testkit.energy_samples import with_energy, with_gap
from testkit.samples import (
    ORACLE_ARM,
    SPEC_ARM,
    arm_argv,
    make_arm,
    make_load_sweep,
    published_arm,
    published_parts,
    with_load,
)
from testkit.samples import measured_parts as sample_measured_parts
from tests.catalog.factories import canary_set, keys_yaml, make_rows, make_server, seal_parts, strict_suite

REPO = Path(__file__).resolve().parents[2]

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
JS_LINK = "[x](javascript:alert(1))"

RECIPE = f"""
meta:
  title: "Fixture 7B"
  slug: "fixture-7b"
  provider: "Fixture Labs {SCRIPT}"
  description: 'A fixture family {IMG}'
  date_added: 2026-01-02
  date_updated: 2026-03-04
  difficulty: beginner
  performance_headline: "fast {SCRIPT}"
  hardware:
    arc_pro_b70: verified
    h100_sxm: verified
    imaginary_card: unsupported
model:
  model_id: "fixture/Fixture-7B"
  architecture: dense
  parameter_count: "7B"
  context_length: 32768
  base_args: ["--trust-remote-code", "--max-model-len", "8192"]
features:
  tool_calling:
    description: "Tool calls {SCRIPT}"
    args: ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
  spec_decoding:
    description: "n-gram speculation"
    args: ["--speculative-config", '{{"method":"ngram","num_speculative_tokens":3}}']
opt_in_features: [spec_decoding]
variants:
  default:
    precision: bf16
    vram_minimum_gb: 16
    description: "BF16"
  int4:
    model_id: "fixture/Fixture-7B-w4a16"
    precision: int4
    vram_minimum_gb: 6
    description: "W4A16"
hardware_overrides:
  xpu:
    extra_args: ["--enforce-eager"]
guide: |
  ## Overview

  Click {JS_LINK} or [data](data:text/html,hi) or [ok](https://example.org/ok).

  {SCRIPT}

  <img src=x onerror=alert(1)>
"""

# Invented, like the model: the facts its packets are checked against (a Qwen2-7B-sized layout).
FIXTURE_OVERLAY = """
schema_version: 1
recipe: fixture-7b
facts:
  released: {value: 2026-01-02, source: "test fixture: the day the invented model was published"}
  architecture: {value: Qwen3ForCausalLM, source: "test fixture"}
  num_layers: {value: 28, source: "test fixture"}
  hidden_size: {value: 3584, source: "test fixture"}
  intermediate_size: {value: 18944, source: "test fixture"}
  num_attention_heads: {value: 28, source: "test fixture"}
  num_kv_heads: {value: 4, source: "test fixture"}
  head_dim: {value: 128, source: "test fixture"}
  vocab_size: {value: 152064, source: "test fixture"}
  tie_word_embeddings: {value: false, source: "test fixture"}
"""

EMPTY_RECIPE = """
meta:
  title: "Empty 1B"
  slug: "empty-1b"
  provider: "Fixture Labs"
  description: "A family nobody has measured"
  date_added: 2026-01-01
  date_updated: 2026-01-01
  difficulty: beginner
model:
  model_id: "fixture/Empty-1B"
  architecture: dense
  parameter_count: "1B"
  context_length: 4096
variants:
  default:
    precision: bf16
    vram_minimum_gb: 3
    description: "BF16"
"""


def rows(ms_per_token: float, *, diverge: set[int] = frozenset(), ttft: float = 40.0) -> list[PromptRow]:  # type: ignore[assignment]
    """The strict suite's twelve rows; prompts in `diverge` differ from the reference at token 50."""
    return make_rows(ms_per_token=ms_per_token, diverge=dict.fromkeys(diverge, 50), ttft_ms=ttft)


# The fixture recipe's command on a B70 (its xpu override, its default tool-calling feature): what
# the runner records, so every shown command's facts are the arm's (catalog/checks/commands.py).
RECIPE_FLAGS = (
    "--trust-remote-code", "--max-model-len", "8192", "--enforce-eager",
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
)  # fmt: skip


def arm(arm_id: str, label: str, *, tp: int, depth: int, servers: list[ServerRun], gates: list[GateResult]) -> ArmParts:
    """An n-gram arm of the fixture model; `seal` derives its state (withheld when a gate failed)."""
    failed = any(not g.passed for g in gates)
    reason = "speculative output differs from the oracle" if failed else None
    config: dict[str, object] = {
        "draft_head": None,
        "graph_capture": "none (--enforce-eager)",
        "argv": arm_argv("fixture/Fixture-7B-w4a16", tp, "ngram", depth, *RECIPE_FLAGS),
        "env": {},
    }
    return make_arm(
        arm_id, label, servers=servers, gates=gates, tp=tp, spec_depth=depth, spec_method="ngram",
        config=config, withheld_reason=reason,
    )  # fmt: skip


def measured_packet(*, signed: bool = True) -> Packet:
    return seal_parts(measured_parts(), signed=signed).packet


def imported_packet(*, signed: bool = True) -> Packet:
    return seal_parts(imported_parts(), signed=signed).packet


def measured_parts() -> PacketParts:
    """Oracle and speculative arms on one card (one speculative depth withheld: G3 8/12), an
    oracle on two cards, a concurrency ladder and a context ladder."""
    base_a, base_b = rows(20.0), rows(20.05)
    fast_a, fast_b = rows(12.0), rows(12.05)
    bad_a, bad_b = rows(11.0, diverge={0, 3, 6, 9}), rows(11.05, diverge={0, 3, 6, 9})
    two_a, two_b = rows(14.0), rows(14.02)
    arms = [
        arm(
            "tp1-base",
            "1 card, no speculation",
            tp=1,
            depth=0,
            servers=[make_server("A", base_a), make_server("B", base_b)],
            gates=[compare_rows("G1", "server B", base_a, base_b)],
        ),
        arm(
            "tp1-ngram3",
            "1 card, ngram depth 3",
            tp=1,
            depth=3,
            servers=[make_server("A", fast_a), make_server("B", fast_b)],
            gates=[
                compare_rows("G2", "server B", fast_a, fast_b),
                compare_rows("G3", "tp1-base", fast_a, base_a, server="A"),
                compare_rows("G3", "tp1-base", fast_b, base_a, server="B"),
            ],
        ),
        arm(
            "tp1-ngram5",
            "1 card, ngram depth 5",
            tp=1,
            depth=5,
            servers=[make_server("A", bad_a), make_server("B", bad_b)],
            gates=[
                compare_rows("G2", "server B", bad_a, bad_b),
                compare_rows("G3", "tp1-base", bad_a, base_a, server="A"),
                compare_rows("G3", "tp1-base", bad_b, base_a, server="B"),
            ],
        ),
        arm(
            "tp2-base",
            "2 cards, no speculation",
            tp=2,
            depth=0,
            servers=[make_server("A", two_a), make_server("B", two_b)],
            gates=[compare_rows("G1", "server B", two_a, two_b)],
        ),
    ]
    return PacketParts.model_validate(
        {
            "title": "Fixture 7B W4A16 on Arc Pro B70",
            "created": "2026-05-06T07:08:09Z",
            "provenance": {"kind": "measured", "tool": "runner test"},
            "identity": {
                "model": {
                    "slug": "fixture-7b",
                    "variant": "int4",
                    "repo": "fixture/Fixture-7B-w4a16",
                    "revision": "abc1230000000000000000000000000000000000",
                    "quantization": "w4a16",
                    "quantization_label": "W4A16",
                    "weight_bytes": 4_500_000_000,
                    "config": {"architecture": "Qwen3ForCausalLM", "num_layers": 28, "hidden_size": 3584},
                },
                "runtime": {
                    "platform": "xpu",
                    "version": "0.17.1",
                    "label": "vLLM 0.17.1 XPU",
                    "image": "vllm/vllm-openai-xpu:0.17.1",
                    "image_digest": "sha256:" + "fe" * 32,
                },
                "host": {"hardware": "arc_pro_b70", "card_count": 2, "boot_id": "boot-1"},
            },
            "workload": {
                "suite_id": "strict-v1",
                "suite_sha256": strict_suite().sha256,
                "canary_set_id": "canaries-v1",
                "canary_set_sha256": canary_set().sha256,
                "max_tokens": 512,
                "seed": 7,
            },
            "arms": arms,
            "ladders": [
                {
                    "arm": "tp1-ngram3",
                    "kind": "concurrency",
                    "concurrency": [
                        {
                            "users": u,
                            # identical to the oracle: user i's output is tp1-base's first server's row for prompt i
                            "completion_tokens": sum(base_a[i % len(base_a)].completion_tokens for i in range(u)),
                            "wall_s": 5.0 + u * 0.5,
                            "identical_to_oracle": True,
                        }
                        for u in (1, 2, 4, 8)
                    ],
                },
                {
                    "arm": "tp1-base",
                    "kind": "context",
                    "context": [
                        {
                            "depth_tokens": d,
                            "content_class": c,
                            "decode_tok_s": 50.0 - d / 1024,
                            "ttft_ms": d / 10,
                            "identical_to_oracle": None,  # a depth-0 arm's context is compared with no oracle's
                        }
                        for d in (2048, 4096)
                        for c in ("code", "prose")
                    ],
                },
            ],
        }
    )


def imported_parts() -> PacketParts:
    """A BF16 result transcribed from a published source, with one arm that carries no values."""
    return PacketParts.model_validate(
        {
            "title": f"Fixture 7B BF16 imported {SCRIPT}",
            "provenance": {
                "kind": "imported",
                "source": {
                    "name": f"Somebody's blog {IMG}",
                    "url": "https://example.org/post",
                    "reference": "post-1",
                    "published": "2026-04-01",
                    "retrieved": "2026-04-02",
                },
            },
            "identity": {
                "model": {
                    "slug": "fixture-7b",
                    "variant": "default",
                    "repo": "fixture/Fixture-7B",
                    "quantization": "bf16",
                    "quantization_label": "BF16",
                },
                "runtime": {"platform": "xpu", "version": "0.16", "label": "vLLM 0.16 XPU"},
                "host": {"hardware": "arc_pro_b70", "card_count": 1},
            },
            "workload": {"suite_id": "their-suite", "max_tokens": 256},
            "arms": [
                {
                    "id": "tp1-base",
                    "label": f"1 card {IMG}",
                    "config": {"tensor_parallel_size": 1},
                    "servers": [{"label": "A", "decode_tok_s": 30.125}, {"label": "B", "decode_tok_s": 30.5}],
                    "gates": [{"gate": "G1", "against": "server B", "total": 12, "passed": True}],
                },
                {
                    "id": "tp1-ngram3",
                    "label": "1 card, ngram 3, values not printed",
                    "config": {"tensor_parallel_size": 1, "spec_method": "ngram", "spec_depth": 3},
                    # an import keeps its gates: the post printed this arm's outcome, not its speed
                    "gates": [{"gate": "G3", "against": "tp1-base", "total": 12, "passed": True}],
                },
            ],
        }
    )


LOAD_DIVERGES = "8 users"  # the speculative arm's level whose outputs differ from the oracle
LOAD_LAGS = "32 users"  # the oracle arm's level whose client lagged past the bound


LOAD_FAMILY = "qwen3.5-9b"  # the repository's recipe: a known architecture, so its sweeps project


ENERGY_GAP_LEVEL = "2 users"  # the oracle arm's level whose power samples have a gap: energy invalid


def load_parts() -> PacketParts:
    """A Qwen3.5-9B BF16 campaign with a load sweep on each arm: the speculative one diverges at one
    level, the oracle's client lags at another. The cards' energy was measured beside every window
    (testkit/energy_samples.py: 180 W steady); one level's power samples have a gap, so its energy
    is invalid."""
    parts = sample_measured_parts(title="Qwen3.5-9B BF16 under load")
    loaded = with_energy(
        with_load(
            parts,
            {
                ORACLE_ARM: make_load_sweep(lagging=[LOAD_LAGS]),
                SPEC_ARM: make_load_sweep(ms_per_token=18.0, diverge={LOAD_DIVERGES: 2}),
            },
        )
    )
    assert loaded.energy is not None
    idle_w = loaded.energy.idle_w()
    ladders = []
    for ladder in loaded.ladders:
        if ladder.arm == ORACLE_ARM and ladder.load is not None:
            levels = [
                level.model_copy(update={"energy": with_gap(level.energy, 1.0, 5.0, idle_w)})
                if level.label == ENERGY_GAP_LEVEL and level.energy is not None
                else level
                for level in ladder.load.levels
            ]
            ladder = ladder.model_copy(update={"load": ladder.load.model_copy(update={"levels": levels})})
        ladders.append(ladder.model_copy(update={"argv": ladder_argv(loaded, ladder.arm)}))
    return loaded.model_copy(update={"ladders": ladders})


LADDER_SEQS = "64"  # runner/plan.py LADDER_MAX_SEQS: a ladder's own server runs many sequences


def ladder_argv(parts: PacketParts, arm_id: str) -> list[str]:
    """The command a ladder's own server records (runner/ladders.py): its arm's, with room for
    many sequences (runner/plan.py ladder_command)."""
    (arm,) = [a for a in parts.arms if a.id == arm_id]
    return merge_args([*arm.config.argv, "--max-num-seqs", LADDER_SEQS])


def screened_load_parts() -> PacketParts:
    """A speed-only curve transcribed from a published load run: the oracle configuration's speed,
    no output checked, the source's client schedule not recorded."""
    parts = published_parts([published_arm(ORACLE_ARM, [31.0, 31.5])], provenance="screened", title="load curve")
    return with_load(parts, {ORACLE_ARM: make_load_sweep(ms_per_token=25.0, users=(1, 4, 16), rates=(), checked=False)})


def repeat_parts(index: int) -> PacketParts:
    """The measured campaign run again: another day and title, so another packet."""
    parts = measured_parts()
    created = parts.created.replace(day=index + 1) if parts.created else None
    title = f"Fixture 7B W4A16 on Arc Pro B70, campaign {index}"
    return parts.model_copy(update={"created": created, "title": title})


def write_catalog(
    root: Path, *, packets: bool = True, empty_family: bool = True, signed: bool = True, load: bool = False
) -> tuple[Path, Path]:
    """data/ (recipes, hardware, suites, a keys.yaml listing the test keys) and packets/ holding
    the measured and imported packets (and, with `load`, a campaign with load sweeps), signed with the
    test keys unless `signed` is False."""
    data, packet_dir = root / "data", root / "packets"
    (data / "models").mkdir(parents=True)
    shutil.copy(REPO / "data" / "hardware.yaml", data / "hardware.yaml")
    shutil.copytree(REPO / "data" / "suites", data / "suites")
    (data / "keys.yaml").write_text(keys_yaml(), encoding="utf-8")
    (data / "models" / "fixture-7b.yaml").write_text(RECIPE, encoding="utf-8")
    (data / "overlays").mkdir()
    (data / "overlays" / "fixture-7b.yaml").write_text(FIXTURE_OVERLAY, encoding="utf-8")
    if empty_family:
        (data / "models" / "empty-1b.yaml").write_text(EMPTY_RECIPE, encoding="utf-8")
    packet_dir.mkdir()
    if packets:
        write_packet(seal_parts(measured_parts(), signed=signed), packet_dir)
        write_packet(seal_parts(imported_parts(), signed=signed), packet_dir)
    if load:
        shutil.copy(REPO / "data" / "models" / f"{LOAD_FAMILY}.yaml", data / "models")
        shutil.copy(REPO / "data" / "overlays" / f"{LOAD_FAMILY}.yaml", data / "overlays")
        write_packet(seal_parts(load_parts(), signed=signed), packet_dir)
        write_packet(seal_parts(screened_load_parts(), signed=signed), packet_dir)
    return data, packet_dir
