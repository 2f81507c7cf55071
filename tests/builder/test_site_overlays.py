"""The real catalog's pages: overlay configurations on the recipe page, and an imported arm's
command composed from its configuration, labelled as composed (never as recorded)."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup

REPO = Path(__file__).resolve().parents[2]
W4A16 = "qwen3.5-9b-w4a16-8c08b0d2"


def _soup(site: Path, relative: str) -> BeautifulSoup:
    return BeautifulSoup((site / relative).read_text(), "lxml")


def test_an_imported_arm_shows_the_command_its_configuration_composes(repository_built: Path) -> None:
    soup = _soup(repository_built, f"packets/{W4A16}/index.html")
    arm = soup.select_one("#arm-tp1-mtp3-int4-head")
    assert arm is not None
    text = " ".join(arm.get_text(" ").split())  # a glossary <abbr> (TP) is its own text node
    assert (
        "Not published by the source: the closest command this catalog composes, from the overlay configuration "
        "b70-w4a16-mtp3-int4-head, for this variant, card, TP and depth." in text
    )
    assert "VLLM_XPU_DRAFT_LM_HEAD_INT4=1" in text and "RedHatAI/Qwen3.5-9B-quantized.w4a16" in text
    assert '"num_speculative_tokens":3' in text and "--max-model-len 8192" in text
    # measured with graph capture on the source's image: the command is not eager; the fact it cannot
    # state as measured (the image) and the one it adds that the source never recorded (its
    # --max-model-len) are each listed as a difference
    assert "--enforce-eager" not in arm.select_one("#cmd-tp1-mtp3-int4-head").get_text()  # type: ignore[union-attr]
    differences = [" ".join(li.get_text(" ").split()) for li in arm.select("ul.differences li")]
    assert len(differences) == 2 and differences[0].startswith("image: this command runs vllm/vllm-openai-xpu:latest")
    assert "R276" in differences[0]
    assert differences[1] == (
        "max-model-len: this command sizes the server for 8192 tokens; the source measured with a length it did"
        " not record"
    )


def test_the_recipe_page_offers_the_overlay_variant_and_configurations(repository_built: Path) -> None:
    soup = _soup(repository_built, "recipes/qwen3.5-9b/index.html")
    section = soup.select_one("#configurations")
    assert section is not None
    text = section.get_text(" ")
    assert "W4A16, MTP depth 3, draft INT4 head, one B70" in text and "VLLM_XPU_DRAFT_LM_HEAD_INT4=1" in text
    assert soup.select_one(f'#configurations a[href$="packets/{W4A16}/index.html"]') is not None
    assert "RedHatAI/Qwen3.5-9B-quantized.w4a16" in soup.select_one("#variants").get_text(" ")  # type: ignore[union-attr]


def test_the_measure_lines_name_the_configuration_the_imported_arms_ran(repository_built: Path) -> None:
    """A `make measure` line without CONFIG= would serve the recipe's default draft head, not the
    INT4 head the packet's speculative arms ran; the line names their overlay configuration."""
    soup = _soup(repository_built, f"packets/{W4A16}/index.html")
    lines = [pre.get_text() for pre in soup.select('pre[id^="measure-"]')]
    assert lines == [
        "make measure MODEL=qwen3.5-9b VARIANT=w4a16 HW=arc_pro_b70 TP=1 DEPTHS=0,3 "
        "CONFIG=b70-w4a16-mtp3-int4-head RUNTIME=docker"
    ]
    fp8 = _soup(repository_built, "packets/qwen3.5-9b-fp8-dynamic-c48f580e/index.html")
    assert [pre.get_text() for pre in fp8.select('pre[id^="measure-"]')] == [
        "make measure MODEL=qwen3.5-9b VARIANT=fp8 HW=arc_pro_b70 TP=1 DEPTHS=0,3,4 "
        "CONFIG=b70-fp8-mtp3-int4-head RUNTIME=docker",
        "make measure MODEL=qwen3.5-9b VARIANT=fp8 HW=arc_pro_b70 TP=2 DEPTHS=0,3,4 "
        "CONFIG=2xb70-fp8-mtp3-int4-head RUNTIME=docker",
    ]


def test_the_9b_hero_runs_what_the_source_measured(repository_built: Path) -> None:
    """The hero's "run this" for the B70 is the W4A16 arm's configuration with graph capture, as the
    source measured it (never the recipe's xpu --enforce-eager); the one fact it cannot state as
    measured, the source's image, is said beside it."""
    soup = _soup(repository_built, "models/qwen3.5-9b/index.html")
    run = soup.select_one("#run-arc_pro_b70")
    assert run is not None
    local = run.select_one("#run-local-arc_pro_b70").get_text()  # type: ignore[union-attr]
    docker = run.select_one("#run-docker-arc_pro_b70").get_text()  # type: ignore[union-attr]
    assert "RedHatAI/Qwen3.5-9B-quantized.w4a16" in local and "VLLM_XPU_DRAFT_LM_HEAD_INT4=1" in local
    assert "--enforce-eager" not in local and "--enforce-eager" not in docker
    assert '"num_speculative_tokens":3' in local
    note = " ".join(run.get_text(" ").split())
    assert "The source published no command" in note and "R276" in note
    assert run.select_one(f'a.run-arm[href$="packets/{W4A16}/index.html#arm-tp1-mtp3-int4-head"]') is not None
