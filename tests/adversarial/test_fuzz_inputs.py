"""Fuzzing every input file: start from the real recipe, hardware, suites and packets, mutate them
(hypothesis, derandomized and bounded), and load the catalog. Every input either loads or is
refused with errors that each name the file and the line or field, on one line; never another
exception, a hang, or a file written."""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from catalog.errors import CatalogError, CatalogErrors, exit_on_user_error
from catalog.packets.layout import signature_path
from catalog.packets.seal import write_packet
from catalog.store.repository import load_catalog
from runner import cli as runner_cli
from tests.adversarial.support import REPO, Tally, snapshot, trusting_data
from tests.catalog.factories import measured_draft, sealed
from tests.profiles import examples

FUZZ = settings(
    max_examples=examples(20),
    deadline=None,  # other test sessions share these cores; pytest-timeout bounds a real hang
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as found, quickly
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
# errors placed by a line or byte of the file rather than a field
PARSE_ERRORS = (
    "invalid JSON",
    "invalid YAML",
    "not UTF-8",
    "cannot read",
    "not a regular file",
    "not in canonical form at byte",
)

Loc = tuple[Any, ...]


# ---- the catalog the fuzzer attacks ----


@pytest.fixture(scope="module")
def fuzz_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """data/ (trusting the test keys too) and the small real packets with their signatures, plus
    a measured packet sealed by the factory (rows, gates and figures that re-derive), so every
    loader and cross-check is in play."""
    root = tmp_path_factory.mktemp("fuzz")
    trusting_data(root / "data")
    (root / "packets").mkdir()
    for path in sorted((REPO / "packets").glob("qwen*.json")):  # the packets and their .dsse.json
        shutil.copy(path, root / "packets" / path.name)
    write_packet(sealed(measured_draft()), root / "packets")
    return root


def targets(root: Path) -> dict[str, Path]:
    packets = [p for p in sorted((root / "packets").glob("*.json")) if not p.name.endswith(".dsse.json")]
    return {
        "recipe": root / "data" / "models" / "qwen3.5-9b.yaml",
        "hardware": root / "data" / "hardware.yaml",
        "suite": root / "data" / "suites" / "strict-v1.json",
        "canaries": root / "data" / "suites" / "canaries-v1.json",
        "packet (imported)": next(p for p in packets if p.name.startswith("qwen3.5-9b-fp8")),
        "packet (measured)": next(p for p in packets if p.name.startswith("qwen3.5-9b-bf16")),
    }


# ---- checking one input ----


def check_outcome(root: Path) -> str:
    """Load the catalog under `root`; assert it loads or fails cleanly without writing."""
    before = snapshot(root)
    try:
        load_catalog(root / "data", root / "packets")
        outcome = "loaded"
    except CatalogError as error:
        problems = error.errors if isinstance(error, CatalogErrors) else [error]
        for problem in problems:
            assert problem.file, f"error names no file: {problem}"
            assert Path(problem.file).resolve().is_relative_to(root.resolve()), problem.file
            text = str(problem)
            assert "\n" not in text and "Traceback" not in text, text
            where = problem.field or problem.line is not None or problem.message.startswith(PARSE_ERRORS)
            assert where, f"error names no line or field: {text}"
        outcome = "refused"
    assert snapshot(root) == before, "loading wrote a file"
    return outcome


# ---- mutations ----


def paths_in(doc: Any, loc: Loc = ()) -> list[Loc]:
    """Every location in the document (containers and leaves), the root first."""
    found = [loc]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += paths_in(value, (*loc, key))
    elif isinstance(doc, list):
        # long arrays (token ids, times): their first elements stand for the rest
        for index, value in enumerate(doc[:8]):
            found += paths_in(value, (*loc, index))
    return found


def at(doc: Any, loc: Loc) -> Any:
    for part in loc:
        doc = doc[part]
    return doc


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=24),
    st.sampled_from(["", " ", "../../etc/passwd", "/abs/path", "ｄｅｍｏ", "dеmo", "\u202e", "\x00", "A" * 5000]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=2),
)
TRICKY = st.sampled_from(
    ["\u202egnp.exe", "ｆｕｌｌｗｉｄｔｈ／slash", "Ｑwen", "qwen3.5-9\u0431", "\u200b", "e\u0301", "🦙" * 50, "\ufeff"]
)
STRUCTURAL = ["delete", "retype", "unknown key", "nest deeply", "unicode", "huge number", "non-finite number"]
TEXTUAL = [
    "truncate",
    "binary garbage",
    "duplicate key",
    "alias bomb",
    "surrogate escape",
    "empty",
    "byte order mark",
    "overflowing float",
]
NUMBER = re.compile(rb"(?<![\w.])[0-9]+(?:\.[0-9]+)?(?![\w.])")


