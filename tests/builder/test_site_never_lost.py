"""The build never loses the site: missing inputs are errors, not an empty catalog; a build that
would drop most packets refuses; the swap into place survives SIGKILL at any instant; the no-op
fast path refuses what a full build refuses; an unwritable output is one line, no traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from catalog.packets.layout import is_signature, signature_path
from tests.builder.factory import REPO, write_catalog


def _cli(*argv: str, module: str = "builder") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", module, *argv]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


def _build(data: Path, packets: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _cli("build", "--data", str(data), "--packets", str(packets), "--out", str(out), *extra)


def _one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def catalog(tmp_path: Path) -> tuple[Path, Path]:
    return write_catalog(tmp_path)


# ---- 1. a missing input folder is an error naming it, never an empty catalog ----


@pytest.mark.slow
@pytest.mark.parametrize("missing", ["packets", "data", "data/models", "data/suites", "data/hardware.yaml"])
def test_build_refuses_a_missing_input(tmp_path, catalog, missing):
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out).returncode == 0
    before = (out / ".catalog-build.json").read_bytes()
    gone = tmp_path / missing
    shutil.rmtree(gone) if gone.is_dir() else gone.unlink()
    _one_line_error(_build(data, packets, out), str(gone))
    assert (out / ".catalog-build.json").read_bytes() == before


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--packets", "--data"])
def test_build_refuses_a_mistyped_folder(tmp_path, catalog, option):
    data, packets = catalog
    typo = tmp_path / "no-such-folder"
    args = {"--data": data, "--packets": packets, option: typo}
    _one_line_error(_build(args["--data"], args["--packets"], tmp_path / "site"), str(typo), "no such folder")
    assert not (tmp_path / "site").exists()


@pytest.mark.slow
def test_an_input_that_is_a_file_not_a_folder_is_refused(tmp_path, catalog):
    data, _ = catalog
    (tmp_path / "packets.txt").write_text("not a folder")
    _one_line_error(_build(data, tmp_path / "packets.txt", tmp_path / "site"), "packets.txt", "not a folder")


@pytest.mark.slow
def test_verify_refuses_a_missing_packets_folder(tmp_path, catalog):
    data, _ = catalog
    result = _cli("--data", str(data), "--packets", str(tmp_path / "gone"), module="catalog.verify")
    _one_line_error(result, str(tmp_path / "gone"))
    assert "verified" not in result.stdout


@pytest.mark.slow
def test_an_empty_packets_folder_is_still_a_catalog(tmp_path):
    data, packets = write_catalog(tmp_path, packets=False)
    assert not any(packets.iterdir())
    result = _build(data, packets, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()


# ---- 5. labels reach Plotly as text, never as its pseudo-HTML ----

EVIL_LINK = '<a href="https://evil.example">x</a>'


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_chart_labels_are_escaped_for_plotly():
    from builder.charts import Point, chart

    points = [
        Point(series=EVIL_LINK, x=1, x_label="<b>1</b> & 'one'", centre=10.0, values=[9.0, 11.0]),
        Point(series=EVIL_LINK, x=2, x_label="2", centre=12.0, values=[12.0]),
        Point(series="other", x=2, x_label="2", centre=5.0, state="withheld", reason="<br>gate <i>failed</i>"),
    ]
    made = chart("c", "title", "subtitle", points, x_title="<sup>x</sup>", y_title='<span style="x">y</span>')
    figure = json.loads(made.figure_json)
    published = figure["data"][0]
    # a long legend entry wraps (at spaces, with the builder's own <br>) so a phone never clips it
    assert published["name"].replace("<br>", " ") == "&lt;a href=&#34;https://evil.example&#34;&gt;x&lt;/a&gt;"
    assert published["hovertext"][0].startswith("&lt;a href=&#34;https://evil.example&#34;&gt;x&lt;/a&gt; · &lt;b&gt;")
    layout = figure["layout"]
    assert layout["xaxis"]["title"]["text"] == "&lt;sup&gt;x&lt;/sup&gt;"
    assert layout["yaxis"]["title"]["text"] == "&lt;span style=&#34;x&#34;&gt;y&lt;/span&gt;"
    assert layout["xaxis"]["ticktext"][0] == "&lt;b&gt;1&lt;/b&gt; &amp; &#39;one&#39;"
    withheld_hover = figure["data"][1]["hovertext"][0]
    assert "WITHHELD: &lt;br&gt;gate &lt;i&gt;failed&lt;/i&gt;" in withheld_hover
    # the only markup left is the line breaks the builder itself puts between hover lines
    for text in _strings(figure):
        assert "<" not in text.replace("<br>", ""), text
    # the table beside the chart keeps the raw text: Jinja escapes it for HTML
    assert made.rows[0].series == EVIL_LINK


def _hostile_labels(tmp_path: Path) -> tuple[Path, Path]:
    """The fixture catalog with every arm label of the measured packet a link (re-sealed)."""
    from catalog.packets.seal import write_packet
    from tests.builder.factory import imported_parts, measured_parts
    from tests.catalog.factories import seal_parts

    data, packets = write_catalog(tmp_path, packets=False)
    parts = measured_parts()
    arms = [arm.model_copy(update={"label": f"{EVIL_LINK} {arm.label}"}) for arm in parts.arms]
    write_packet(seal_parts(parts.model_copy(update={"arms": arms})), packets)
    write_packet(seal_parts(imported_parts()), packets)
    return data, packets


@pytest.mark.slow
def test_no_figure_in_the_built_site_carries_markup(tmp_path):
    out = tmp_path / "site"
    result = _build(*_hostile_labels(tmp_path), out)
    assert result.returncode == 0, result.stderr
    figures, escaped = 0, 0
    for path in sorted(out.rglob("*.html")):
        html = path.read_text()
        for body in re.findall(r'<script type="application/json" id="chart-data-[^"]*">(.*?)</script>', html, re.S):
            figures += 1
            for text in _strings(json.loads(body)):
                assert "<" not in text.replace("<br>", ""), (path, text)
                escaped += "&lt;a href=&#34;https://evil.example&#34;&gt;" in text
    assert figures > 0 and escaped > 0


# ---- 4. the no-op fast path refuses exactly what a full build refuses ----


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dangling_link(path: Path) -> None:
    path.symlink_to(path.parent / "no-such-target.json")


def _folder(path: Path) -> None:
    path.mkdir()
    (path / "inside.txt").write_text("a folder named like a packet")


@pytest.mark.slow
@pytest.mark.parametrize("make", [_fifo, _dangling_link, _folder], ids=["fifo", "dangling-link", "folder"])
@pytest.mark.parametrize("where", ["packets/odd.json", "data/models/odd.yaml", "data/suites/odd.json"])
def test_an_entry_the_full_build_refuses_defeats_the_fast_path(tmp_path, catalog, make, where):
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out).returncode == 0
    assert "is up to date" in _build(data, packets, out).stdout
    make(tmp_path / where)
    incremental = _build(data, packets, out)
    full = _build(data, packets, tmp_path / "fresh")  # no manifest: the full build, nothing else
    assert full.returncode == 1 and str(tmp_path / where) in full.stderr, full.stderr
    assert (incremental.returncode, incremental.stdout, incremental.stderr) == (1, "", full.stderr)
    assert "Traceback" not in incremental.stderr


@pytest.mark.slow
def test_a_deleted_empty_packets_folder_is_not_up_to_date(tmp_path):
    """An empty folder and a missing one once hashed alike; the missing one must fail."""
    data, packets = write_catalog(tmp_path, packets=False)
    out = tmp_path / "site"
    assert _build(data, packets, out).returncode == 0
    packets.rmdir()
    _one_line_error(_build(data, packets, out), str(packets), "no such folder")


@pytest.mark.slow
def test_a_link_to_a_good_packet_is_built_every_time_not_trusted(tmp_path, catalog):
    """A link is never vouched for by a fingerprint: the build runs (and succeeds) each time."""
    data, packets = catalog
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = next(packets.glob("*.json"))
    victim.rename(elsewhere / victim.name)
    victim.symlink_to(elsewhere / victim.name)
    out = tmp_path / "site"
    assert _build(data, packets, out).returncode == 0
    again = _build(data, packets, out)
    assert again.returncode == 0 and "up to date" not in again.stdout and "0 changed" in again.stdout


# ---- 2. a build that would drop most packets refuses without --allow-shrink ----


def _packets_in(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "packets").glob("*.json") if not is_signature(p))


@pytest.mark.slow
def test_the_manifest_records_the_packet_count(tmp_path, catalog):
    out = tmp_path / "site"
    assert _build(*catalog, out).returncode == 0
    assert json.loads((out / ".catalog-build.json").read_text())["packets"] == 2 == len(_packets_in(out))


@pytest.mark.slow
@pytest.mark.parametrize("manifest", ["with-count", "older-without-count", "none"])
def test_a_build_dropping_most_packets_refuses(tmp_path, catalog, manifest):
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out).returncode == 0
    recorded = out / ".catalog-build.json"
    if manifest == "older-without-count":
        body = json.loads(recorded.read_text())
        del body["packets"]
        recorded.write_text(json.dumps(body))
    elif manifest == "none":
        recorded.unlink()
    before = _packets_in(out)
    for path in packets.glob("*.json"):
        path.unlink()
    _one_line_error(_build(data, packets, out), str(out), "0 packet(s) over the 2", "--allow-shrink")
    assert _packets_in(out) == before
    allowed = _build(data, packets, out, "--allow-shrink")
    assert allowed.returncode == 0, allowed.stderr
    assert _packets_in(out) == []


@pytest.mark.slow
def test_losing_half_the_packets_is_still_allowed(tmp_path, catalog):
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out).returncode == 0
    dropped = next(p for p in packets.glob("fixture-7b-w4a16-*.json") if not is_signature(p))
    dropped.unlink()
    signature_path(dropped).unlink()
    result = _build(data, packets, out)
    assert result.returncode == 0, result.stderr
    assert len(_packets_in(out)) == 1


# ---- 3. the swap into place: SIGKILL at any instant leaves the old or the new site, whole ----

# Runs the real CLI with a pause injected at one point of publishing; the test SIGKILLs it there.
PAUSED_BUILD = """
import os, sys, time
from pathlib import Path
import builder.output as output

