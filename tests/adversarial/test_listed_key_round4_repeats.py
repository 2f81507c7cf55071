"""A listed key cannot push an honest repeat out of the count and put its own in (round 4, the
tests/adversarial/test_listed_key.py harness). Two listed keys of two owners; the honest lab seals
a campaign, and another lab, with its own listed key, either

- copies the honest packet's servers byte for byte under a new boot id, dated half a year earlier;
- or seals a campaign of its own timings claiming the honest packet's campaign cell and repeat,
  dated earlier too.

Until now `created` (the signer's word) decided: the honest packet was published as the copy, or
as the later claimant, and the forger's figure counted. Now neither of each pair counts: both are
listed under "Repeats refused", each naming the other, the build warns of both and `--strict`
fails (catalog/checks/repeats.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bs4 import BeautifulSoup

from testkit.samples import measured_parts
from tests.adversarial.support import REPO
from tests.adversarial.test_forgery import SIGNED, commands
from tests.adversarial.test_listed_key import campaign, campaign_cell, lab, lab_seal  # noqa: F401 (lab: a fixture)
from tests.adversarial.test_listed_key_round2_grade import extra_key, seal_with

REF = {**campaign_cell(campaign()), "repeats": 3}  # the cell both packets measured (catalog/model/campaign.py)
FAMILY = Path("site") / "models" / "qwen3.5-9b" / "index.html"


def _build(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    verify, build = commands(root, root / "packets", SIGNED)
    done = subprocess.run(verify, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return subprocess.run([*build, *options], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _refused(root: Path) -> list[str]:
    page = BeautifulSoup((root / FAMILY).read_text(encoding="utf-8"), "html.parser")
    return [li.get_text(" ", strip=True) for li in page.select("#history .gap li")]


def _counted(root: Path) -> set[str]:
    page = BeautifulSoup((root / FAMILY).read_text(encoding="utf-8"), "html.parser")
    return {a.get_text(strip=True) for a in page.select("table.history-runs a")}


def _neither(root: Path, honest: Path, forged: Path, words: str) -> None:
    built = _build(root)
    assert built.returncode == 0, built.stdout + built.stderr
    refused = _refused(root)
    for mine, theirs in ((honest.stem, forged.stem), (forged.stem, honest.stem)):
        assert any(line.startswith(f"{mine} : ") and theirs in line and words in line for line in refused), refused
        assert f"packets/{mine}.json: not counted as a repeat" in built.stderr
    assert not {honest.stem, forged.stem} & _counted(root)
    assert _build(root, "--strict").returncode != 0


def test_a_backdated_copy_under_another_key_counts_neither(lab: Path) -> None:  # noqa: F811
    honest = lab_seal(lab, campaign())
    copy = campaign()
    copy["created"] = "2026-06-01T10:15:00Z"
    copy["identity"]["host"]["boot_id"] = "77777777-other-boot"
    copy["title"] = "Qwen3.5-9B BF16 on one Arc Pro B70 (first run)"
    forged = seal_with(lab, copy, extra_key(lab, "copier", "a copying lab (measurer)"))
    _neither(lab, honest, forged, "are copies of one another")


def test_a_backdated_claim_on_a_campaign_repeat_counts_neither(lab: Path) -> None:  # noqa: F811
    document = campaign()
    document["campaign"] = REF
    honest = lab_seal(lab, document)
    claim = measured_parts(ms_per_token=26.0).model_dump(mode="json")
    claim["campaign"] = REF
    claim["created"] = "2026-06-01T00:00:00Z"
    claim["identity"]["host"]["boot_id"] = "5555-forger-boot"
    forged = seal_with(lab, claim, extra_key(lab, "hijacker", "another lab (measurer)"))
    _neither(lab, honest, forged, "the claims contradict each other")
