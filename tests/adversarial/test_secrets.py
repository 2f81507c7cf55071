"""Secrets: tokens and keys set in the environment, in a recipe's base_env and as --api-key in its
args reach the server (it even prints them), yet none appears in a packet, a file under runs/
(server logs, attempt records with their log tails), the console, or any file of a built site."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from builder import cli as builder_cli
from tests.adversarial.fakes import Campaign
from tests.adversarial.support import Tally

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

    (packet,) = (campaign.root / "packets").iterdir()
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