point, flag = sys.argv[1], Path(sys.argv[2])

def pause():
    flag.write_text(point)
    time.sleep(600)

def after(function):
    def wrapped(*args, **kwargs):
        result = function(*args, **kwargs)
        pause()
        return result
    return wrapped

if point == "writing":
    real_write = output._write
    output._write = lambda *a: (real_write(*a), pause())
elif point == "before-swap":
    real_swap = output._swap
    output._swap = lambda *a: (pause(), real_swap(*a))
elif point == "after-exchange":
    output._exchange = after(output._exchange)
elif point == "fallback-mid-swap":
    output._exchange = lambda *a: False
    real_rename = os.rename
    def rename(source, target):
        real_rename(source, target)
        if ".old-" in str(target):
            pause()
    output.os.rename = rename
from builder.cli import main
sys.argv = ["builder", *sys.argv[3:]]
main()
"""


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _whole_site(out: Path) -> str:
    """The inputs hash of the site in `out` after checking it holds exactly its manifest's files."""
    recorded = json.loads((out / ".catalog-build.json").read_text())
    present = {p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir()}
    assert present == set(recorded["files"]) | {".catalog-build.json"}
    assert all(_sha256(out / relative) == sha for relative, sha in recorded["files"].items())
    return str(recorded["inputs"])


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _toggle(data: Path) -> None:
    recipe = data / "models" / "empty-1b.yaml"
    text = recipe.read_text()
    flipped = text.replace("nobody has measured", "NOBODY HAS MEASURED")
    recipe.write_text(flipped if flipped != text else text.replace("NOBODY HAS MEASURED", "nobody has measured"))


