"""Verify once per content: the builder keeps verified packets as summaries in a cache keyed by
their bytes, their signature, the key ring and the verifier; `make verify` never trusts it."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import pytest

from catalog.errors import CatalogError
from catalog.model.arrays import decode_uint32, encode_uint32
from catalog.model.metrics import decode_rate
from catalog.packets import verify as packet_verify
from catalog.packets.layout import is_signature
from catalog.packets.seal import write_packet
from catalog.store import cache as summary
from catalog.store import reading as packet_reading
from catalog.store.cache import KEPT_TOKENS, SummaryCache, summarize
from catalog.store.record import is_record
from catalog.store.repository import load_catalog
from tests.builder.factory import write_catalog
from tests.catalog.factories import measured_draft, sealed


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "llm-serving-catalog" / "summaries"


@pytest.fixture
def catalog_dirs(tmp_path: Path) -> tuple[Path, Path]:
    return write_catalog(tmp_path / "tree")


def _packet_files(packets: Path) -> list[Path]:
    return sorted(p for p in packets.glob("*.json") if not is_signature(p))


def _count_verifications(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Load in this process (so the patch is seen) and record every packet verified from scratch."""
    verified: list[Path] = []
    real = packet_reading.verify  # type: ignore[attr-defined]

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        verified.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(packet_reading, "verify", counting)
    monkeypatch.setattr(packet_reading, "PACKETS_PER_WORKER", 10**9)
    return verified


def test_a_summary_keeps_every_figure_a_page_shows_and_drops_the_rest(catalog_dirs):
    data, packets = catalog_dirs
    whole = load_catalog(data, packets)
    for packet in whole.packets.values():
        cut = summarize(packet)
        assert cut.seal == packet.seal
        for arm, cut_arm in zip(packet.arms, cut.arms, strict=True):
            assert cut_arm.decode_tok_s == arm.decode_tok_s
            assert cut_arm.ttft_ms == arm.ttft_ms
            for server, cut_server in zip(arm.servers, cut_arm.servers, strict=True):
                for row, cut_row in zip(server.rows, cut_server.rows, strict=True):
                    assert len(cut_row.token_ids) == min(KEPT_TOKENS, len(row.token_ids))
                    assert list(cut_row.token_ids) == list(row.token_ids[:KEPT_TOKENS])
                    assert decode_rate(cut_row.token_times_us) == decode_rate(row.token_times_us)
                    assert cut_row.completion_tokens == row.completion_tokens
    rows = [r for p in whole.packets.values() for a in p.arms for s in a.servers for r in s.rows]
    assert rows and any(len(r.token_ids) > KEPT_TOKENS for r in rows)  # the fixture has long rows to cut


def test_a_second_load_verifies_nothing_and_gives_the_same_catalog(catalog_dirs, cache_home, monkeypatch):
    data, packets = catalog_dirs
    verified = _count_verifications(monkeypatch)
    first = load_catalog(data, packets, summaries=True, use_cache=True)
    assert sorted(verified) == _packet_files(packets)
    recipes = len(list((data / "models").glob("*.yaml")))
    assert len(list(cache_home.rglob("*.pickle"))) == len(first.packets) + recipes
    verified.clear()
    second = load_catalog(data, packets, summaries=True, use_cache=True)
    assert verified == []
    assert second.packets == first.packets
    assert {i: p.seal for i, p in second.packets.items()} == {i: p.seal for i, p in first.packets.items()}


def test_without_the_cache_flag_nothing_is_read_or_written(catalog_dirs, cache_home, monkeypatch):
    data, packets = catalog_dirs
    verified = _count_verifications(monkeypatch)
    load_catalog(data, packets, summaries=True, use_cache=True)
    verified.clear()
    load_catalog(data, packets, summaries=True, use_cache=False)
    load_catalog(data, packets)  # what `make verify` does
    assert len(verified) == 2 * len(_packet_files(packets))
    assert not list(cache_home.rglob("*.tmp"))


def test_a_changed_key_ring_or_verifier_trusts_no_old_summary(catalog_dirs, cache_home, monkeypatch):
    data, packets = catalog_dirs
    verified = _count_verifications(monkeypatch)
    load_catalog(data, packets, summaries=True, use_cache=True)
    verified.clear()
    keys = data / "keys.yaml"
    keys.write_text(keys.read_text() + "\n# reviewed\n", encoding="utf-8")
    load_catalog(data, packets, summaries=True, use_cache=True)
    assert sorted(verified) == _packet_files(packets)
    verified.clear()
    monkeypatch.setattr(summary, "verifier_digest", lambda: "another verifier")
    load_catalog(data, packets, summaries=True, use_cache=True)
    assert sorted(verified) == _packet_files(packets)


