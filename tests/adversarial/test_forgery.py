"""Forgery: someone with the project's code but not its private keys edits packets and re-seals
them with a key of their own (or keeps the original signature file), then runs the real command
lines, `python -m catalog.verify` and `python -m builder build`, as subprocesses. Each forgery
must be refused: a non-zero exit, `error:` lines only (no traceback), one naming the forged
packet, and nothing published or written.

Most forgeries are tried twice: against the published catalog (the forger's key is not in
data/keys.yaml, so the signature alone refuses them) and with `--allow-unsigned` (a local
build, where the forger's key is admitted as an unsigned local packet): only the packet's own
content checks (catalog/checks/evidence.py, catalog/checks/consistency.py) can refuse them there. Those not
refused yet are marked xfail (strict): each flips to a failure once a check refuses it, and the
mark must then be removed.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from catalog.model.metrics import compare_rows, server_decode_rate, server_ttft_ms
from catalog.model.packet import PacketParts, PromptRow, packet_id
from catalog.packets.canonical import canonical_json, sha256_hex
from catalog.packets.layout import SIGNATURE_SUFFIX, signature_path
from catalog.packets.seal import seal, write_packet
from catalog.packets.signing import HostKey, host_key, sign_packet
from testkit.samples import (
    ORACLE_ARM,
    SAME_SERVER,
    SPEC_ARM,
    make_arm,
    make_rows,
    make_server,
    measured_parts,
    strict_suite,
)
from tests.adversarial.support import REPO, Tally, snapshot
from tests.catalog.factories import draft_of

# the committed CPU demo packet, whatever its id (re-measured with make measure MODEL=demo ...)
DEMO = next(p.stem for p in sorted((REPO / "packets").glob("demo-bf16-*.json")) if not p.name.endswith(".dsse.json"))
IMPORTED = "qwen3.5-9b-fp8-dynamic-c48f580e"  # imported: withheld MTP arms whose G3 failed (8/12)
SIGNED = ()
LOCAL = ("--allow-unsigned",)
MODES = [pytest.param(SIGNED, id="published"), pytest.param(LOCAL, id="allow-unsigned")]
Document = dict[str, Any]


# ---- the forger's tools: the project's code, their own key ----


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A private copy of data/ (its keys.yaml lists only the project's keys) and of packets/."""
    shutil.copytree(REPO / "data", tmp_path / "data")
    shutil.copytree(REPO / "packets", tmp_path / "packets")
    return tmp_path


def forger_key(root: Path, role: str) -> HostKey:
    """A throwaway key of the forger's own, made where keys are made, listed nowhere."""
    return host_key(role, config_dir=root.parent / f"{root.name}-forger-keys")


def stored(root: Path, name: str) -> Document:
    document: Document = json.loads((root / "packets" / f"{name}.json").read_bytes())
    return document


def remove(root: Path, name: str) -> None:
    """The forger replaces a packet: its file and its signature go."""
    path = root / "packets" / f"{name}.json"
    path.unlink()
    signature_path(path).unlink()


def reseal(root: Path, document: Document) -> Path:
    """Seal an edited packet with the project's own `seal` and the forger's key: states, bytes,
    digest, file name and signature all derived again, as the runner does."""
    parts = PacketParts.model_validate(draft_of(document))
    role = "measurer" if parts.provenance.kind == "measured" else "importer"
    return write_packet(seal(parts, forger_key(root, role)), root / "packets")


def forge_bytes(root: Path, document: Document, *, signature_of: str | None = None) -> Path:
    """Write a document `seal` would not make (its models refuse it): canonical bytes, named by
    their digest, signed by the forger's key, or beside a copy of packet `signature_of`'s
    signature file."""
    data = canonical_json(document) + b"\n"
    digest = sha256_hex(data)
    model = document["identity"]["model"]
    path = root / "packets" / f"{packet_id(model['slug'], model['quantization'], digest)}.json"
    path.write_bytes(data)
    if signature_of is not None:
        shutil.copy(root / "packets" / f"{signature_of}{SIGNATURE_SUFFIX}", signature_path(path))
    else:
        role = "measurer" if document["provenance"]["kind"] == "measured" else "importer"
        signature_path(path).write_bytes(sign_packet(digest, path.name, forger_key(root, role)))
    return path


# ---- the two command lines ----


