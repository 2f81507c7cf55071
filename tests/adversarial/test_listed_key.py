"""A listed key cannot publish a lie: a lab adds its keys to data/keys.yaml exactly as
docs/packets.md says (the lines `HostKey.keys_yaml_entry` prints, its own valid_from), then seals
what no measurement produced with the project's own `seal`. The signature holds, so only what the
packet says can refuse it: each forgery below must be refused by `python -m catalog.verify` and
`python -m builder build`, published and with `--allow-unsigned` alike, by one error line naming
the packet file and the field, with no traceback and no site written (tests/adversarial/
test_forgery.py's `refused`). Beside each class, a control packet honestly sealed by the same key
is accepted by both, so every refusal is the content's, never the key's.

The classes (issue 27): 1 facts come from the catalog, not the packet; 2 physics both ways;
3 independence means another signer and its own time; 4 imports keep their gates; 5 the workload
and load sweeps are what they say; 6 identity is one story; 7 keys and dates; 8 bounds on size.
"""

from __future__ import annotations

import base64
import copy
import os
import subprocess
from array import array
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from catalog.model.campaign import measured_cell
from catalog.model.load_sweep import LoadLevel, LoadRequest, LoadSweep
from catalog.model.metrics import compare_rows, server_decode_rate, server_ttft_ms
from catalog.model.packet import PacketParts, PromptRow
from catalog.packets.seal import seal, write_packet
from catalog.packets.signing import HostKey, host_key
from testkit.samples import measured_parts
from tests.adversarial.support import REPO, Tally, snapshot
from tests.adversarial.test_forgery import LOCAL, MODES, SIGNED, commands, refused, remove, stored
from tests.catalog.factories import draft_of

DEMO = next(p.stem for p in sorted((REPO / "packets").glob("demo-bf16-*.json")) if not p.name.endswith(".dsse.json"))
IMPORTED_9B = "qwen3.5-9b-fp8-dynamic-c48f580e"  # imported: two depth-4 arms withheld by a failing G3 (8/12)
IMPORTED_4B = "qwen3.5-4b-w4a16-c23911f1"  # imported: TTFT figures printed
WITHHELD_4B = "qwen3.5-4b-fp8-dynamic-aabd651f"  # imported: its oracle failed G1, so every arm is withheld
LAB_VALID_FROM = "2025-01-01"  # the day the lab's entry says its keys vouch from (any day it likes)
Document = dict[str, Any]


# ---- the lab: its keys listed the documented way, sealing with the project's seal ----


def lab_key(root: Path, role: str) -> HostKey:
    return host_key(role, config_dir=root.parent / f"{root.name}-lab-keys")


def list_lab(root: Path, *, entry: Callable[[str], str] = lambda line: line) -> None:
    """Append the lab's measurer and importer lines to data/keys.yaml, as printed, dated."""
    keys = root / "data" / "keys.yaml"
    lines = "".join(entry(lab_key(root, role).keys_yaml_entry(f"a lab ({role})")) for role in ("measurer", "importer"))
    lines = lines.replace(f"valid_from: {date.today().isoformat()}", f"valid_from: {LAB_VALID_FROM}")
    keys.write_text(keys.read_text(encoding="utf-8") + lines, encoding="utf-8")


def lab_seal(root: Path, document: Document) -> Path:
    """Seal a document with the project's `seal` and the lab's key of its role: states, bytes,
    digest, file name and signature all derived again, as the runner and importers do."""
    parts = PacketParts.model_validate(draft_of(document))
    role = "measurer" if parts.provenance.kind == "measured" else "importer"
    return write_packet(seal(parts, lab_key(root, role)), root / "packets")


@pytest.fixture
def lab(tree: Path) -> Path:
    list_lab(tree)
    return tree


def campaign() -> Document:
    """A campaign as the runner records one: Qwen3.5 9B BF16 on one Arc Pro B70, an oracle and an
    MTP arm on two fresh servers each, every figure derived from its rows (testkit.samples)."""
    return measured_parts().model_dump(mode="json")


def base(root: Path, name: str) -> Document:
    """A committed packet as the lab would start from it (removed: the lab replaces it)."""
    document = stored(root, name)
    remove(root, name)
    return document