def test_the_key_covers_the_signature_and_the_file_name(catalog_dirs, tmp_path):
    data, packets = catalog_dirs
    cache = SummaryCache.for_run(data / "keys.yaml", allow_unsigned=False, root=tmp_path / "c")
    path = _packet_files(packets)[0]
    body = path.read_bytes()
    before = cache.key(path, body)
    envelope = path.with_name(path.stem + ".dsse.json")
    envelope.write_bytes(envelope.read_bytes() + b" ")
    assert cache.key(path, body) != before
    renamed = path.with_name("renamed.json")
    assert cache.key(renamed, body) != cache.key(path, body)
    unsigned = SummaryCache.for_run(data / "keys.yaml", allow_unsigned=True, root=tmp_path / "c")
    assert unsigned.context != cache.context


def test_a_packet_with_problems_is_never_cached_and_still_fails(catalog_dirs, cache_home):
    data, packets = catalog_dirs
    path = _packet_files(packets)[0]
    path.write_bytes(path.read_bytes().replace(b'"seed":', b'"seed": ', 1))  # not canonical
    for _ in range(2):
        with pytest.raises(CatalogError):
            load_catalog(data, packets, summaries=True, use_cache=True)
    recipes = len(list((data / "models").glob("*.yaml")))
    assert len(list(cache_home.rglob("*.pickle"))) == len(_packet_files(packets)) - 1 + recipes


def test_a_corrupt_cache_entry_is_verified_again(catalog_dirs, cache_home, monkeypatch):
    data, packets = catalog_dirs
    verified = _count_verifications(monkeypatch)
    first = load_catalog(data, packets, summaries=True, use_cache=True)
    for entry in [*cache_home.rglob("*.pickle"), *cache_home.rglob("*.record"), *cache_home.rglob("*.listed")]:
        entry.write_bytes(b"not a pickle")
    verified.clear()
    again = load_catalog(data, packets, summaries=True, use_cache=True)
    assert sorted(verified) == _packet_files(packets)
    assert {i: again.summary(i) for i in again.packets} == {i: first.summary(i) for i in first.packets}


def test_a_listed_packet_whose_record_and_summary_are_lost_is_verified_again_when_read(
    catalog_dirs, cache_home, monkeypatch
):
    """A load reads only listings: the record and summary it did not read are verified again by the
    page or view that needs them, from the file, never taken on trust or as absent."""
    data, packets = catalog_dirs
    verified = _count_verifications(monkeypatch)
    first = load_catalog(data, packets, summaries=True, use_cache=True)
    records = {i: first.packets[i] for i in first.packets}
    summaries = {i: first.summary(i) for i in first.packets}
    for entry in [*cache_home.rglob("*.pickle"), *cache_home.rglob("*.record")]:
        entry.write_bytes(b"not a pickle")
    verified.clear()
    again = load_catalog(data, packets, summaries=True, use_cache=True)
    assert verified == []
    assert {i: again.packets[i] for i in again.packets} == records
    assert sorted(verified) == _packet_files(packets)
    verified.clear()
    assert {i: again.summary(i) for i in again.packets} == summaries
    assert sorted(verified) == _packet_files(packets)


def test_a_cached_listing_is_the_listing_of_the_packet_verified_whole(catalog_dirs, cache_home, monkeypatch):
    """The listing (catalog/store/listing.py) is all a load reads of a packet verified before; a cache
    from before listings has only records, and the listing is made from the record, once."""
    data, packets = catalog_dirs
    whole = load_catalog(data, packets).listing
    load_catalog(data, packets, summaries=True, use_cache=True)
    verified = _count_verifications(monkeypatch)
    assert load_catalog(data, packets, summaries=True, use_cache=True).listing == whole
    listed = sorted(cache_home.rglob("*.listed"))
    assert len(listed) == len(whole)
    for entry in listed:
        entry.unlink()
    assert load_catalog(data, packets, summaries=True, use_cache=True).listing == whole
    assert verified == []
    assert len(sorted(cache_home.rglob("*.listed"))) == len(whole)


