"""The load sweep's command-line settings: defaults, one-line errors naming the flag, the plan's
summary line, the campaign id of requests without a sweep unchanged, and a reproduction's replay."""

from __future__ import annotations

import pytest

from catalog.errors import UserError
from catalog.model.load_sweep import LoadLevel, LoadRequest, LoadSweep, Slo
from catalog.packets.canonical import canonical_sha256
from runner.cli import _request, build_parser
from runner.measure import load_sweep_summary
from runner.plan import LOAD_REQUESTS_PER_LEVEL, CampaignRequest, LoadSweepOptions, campaign_id


def request(*flags: str) -> CampaignRequest:
    return _request(build_parser().parse_args(["measure", "--model", "demo", *flags]))


def test_load_defaults_when_the_ladder_is_asked_for() -> None:
    assert request().load is None
    load = request("--ladders", "load").load
    assert load == LoadSweepOptions()
    assert load.users == [1, 2, 4, 8, 16, 32, 64] and load.rates_rps is None
    assert load.requests_per_level == LOAD_REQUESTS_PER_LEVEL and load.slo == Slo()


def test_load_flags_are_read() -> None:
    load = request(
        "--ladders", "concurrency,load", "--load-users", "4,1,2", "--rates", "1,0.5",
        "--load-requests", "9", "--slo", "ttft_ms=500, tpot_ms=50,e2e_ms=9000", "--load-seed", "3",
    ).load  # fmt: skip
    assert load == LoadSweepOptions(
        users=[1, 2, 4], rates_rps=[0.5, 1.0], requests_per_level=9, seed=3,
        slo=Slo(ttft_ms=500, tpot_ms=50, e2e_ms=9000),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "field", "message"),
    [
        (["--slo", "itl_ms=50"], "--slo", "unknown objective 'itl_ms' (known: ttft_ms, tpot_ms, e2e_ms)"),
        (["--slo", "ttft_ms=fast"], "--slo", "ttft_ms needs a number, got 'fast'"),
        (["--slo", "ttft_ms=-1"], "--slo", "ttft_ms must be a positive number of milliseconds"),
        (["--rates", "0"], "--rates", "load rates must be positive"),
        (["--load-users", "128"], "--load-users", "load users must be between 1 and 64"),
        (["--load-requests", "0"], "--load-requests", "greater than or equal to 1"),
    ],
)
def test_a_bad_setting_is_one_line_naming_its_flag(flags: list[str], field: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        request("--ladders", "load", *flags)
    assert caught.value.field == field and message in caught.value.message and "\n" not in str(caught.value)


def test_a_load_setting_without_the_load_ladder_is_refused() -> None:
    with pytest.raises(UserError, match="add load to --ladders") as caught:
        request("--ladders", "concurrency", "--rates", "1")
    assert caught.value.field == "--rates"


def test_a_request_without_a_sweep_keeps_its_campaign_id() -> None:
    """Folders of campaigns started before the load sweep existed still resume."""
    plain = CampaignRequest(model="demo")
    before = {k: v for k, v in plain.model_dump(mode="json").items() if k != "load"}  # the request as it was
    hashed = canonical_sha256({"request": before, "arms": [], "suite": "s", "runtime": ""})
    assert campaign_id(plain, [], "s") == f"demo-default-{hashed[:12]}"
    assert campaign_id(request("--ladders", "load"), [], "s") != campaign_id(
        request("--ladders", "load", "--load-seed", "2"), [], "s"
    )


def test_the_plan_prints_the_settings() -> None:
    line = load_sweep_summary(LoadSweepOptions(users=[1, 2], slo=Slo(ttft_ms=500)))
    assert line.startswith("load sweep: closed loop at 1, 2 users, open loop at 0.25, 0.5, 0.75, 1 x")
    assert "64 requests per level" in line and "SLO ttft_ms <= 500" in line and "lag bound 10 ms" in line


def test_a_reproduction_replays_the_recorded_levels() -> None:
    row = LoadRequest(prompt_id="p", planned_ms=0.0, sent_ms=0.0, error="x")
    levels = [
        LoadLevel(mode="closed", users=2, duration_s=1, client_cpu_s=0, requests=[row]),
        LoadLevel(mode="open", rate_rps=0.7, duration_s=1, client_cpu_s=0, requests=[row]),
    ]
    sweep = LoadSweep(seed=5, requests_per_level=1, slo=Slo(e2e_ms=10), levels=levels, open_rates_from_users=2)
    assert LoadSweepOptions.of_sweep(sweep) == LoadSweepOptions(
        users=[2], rates_rps=[0.7], requests_per_level=1, seed=5, slo=Slo(e2e_ms=10)
    )
