"""Secrets: tokens and keys set in the environment, in a recipe's base_env and as --api-key in its
args reach the server (it even prints them), yet none appears in a packet, a file under runs/
(server logs, attempt records with their log tails), the console, or any file of a built site."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from builder import cli as builder_cli
from catalog import verify
from catalog.packets.canonical import canonical_json
from catalog.packets.layout import signature_path
from tests.adversarial.fakes import Campaign
from tests.adversarial.support import Tally, run_main
from tests.catalog.factories import measured_draft, sealed, signed_data

ENVIRONMENT = {
    "HF_TOKEN": "hf_envTokenSECRET0001",
    "OPENAI_API_KEY": "sk-envKeySECRET0002",
    "MY_SECRET": "env-my-secret-SECRET0003",
    "AWS_SESSION_TOKEN": "aws-session-SECRET0004",
}
RECIPE_ENV = {"HF_TOKEN": "hf_recipeTokenSECRET0005", "WANDB_API_KEY": "wandb-recipe-SECRET0006"}
RECIPE_API_KEY = "sk-recipe-api-key-SECRET0007"
SECRETS = [*ENVIRONMENT.values(), *RECIPE_ENV.values(), RECIPE_API_KEY]


@pytest.fixture
def secret_campaign(campaign: Campaign, monkeypatch: pytest.MonkeyPatch) -> Campaign:
    recipe_path = campaign.root / "data" / "models" / "demo.yaml"
    recipe = yaml.safe_load(recipe_path.read_text())
    recipe["model"]["base_env"].update(RECIPE_ENV)
    recipe["model"]["base_args"] += ["--api-key", RECIPE_API_KEY]
    recipe_path.write_text(yaml.safe_dump(recipe, allow_unicode=True, sort_keys=False))
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FAKE_VLLM_LOG_ENV", ",".join([*ENVIRONMENT, *RECIPE_ENV]))
    return campaign


def leaks(folder: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits = [secret for secret in SECRETS if secret.encode() in data]
        if hits:
            found[path.relative_to(folder).as_posix()] = hits
    return found


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_no_secret_leaves_the_machine(
    secret_campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally
) -> None:
    campaign = secret_campaign
    # a failed attempt first: its record keeps the tail of a log that printed every secret
    monkeypatch.setenv("FAKE_VLLM_FAULT", "exit_on_start")
    code, failed_err = campaign.run(capsys)
    assert code == 1
    record = json.loads((campaign.run_dir() / "tp1-oracle" / "server-A.json").read_text())
    assert "environment HF_TOKEN=<redacted>" in record["error"]
    shutil.move(campaign.run_dir(), campaign.root / "failed-run")

    monkeypatch.delenv("FAKE_VLLM_FAULT")
    code, err = campaign.run(capsys)
    assert code == 0, err
    log = (campaign.run_dir() / "tp1-oracle" / "server-A.log").read_text()
    assert "'--api-key', '<redacted>'" in log and "environment OPENAI_API_KEY=<redacted>" in log

    (packet,) = campaign.packet_files()
    config = json.loads(packet.read_text())["arms"][0]["config"]
    assert config["env"]["HF_TOKEN"] == config["env"]["WANDB_API_KEY"] == "<redacted>"
    assert config["argv"][config["argv"].index("--api-key") + 1] == "<redacted>"

    site = campaign.root / "site"
    argv = ["build", "--data", "data", "--packets", "packets", "--out", str(site)]
    assert builder_cli.run(argv) == 0
    recipe_page = (site / "recipes" / "demo" / "index.html").read_text()
    assert "HF_TOKEN=&#39;&lt;redacted&gt;&#39;" in recipe_page

    everything = {
        "packets/": leaks(campaign.root / "packets"),
        "runs/ (passing campaign)": leaks(campaign.root / "runs"),
        "runs/ (failed campaign)": leaks(campaign.root / "failed-run"),
        "site/": leaks(site),
    }
    assert everything == {key: {} for key in everything}, everything
    console = failed_err + err
    assert [s for s in SECRETS if s in console] == []
    files = sum(1 for folder in ("packets", "runs", "failed-run", "site") for p in (campaign.root / folder).rglob("*"))
    tally.add("secrets", "secret values planted (environment, base_env, --api-key)", len(SECRETS))
    tally.add("secrets", "files searched (packet, runs/ logs and records, built site)", files)


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        ("env.HF_TOKEN", lambda config: config["env"].__setitem__("HF_TOKEN", ENVIRONMENT["HF_TOKEN"])),
        ("argv[", lambda config: config["argv"].extend(["--api-key", RECIPE_API_KEY])),
        ("argv[", lambda config: config["argv"].append(f"--hf-token={ENVIRONMENT['HF_TOKEN']}")),
    ],
)
def test_a_hand_made_packet_with_a_credential_is_refused(
    tmp_path: Path, where: str, edit: Callable[[dict[str, Any]], None], capsys, tally: Tally
) -> None:
    """Packets are published byte for byte, so a credential written into one by hand (or by
    another tool), even re-sealed, is refused by make verify and make site."""
    signed_data(tmp_path / "data")
    (tmp_path / "packets").mkdir()
    draft = measured_draft()
    edit(draft["arms"][0]["config"])
    with pytest.raises(ValueError, match="holds a credential"):
        sealed(draft)
    clean = sealed(measured_draft())
    stored = json.loads(clean.data)
    edit(stored["arms"][0]["config"])
    path = tmp_path / "packets" / clean.file_name
    path.write_bytes(canonical_json(stored) + b"\n")  # canonical: only the credential is wrong
    assert clean.envelope is not None
    signature_path(path).write_bytes(clean.envelope)
    for main, argv in (
        (verify.main, ["catalog.verify"]),
        (builder_cli.main, ["builder", "build", "--out", str(tmp_path / "site")]),
    ):
        argv += ["--data", str(tmp_path / "data"), "--packets", str(tmp_path / "packets")]
        code, err = run_main(main, argv, capsys)
        assert code == 1 and "Traceback" not in err, err
        assert f"error: {path}" in err and f"arms[0].config.{where}" in err and "holds a credential" in err
        assert [s for s in SECRETS if s in err] == [], "the error message itself shows the secret"
    assert not (tmp_path / "site").exists()
    tally.add("secrets", "hand-made packets carrying a credential (verify and site)", 2)