def commands(root: Path, packets: Path, options: tuple[str, ...]) -> list[list[str]]:
    data, out = str(root / "data"), str(root / "site")
    return [
        [sys.executable, "-m", "catalog.verify", "--data", data, "--packets", str(packets), *options],
        [sys.executable, "-m", "builder", "build", "--data", data, "--packets", str(packets), "--out", out, *options],
    ]


def refused(
    root: Path,
    forged: Path,
    options: tuple[str, ...] = SIGNED,
    *,
    packets: Path | None = None,
    because: str = "",
) -> None:
    """Both command lines exit non-zero with `error:` lines only, one of them naming the forged
    packet (its file, or its signature file beside it: both carry the packet's id) and holding
    `because`, and write nothing: no site, no file changed under `root`."""
    before = snapshot(root)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for command in commands(root, packets or root / "packets", options):
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode != 0, f"{command[2]} accepted the forgery:\n{done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        lines = done.stderr.strip().splitlines()
        assert lines and all(line.startswith(("error: ", "warning: ")) for line in lines), done.stderr
        named = [line for line in lines if line.startswith("error: ") and forged.stem in line and because in line]
        assert named, f"no error names {forged.name} ({because!r}):\n{done.stderr}"
    assert not (root / "site").exists(), "a refused catalog was published"
    assert snapshot(root) == before, "a refused command wrote a file"


# ---- 1. the demo packet relabelled as a real model on real hardware ----


def _relabelled(root: Path) -> Document:
    """The synthetic CPU demo passed off as Qwen3.5 9B on an Arc Pro B70, every canary passed."""
    document = stored(root, DEMO)
    model = document["identity"]["model"]
    model.update(slug="qwen3.5-9b", variant="default", repo="Qwen/Qwen3.5-9B", synthetic=False, synthetic_note=None)
    document["identity"]["host"].update(hardware="arc_pro_b70", device_name="Intel Arc Pro B70")
    document["identity"]["runtime"].update(platform="xpu", label="vLLM XPU")
    document["title"] = "Qwen3.5-9B BF16 on one Arc Pro B70"
    for arm in document["arms"]:
        for server in arm["servers"]:
            for canary in server["canaries"]:
                canary.update(passed=True, detail="")
    return document


@pytest.mark.slow
def test_demo_relabelled_and_resealed_with_the_forgers_key(tree: Path, tally: Tally) -> None:
    document = _relabelled(tree)
    remove(tree, DEMO)
    forged = reseal(tree, document)
    assert forged.stem.startswith("qwen3.5-9b-bf16-")
    refused(tree, forged, because=f"unknown key {forger_key(tree, 'measurer').key_id}")
    tally.add("forgery", "demo packet relabelled as Qwen3.5 9B on an Arc Pro B70, re-sealed with an unknown key", 2)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("named", ["by its own digest", "as the original"])
def test_demo_relabelled_beside_the_original_signature(
    tree: Path, named: str, options: tuple[str, ...], tally: Tally
) -> None:
    """The project's real signature kept beside the relabelled bytes: it signs the original
    digest and file name. Under the name its own digest gives, the signature names another
    packet; under the original name, the name no longer is its digest's."""
    original = tree / "packets" / f"{DEMO}.json"
    signature = original.with_name(f"{DEMO}{SIGNATURE_SUFFIX}").read_bytes()
    document = _relabelled(tree)
    remove(tree, DEMO)
    forged = reseal(tree, document)
    if named == "as the original":
        forged.rename(original)
        signature_path(forged).unlink()
        forged, because = original, "the id its bytes hash to"
    else:
        because = f"signs packet '{DEMO}.json'"
    signature_path(forged).write_bytes(signature)
    refused(tree, forged, options, because=because)
    tally.add("forgery", "demo packet relabelled, kept beside the original signature", 2)


# ---- 2. token times divided by 100,000, every figure derived again ----


