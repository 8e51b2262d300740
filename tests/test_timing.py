"""trnplan.core.timing, the one timer, and the tools that time through it (bench cells, calibration).

Timed against a fake clock that advances only inside the timed callables, so every figure is exact
and no test depends on the machine's speed or load.
"""

from __future__ import annotations

import pytest

from trnplan.core import timing
from trnplan.planner import measure
from trnplan.tools import benchsuite, calibrate


class Clock:
    """``time.perf_counter`` that moves only when a callable made by :meth:`costing` runs."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def costing(self, seconds: float, log: list | None = None, name: str = ""):
        def call(*_args):
            self.t += seconds
            if log is not None:
                log.append(name)

        return call


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(timing.time, "perf_counter", c)
    return c


def test_calls_per_sample_fills_the_sample(clock):
    assert timing.calls_per_sample(clock.costing(10e-6), timing.no_sync, 50e-6) == (5, pytest.approx(10e-6))
    assert timing.calls_per_sample(clock.costing(1e-3), timing.no_sync, 50e-6)[0] == 1  # never below one call


def test_round_robin_stops_after_min_rounds_once_the_time_is_spent(clock):
    log = []
    runners = [(clock.costing(1e-3, log, "a"), 2), (clock.costing(2e-3, log, "b"), 1)]
    samples = timing.round_robin(runners, timing.no_sync, 50, stop_s=0.0, min_rounds=3)
    assert [len(s) for s in samples] == [3, 3]
    # per turn: one untimed call, then the sample's calls; the turns' order shuffled after round one
    assert log[:5] == ["a", "a", "a", "b", "b"]
    assert all("".join(log[i:i + 5]) in ("aaabb", "bbaaa") for i in range(0, 15, 5))
    assert samples == [[pytest.approx(1e-3)] * 3, [pytest.approx(2e-3)] * 3]  # seconds per call
    # without a stop, every round is made; measured planning's own stops only after MIN_ROUNDS
    assert [len(s) for s in timing.round_robin(runners, timing.no_sync, 7)] == [7, 7]
    assert len(measure.round_robin(runners, timing.no_sync, 50, stop_s=0.0)[0]) == measure.MIN_ROUNDS


def test_paired_is_measured_planning_s():
    assert measure.paired is timing.paired and measure.spread is timing.spread
    assert timing.paired([2.0, 4.0, 6.0], [1.0, 2.0, 3.0]) == (2.0, 0.0)


def test_bench_cells_time_through_the_one_timer(clock):
    fns = {"fast": clock.costing(2e-6), "slow": clock.costing(5e-3)}
    cells = benchsuite.time_cells(fns, cell_seconds=0.02, min_repeats=5, rounds=5)
    assert cells["fast"]["us"] == pytest.approx(2.0) and cells["fast"]["min_us"] == pytest.approx(2.0)
    assert cells["slow"]["us"] == pytest.approx(5000.0)
    # min_repeats kept; the fast cell wanted max_repeats (10,000) calls but the rounds stop once twice
    # cell_seconds per cell has passed: the time spent is that bound plus at most one round (10.1 ms)
    # and the warm-up (three calls of each)
    assert cells["slow"]["repeats"] >= 5 and 5 <= cells["fast"]["repeats"] < 10000
    assert clock.t <= 2 * 0.02 * len(fns) + (2 * 5e-3 + 51 * 2e-6) + 3 * (5e-3 + 2e-6) + 1e-9


def test_calibration_times_plans_round_robin(clock):
    class FakePlan:
        def __init__(self, seconds):
            self.execute = clock.costing(seconds)

    got = calibrate.time_round_robin({"a": FakePlan(30e-6), "b": FakePlan(1e-3)}, x=None, rounds=4)
    assert got == {"a": pytest.approx(30.0), "b": pytest.approx(1000.0)}