def mutate(doc: Any, draw: Callable[[Any], Any], op: str) -> Any:
    locs = paths_in(doc)
    loc = locs[draw(st.integers(0, len(locs) - 1))]
    parent_loc, key = (loc[:-1], loc[-1]) if loc else (None, None)
    if op == "delete" and parent_loc is not None:
        del at(doc, parent_loc)[key]
        return doc
    new: Any
    if op == "retype":
        new = draw(VALUES)
    elif op == "unknown key":
        target = at(doc, loc)
        if isinstance(target, dict):
            target[draw(st.sampled_from(["x_unknown", "Meta", "__proto__", "", "id "]))] = draw(VALUES)
            return doc
        new = {"unknown": at(doc, loc)}
    elif op == "nest deeply":
        new = at(doc, loc)
        for _ in range(draw(st.integers(2, 200))):
            new = [new]
    elif op == "unicode":
        value = at(doc, loc)
        new = (value if isinstance(value, str) else "") + draw(TRICKY)
    elif op == "huge number":
        new = draw(st.sampled_from([10**300, -(10**30), 2**63, 1e308, 5e-324, -0.0, 10**4000]))
    else:  # non-finite number
        new = draw(st.sampled_from([math.inf, -math.inf, math.nan]))
    if parent_loc is None:
        return new
    at(doc, parent_loc)[key] = new
    return doc


def serialise(doc: Any, suffix: str, *, canonical: bool = False) -> bytes:
    """JSON or YAML; `canonical` writes a packet's form (compact, sorted keys, final newline), so a
    mutated packet reaches validation and the digest check instead of stopping at its layout."""
    if canonical and suffix == ".json":
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True) + "\n"
        return text.encode("utf-8", "surrogatepass")
    if suffix == ".json":
        return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode("utf-8", "surrogatepass")


