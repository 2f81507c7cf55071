"""Packet schema 2: the file's bytes are its canonical form and its digest, values are typed
strictly, token arrays are compact base64, `seal` derives everything a writer must not choose,
signatures are checked against data/keys.yaml, canaries are judged again, and schema 1 files
are migrated only while their own seal holds."""

from __future__ import annotations

import binascii
import copy
import hashlib
import itertools
import json
import pickle
import shutil
from array import array
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from catalog.checks.canaries import verdict
from catalog.errors import CatalogError, CatalogErrors
from catalog.model.arrays import (
    AS_READ,
    UINT32_MAX,
    Decoded,
    UInt32Array,
    decode_int64,
    decode_uint32,
    decreasing,
    encode_uint32,
    largest,
    to_uint32,
)
from catalog.model.packet import ArmParts, CanaryResult, GateResult, PacketParts, PromptRow, ServerRun, State
from catalog.packets import layout
from catalog.packets import seal as packet_io
from catalog.packets.canonical import canonical_json
from catalog.packets.keys import KeyRing, load_keys
from catalog.packets.layout import signature_path
from catalog.packets.migrate import migrate
from catalog.packets.seal import Sealed, packet_bytes, seal, write_packet
from catalog.packets.signing import HostKey, host_key
from catalog.packets.verify import MIGRATE_HINT, read_packet
from catalog.store.repository import Catalog, load_catalog
from testkit.samples import canary_answers, measured_parts
from tests.catalog.factories import (
    REPO,
    SPEC_ARM,
    canary_set,
    key_for,
    keys_yaml,
    measured_draft,
    published_arm,
    published_draft,
    sealed,
    signed_data,
)
from tests.catalog.factories import test_key as signing_key
from tests.profiles import examples

FIXTURES = REPO / "tests" / "fixtures" / "schema1"
SCHEMA1 = FIXTURES / "qwen3.5-4b-w4a16-882591a8.json"
# What migrating that packet gives, the bytes committed to packets/ until the imported packets were
# re-imported with their source's dates (catalog/checks/dates.py): pinned by the digest in its id.
MIGRATED_ID = "qwen3.5-4b-w4a16-70b47480"


# --- helpers -------------------------------------------------------------------------------


def catalog_dirs(tmp_path: Path) -> tuple[Path, Path]:
    data = signed_data(tmp_path / "data")
    packets = tmp_path / "packets"
    packets.mkdir()
    return data, packets


def refusal(data: Path, packets: Path, **kw: Any) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        load_catalog(data, packets, **kw)
    error = info.value
    assert not isinstance(error, CatalogErrors), str(error)
    return error


def other_key(tmp_path: Path, role: str = "measurer") -> HostKey:
    """A key this session's keys.yaml does not list (another host's, or a forger's)."""
    return host_key(role, config_dir=tmp_path / "elsewhere")


# --- a golden canonical vector -------------------------------------------------------------


def golden_parts() -> PacketParts:
    row = PromptRow(
        prompt_id="p1",
        class_id="code",
        token_ids=to_uint32([1, 2, 65536]),
        token_times_us=to_uint32([1500, 2500, 2500]),
        prompt_tokens=7,
        completion_tokens=3,
        cached_tokens=0,
        finish_reason="length",
    )
    canary = CanaryResult(id="repeat-8", outputs=["yes", "no"], passed=False, detail="2 runs, 2 distinct outputs")
    server = ServerRun(label="A", decode_tok_s=12.5, ttft_ms=1.5, rows=[row], canaries=[canary], cache_zero=True)
    gate = GateResult(gate="G1", against="B", exact=1, total=1, passed=True, first_divergence=[None])
    arm = ArmParts(id="tp1-mtp0", label="1 card", config={"tensor_parallel_size": 1}, servers=[server], gates=[gate])
    return PacketParts.model_validate(
        {
            "title": "Golden — µs",
            "created": datetime(2026, 12, 1, tzinfo=UTC),
            "provenance": {"kind": "measured", "tool": "golden"},
            "identity": {
                "model": {
                    "slug": "golden-1b",
                    "variant": "default",
                    "repo": "golden/Golden-1B",
                    "quantization": "bf16",
                    "quantization_label": "BF16",
                },
                "runtime": {"platform": "cpu", "version": "0.0.1", "label": "vLLM 0.0.1 CPU"},
                "host": {"hardware": "cpu", "card_count": 1},
            },
            "workload": {"suite_id": "golden-v1", "max_tokens": 3, "temperature": 0.0, "top_p": 1.0},
            "arms": [arm],
        }
    )


