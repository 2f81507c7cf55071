"""A command shown beside a result is evidence: catalog/checks/commands.py fails `make verify` and
every build, naming the packet file, the arm and the field, when a shown command's facts are not
the arm's. One test per kind of disagreement (graph mode, image, env, depth, TP), through a
recorded command, an overlay configuration and a `make measure` line; the committed catalog passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from builder.build import Options, build
from catalog.errors import CatalogError, CatalogErrors
from catalog.packets.seal import write_packet
from catalog.recipes.command_facts import CommandFacts, Image, command_facts
from catalog.recipes.docker_run import DockerRun
from catalog.recipes.recorded import disagreements, graph_capture_words, recorded_eager, unrecorded
from catalog.store.repository import load_catalog
from tests.catalog.factories import SPEC_ARM, measured_draft, sealed, signed_data

REPO = Path(__file__).resolve().parents[2]
PINNED = "vllm/vllm-openai-xpu@sha256:" + "ab" * 32
OTHER = "vllm/vllm-openai-xpu@sha256:" + "cd" * 32


def _docker_launch(image: str, *vllm: str, env: dict[str, str] | None = None) -> list[str]:
    """The shape runner/runtime.py DockerRuntime records (compose.LaunchCommand.docker_argv)."""
    variables = [token for k, v in sorted((env or {}).items()) for token in ("-e", f"{k}={v}")]
    return [
        "docker", "run", "--rm", "--name", "llmcat-x-A", "--device", "/dev/dri", "--ipc=host",
        "-p", "127.0.0.1:8000:8000", *variables, image, "Qwen/Qwen3.5-9B", *vllm,
    ]  # fmt: skip


def _refusal(tree: Path, draft: dict[str, Any]) -> list[CatalogError]:
    write_packet(sealed(draft), tree / "packets")
    with pytest.raises(CatalogError) as caught:
        load_catalog(tree / "data", tree / "packets")
    found = caught.value.errors if isinstance(caught.value, CatalogErrors) else [caught.value]
    return [e for e in found if e.message.startswith("arm ")]  # the command check's (others may follow from the edit)


def _spec_arm(draft: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    index = next(i for i, arm in enumerate(draft["arms"]) if arm["id"] == SPEC_ARM)
    return index, draft["arms"][index]["config"]


def _one(errors: list[CatalogError], field: str, *words: str) -> CatalogError:
    """The one refusal: the packet file, the arm's config, the arm and the fact (and its field) in words."""
    (error,) = errors
    assert error.file is not None and error.file.endswith(".json"), "names the packet file"
    index, fact = field.split(".config.") if ".config." in field else (field.removesuffix(".config"), "")
    assert error.field == f"{index}.config" and f"arm {SPEC_ARM}" in error.message, error
    assert f"config.{fact}" in error.message or fact == "", error.message
    assert all(w in error.message for w in words), error.message
    return error


def test_graph_mode_a_recorded_command_contradicts(tree: Path) -> None:
    draft = measured_draft()
    index, config = _spec_arm(draft)
    config["graph_capture"] = "off (--enforce-eager)"  # the arm says eager; its argv has no --enforce-eager
    for arm in draft["arms"]:
        if arm["id"] != SPEC_ARM:
            arm["config"]["graph_capture"] = "off (--enforce-eager)"
            arm["config"]["argv"].append("--enforce-eager")
    _one(_refusal(tree, draft), f"arms[{index}].config.graph_capture", "graph mode", "runs graph capture", "eager")


def test_an_image_other_than_the_one_recorded(tree: Path) -> None:
    draft = measured_draft()
    draft["identity"]["runtime"].update(image="vllm/vllm-openai-xpu:latest", image_digest=PINNED.split("@")[1])
    draft["identity"]["runtime"]["image_pinned"] = PINNED
    index, _ = _spec_arm(draft)
    for arm in draft["arms"]:
        launched = OTHER if arm["id"] == SPEC_ARM else PINNED
        arm["config"]["launch_argv"] = _docker_launch(launched, *arm["config"]["argv"][3:])
    error = _one(_refusal(tree, draft), f"arms[{index}].config", "image", OTHER, PINNED.split("@")[1])
    assert "(identity.runtime)" in error.message


def test_an_env_switch_missing_or_extra(tree: Path) -> None:
    draft = measured_draft()
    index, config = _spec_arm(draft)
    config["launch_argv"] = _docker_launch(PINNED, *config["argv"][3:], env={"VLLM_XPU_DRAFT_LM_HEAD_INT4": "1"})
    draft["identity"]["runtime"].update(image_pinned=PINNED)
    error = _one(_refusal(tree, draft), f"arms[{index}].config.env", "env", "sets VLLM_XPU_DRAFT_LM_HEAD_INT4=1")
    assert "without VLLM_XPU_DRAFT_LM_HEAD_INT4" in error.message


