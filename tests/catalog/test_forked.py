"""`forked_call`: one call in a forked process beside this one's own work."""

from __future__ import annotations

import os

import pytest

from catalog.forked import forked_call


def _failing() -> None:
    raise ValueError("refused in the child")


def test_a_forked_call_runs_in_another_process_on_what_this_one_holds():
    held = {"names": [f"n{i}" for i in range(1000)]}  # inherited: nothing of it is pickled on the way in
    call = forked_call(lambda: (os.getpid(), len(held["names"])))
    pid, count = call.result()
    assert pid != os.getpid() and count == 1000


def test_what_a_forked_call_raises_is_raised_by_its_result():
    call = forked_call(_failing)
    with pytest.raises(ValueError, match="refused in the child"):
        call.result()


def test_a_call_whose_process_died_is_made_here():
    parent = os.getpid()

    def dies_unless_here() -> int:
        if os.getpid() != parent:
            os._exit(9)  # as a process killed, or out of memory, ends
        return os.getpid()

    assert forked_call(dies_unless_here).result() == parent