def _known(path: Path) -> str | None:
    """What the builder gives the loader: each input's sha256, taken once (builder/stamp.py)."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def test_a_load_takes_what_the_last_one_listed_from_one_file(catalog_dirs, cache_home, monkeypatch):
    """A packet the last load with the same data/ listed is not read at all, not even its cache
    entries; one whose bytes changed, or every one after an edit to data/, is read again."""
    data, packets = catalog_dirs
    verified = _count_verifications(monkeypatch)
    read: list[Path] = []
    real = packet_reading.Reader._read

    def reading(self: packet_reading.Reader, path: Path) -> object:
        read.append(path)
        return real(self, path)

    monkeypatch.setattr(packet_reading.Reader, "_read", reading)
    first = load_catalog(data, packets, summaries=True, use_cache=True, known=_known)
    assert sorted(read) == _packet_files(packets) == sorted(verified)
    assert len(list((cache_home / summary.LISTINGS).iterdir())) == 1
    read.clear()
    again = load_catalog(data, packets, summaries=True, use_cache=True, known=_known)
    assert read == [] and again.listing == first.listing
    assert {i: again.packets[i] for i in again.packets} == {i: first.packets[i] for i in first.packets}
    changed = _packet_files(packets)[0]
    changed.write_bytes(changed.read_bytes().replace(b'"seed":', b'"seed": ', 1))  # not canonical
    with pytest.raises(CatalogError):
        load_catalog(data, packets, summaries=True, use_cache=True, known=_known)
    assert read == [changed]
    read.clear()
    recipe = sorted((data / "models").glob("*.yaml"))[0]
    recipe.write_text(recipe.read_text(encoding="utf-8") + "\n# reviewed\n", encoding="utf-8")
    with pytest.raises(CatalogError):
        load_catalog(data, packets, summaries=True, use_cache=True, known=_known)
    assert sorted(read) == _packet_files(packets)


@pytest.mark.parametrize(
    "damage", [b"not a pickle", pickle.dumps(["a", "list"]), pickle.dumps({"key": "not a listing"})]
)
def test_a_damaged_listings_file_is_read_past(catalog_dirs, cache_home, monkeypatch, damage):
    """The file of listings is a cache like the rest: damaged, each packet is read from its own
    entries again (none verified: they still hold), and the file is written anew."""
    data, packets = catalog_dirs
    first = load_catalog(data, packets, summaries=True, use_cache=True, known=_known)
    (listings,) = (cache_home / summary.LISTINGS).iterdir()
    if b"key" in damage:
        damage = pickle.dumps(dict.fromkeys(pickle.loads(listings.read_bytes()), "not a listing"))
    listings.write_bytes(damage)
    verified = _count_verifications(monkeypatch)
    again = load_catalog(data, packets, summaries=True, use_cache=True, known=_known)
    assert verified == [] and again.listing == first.listing
    assert set(pickle.loads(listings.read_bytes()).values()) == set(first.listing.values())


def test_the_builder_uses_the_cache_unless_told_not_to(catalog_dirs, cache_home, tmp_path, monkeypatch):
    from builder.cli import run

    data, packets = catalog_dirs
    verified = _count_verifications(monkeypatch)
    argv = ["build", "--data", str(data), "--packets", str(packets)]
    assert run([*argv, "--out", str(tmp_path / "one")]) == 0
    assert sorted(verified) == _packet_files(packets)
    assert len(list((cache_home / summary.LISTINGS).iterdir())) == 1  # kept once the site was out
    verified.clear()
    assert run([*argv, "--out", str(tmp_path / "two")]) == 0
    assert verified == []
    assert run([*argv, "--out", str(tmp_path / "three"), "--no-cache"]) == 0
    assert sorted(verified) == _packet_files(packets)
    one, two, three = (
        {p.relative_to(tmp_path / n): p.read_bytes() for p in (tmp_path / n).rglob("*") if p.is_file()}
        for n in ("one", "two", "three")
    )
    assert one == two == three  # records with summaries read back, or summaries held: the same site


def test_a_reproduction_and_its_original_are_held_whole(tree, cache_home):
    """Their checks and grade compare whole token arrays; every other packet is a summary."""
    from catalog.packets.seal import write_packet
    from tests.catalog.factories import measured_draft, sealed

    original = sealed(measured_draft(spec=False))
    again = measured_draft(spec=False, title="again", ms_per_token=20.5)
    again["identity"]["host"]["boot_id"] = "another-boot"
    again["reproduces"] = original.packet.id
    other = sealed(measured_draft(spec=False, title="another campaign", ms_per_token=21.5))
    for made in (original, sealed(again), other):
        write_packet(made, tree / "packets")
    whole = load_catalog(tree / "data", tree / "packets")
    for _ in range(2):  # verified, then from the cache
        held = load_catalog(tree / "data", tree / "packets", summaries=True, use_cache=True)
        for packet_id, packet in held.packets.items():
            expected = whole.packets[packet_id]
            assert held.summary(packet_id) == (expected if packet_id != other.packet.id else summarize(expected))
            assert is_record(packet) == (packet_id == other.packet.id)
        assert held.packets[other.packet.id] != whole.packets[other.packet.id]


def test_recipes_are_parsed_once_per_content(catalog_dirs, cache_home, monkeypatch):
    from catalog.store import cache as summary_module

    data, packets = catalog_dirs
    parsed: list[Path] = []
    real = summary_module.load_file  # type: ignore[attr-defined]

    def counting(model: type, path: Path) -> object:
        parsed.append(path)
        return real(model, path)

    monkeypatch.setattr(summary_module, "load_file", counting)
    first = load_catalog(data, packets, summaries=True, use_cache=True)
    recipes = sorted((data / "models").glob("*.yaml"))
    assert sorted(parsed) == recipes
    parsed.clear()
    assert load_catalog(data, packets, summaries=True, use_cache=True).recipes == first.recipes
    assert parsed == []
    edited = recipes[0]
    edited.write_text(edited.read_text().replace("meta:", "meta:  # edited", 1), encoding="utf-8")
    load_catalog(data, packets, summaries=True, use_cache=True)
    assert parsed == [edited]


def test_the_checks_against_data_are_kept_per_data_content(catalog_dirs, cache_home, monkeypatch):
    """A cached summary skips verification, never the checks against data/ as it is now: a recipe
    that lost the variant a packet names is an error on the next load, cached or not (the whole
    packet verified again: the checks against data/ read every row)."""
    data, packets = catalog_dirs
    checked: list[Path] = []
    real = packet_verify.cross_check  # type: ignore[attr-defined]

    def counting(packet: object, path: Path, ref: object) -> object:
        checked.append(path)
        return real(packet, path, ref)  # type: ignore[arg-type]

    monkeypatch.setattr(packet_verify, "cross_check", counting)
    monkeypatch.setattr(packet_reading, "PACKETS_PER_WORKER", 10**9)
    first = load_catalog(data, packets, summaries=True, use_cache=True)
    assert sorted(checked) == _packet_files(packets)
    checked.clear()
    load_catalog(data, packets, summaries=True, use_cache=True)
    assert checked == []  # this content passed against this data/ before
    packet = next(p for p in first.packets.values() if p.identity.model.variant not in (None, "default"))
    recipe = data / "models" / f"{packet.identity.model.slug}.yaml"
    variant = packet.identity.model.variant
    recipe.write_text(recipe.read_text().replace(f"\n  {variant}:", "\n  renamed-variant:", 1), encoding="utf-8")
    with pytest.raises(CatalogError) as refused:
        load_catalog(data, packets, summaries=True, use_cache=True)
    assert f"has no variant {variant!r}" in str(refused.value)
    assert checked  # checked again: the data changed


def test_known_digests_spare_reading_the_packets_again(catalog_dirs, cache_home, monkeypatch):
    """The builder has hashed its inputs before loading (builder/stamp.py): a packet verified
    before is then found in the cache without reading its bytes a second time."""
    import hashlib

    data, packets = catalog_dirs
    monkeypatch.setattr(packet_reading, "PACKETS_PER_WORKER", 10**9)
    first = load_catalog(data, packets, summaries=True, use_cache=True)
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in packets.glob("*.json")}
    read: list[Path] = []
    real = summary.read_bytes  # type: ignore[attr-defined]

    def counting(path: Path) -> bytes:
        read.append(path)
        return real(path)

    monkeypatch.setattr(summary, "read_bytes", counting)
    again = load_catalog(data, packets, summaries=True, use_cache=True, known=digests.get)
    assert not [p for p in read if p.parent == packets]
    assert again.packets == first.packets


def test_a_packet_the_cache_does_not_hold_is_verified_as_it_is_now(catalog_dirs, cache_home):
    """Whatever digest the builder knew for a file that changed after it hashed it: on a cache
    miss the bytes are read and verified now, and nothing is kept under the stale digest."""
    import hashlib

    data, packets = catalog_dirs
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in packets.glob("*.json")}
    path = _packet_files(packets)[0]
    path.write_bytes(path.read_bytes().replace(b'"seed":', b'"seed": ', 1))  # not canonical
    with pytest.raises(CatalogError) as refused:
        load_catalog(data, packets, summaries=True, use_cache=True, known=digests.get)
    assert path.name in str(refused.value)
    stale_key = SummaryCache.for_run(data / "keys.yaml", False).key(path, known=digests.get)
    assert SummaryCache.for_run(data / "keys.yaml", False).get(stale_key) is None


def test_a_load_told_to_keep_later_leaves_its_listings_to_the_caller(catalog_dirs, cache_home):
    """The builder writes what a load keeps for the next one once the site is out, in a forked
    process: until `to_keep` is called, nothing is written; once it is, the next load reads it."""
    data, packets = catalog_dirs
    loaded = load_catalog(data, packets, summaries=True, use_cache=True, known=_known, keep_later=True)
    assert loaded.to_keep is not None and not (cache_home / summary.LISTINGS).exists()
    loaded.to_keep()
    (listings,) = (cache_home / summary.LISTINGS).iterdir()
    assert set(pickle.loads(listings.read_bytes()).values()) == set(loaded.listing.values())
    again = load_catalog(data, packets, summaries=True, use_cache=True, known=_known, keep_later=True)
    assert again.to_keep is None and again.listing == loaded.listing  # nothing new to keep
    assert load_catalog(data, packets, summaries=True, use_cache=True, known=_known).to_keep is None


def test_a_build_refused_by_strict_still_keeps_what_its_load_verified(catalog_dirs, cache_home, tmp_path):
    """--strict refuses the fixture's warnings before publishing; the listings its load verified
    are kept all the same, so the build run again after the fix takes them."""
    from builder.cli import run

    data, packets = catalog_dirs
    argv = ["build", "--data", str(data), "--packets", str(packets), "--out", str(tmp_path / "site")]
    assert run([*argv, "--strict"]) == 1
    assert len(list((cache_home / summary.LISTINGS).iterdir())) == 1


def test_the_verifier_digest_covers_what_verification_runs_and_nothing_else(tmp_path, monkeypatch):
    """The modules verification imports, lazily too, are in the digest; a module it never runs
    (the schema writer) and the test helpers outside catalog/ are not: editing them keeps the cache."""
    covered = {path.relative_to(summary.CATALOG_SOURCE).as_posix() for path in summary.verifier_sources()}
    assert {"checks/consistency.py", "checks/evidence.py", "packets/signing.py", "store/repository.py"} <= covered
    assert {"__init__.py", "checks/__init__.py"} <= covered  # the packages a module sits in run first
    assert "schema.py" not in covered and "verify.py" not in covered

    source = tmp_path / "catalog"
    (source / "sub").mkdir(parents=True)
    (source / "__init__.py").write_text("")
    (source / "sub" / "__init__.py").write_text("")
    (source / "entry.py").write_text("def later():\n    from catalog.sub import lazy, other as renamed\n")
    (source / "sub" / "lazy.py").write_text("import catalog.leaf\n")
    (source / "sub" / "other.py").write_text("")
    (source / "leaf.py").write_text("")
    (source / "unused.py").write_text("")
    monkeypatch.setattr(summary, "CATALOG_SOURCE", source)
    found = {path.relative_to(source).as_posix() for path in summary.verifier_sources("catalog.entry")}
    assert found == {"__init__.py", "entry.py", "sub/__init__.py", "sub/lazy.py", "sub/other.py", "leaf.py"}


def test_the_checks_against_data_read_every_row_not_a_summary(tree: Path, cache_home: Path) -> None:
    """A summary keeps each row's first KEPT_TOKENS tokens; a token id past the vocabulary after
    them is still refused by the builder's load, first or after data/ changed (the whole packet is
    verified against data/, never its summary)."""
    draft = measured_draft(spec=False)
    draft["identity"]["model"]["config"] = None
    for server in draft["arms"][0]["servers"]:
        row = server["rows"][2]
        ids = decode_uint32(row["token_ids"])
        ids[KEPT_TOKENS + 9] = 250_000  # past Qwen3.5's 248,320, and past what a summary keeps
        row["token_ids"] = encode_uint32(ids)
    path = write_packet(sealed(draft), tree / "packets")
    for _ in range(2):
        with pytest.raises(CatalogError) as refused:
            load_catalog(tree / "data", tree / "packets", summaries=True, use_cache=True)
        errors = getattr(refused.value, "errors", [refused.value])
        assert {(e.file, e.field) for e in errors} == {
            (str(path), f"arms[0].servers[{j}].rows[2].token_ids[{KEPT_TOKENS + 9}]") for j in (0, 1)
        }
        (tree / "data" / "hardware.yaml").write_text(
            (tree / "data" / "hardware.yaml").read_text() + "\n# data/ changed\n", encoding="utf-8"
        )