def test_a_depth_other_than_the_arms(tree: Path) -> None:
    draft = measured_draft()
    index, config = _spec_arm(draft)
    flag = config["argv"].index("--speculative-config")
    spec = json.loads(config["argv"][flag + 1])
    config["argv"][flag + 1] = json.dumps({**spec, "num_speculative_tokens": spec["num_speculative_tokens"] + 2})
    _one(_refusal(tree, draft), f"arms[{index}].config.spec_depth", "speculative depth")


def test_a_card_count_other_than_the_arms(tree: Path) -> None:
    draft = measured_draft()
    index, config = _spec_arm(draft)
    config["argv"][3:3] = ["--tensor-parallel-size", "2"]
    _one(_refusal(tree, draft), f"arms[{index}].config.tensor_parallel_size", "TP", "spans 2 card(s)")


def test_a_make_measure_line_that_runs_another_graph_mode(tree: Path) -> None:
    """The recipe adds --enforce-eager on XPU: a packet measured with graph capture cannot show a
    `make measure` line that would measure it eager."""
    draft = measured_draft()
    for arm in draft["arms"]:
        arm["config"]["graph_capture"] = "vLLM default"
    errors = _refusal(tree, draft)
    assert errors and all("`make measure MODEL=qwen3.5-9b" in e.message for e in errors)
    assert {e.field for e in errors} == {f"arms[{i}].config.graph_capture" for i in range(len(draft["arms"]))}
    assert all("runs eager mode (--enforce-eager); the arm measured graph capture" in e.message for e in errors)


def test_an_overlay_configuration_inheriting_the_recipes_eager_override_fails_the_build(tmp_path: Path) -> None:
    """The 9B W4A16 arm was measured with graph capture on the source's image: the configuration
    that lists it must not inherit the recipe's xpu --enforce-eager (the image, which no registry
    serves, is the one difference the page lists instead)."""
    data = signed_data(tmp_path / "data")
    overlay = data / "overlays" / "qwen3.5-9b.yaml"
    document = yaml.safe_load(overlay.read_text())
    del document["configurations"]["b70-w4a16-mtp3-int4-head"]["drop_args"]
    overlay.write_text(yaml.safe_dump(document), encoding="utf-8")
    with pytest.raises(CatalogErrors) as caught:
        build(Options(data, REPO / "packets", tmp_path / "site", allow_unsigned=True))
    named = [e for e in caught.value.errors if "qwen3.5-9b-w4a16-8c08b0d2" in (e.file or "")]
    assert {e.field for e in named} == {"arms[0].config.graph_capture", "arms[1].config.graph_capture"}
    spec = next(e for e in named if "tp1-mtp3-int4-head" in e.message and "configuration" in e.message)
    assert "configuration b70-w4a16-mtp3-int4-head's command runs eager mode (--enforce-eager)" in spec.message
    assert "the arm measured graph capture (full decode-only XPU graph capture)" in spec.message
    assert not any("image" in (e.field or "") for e in named)


def test_the_committed_catalog_passes() -> None:
    catalog = load_catalog(REPO / "data", REPO / "packets")
    assert catalog.packets


def test_facts_read_from_every_form_of_command() -> None:
    server = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8000"]
    local = command_facts([*server, "-tp", "2", "--enforce-eager", "--max-model-len", "4096"], {"A": "1"})
    assert (local.eager, local.tp, local.max_model_len, dict(local.env), local.image) == (
        True,
        2,
        4096,
        {"A": "1"},
        None,
    )
    spec = '{"method":"mtp","num_speculative_tokens":3}'
    docker = command_facts(_docker_launch(PINNED, "--speculative-config", spec))
    assert (docker.eager, docker.spec_method, docker.spec_depth, docker.image) == (False, "mtp", 3, Image.parse(PINNED))
    assert Image.parse(PINNED).pullable and not Image("R276", None, "521eb277").pullable
    modes = ("off (--enforce-eager)", "vLLM default", "full decode-only XPU graph capture")
    assert [recorded_eager(g) for g in modes] == [True, False, False]


def test_what_a_command_sets_that_the_source_never_recorded_is_a_difference_a_reader_sees_not_a_refusal():
    """An imported source that printed no length, KV cache dtype or graph mode: a composed command
    setting one is listed beside the source's figure (`unrecorded`), never refused (`disagreements`)."""
    recorded = CommandFacts(eager=None, image=None, max_model_len=None, kv_cache_dtype=None)
    shown = command_facts(["vllm", "serve", "m", "--max-model-len", "8k", "--kv-cache-dtype", "fp8", "--enforce-eager"])
    assert disagreements(shown, recorded) == []
    assert [d.field for d in unrecorded(shown, recorded)] == ["graph mode", "max-model-len", "KV cache dtype"]
    assert "8000 tokens" in unrecorded(shown, recorded)[1].shown  # vLLM reads 8k as 8,000
    plain = command_facts(["vllm", "serve", "m"])  # sets none of them: vLLM's defaults, nothing to list
    assert unrecorded(plain, recorded) == []
    known = CommandFacts(eager=True, image=None, max_model_len=8000, kv_cache_dtype="fp8")
    assert unrecorded(shown, known) == []  # recorded: compared by disagreements, not listed twice


