"""`python -m bench.packet_cost RUNS` refuses a RUNS it cannot take a median of, as an argument
error, before measuring anything (RUNS 0 raised StatisticsError from median([]))."""

from __future__ import annotations

import pytest

from bench import packet_cost


@pytest.mark.parametrize("runs", ["0", "-1", "two"])
def test_runs_under_one_or_not_a_number_is_an_argument_error(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        packet_cost.main([runs])
    assert exit_.value.code == 2
    assert "argument RUNS: RUNS must be" in capsys.readouterr().err