@pytest.fixture
def two_sites(tmp_path, catalog):
    """A site built from the catalog, the catalog then changed; both sites' inputs hashes."""
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out).returncode == 0
    _toggle(data)
    assert _build(data, packets, tmp_path / "probe").returncode == 0
    return data, packets, out, {"old": _whole_site(out), "new": _whole_site(tmp_path / "probe")}


def _killed_at(point: str, data: Path, packets: Path, out: Path, flag: Path) -> None:
    argv = ["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]
    process = subprocess.Popen([sys.executable, "-c", PAUSED_BUILD, point, str(flag), *argv], cwd=REPO)
    try:
        for _ in range(1200):
            if flag.exists() or process.poll() is not None:
                break
            time.sleep(0.05)
        assert flag.exists(), f"the build never reached {point}"
    finally:
        process.kill()
        process.wait()


@pytest.mark.slow
@pytest.mark.parametrize(("point", "expected"), [("writing", "old"), ("before-swap", "old"), ("after-exchange", "new")])
def test_sigkill_while_publishing_leaves_a_whole_site(tmp_path, two_sites, point, expected):
    data, packets, out, hashes = two_sites
    _killed_at(point, data, packets, out, tmp_path / "flag")
    assert _whole_site(out) == hashes[expected]
    assert _leftovers(out), "the kill should have left a staging folder"
    result = _build(data, packets, out)
    assert result.returncode == 0, result.stderr
    assert _leftovers(out) == []
    assert _whole_site(out) == hashes["new"]


@pytest.mark.slow
def test_sigkill_mid_swap_without_renameat2_is_repaired_by_the_next_build(tmp_path, two_sites):
    """Without renameat2 the old site is renamed aside before the new one moves in: killed
    between the two, `site` is briefly missing, its whole old copy beside it, put back next build."""
    data, packets, out, hashes = two_sites
    _killed_at("fallback-mid-swap", data, packets, out, tmp_path / "flag")
    assert not out.exists()
    [retired] = [out.parent / name for name in _leftovers(out) if ".old-" in name]
    assert _whole_site(retired) == hashes["old"]
    result = _build(data, packets, out)
    assert result.returncode == 0, result.stderr
    assert _leftovers(out) == []
    assert _whole_site(out) == hashes["new"]


@pytest.mark.slow
def test_sigkill_at_any_delay_leaves_a_whole_site(tmp_path, two_sites):
    """Kills at delays spread over a whole build, the inputs changed before each: whichever
    instant the kill lands on, the site is whole, and the next build removes the leftovers."""
    data, packets, out, hashes = two_sites
    argv = ["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]
    started = time.perf_counter()
    assert _build(data, packets, out).returncode == 0
    duration = time.perf_counter() - started
    valid = set(hashes.values())
    for step in range(8):
        _toggle(data)
        process = subprocess.Popen([sys.executable, "-m", "builder", *argv], cwd=REPO, stdout=subprocess.DEVNULL)
        time.sleep(duration * (0.45 + step * 0.08))
        process.kill()
        process.wait()
        assert _whole_site(out) in valid
    result = _build(data, packets, out)
    assert result.returncode == 0, result.stderr
    assert _leftovers(out) == []
    assert _whole_site(out) in valid


@pytest.mark.slow
def test_a_symlinked_output_is_followed_and_kept_a_link(tmp_path, two_sites):
    data, packets, out, hashes = two_sites
    link = tmp_path / "published"
    link.symlink_to(out)
    result = _build(data, packets, link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and link.resolve() == out.resolve()
    assert _whole_site(out) == hashes["new"]
    assert _leftovers(out) == [] and _leftovers(link) == []


# ---- 6. the system refusing a read or a write: one line naming the path, exit 1, no traceback ----


@pytest.mark.slow
@pytest.mark.parametrize("out", ["/proc/catalog-site", "/proc/self/catalog-site", "/sys/kernel/catalog-site"])
def test_an_output_the_system_will_not_write_is_one_line(tmp_path, catalog, out):
    """Root writes through file modes, so an unwritable output is one under /proc or /sys."""
    _one_line_error(_build(*catalog, Path(out)), out, "cannot write the site")  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_special_folder_as_output_is_refused_in_one_line(catalog):
    _one_line_error(_build(*catalog, Path("/proc/self")), "/proc/self", "refusing to replace")  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "reason"),
    [(_fifo, "not a regular file"), (_dangling_link, "cannot read: No such file or directory")],
    ids=["fifo", "dangling-link"],
)
@pytest.mark.parametrize("where", ["packets/odd.json", "data/models/odd.yaml"])
def test_an_input_that_cannot_be_read_is_one_line(tmp_path, catalog, make, reason, where):
    """Root reads through file modes: the unreadable inputs here are a FIFO and a dangling link."""
    make(tmp_path / where)
    _one_line_error(_build(*catalog, tmp_path / "site"), str(tmp_path / where), reason)
    assert not (tmp_path / "site").exists()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_packet_without_read_permission_is_one_line(tmp_path, catalog):
    data, packets = catalog
    victim = next(packets.glob("*.json"))
    victim.chmod(0)
    _one_line_error(_build(data, packets, tmp_path / "site"), str(victim), "Permission denied")


def test_an_os_error_outside_the_loader_is_one_line(tmp_path, monkeypatch, capsys):
    """The last resort in exit_on_user_error: any OSError is printed as its path and reason."""
    from catalog.errors import exit_on_user_error

    def failing() -> int:
        raise PermissionError(13, "Permission denied", str(tmp_path / "x"))

    with pytest.raises(SystemExit) as done:
        exit_on_user_error(failing)()
    assert done.value.code == 1
    assert capsys.readouterr().err == f"error: {tmp_path / 'x'}: Permission denied\n"