def _times_divided(document: Document, by: int) -> None:
    for arm in document["arms"]:
        for server in arm["servers"]:
            rows = []
            for row in server["rows"]:
                times = array("I", base64.b64decode(row["token_times_us"]))
                # each token still a microsecond after the one before, so every rate exists
                faster = array("I", (t // by + i for i, t in enumerate(times)))
                row["token_times_us"] = base64.b64encode(faster.tobytes()).decode()
                rows.append(PromptRow.model_validate(row))
            if rows:
                server["decode_tok_s"] = server_decode_rate(rows)
                server["ttft_ms"] = server_ttft_ms(rows)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_token_times_divided_and_figures_rederived(tree: Path, options: tuple[str, ...], tally: Tally) -> None:
    document = stored(tree, DEMO)
    _times_divided(document, 100_000)
    rates = [s["decode_tok_s"] for a in document["arms"] for s in a["servers"]]
    assert all(rate is not None and rate > 500_000 for rate in rates), rates  # half a million tok/s on a CPU
    remove(tree, DEMO)
    refused(tree, reseal(tree, document), options)
    tally.add("forgery", "token times divided by 100,000, every figure re-derived and re-sealed", 2)


# ---- 3. a speculative arm freed of its failing G3 gates ----


def _failing_g3_deleted(document: Document) -> None:
    freed = 0
    for arm in document["arms"]:
        kept = [g for g in arm["gates"] if g["gate"] != "G3" or g["passed"]]
        if len(kept) < len(arm["gates"]):
            arm["gates"], arm["withheld_reason"] = kept, None
            freed += 1
    assert freed >= 2  # depth 4 on one card and on two (depths 5 and 6 are screened: no gate to delete)


def _measured_with_failing_g3() -> Document:
    """A measured campaign (testkit.samples) whose MTP servers agree with each other (G2 passes)
    but both drift from the oracle on one prompt: G3 fails for A and B, so the arm is withheld."""
    oracle_a, oracle_b = make_rows(ms_per_token=20.0), make_rows(ms_per_token=20.05)
    spec_a = make_rows(ms_per_token=12.0, chunk=3, diverge={4: 57})
    spec_b = make_rows(ms_per_token=12.05, chunk=3, diverge={4: 57})
    oracle = make_arm(
        ORACLE_ARM,
        "1 card, no speculative decoding",
        servers=[make_server("A", oracle_a), make_server("B", oracle_b)],
        gates=[compare_rows("G1", SAME_SERVER, oracle_a, oracle_b)],
    )
    spec = make_arm(
        SPEC_ARM,
        "1 card, MTP depth 2",
        servers=[make_server("A", spec_a), make_server("B", spec_b)],
        gates=[
            compare_rows("G2", SAME_SERVER, spec_a, spec_b),
            compare_rows("G3", ORACLE_ARM, spec_a, oracle_a, server="A"),
            compare_rows("G3", ORACLE_ARM, spec_b, oracle_a, server="B"),
        ],
        spec_depth=2,
    )
    document = measured_parts(spec=False).model_dump(mode="json")
    document["arms"] = [arm.model_dump(mode="json") for arm in (oracle, spec)]
    assert [g["passed"] for g in document["arms"][1]["gates"]] == [True, False, False]
    return document


def _measured_failing_g3_deleted(document: Document) -> None:
    arm = document["arms"][1]
    arm["gates"] = [g for g in arm["gates"] if g["gate"] != "G3"]
    arm["withheld_reason"] = None


def _g3_against_itself(document: Document) -> None:
    """Each withheld speculative arm's G3 now compares the arm with itself: trivially identical."""
    changed = 0
    for arm in document["arms"]:
        for gate in arm["gates"]:
            if gate["gate"] == "G3" and not gate["passed"]:
                gate.update(against=arm["id"], exact=gate["total"], passed=True, first_divergence=[])
                arm["withheld_reason"] = None
                changed += 1
    assert changed >= 2  # depth 4 on one card and on two


def _measured_g3_against_itself(document: Document) -> None:
    """The measured demo's speculative arm: its G3 re-compares its own rows, so the re-derived
    count agrees with the stored one."""
    (arm,) = [a for a in document["arms"] if a["config"]["spec_depth"] > 0]
    for gate in arm["gates"]:
        if gate["gate"] == "G3":
            gate["against"] = arm["id"]


G3_EDITS: dict[str, tuple[str | None, Callable[[Document], None]]] = {
    "failing G3 gates deleted (measured)": (None, _measured_failing_g3_deleted),
    "failing G3 gates deleted (imported)": (IMPORTED, _failing_g3_deleted),
    "G3 against the arm itself (measured)": (DEMO, _measured_g3_against_itself),
    "G3 against the arm itself (imported)": (IMPORTED, _g3_against_itself),
}
# An imported arm carries the gates its source published: a failing G3 deleted from one is refused
# in a local --allow-unsigned build too (catalog/checks/consistency.py: an imported arm above depth 0
# without its G3), as a G3 against the arm itself is.


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "options"),
    [
        pytest.param(edit, options, id=f"{edit}-{mode}")
        for edit in G3_EDITS
        for options, mode in ((SIGNED, "published"), (LOCAL, "allow-unsigned"))
    ],
)
def test_speculative_arm_freed_of_its_g3(tree: Path, edit: str, options: tuple[str, ...], tally: Tally) -> None:
    name, change = G3_EDITS[edit]
    document = stored(tree, name) if name else _measured_with_failing_g3()
    change(document)
    if name:
        remove(tree, name)
    refused(tree, reseal(tree, document), options)
    tally.add("forgery", f"speculative arm: {edit}, re-sealed", 2)