def accepted(root: Path, options: tuple[str, ...]) -> None:
    """Both command lines exit 0 without an error line; the build writes the site."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for command in commands(root, root / "packets", options):
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{command[2]} refused an honest packet:\n{done.stdout}{done.stderr}"
        assert "error:" not in done.stderr, done.stderr
    assert (root / "site" / "index.html").is_file()


# ---- editing rows and their figures as the runner derives them ----


def rows_of(server: Document) -> list[PromptRow]:
    return [PromptRow.model_validate(row) for row in server["rows"]]


def rederive(server: Document) -> None:
    """A server's published figures derived again from its (edited) rows, as the runner does."""
    rows = rows_of(server)
    server["decode_tok_s"] = server_decode_rate(rows)
    server["ttft_ms"] = server_ttft_ms(rows)


def times(row: Document) -> array[int]:
    return array("I", base64.b64decode(row["token_times_us"]))


def set_times(row: Document, values: list[int]) -> None:
    row["token_times_us"] = base64.b64encode(array("I", values).tobytes()).decode()


def regate(document: Document) -> None:
    """Every gate compared again from the (edited) rows, as the runner compares them."""
    for arm in document["arms"]:
        servers = [rows_of(s) for s in arm["servers"]]
        for gate in arm["gates"]:
            if gate["gate"] in ("G1", "G2"):
                redone = compare_rows(gate["gate"], gate["against"], servers[0], servers[1])
            else:
                oracle = next(a for a in document["arms"] if a["id"] == gate["against"])
                mine = servers[[s["label"] for s in arm["servers"]].index(gate["server"])]
                redone = compare_rows("G3", gate["against"], mine, rows_of(oracle["servers"][0]), server=gate["server"])
            gate.update(redone.model_dump(mode="json"))


# ---- 1. facts come from the catalog, not the packet ----


def demo_as_qwen(document: Document) -> None:
    """The CPU demo relabelled as Qwen3.5-9B on an Arc Pro B70: it would lead the 9B family."""
    document["identity"]["model"].update(
        slug="qwen3.5-9b", variant="default", repo="Qwen/Qwen3.5-9B", synthetic=False, synthetic_note=None
    )
    document["identity"]["host"].update(hardware="arc_pro_b70")
    document["identity"]["runtime"].update(platform="xpu", label="vLLM XPU 0.32.0", torch_version=None)
    document["workload"]["max_tokens"] = 512
    for arm in document["arms"]:
        arm["config"]["argv"] = ["vllm", "serve", "Qwen/Qwen3.5-9B"]


def demo_as_qwen_declaring_nothing(document: Document) -> None:
    """The same with its own config, weight files and weight bytes removed: nothing declared."""
    demo_as_qwen(document)
    document["identity"]["model"].update(config=None, weight_files=[], weight_bytes=None)


def cheaper_precision(document: Document) -> None:
    """A BF16 campaign declared W4A16: its ceiling would count 4 bits per weight."""
    document["identity"]["model"].update(quantization="w4a16", quantization_label="W4A16")


def smaller_hidden_size(document: Document) -> None:
    document["identity"]["model"]["config"] = {"hidden_size": 1024}


def token_beyond_the_vocabulary(document: Document) -> None:
    """No vocabulary declared; one id past Qwen3.5's 248,320 on both oracle servers."""
    document["identity"]["model"]["config"] = None
    for server in document["arms"][0]["servers"]:
        row = server["rows"][5]
        ids = array("I", base64.b64decode(row["token_ids"]))
        ids[30] = 250_000
        row["token_ids"] = base64.b64encode(ids.tobytes()).decode()
    regate(document)


# ---- 2. physics both ways ----


def first_token_at_once(document: Document) -> None:
    """Every row's first token 1 µs after sending."""
    for arm in document["arms"]:
        for server in arm["servers"]:
            for row in server["rows"]:
                set_times(row, [1, *times(row)[1:]])
            rederive(server)