@pytest.mark.parametrize(
    ("flags", "eager"),
    [
        (["-O0"], True),  # FlexibleArgumentParser: -O0, -O 0, -O=0 are --optimization-level 0
        (["-O", "0"], True),
        (["-O=0"], True),
        (["--optimization-level", "0"], True),
        (["--opt", "0"], True),  # argparse's abbreviation
        (["-O3"], False),
        (["-cc", '{"cudagraph_mode": "none"}'], True),  # CUDAGraphMode[value.upper()]
        (["-cc.cudagraph_mode=NONE"], True),
        (["--compilation_config.cudagraph_mode", "NONE"], True),
        (["-O0", "-cc.cudagraph_mode=PIECEWISE"], False),  # a mode the command sets beats -O0's default
        (["-O0", "--no-enforce-eager"], True),  # that switch leaves -O0's default as it is
        (["--enforce-eager"], True),
        ([], False),
    ],
)
def test_graph_capture_turned_off_by_an_optimization_level_or_a_cudagraph_mode_is_read(flags, eager):
    """vLLM 0.32: -O0 defaults cudagraph_mode to NONE (vllm/config/vllm.py:247-261, a default a mode
    the command sets overrides, 1009-1036); -cc's JSON sets it (vllm/config/compilation.py:873-879)."""
    argv = ["vllm", "serve", "m", *flags]
    assert command_facts(argv).eager is eager
    assert recorded_eager(graph_capture_words(argv)) is eager  # what the runner records, read back alike


def test_a_compilation_config_or_level_vllm_cannot_read_is_named_not_guessed():
    assert command_facts(["vllm", "serve", "m", "-cc", "3"]).unread == (
        "sets --compilation-config 3, which is no JSON object vLLM reads",
    )
    assert command_facts(["vllm", "serve", "m", "-Odecode"]).unread == (
        "sets --optimization-level decode, a level the catalog cannot read",
    )


def test_the_shared_facts_of_a_command_cannot_be_changed_by_a_caller() -> None:
    """command_facts answers every caller with one object per command (lru_cache): an `env` a caller
    could change would change every later answer."""
    facts = command_facts(["vllm", "serve", "m"], {"A": "1"})
    with pytest.raises(TypeError):
        facts.env["B"] = "2"  # type: ignore[index]
    assert command_facts(["vllm", "serve", "m"], {"A": "1"}).env == {"A": "1"}


PINNED_IMAGE = "vllm/vllm-openai-xpu@sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "options",
    [
        ["--rm", "--health-cmd", "lab/check:1"],  # a valued option the runner never writes (docker/cli opts.go)
        ["-it", "--rm", "-eVLLM_X=1", "-v", "/a:/b"],  # pflag: flags run together, a value attached
        ["-dit", "--name=x", "--sig-proxy", "-p", "8000:8000"],
        ["--pull", "never", "--platform=linux/amd64"],  # run.go's own valued options
    ],
)
def test_docker_run_is_read_as_docker_reads_its_options(options: list[str]) -> None:
    """Every docker run option takes a value but the flags docker/cli declares as booleans
    (opts.go addFlags, run.go NewRunCommand): the image read is the one docker runs."""
    run = DockerRun.parse(["docker", "run", *options, PINNED_IMAGE, "Qwen/Qwen3.5-9B", "--max-model-len", "8192"])
    assert run is not None and run.image == PINNED_IMAGE and run.model == "Qwen/Qwen3.5-9B"


def test_an_unknown_docker_option_cannot_hide_the_image_it_runs() -> None:
    """`--health-cmd PINNED lab/patched` runs lab/patched; read as a flag, PINNED looked like the image."""
    run = DockerRun.parse(["docker", "run", "--health-cmd", PINNED_IMAGE, "lab/patched:fast", "Qwen/Qwen3.5-9B"])
    assert run is not None and run.image == "lab/patched:fast"


@pytest.mark.parametrize(
    ("options", "unread"),
    [
        (["-e", "HF_TOKEN", "-e", "VLLM_X=1"], []),  # the runner hands the hub's token through by name
        (["-e", "VLLM_XPU_DRAFT_LM_HEAD_INT4"], ["hands VLLM_XPU_DRAFT_LM_HEAD_INT4 through from the caller"]),
        (["--env=VLLM_Y"], ["hands VLLM_Y through from the caller"]),
        (["--env-file", "/etc/lab.env"], ["reads variables from --env-file /etc/lab.env"]),
        (["--entrypoint=/bin/fast"], ["runs --entrypoint /bin/fast in place of the image's own"]),
    ],
)
def test_what_a_docker_launch_does_not_say_is_unread(options: list[str], unread: list[str]) -> None:
    facts = command_facts(["docker", "run", "--rm", *options, PINNED_IMAGE, "Qwen/Qwen3.5-9B"])
    assert len(facts.unread) == len(unread)
    assert all(any(expected in words for words in facts.unread) for expected in unread)