# ---- 4. an imported packet passed off as measured; negative figures ----


def _imported_as_measured(document: Document) -> None:
    """`measured` with no rows at all, and a published figure nobody published."""
    document["provenance"] = {"kind": "measured", "tool": "runner 0.1.0", "source": None}
    document["workload"].update(suite_sha256=strict_suite().sha256)  # as a measured packet names it
    document["arms"][0]["published_figure"] = 250.0


def _negative_published_rate(document: Document) -> None:
    document["arms"][0]["published_figure"] = -500.0


def _negative_published_ttft(document: Document) -> None:
    document["arms"][0]["published_ttft_ms"] = [-3.0, -3.0]


FIGURE_EDITS: dict[str, Callable[[Document], None]] = {
    "imported relabelled measured, no rows, an invented published_figure": _imported_as_measured,
    "published_figure of -500 tok/s": _negative_published_rate,
    "published TTFT of -3 ms": _negative_published_ttft,
}


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("edit", list(FIGURE_EDITS))
def test_invented_figures_resealed(tree: Path, edit: str, options: tuple[str, ...], tally: Tally) -> None:
    document = stored(tree, IMPORTED)
    FIGURE_EDITS[edit](document)
    remove(tree, IMPORTED)
    refused(tree, reseal(tree, document), options)
    tally.add("forgery", f"{edit}, re-sealed", 2)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("field", ["decode_tok_s", "ttft_ms"])
def test_negative_server_figures_forged_byte_by_byte(
    tree: Path, field: str, options: tuple[str, ...], tally: Tally
) -> None:
    """-500 tok/s or -3 ms TTFT on a server: `seal` refuses them, so the forger writes the bytes
    (canonical, named by their digest) and signs them with their key."""
    document = stored(tree, IMPORTED)
    document["arms"][0]["servers"][0][field] = -500.0 if field == "decode_tok_s" else -3.0
    with pytest.raises(ValueError, match="greater than"):
        reseal(tree, document)
    remove(tree, IMPORTED)
    refused(tree, forge_bytes(tree, document), options)
    tally.add("forgery", f"a server's {field} negative, forged byte by byte and signed", 2)


# ---- 5. one type changed in the file's bytes, no re-seal ----


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_false_spelled_as_a_string(tree: Path, options: tuple[str, ...], tally: Tally) -> None:
    """`"passed":false` -> `"passed":"false"`: the signature and name are left as they were."""
    path = tree / "packets" / f"{IMPORTED}.json"
    original = path.read_bytes()
    assert original.count(b'"passed":false') >= 2  # the two depth 4 arms' G3
    path.write_bytes(original.replace(b'"passed":false', b'"passed":"false"', 1))
    refused(tree, path, options, because="passed: Input should be a valid boolean")
    tally.add("forgery", '"passed":false written as "passed":"false" (strict types, canonical bytes)', 2)


# ---- 6. reproductions that reproduce nothing ----


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_byte_copy_marked_as_a_reproduction(tree: Path, options: tuple[str, ...], tally: Tally) -> None:
    """The demo's own rows, token for token, claimed as an independent reproduction of it."""
    document = stored(tree, DEMO)
    document["reproduces"] = DEMO
    refused(tree, reseal(tree, document), options)
    tally.add("forgery", "a byte copy of a packet marked as its reproduction", 2)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_reproduction_of_another_model(tree: Path, options: tuple[str, ...], tally: Tally) -> None:
    """A Qwen3.5 9B campaign claiming to reproduce the CPU demo."""
    document = measured_parts().model_dump(mode="json")
    document["reproduces"] = DEMO
    refused(tree, reseal(tree, document), options)
    tally.add("forgery", "a reproduction of a different model", 2)


# ---- 7. no packets at all ----


@pytest.mark.slow
def test_a_missing_packets_folder_is_an_error(tree: Path, tally: Tally) -> None:
    """A typo in --packets must not publish an empty catalog over the real one."""
    missing = tree / "no-such-packets"
    refused(tree, missing, packets=missing, because="no such folder")
    tally.add("forgery", "--packets naming a folder that does not exist", 2)