GOLDEN_BYTES = (
    b'{"arms":[{"config":{"argv":[],"draft_head":null,"env":{},"graph_capture":null,"kv_cache_dtype":null,'
    b'"max_model_len":null,"spec_depth":0,"spec_method":null,"tensor_parallel_size":1},"gates":[{"against":"B",'
    b'"exact":1,"first_divergence":[null],"gate":"G1","note":null,"passed":true,"server":null,"total":1}],'
    b'"id":"tp1-mtp0","label":"1 card","note":null,"oracle_decode_tok_s":[],"published_figure":null,'
    b'"published_ttft_ms":[],"servers":[{"cache_zero":true,"canaries":[{"detail":"2 runs, 2 distinct outputs",'
    b'"id":"repeat-8","outputs":["yes","no"],"passed":false}],"decode_tok_s":12.5,"error":null,"label":"A",'
    b'"log":null,"rows":[{"cached_tokens":0,"class_id":"code","completion_tokens":3,"finish_reason":"length",'
    b'"prompt_id":"p1","prompt_tokens":7,"token_ids":"AQAAAAIAAAAAAAEA","token_times_us":"3AUAAMQJAADECQAA"}],'
    b'"spec_metrics":null,"startup_s":null,"status":"ok","ttft_ms":1.5}],"state":"measured",'
    b'"withheld_reason":null}],"created":"2026-12-01T00:00:00Z","identity":{"host":{"boot_id":null,'
    b'"card_count":1,"cpu":null,"device_name":null,"driver":null,"hardware":"cpu","os":null,"repo_revision":null},'
    b'"model":{"config":null,"quantization":"bf16","quantization_label":"BF16","repo":"golden/Golden-1B",'
    b'"revision":null,"slug":"golden-1b","synthetic":false,"synthetic_note":null,"variant":"default",'
    b'"weight_bytes":null,"weight_files":[]},"runtime":{"image":null,"image_digest":null,"label":"vLLM 0.0.1 CPU",'
    b'"name":"vLLM","package_set_sha256":null,"platform":"cpu","torch_version":null,"version":"0.0.1"}},'
    b'"ladders":[],"provenance":{"kind":"measured","source":null,"tool":"golden"},"reproduces":null,'
    b'"schema_version":2,"state":"measured","title":"Golden \xe2\x80\x94 \xc2\xb5s","workload":{"api":"completions",'
    b'"canary_set_id":null,"canary_set_sha256":null,"max_tokens":3,"seed":null,"suite_id":"golden-v1",'
    b'"suite_sha256":null,"temperature":0.0,"top_p":1.0}}\n'
)
GOLDEN_SHA256 = "18fc220a950cdbc99a0e799fc67cdfb234cb3239c90e0ede156fb237bd2c21b1"
GOLDEN_ID = "golden-1b-bf16-18fc220a"

# The same packet written by hand in its JSON form, defaults left out.
GOLDEN_DICT: dict[str, Any] = {
    "schema_version": 2,
    "title": "Golden — µs",
    "created": "2026-12-01T00:00:00Z",
    "provenance": {"kind": "measured", "tool": "golden"},
    "identity": {
        "model": {
            "slug": "golden-1b",
            "variant": "default",
            "repo": "golden/Golden-1B",
            "quantization": "bf16",
            "quantization_label": "BF16",
        },
        "runtime": {"platform": "cpu", "version": "0.0.1", "label": "vLLM 0.0.1 CPU"},
        "host": {"hardware": "cpu", "card_count": 1},
    },
    "workload": {"suite_id": "golden-v1", "max_tokens": 3, "temperature": 0.0, "top_p": 1.0},
    "arms": [
        {
            "id": "tp1-mtp0",
            "label": "1 card",
            "state": "measured",
            "config": {"tensor_parallel_size": 1},
            "gates": [
                {"gate": "G1", "against": "B", "exact": 1, "total": 1, "passed": True, "first_divergence": [None]}
            ],
            "servers": [
                {
                    "label": "A",
                    "decode_tok_s": 12.5,
                    "ttft_ms": 1.5,
                    "cache_zero": True,
                    "canaries": [
                        {
                            "id": "repeat-8",
                            "outputs": ["yes", "no"],
                            "passed": False,
                            "detail": "2 runs, 2 distinct outputs",
                        }
                    ],
                    "rows": [
                        {
                            "prompt_id": "p1",
                            "class_id": "code",
                            "token_ids": "AQAAAAIAAAAAAAEA",  # 1, 2, 65536 as little-endian uint32
                            "token_times_us": "3AUAAMQJAADECQAA",  # 1500, 2500, 2500
                            "prompt_tokens": 7,
                            "completion_tokens": 3,
                            "cached_tokens": 0,
                            "finish_reason": "length",
                        }
                    ],
                }
            ],
        }
    ],
    "state": "measured",
}