def decode_at_once(document: Document) -> None:
    """Every token of every row 40 ms after sending: no decode step took any time."""
    for arm in document["arms"]:
        for server in arm["servers"]:
            for row in server["rows"]:
                set_times(row, [40_000 + (k // 60) for k in range(len(times(row)))])
            rederive(server)


def imported_ttft_too_soon(document: Document) -> None:
    document["arms"][0]["published_ttft_ms"] = [0.5, 0.5]


# ---- 3. independence ----


def second_server_shifted(document: Document) -> None:
    """The oracle's server B is server A with every time a microsecond later: G1 passes."""
    first, second = document["arms"][0]["servers"]
    second["rows"] = copy.deepcopy(first["rows"])
    for row in second["rows"]:
        set_times(row, [t + 1 for t in times(row)])
    rederive(second)
    regate(document)


def second_server_copied(document: Document) -> None:
    first, second = document["arms"][1]["servers"]
    second["rows"] = copy.deepcopy(first["rows"])
    rederive(second)
    regate(document)


# ---- 4. imports keep their gates ----


def failing_g3_deleted(document: Document) -> None:
    for arm in document["arms"]:
        if any(g["gate"] == "G3" and not g["passed"] for g in arm["gates"]):
            arm["gates"], arm["withheld_reason"] = [], None


def failing_g1_deleted(document: Document) -> None:
    """The FP8 oracle failed repeat-exactness: without its G1 it would publish as imported."""
    document["arms"][0]["gates"], document["arms"][0]["withheld_reason"] = [], None


# ---- 5. workload and load sweeps ----


def rows_past_max_tokens(document: Document) -> None:
    document["workload"]["max_tokens"] = 100  # every row holds 120 tokens


def users_one_at_a_time(document: Document) -> None:
    """A load level of "4 users" whose four requests ran one after the other."""
    each = 80.0 + 119 * 25.0
    requests = [
        LoadRequest(
            prompt_id=document["arms"][0]["servers"][0]["rows"][k]["prompt_id"],
            planned_ms=k * (each + 1.0),
            sent_ms=k * (each + 1.0) + 0.2,
            ttft_ms=80.0,
            e2e_ms=each,
            output_tokens=120,
            tpot_ms=25.0,
            identical_to_oracle=True,
        )
        for k in range(4)
    ]
    level = LoadLevel(mode="closed", users=4, duration_s=13.0, client_cpu_s=0.1, requests=requests)
    sweep = LoadSweep(seed=7, requests_per_level=4, levels=[level])
    document["ladders"] = [{"arm": "tp1-mtp0", "kind": "load", "load": sweep.model_dump(mode="json")}]


# ---- 6. identity is one story ----

DIGEST, OTHER = "sha256:" + "ab" * 32, "sha256:" + "cd" * 32
PINNED = f"vllm/vllm-openai-xpu@{DIGEST}"


def docker_story(document: Document) -> None:
    """What the runner records of a docker campaign: tag, digest, pinned image, launch, /version."""
    runtime = document["identity"]["runtime"]
    runtime.update(image="vllm/vllm-openai-xpu:0.17.1", image_digest=DIGEST, image_pinned=PINNED)
    for arm in document["arms"]:
        arm["config"]["launch_argv"] = ["docker", "run", "--rm", PINNED, "Qwen/Qwen3.5-9B", *arm["config"]["argv"][3:]]
        for server in arm["servers"]:
            server["server_version"] = runtime["version"]


def campaign_cell(document: Document) -> dict[str, Any]:
    """A fleet campaign's ref naming the cell the document measured (catalog/model/campaign.py)."""
    cell = measured_cell(PacketParts.model_validate(draft_of(document)))
    return {"name": "b70-qwen", "round": "2026-11", "cell": cell, "repeat": 1, "repeats": 2}


def claims_another_card_s_cell(document: Document) -> None:
    """Qwen3.5 9B measured on an Arc Pro B70 claims the plan's B60 cell: a re-run would skip it."""
    document["campaign"] = campaign_cell(measured_parts(hardware="arc_pro_b60").model_dump(mode="json"))


def digest_contradicts(document: Document) -> None:
    docker_story(document)
    document["identity"]["runtime"]["image_digest"] = OTHER


def launch_of_another_image(document: Document) -> None:
    docker_story(document)
    document["arms"][1]["config"]["launch_argv"][3] = f"vllm/vllm-openai-xpu@{OTHER}"


def launch_with_unsaid_environment(document: Document) -> None:
    """The launch reads variables from a file the packet does not carry and hands the draft head's
    switch through from the lab's shell (`-e NAME`): what the server ran with is nowhere in it."""
    docker_story(document)
    launch = document["arms"][1]["config"]["launch_argv"]
    launch[3:3] = ["--env-file=/etc/lab/fast.env", "-e", "VLLM_XPU_DRAFT_LM_HEAD_INT4"]


def another_server_version(document: Document) -> None:
    docker_story(document)
    document["arms"][0]["servers"][1]["server_version"] = "0.11.0"


def before_the_model_existed(document: Document) -> None:
    document["created"] = "2026-01-15T10:00:00Z"  # Qwen3.5 9B was released on 2026-03-02


def older_vllm_than_the_recipe_needs(document: Document) -> None:
    document["identity"]["runtime"].update(version="0.10.2", label="vLLM 0.10.2 XPU")


# ---- 7. keys and dates ----


def no_publication_date(document: Document) -> None:
    document["provenance"]["source"]["published"] = None


def no_creation_date(document: Document) -> None:
    document["created"] = None


# ---- 8. bounds on size ----


def long_title(document: Document) -> None:
    document["title"] = "Qwen3.5 9B, the fastest ever measured " * 10


def long_label(document: Document) -> None:
    document["arms"][0]["label"] = "1 card " + "and a very long label " * 10


def huge_packet(document: Document) -> None:
    """A title of 17 MB: the file is refused before it is read."""
    document["title"] = "x" * (17 * 1024 * 1024)


# (class, what is forged, the committed packet it starts from or None for a campaign, the edit,
#  what the error line holds besides the packet's id)
ATTACKS: list[tuple[str, str, str | None, Callable[[Document], None], str]] = [
    (
        "1 facts",
        "the CPU demo relabelled as Qwen3.5 9B on an Arc Pro B70",
        DEMO,
        demo_as_qwen,
        "identity.model.config.",
    ),
    (
        "1 facts",
        "the CPU demo relabelled, its config, weight files and bytes removed",
        DEMO,
        demo_as_qwen_declaring_nothing,
        "decode rate",
    ),
    ("1 facts", "a BF16 campaign declared W4A16", None, cheaper_precision, "identity.model.quantization"),
    ("1 facts", "a declared hidden size of 1024", None, smaller_hidden_size, "identity.model.config.hidden_size"),
    ("1 facts", "a token id past the real vocabulary, none declared", None, token_beyond_the_vocabulary, "vocab"),
    ("2 physics", "every first token 1 µs after sending", None, first_token_at_once, "token_times_us[0]"),
    ("2 physics", "every row's tokens all within 2 µs", None, decode_at_once, "last token"),
    ("2 physics", "an imported TTFT of 0.5 ms", IMPORTED_4B, imported_ttft_too_soon, "published_ttft_ms[0]"),
    (
        "3 independence",
        "a second fresh server that is the first 1 µs later",
        None,
        second_server_shifted,
        "never share",
    ),
    ("3 independence", "a second fresh server copied byte for byte", None, second_server_copied, "never share"),
    ("4 imports", "an imported arm's failing G3 deleted", IMPORTED_9B, failing_g3_deleted, "carries no G3 gate"),
    ("4 imports", "an imported oracle's failing G1 deleted", WITHHELD_4B, failing_g1_deleted, "carries no G1 gate"),
    ("5 workload", "rows longer than the max_tokens declared", None, rows_past_max_tokens, "completion_tokens"),
    ("5 workload", "4 users whose requests ran one at a time", None, users_one_at_a_time, "users it declares"),
    ("6 identity", "a digest the pinned image does not carry", None, digest_contradicts, "image_digest"),
    ("6 identity", "a launch of another image than the pinned one", None, launch_of_another_image, "launch_argv"),
    ("6 identity", "a launch whose environment is not in it", None, launch_with_unsaid_environment, "--env-file"),
    ("6 identity", "a server whose /version is another vLLM", None, another_server_version, "server_version"),
    ("6 identity", "a campaign dated before its model existed", None, before_the_model_existed, "existed"),
    ("6 identity", "a vLLM older than the recipe needs", None, older_vllm_than_the_recipe_needs, "older than"),
    ("6 identity", "a campaign cell measured on another card", None, claims_another_card_s_cell, "campaign.cell"),
    ("7 dates", "an import without its source's publication date", IMPORTED_4B, no_publication_date, "published"),
    ("7 dates", "a campaign without its creation date", None, no_creation_date, "created"),
    ("8 bounds", "a title of 380 characters", None, long_title, "title"),
    ("8 bounds", "an arm label of 227 characters", None, long_label, "arms[0].label"),
    ("8 bounds", "a 17 MB packet", None, huge_packet, "16 MiB"),
]


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize(("kind", "what", "start", "edit", "because"), ATTACKS, ids=[a[1] for a in ATTACKS])
def test_a_listed_key_cannot_publish_a_lie(
    lab: Path,
    kind: str,
    what: str,
    start: str | None,
    edit: Callable[[Document], None],
    because: str,
    options: tuple[str, ...],
    tally: Tally,
) -> None:
    document = base(lab, start) if start else campaign()
    edit(document)
    refused(lab, lab_seal(lab, document), options, because=because)
    tally.add("listed key", f"{kind}: {what}", 2)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_reproduction_that_is_its_original_a_microsecond_later(
    lab: Path, options: tuple[str, ...], tally: Tally
) -> None:
    """3 independence: the lab's own campaign, and a "reproduction" of it signed by the same key that
    differs only in a declared boot id and every time shifted by 1 µs (grade A if it counted)."""
    original = lab_seal(lab, campaign())
    copy_of = campaign()
    copy_of.update(title="Qwen3.5-9B BF16 on one Arc Pro B70, reproduced", reproduces=original.stem)
    copy_of["identity"]["host"]["boot_id"] = "0d3c8b9e-another-boot"
    for arm in copy_of["arms"]:
        for server in arm["servers"]:
            for row in server["rows"]:
                set_times(row, [t + 1 for t in times(row)])
            rederive(server)
    regate(copy_of)
    refused(lab, lab_seal(lab, copy_of), options, because="a copy, not a reproduction")
    tally.add("listed key", "3 independence: a same-key reproduction, another boot id, every time 1 µs later", 2)


# ---- what a lab may honestly publish with the same key: every class's starting packet ----

CONTROLS: dict[str, list[str | None]] = {
    "1 facts": [DEMO, None],
    "2 physics": [IMPORTED_4B, None],
    "3 independence": [None],
    "4 imports": [IMPORTED_9B, WITHHELD_4B],
    "5 workload": [None],
    "6 identity": [None],
    "7 dates": [IMPORTED_4B, None],
    "8 bounds": [None],
}


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("kind", list(CONTROLS))
def test_the_same_key_publishes_an_honest_packet(lab: Path, kind: str, options: tuple[str, ...]) -> None:
    """The control: the class's starting packets sealed honestly by the lab's key (a campaign with
    the docker story and the fleet campaign cell the runner records, for class 6) are accepted, so
    each refusal above is the content's."""
    for start in CONTROLS[kind]:
        document = base(lab, start) if start else campaign()
        if kind == "6 identity":
            docker_story(document)
            document["campaign"] = campaign_cell(document)
        lab_seal(lab, document)
    accepted(lab, options)


# ---- 7. keys and dates: a keys.yaml in error is one error, not one per packet ----


def _one_error_about_keys(root: Path, options: tuple[str, ...], because: str) -> None:
    before = snapshot(root)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for command in commands(root, root / "packets", options):
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        errors = [line for line in done.stderr.strip().splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, done.stderr
        assert "data/keys.yaml" in errors[0] and because in errors[0], errors[0]
    assert not (root / "site").exists()
    assert snapshot(root) == before


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("listing", ["listed twice", "undated"])
def test_a_keys_yaml_in_error_is_one_error(tree: Path, listing: str, options: tuple[str, ...], tally: Tally) -> None:
    """Every committed packet's signature rests on data/keys.yaml: a key listed twice, or one that
    says no first day, is reported once, never as each packet's unknown key."""
    if listing == "listed twice":
        list_lab(tree)
        list_lab(tree)
        because = "is listed twice"
    else:
        list_lab(tree, entry=lambda line: "\n".join(x for x in line.splitlines() if "valid_from" not in x) + "\n")
        because = "has no valid_from"
    for name in (DEMO, IMPORTED_9B):
        lab_seal(tree, base(tree, name))
    _one_error_about_keys(tree, options, because)
    tally.add("listed key", f"7 dates: a lab's key {listing} in keys.yaml (one error)", 2)


# ---- 8. bounds on size: a packet that is a link out of its catalog ----


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_packet_linked_from_outside_the_catalog(lab: Path, options: tuple[str, ...], tally: Tally) -> None:
    """An honest packet, sealed by the lab, kept outside and linked into packets/: refused by name."""
    outside = lab.parent / f"{lab.name}-outside"
    outside.mkdir()
    made = write_packet(seal(PacketParts.model_validate(campaign()), lab_key(lab, "measurer")), outside)
    link = lab / "packets" / made.name
    link.symlink_to(made)
    (lab / "packets" / f"{made.stem}.dsse.json").symlink_to(outside / f"{made.stem}.dsse.json")
    refused(lab, link, options, because="outside the catalog")
    tally.add("listed key", "8 bounds: a packet linked into packets/ from outside the catalog", 2)


assert SIGNED == () and LOCAL == ("--allow-unsigned",)  # the two modes every attack runs in