def mutate_text(data: bytes, suffix: str, draw: Callable[[Any], Any], op: str) -> bytes:
    if op == "truncate":
        return data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    if op == "binary garbage":
        at_byte = draw(st.integers(0, len(data)))
        return data[:at_byte] + draw(st.binary(min_size=1, max_size=64)) + data[at_byte:]  # type: ignore[no-any-return]
    if op == "empty":
        return b""
    if op == "byte order mark":
        return draw(st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"])) + data  # type: ignore[no-any-return]
    if op == "overflowing float":  # 1e999 reads as inf in both JSON and YAML
        numbers = list(NUMBER.finditer(data))
        if not numbers:
            return data
        hit = numbers[draw(st.integers(0, len(numbers) - 1))]
        return data[: hit.start()] + draw(st.sampled_from([b"1e999", b"-1e999"])) + data[hit.end() :]  # type: ignore[no-any-return]
    lines = data.split(b"\n")
    index = draw(st.integers(0, len(lines) - 1))
    if op == "duplicate key":
        keyed = [i for i, line in enumerate(lines) if b":" in line] or [0]
        index = keyed[index % len(keyed)]
        lines.insert(index, lines[index])
    elif op == "surrogate escape":
        escape = b'"\\ud800"' if suffix == ".json" else b'"\\udc00"'
        strings = [i for i, line in enumerate(lines) if b'": "' in line or b': "' in line] or [0]
        index = strings[index % len(strings)]
        head, _, _ = lines[index].rpartition(b'"')
        head, _, _ = head.rpartition(b'"')
        lines[index] = head + escape + (b"," if lines[index].rstrip().endswith(b",") else b"")
    else:  # alias bomb (YAML) or a value repeated as a huge nested array (JSON)
        if suffix == ".json":
            lines.insert(index, b'"x": ' + b"[" * 5000 + b"]" * 5000 + b",")
        else:
            bomb = [b'bomb0: &b0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
            bomb += [f"bomb{i}: &b{i} [{', '.join([f'*b{i - 1}'] * 10)}]".encode() for i in range(1, 9)]
            lines = bomb + lines
    return b"\n".join(lines)


def attack(root: Path, name: str, draw: Callable[[Any], Any]) -> str:
    """Mutate one target file in place, load the catalog, put the file back; the outcome."""
    path = targets(root)[name]
    original_bytes = path.read_bytes()
    original = json.loads(original_bytes) if path.suffix == ".json" else yaml.safe_load(original_bytes)
    doc = copy.deepcopy(original)
    ops = draw(st.lists(st.sampled_from(STRUCTURAL + TEXTUAL), min_size=1, max_size=3))
    for op in ops:
        if op in STRUCTURAL:
            doc = mutate(doc, draw, op)
    written, envelope = path, None
    # textual mutations work line by line: those packets are written indented (and so refused as
    # not canonical); structurally mutated ones are written in canonical form
    canonical = name.startswith("packet") and not any(op in TEXTUAL for op in ops)
    data = serialise(doc, path.suffix, canonical=canonical)
    if name.startswith("packet") and isinstance(doc, dict) and draw(st.booleans()):
        # re-seal what still validates (with a trusted key), so the attack reaches the cross-checks
        # behind the digest and the signature
        try:
            resealed = sealed(doc)
            data, envelope = resealed.data, resealed.envelope
            written = path.with_name(resealed.file_name)
        except (ValueError, TypeError, KeyError, AttributeError, CatalogError):
            pass
    for op in ops:
        if op in TEXTUAL:
            data = mutate_text(data, path.suffix, draw, op)
    signature = signature_path(path)
    original_signature = signature.read_bytes() if signature.exists() else None
    if written != path:
        path.unlink()
        signature.unlink(missing_ok=True)
        if envelope is not None:
            signature_path(written).write_bytes(envelope)
    written.write_bytes(data)
    try:
        return check_outcome(root)
    finally:
        written.unlink()
        signature_path(written).unlink(missing_ok=True)
        path.write_bytes(original_bytes)
        if original_signature is not None:
            signature.write_bytes(original_signature)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["recipe", "hardware", "suite", "canaries", "packet (imported)", "packet (measured)"])
def test_mutated_inputs_load_or_fail_cleanly(fuzz_tree: Path, name: str, tally: Tally) -> None:
    outcomes = {"loaded": 0, "refused": 0}

    @FUZZ
    @given(st.data())
    def run(data: st.DataObject) -> None:
        outcomes[attack(fuzz_tree, name, data.draw)] += 1

    run()
    assert check_outcome(fuzz_tree) == "loaded"  # the tree is back as it was
    assert outcomes["refused"] > 0
    tally.add("fuzzing", f"mutated {name} files", sum(outcomes.values()))


# ---- the runner's importers: a transcription of a published page, a `vllm bench serve` result ----

BENCH_RESULT = {
    "date": "20261202-120000",
    "backend": "vllm",
    "model_id": "local/demo-qwen3-tiny",
    "num_prompts": 16,
    "max_concurrency": 4,
    "duration": 12.5,
    "completed": 16,
    "total_output_tokens": 2048,
    "output_throughput": 163.8,
    "median_ttft_ms": 40.0,
    "median_tpot_ms": 9.5,
    "output_lens": [128, 128],
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("importer", ["import-reference", "import-bench"])
def test_mutated_importer_inputs_seal_or_fail_cleanly(
    tmp_path: Path, importer: str, capsys: pytest.CaptureFixture[str], tally: Tally
) -> None:
    trusting_data(tmp_path / "data")  # the importers sign with this session's key
    packets = tmp_path / "packets"
    packets.mkdir()
    if importer == "import-reference":
        source = tmp_path / "transcription.yaml"
        original_bytes = (REPO / "data" / "imports" / "neural-download.yaml").read_bytes()
        options: list[str] = []
    else:
        source = tmp_path / "bench.json"
        original_bytes = json.dumps(BENCH_RESULT).encode()
        options = ["--model", "demo", "--hardware", "cpu_generic", "--source", "fuzzer", "--cards", "1"]
    original = yaml.safe_load(original_bytes)
    argv = ["--data", str(tmp_path / "data"), "--packets", str(packets), importer, str(source), *options]
    outcomes = {"sealed": 0, "refused": 0}

    @FUZZ
    @given(st.data())
    def run(data: st.DataObject) -> None:
        doc = copy.deepcopy(original)
        ops = data.draw(st.lists(st.sampled_from(STRUCTURAL + TEXTUAL), min_size=1, max_size=3))
        for op in ops:
            if op in STRUCTURAL:
                doc = mutate(doc, data.draw, op)
        content = serialise(doc, source.suffix)
        for op in ops:
            if op in TEXTUAL:
                content = mutate_text(content, source.suffix, data.draw, op)
        source.write_bytes(content)
        try:
            exit_on_user_error(lambda: runner_cli.run(argv))()
        except SystemExit as done:
            code = done.code
        err = capsys.readouterr().err
        assert "Traceback" not in err
        if code == 0:
            outcomes["sealed"] += 1
            load_catalog(tmp_path / "data", packets)  # what it sealed (and signed) verifies
        else:
            assert code == 1, err
            lines = err.strip().splitlines()
            assert lines and all(line.startswith("error: ") for line in lines), err
            assert str(source) in lines[0], err
            assert not list(packets.iterdir()), "a refused input left a packet"
            outcomes["refused"] += 1
        for path in packets.iterdir():
            path.unlink()

    run()
    assert outcomes["refused"] > 0
    tally.add("fuzzing", f"mutated `python -m runner {importer}` inputs", sum(outcomes.values()))


IMPORTER_CASES = {
    "a bench duration of 1e999": (
        "import-bench",
        lambda text: text.replace('"duration": 12.5', '"duration": 1e999'),
        [],
    ),
    "--cards 0": ("import-bench", None, ["--cards", "0"]),
    "an empty --source": ("import-bench", None, ["--source", ""]),
    "a transcribed gate with more exact prompts than prompts": (
        "import-reference",
        lambda text: text.replace("exact: 12, total: 12, passed: true", "exact: 15, total: 12, passed: true", 1),
        [],
    ),
    "a transcribed arm state its gates contradict": (
        "import-reference",
        lambda text: text.replace("exact: 8, total: 12, passed: false", "exact: 8, total: 12, passed: true", 1),
        [],
    ),
}


@pytest.mark.parametrize("case", list(IMPORTER_CASES))
def test_importer_input_the_packet_refuses(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str], tally: Tally
) -> None:
    """Input the importer's own model accepts but the sealed packet does not: one error line
    naming the input file, no traceback, no packet."""
    importer, edit, extra = IMPORTER_CASES[case]
    packets = tmp_path / "packets"
    packets.mkdir()
    if importer == "import-bench":
        source, text = tmp_path / "bench.json", json.dumps(BENCH_RESULT)
        options = ["--model", "demo", "--hardware", "cpu_generic", "--source", "fuzzer", "--cards", "1", *extra]
    else:
        source, text = tmp_path / "transcription.yaml", (REPO / "data" / "imports" / "neural-download.yaml").read_text()
        options = list(extra)
    edited = edit(text) if edit else text
    assert edited != text or extra
    source.write_text(edited)
    argv = ["--data", str(REPO / "data"), "--packets", str(packets), importer, str(source), *options]
    with pytest.raises(SystemExit) as done:
        exit_on_user_error(lambda: runner_cli.run(argv))()
    err = capsys.readouterr().err
    assert done.value.code == 1, err
    assert "Traceback" not in err and err.startswith(f"error: {source}") and err.count("\n") == 1, err
    assert not list(packets.iterdir())
    tally.add("fuzzing", "importer inputs that make an invalid packet", 1)