def test_golden_vector() -> None:
    result = seal(golden_parts(), None)
    assert result.data == GOLDEN_BYTES
    assert hashlib.sha256(GOLDEN_BYTES).hexdigest() == GOLDEN_SHA256
    assert (result.packet.sha256, result.packet.id) == (GOLDEN_SHA256, GOLDEN_ID)
    assert result.file_name == f"{GOLDEN_ID}.json"
    assert result.envelope is None and not result.packet.signed


def test_golden_vector_from_a_hand_written_dict() -> None:
    from catalog.model.packet import Packet

    packet = Packet.model_validate(GOLDEN_DICT)
    assert packet_bytes(packet) == GOLDEN_BYTES
    # and the bytes read back through the reader, strictly, to the same packet
    assert Packet.model_validate_json(GOLDEN_BYTES, strict=True).model_dump() == packet.model_dump()


def test_golden_file_reads_back(tmp_path: Path) -> None:
    path = write_packet(seal(golden_parts(), None), tmp_path)
    assert path.name == f"{GOLDEN_ID}.json"
    assert path.read_bytes() == GOLDEN_BYTES
    assert not signature_path(path).exists()
    packet = read_packet(path, None)
    assert (packet.sha256, packet.id, packet.signed) == (GOLDEN_SHA256, GOLDEN_ID, False)


# --- strict types and canonical bytes -------------------------------------------------------


@pytest.fixture
def golden_file(tmp_path: Path) -> Path:
    return write_packet(seal(golden_parts(), None), tmp_path)


def rewrite(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) == 1, old
    path.write_bytes(data.replace(old, new))


def refused(path: Path) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        read_packet(path, None)
    assert info.value.file == str(path)
    assert str(info.value).startswith(str(path))
    return info.value


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        (b'"passed":false', b'"passed":"false"', "arms[0].servers[0].canaries[0].passed", "valid boolean"),
        (b'"card_count":1', b'"card_count":true', "identity.host.card_count", "valid integer"),
        (b'"max_tokens":3', b'"max_tokens":3.0', "workload.max_tokens", "valid integer"),
        (b'"decode_tok_s":12.5', b'"decode_tok_s":"12.5"', "arms[0].servers[0].decode_tok_s", "valid number"),
        (
            b'"token_ids":"AQAAAAIAAAAAAAEA"',
            b'"token_ids":[1,2,65536]',
            "arms[0].servers[0].rows[0].token_ids",
            "must be base64 text",
        ),
        (
            b'"token_times_us":"3AUAAMQJAADECQAA"',
            b'"token_times_us":"3AUAAMQJAADECQ=="',
            "arms[0].servers[0].rows[0].token_times_us",
            "not a whole number of 32-bit integers",
        ),
    ],
    ids=["bool-as-string", "int-as-bool", "int-as-float", "float-as-string", "array-as-list", "array-not-uint32"],
)
def test_no_value_is_coerced(golden_file: Path, old: bytes, new: bytes, field: str, message: str) -> None:
    rewrite(golden_file, old, new)
    error = refused(golden_file)
    assert error.field == field
    assert message in error.message


def test_an_integer_where_a_float_is_stored_is_refused(golden_file: Path) -> None:
    # 1 reads as the float 1.0, but sealing writes 1.0: the bytes differ, so the file is refused
    rewrite(golden_file, b'"top_p":1.0}', b'"top_p":1}')
    error = refused(golden_file)
    assert error.message.startswith(f"not in canonical form at byte {GOLDEN_BYTES.index(b'1.0}}') + 1} ")


def test_an_extra_space_is_refused(golden_file: Path) -> None:
    rewrite(golden_file, b'{"arms":', b'{ "arms":')
    assert refused(golden_file).message.startswith("not in canonical form at byte 1 ")


def test_reordered_keys_are_refused(golden_file: Path) -> None:
    document = json.loads(GOLDEN_BYTES)
    reordered = {"title": document.pop("title"), **document}
    golden_file.write_bytes(json.dumps(reordered, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    assert refused(golden_file).message.startswith("not in canonical form at byte 2 ")


def test_pretty_printed_json_is_refused(golden_file: Path) -> None:
    golden_file.write_text(json.dumps(json.loads(GOLDEN_BYTES), indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    assert refused(golden_file).message.startswith("not in canonical form at byte 1 ")


def test_a_missing_trailing_newline_is_refused(golden_file: Path) -> None:
    golden_file.write_bytes(GOLDEN_BYTES[:-1])
    assert refused(golden_file).message.startswith(f"not in canonical form at byte {len(GOLDEN_BYTES) - 1} ")


def test_an_escaped_character_is_refused(golden_file: Path) -> None:
    # "\u00b5" is the same string as "µ", but not the bytes sealing writes
    rewrite(golden_file, "µs".encode(), b"\\u00b5s")
    assert refused(golden_file).message.startswith("not in canonical form at byte ")


def test_an_edit_kept_canonical_is_caught_by_the_name(golden_file: Path) -> None:
    rewrite(golden_file, b'"decode_tok_s":12.5', b'"decode_tok_s":13.5')
    error = refused(golden_file)
    assert error.field == "id"
    assert error.message.startswith("file name should be golden-1b-bf16-")
    assert error.message.endswith("the file was edited or renamed")


# --- compact arrays ------------------------------------------------------------------------


@pytest.mark.parametrize("values", [[], [0], [1, 2, 3], [UINT32_MAX, 0, 65536], list(range(1000))])
def test_arrays_round_trip(values: list[int]) -> None:
    encoded = encode_uint32(to_uint32(values))
    assert isinstance(encoded, str)
    assert list(decode_uint32(encoded)) == values
    assert encode_uint32(decode_uint32(encoded)) == encoded  # one spelling per array
    assert TypeAdapter(UInt32Array).dump_python(to_uint32(values)) == encoded


def test_array_encoding_is_little_endian_base64() -> None:
    assert encode_uint32(to_uint32([1])) == "AQAAAA=="
    assert encode_uint32(to_uint32([1, 2, 65536])) == "AQAAAAIAAAAAAAEA"
    assert encode_uint32(to_uint32([])) == ""
    assert decode_uint32("AQAAAA==").typecode == "I"


@pytest.mark.parametrize("text", ["AQID", "AQAAAAI=", "AQ=="])
def test_array_of_a_partial_integer_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a whole number of 32-bit integers"):
        decode_uint32(text)


def test_array_that_is_not_base64_is_refused() -> None:
    with pytest.raises(ValueError, match="is not base64"):
        decode_uint32("A")


def _one_spelling(text: str) -> bool:
    """The rule itself, by brute force: the text decodes, and encoding what it decodes to gives it back."""
    try:
        return binascii.b2a_base64(binascii.a2b_base64(text), newline=False).decode() == text
    except binascii.Error:
        return False


# base64's alphabet, its padding, and what a hand edit adds: a line break, a space, the URL-safe letters
_SPELLINGS = st.text(alphabet="AQgwBCDE/+9=\n -_", max_size=14)


@settings(max_examples=examples(3000))
@given(_SPELLINGS)
def test_an_array_is_read_only_from_its_one_spelling(text: str) -> None:
    """The reader keeps the text it decoded and writes it back unchanged (catalog/model/arrays.py),
    so it must refuse every text but the canonical spelling: a set unused bit, a missing or extra
    pad, a line break. Held to the brute-force rule over short texts, where every case lives."""
    try:
        values = decode_int64(text) if len(text) % 12 == 0 else decode_uint32(text)
    except ValueError as refused:
        assert not _one_spelling(text) or "whole number" in str(refused)
        return
    assert _one_spelling(text)
    assert isinstance(values, Decoded) and values.text == text


@pytest.mark.parametrize("text", ["AQAAAB==", "AQAAAA=", "AQAAAA", "AQAA\nAA==", "AQAAAA==\n", " AQAAAA=="])
def test_an_array_spelled_otherwise_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="base64"):
        decode_uint32(text)


def test_an_array_read_is_written_back_as_its_text_only_where_just_read() -> None:
    """The reader's canonical-bytes check writes an array back as the text it was read from
    (`AS_READ`); anywhere else an array is encoded from its values, so one changed since it was
    read is never written as its old text."""
    values = decode_uint32("AQAAAAIAAAA=")
    adapter = TypeAdapter(UInt32Array)
    assert isinstance(values, Decoded) and values.text == "AQAAAAIAAAA="
    values.text = "the text it was read from"  # only AS_READ can write this
    assert adapter.dump_python(values, mode="json", context=AS_READ) == "the text it was read from"
    assert adapter.dump_python(values, mode="json") == "AQAAAAIAAAA="
    values[0] = 3
    assert adapter.dump_python(values, mode="json") == "AwAAAAIAAAA="
    for copied in (pickle.loads(pickle.dumps(values)), copy.copy(values), copy.deepcopy(values)):
        assert type(copied) is array and list(copied) == [3, 2]
        assert adapter.dump_python(copied, mode="json", context=AS_READ) == "AwAAAAIAAAA="


@pytest.mark.parametrize("value", [[1, 2, 3], (1, 2), 7, None, b"AQAAAA==", array("i", [1]), array("B", [1])])
def test_array_field_takes_only_base64_text_or_a_uint32_array(value: Any) -> None:
    with pytest.raises(ValidationError, match="must be base64 text"):
        TypeAdapter(UInt32Array).validate_python(value)


def test_array_field_accepts_text_and_arrays() -> None:
    adapter = TypeAdapter(UInt32Array)
    assert list(adapter.validate_python("AQAAAA==")) == [1]
    given = to_uint32([4, 5])
    assert adapter.validate_python(given) is given


@pytest.mark.parametrize("value", [2**32, 2**40, -1])
def test_array_values_out_of_uint32_range_overflow(value: int) -> None:
    with pytest.raises(OverflowError):
        to_uint32([1, value])
    assert list(to_uint32([UINT32_MAX])) == [2**32 - 1]


def _slowly_decreasing(arrays: list[list[int]]) -> list[int]:
    return [i for i, values in enumerate(arrays) if any(b < a for a, b in itertools.pairwise(values))]


@given(st.lists(st.lists(st.integers(0, UINT32_MAX), max_size=6), max_size=6))
@settings(max_examples=examples(300), deadline=None)
def test_all_arrays_checked_at_once_agree_with_each_one_alone(arrays: list[list[int]]) -> None:
    """A drop across two arrays (the last of one, the first of the next) is no drop within either."""
    packed = [to_uint32(values) for values in arrays]
    assert decreasing(packed) == _slowly_decreasing(arrays)
    assert largest(packed) == max((v for values in arrays for v in values), default=None)


def test_a_drop_only_between_arrays_is_not_a_drop() -> None:
    assert decreasing([to_uint32([5, 9]), to_uint32([1, 2]), to_uint32([]), to_uint32([0]), to_uint32([3, 2])]) == [4]
    assert decreasing([]) == [] and largest([]) is None and largest([to_uint32([])]) is None
    assert largest([to_uint32([1]), to_uint32([UINT32_MAX, 0])]) == UINT32_MAX


# --- seal ----------------------------------------------------------------------------------


def test_seal_derives_the_states() -> None:
    packet = seal(measured_parts(), None).packet
    assert packet.state == State.MEASURED
    assert [a.state for a in packet.arms] == [State.MEASURED, State.MEASURED]
    withheld = seal(measured_parts(g3_diverges=True), None).packet
    assert withheld.state == State.MEASURED  # the oracle arm still publishes
    assert withheld.arm(SPEC_ARM).state == State.WITHHELD
    imported = sealed(published_draft([published_arm("a", [1.0, 2.0], gates=[("G1", 11, 12, False)])])).packet
    assert (imported.state, imported.arms[0].state) == (State.WITHHELD, State.WITHHELD)
    screened = sealed(published_draft([published_arm("a", [1.0, 2.0])], provenance="screened")).packet
    assert (screened.state, screened.arms[0].state) == (State.SCREENED, State.SCREENED)
    ok = sealed(published_draft([published_arm("a", [1.0, 2.0])])).packet
    assert (ok.state, ok.arms[0].state) == (State.IMPORTED, State.IMPORTED)


def test_seal_derives_the_withheld_reason_from_the_failed_gates() -> None:
    spec = seal(measured_parts(g3_diverges=True), None).packet.arm(SPEC_ARM)
    assert [g.gate for g in spec.failed_gates] == ["G2", "G3"]
    assert spec.withheld_reason == "; ".join(g.summary for g in spec.failed_gates)
    assert spec.withheld_reason.startswith("G2 11/12 vs ")
    # a reason the writer gives is kept
    draft = measured_draft(g3_diverges=True)
    draft["arms"][1]["withheld_reason"] = "server A drifted at token 57"
    assert sealed(draft).packet.arm(SPEC_ARM).withheld_reason == "server A drifted at token 57"


def test_seal_id_is_slug_quant_digest8() -> None:
    result = seal(measured_parts(slug="qwen3.5-4b"), None)
    digest = hashlib.sha256(result.data).hexdigest()
    assert result.packet.sha256 == digest
    assert result.packet.id == f"qwen3.5-4b-bf16-{digest[:8]}"
    assert result.packet.seal.id == result.packet.id


def test_seal_is_deterministic() -> None:
    key = signing_key("measurer")
    first, second = seal(measured_parts(), key), seal(measured_parts(), key)
    assert first.data == second.data
    assert first.envelope == second.envelope and first.envelope is not None
    assert first.packet == second.packet
    assert first.packet.seal.signed_by == key.key_id
    # the signature is beside the bytes, not in them: unsigned, the same bytes and id
    unsigned = seal(measured_parts(), None)
    assert (unsigned.data, unsigned.packet.id) == (first.data, first.packet.id)


def test_write_packet_writes_the_signature_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from catalog.files import write_file as real

    order: list[str] = []

    def recording(path: Path, data: bytes) -> None:
        order.append(path.name)
        real(path, data)

    monkeypatch.setattr(packet_io, "write_file", recording)
    result = seal(measured_parts(), signing_key("measurer"))
    path = write_packet(result, tmp_path)
    assert order == [f"{result.packet.id}.dsse.json", f"{result.packet.id}.json"]
    assert path.read_bytes() == result.data
    assert signature_path(path).read_bytes() == result.envelope


# --- signatures, through read_packet and load_catalog ---------------------------------------


def put(packets: Path, result: Sealed) -> Path:
    return write_packet(result, packets)


def test_a_valid_signature_is_accepted(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    result = sealed(measured_draft())
    path = put(packets, result)
    catalog: Catalog = load_catalog(data, packets)
    packet = catalog.packets[result.packet.id]
    assert packet.signed and packet.seal.signed_by == signing_key("measurer").key_id
    again = read_packet(path, load_keys(data / "keys.yaml"))
    assert again.signed and again.sha256 == result.packet.sha256


def test_an_unsigned_packet_is_refused_unless_allowed(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    result = sealed(measured_draft(), signed=False)
    path = put(packets, result)
    assert not signature_path(path).exists()
    error = refusal(data, packets)
    assert (error.file, error.field) == (str(path), "signature")
    assert error.message.startswith(f"unsigned: no {signature_path(path).name} beside it")
    catalog = load_catalog(data, packets, allow_unsigned=True)
    assert catalog.packets[result.packet.id].signed is False


def test_a_key_not_in_keys_yaml_is_refused(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    key = other_key(tmp_path)
    assert key.key_id not in load_keys(data / "keys.yaml").by_id()
    result = seal(measured_parts(), key)
    path = put(packets, result)
    error = refusal(data, packets)
    assert (error.file, error.field) == (str(signature_path(path)), "signatures[0].keyid")
    assert error.message.startswith(f"unknown key {key.key_id}")
    # a local build admits it as an unsigned packet (this host's own key, not listed yet)
    catalog = load_catalog(data, packets, allow_unsigned=True)
    assert catalog.packets[result.packet.id].signed is False


def test_a_revoked_key_is_refused_even_when_unsigned_packets_are_allowed(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    measurer = signing_key("measurer")
    lines = keys_yaml().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if measurer.key_id in line)
    lines.insert(at + 1, "    revoked: 2026-01-02\n")
    (data / "keys.yaml").write_text("".join(lines), encoding="utf-8")
    assert load_keys(data / "keys.yaml").by_id()[measurer.key_id].revoked is not None
    path = put(packets, sealed(measured_draft()))
    for allow in (False, True):
        error = refusal(data, packets, allow_unsigned=allow)
        assert (error.file, error.field) == (str(signature_path(path)), "signatures[0].keyid")
        assert "was revoked on 2026-01-02" in error.message


def test_a_tampered_byte_is_caught(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    result = sealed(measured_draft())
    path = put(packets, result)
    tampered = result.data.replace(b'"card_count":1', b'"card_count":2', 1)
    assert tampered != result.data
    path.write_bytes(tampered)
    error = refusal(data, packets)
    assert (error.file, error.field) == (str(path), "id")  # the digest no longer matches the name
    # renamed to the name its new digest gives, with its signature: the signature refuses it
    new_id = f"qwen3.5-9b-bf16-{hashlib.sha256(tampered).hexdigest()[:8]}"
    moved = path.rename(path.with_name(f"{new_id}.json"))
    signature_path(path).rename(signature_path(moved))
    error = refusal(data, packets)
    assert (error.file, error.field) == (str(signature_path(moved)), "payload.subject[0].name")
    assert "a signature cannot move between packets" in error.message


def test_a_signature_of_the_same_name_over_other_bytes_is_refused(tmp_path: Path) -> None:
    # a signature whose statement names this file but another digest (signed before an edit)
    _, packets = catalog_dirs(tmp_path)
    result = sealed(measured_draft())
    path = put(packets, result)
    from catalog.packets.signing import sign_packet

    signature_path(path).write_bytes(sign_packet("0" * 64, path.name, signing_key("measurer")))
    with pytest.raises(CatalogError) as info:
        read_packet(path, load_keys(signed_data(tmp_path / "data") / "keys.yaml"))
    assert info.value.field == "payload.subject[0].digest.sha256"
    assert "the packet changed after signing" in info.value.message


def test_a_signature_copied_from_another_packet_is_refused(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    first = put(packets, sealed(measured_draft(title="first")))
    second = put(packets, sealed(measured_draft(title="second")))
    shutil.copy(signature_path(first), signature_path(second))
    error = refusal(data, packets)
    assert (error.file, error.field) == (str(signature_path(second)), "payload.subject[0].name")
    assert f"signs packet {first.name!r}, not {second.name!r}" in error.message


def test_an_importer_key_cannot_sign_a_measured_packet(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    path = put(packets, seal(measured_parts(), signing_key("importer")))
    error = refusal(data, packets)
    assert (error.file, error.field) == (str(signature_path(path)), "signatures[0].keyid")
    assert "has role importer; this packet needs a key with role measurer" in error.message
    # and a measurer key cannot sign an imported one
    imported = sealed(published_draft([published_arm("a", [1.0, 2.0])]))
    assert key_for("imported").role == "importer"
    (packets / path.name).unlink()
    signature_path(path).unlink()
    wrong = put(packets, seal(PacketParts.model_validate(_parts_json(imported)), signing_key("measurer")))
    error = refusal(data, packets)
    assert (error.file, error.field) == (str(signature_path(wrong)), "signatures[0].keyid")
    assert "has role measurer; this packet needs a key with role importer" in error.message


def _parts_json(result: Sealed) -> dict[str, Any]:
    from catalog.packets.seal import parts_of

    return parts_of(result.packet).model_dump(mode="json")


def test_a_stray_signature_without_its_packet_is_refused(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    path = put(packets, sealed(measured_draft()))
    path.unlink()
    stray = signature_path(path)
    error = refusal(data, packets, allow_unsigned=True)
    assert (error.file, error.field) == (str(stray), "subject")
    assert error.message == "a signature for a packet that is not here"


# --- canaries are judged again ------------------------------------------------------------


def test_a_canary_recorded_as_passed_whose_answers_fail_is_refused(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    canaries = canary_set().canaries
    index = next(i for i, c in enumerate(canaries) if c.kind == "contains")
    canary = canaries[index]
    draft = measured_draft(spec=False)
    recorded = draft["arms"][0]["servers"][1]["canaries"][index]
    assert recorded["id"] == canary.id and recorded["passed"] is True
    recorded["outputs"] = canary_answers(canary, passing=False)  # the verdict left as it was
    assert verdict(canary, recorded["outputs"])[0] is False
    path = put(packets, sealed(draft))  # sealed and signed with a listed key: only re-judging catches it
    error = refusal(data, packets)
    assert (error.file, error.field) == (str(path), f"arms[0].servers[1].canaries[{index}].passed")
    assert error.message.startswith("recorded True (")
    assert "its answers give False" in error.message


def test_a_canary_detail_that_disagrees_with_its_answers_is_refused(tmp_path: Path) -> None:
    data, packets = catalog_dirs(tmp_path)
    draft = measured_draft(spec=False)
    draft["arms"][0]["servers"][0]["canaries"][0]["detail"] = "looked fine to me"
    path = put(packets, sealed(draft))
    error = refusal(data, packets)
    # the verdict stands, the words do not: the field named is the one that disagrees
    assert (error.file, error.field) == (str(path), "arms[0].servers[0].canaries[0].detail")


# --- migration from schema 1 ----------------------------------------------------------------


@pytest.fixture
def schema1_packets(tmp_path: Path) -> Path:
    packets = tmp_path / "packets"
    packets.mkdir()
    shutil.copy(SCHEMA1, packets / SCHEMA1.name)
    return packets


def test_migration_gives_a_schema_2_packet_that_reads_back(schema1_packets: Path) -> None:
    [(old, new)] = migrate(schema1_packets, sign=False)
    assert old == schema1_packets / SCHEMA1.name and not old.exists()
    assert new == schema1_packets / f"{MIGRATED_ID}.json"
    assert not signature_path(new).exists()
    packet = read_packet(new, None)
    assert (packet.schema_version, packet.id) == (2, MIGRATED_ID)
    assert packet.provenance.kind == "imported"
    # unsigned: admitted only where unsigned packets are allowed
    keys = KeyRing.empty()
    assert read_packet(new, keys, allow_unsigned=True).signed is False
    with pytest.raises(CatalogError, match="unsigned"):
        read_packet(new, keys)


def test_signed_migration_is_signed_by_the_importer_key(tmp_path: Path, schema1_packets: Path) -> None:
    [(_, new)] = migrate(schema1_packets, sign=True)
    data = signed_data(tmp_path / "data")
    packet = read_packet(new, load_keys(data / "keys.yaml"))
    assert packet.signed and packet.seal.signed_by == signing_key("importer").key_id


def test_an_edited_schema_1_file_is_not_migrated(schema1_packets: Path) -> None:
    path = schema1_packets / SCHEMA1.name
    document = json.loads(path.read_text(encoding="utf-8"))
    document["arms"][0]["servers"][0]["decode_tok_s"] = 99.0
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with pytest.raises(CatalogError) as info:
        migrate(schema1_packets, sign=False)
    assert info.value.file == str(path)
    assert "its schema 1 seal does not hold" in info.value.message
    assert [p.name for p in schema1_packets.iterdir()] == [SCHEMA1.name]  # nothing written


def test_reading_a_schema_1_file_says_to_migrate(schema1_packets: Path) -> None:
    path = schema1_packets / SCHEMA1.name
    with pytest.raises(CatalogError) as info:
        read_packet(path, None)
    assert (info.value.file, info.value.field, info.value.message) == (str(path), "schema_version", MIGRATE_HINT)
    assert "run `python -m catalog migrate`" in str(info.value)


# --- the committed demo packet --------------------------------------------------------------


def test_the_demo_packet_reads_verifies_and_is_small() -> None:
    [path] = [p for p in (REPO / "packets").glob("demo-bf16-*.json") if not layout.is_signature(p)]
    # its arms' rows and token arrays under 300 KB; its three ladders of both arms (a load sweep's 128
    # request rows each, concurrency c1-c8, the 2K context depth) add about 60 KB
    assert path.stat().st_size < 400_000
    packet = read_packet(path, load_keys(REPO / "data" / "keys.yaml"))
    assert packet.signed
    assert path.name == f"{packet.id}.json"
    assert packet.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert canonical_json(packet.model_dump(mode="json")) + b"\n" == path.read_bytes()
