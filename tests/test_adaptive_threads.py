"""The adaptive thread count of a library leaf (issue 32): two threads while they pay, one while
the other core is busy. The clock and the calls are faked (no timing assertions)."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import pickle
import subprocess
import sys
import time

import attrs
import numpy as np
import pytest
import torch
from support import BAR, LIBRARY_LEAVES, need_library, random_complex, reference, rel_l2, torch_threads

import trnplan
from trnplan.backends import get_backend
from trnplan.cache import PlanCache
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem
from trnplan.kernels.hostlib import occupancy as occupancy_module
from trnplan.kernels.hostlib import threads as threads_module
from trnplan.kernels.hostlib.occupancy import Occupancy
from trnplan.kernels.hostlib.threads import (
    BIG_STALL,
    EMA_WEIGHT,
    MAX_BACKOFF_S,
    MIN_BACKOFF_S,
    STALL_COST,
    STALL_MARGIN,
    AdaptiveThreads,
    adaptive,
)
from trnplan.planner import measure
from trnplan.planner.measure import SLOWER, Measurement, Timing, adaptive_pick, describe
from trnplan.planner.planner import Planner


class _Fake:
    """Two fake calls on a fake clock (seconds): each call advances the clock by the time the test
    set for that count, and records which count ran."""

    def __init__(self, t1=100e-6, t2=60e-6, room=None):
        self.now, self.times, self.ran = 0.0, {1: t1, 2: t2}, []
        self.room = room  # the run queue's answer (None: the time-only rules)

    def clock(self):
        return self.now

    def call(self, k):
        def run(x):
            self.ran.append(k)
            self.now += self.times[k]
            return (x, k)

        return run

    def leaf(self, t1=100e-6):
        leaf = adaptive(self.call(1), self.call(2), t1, 2, self.clock, room=self.room)
        leaf.warm = True  # past its first call, which is not judged (test_the_first_call_is_not_judged)
        return leaf

    def until_two(self, leaf):
        """Calls until the leaf runs two threads again: how many ran on one."""
        n = 0
        while leaf.threads_now == 1:
            leaf(0)
            n += 1
        return n


@pytest.fixture
def time_rules(monkeypatch):
    """Plans' adaptive leaves on the time-only rules: the stall these tests force (T1 of 1 µs)
    would otherwise be judged by this machine's run queue (cores free: a hiccup, no back-off)."""
    monkeypatch.setattr(threads_module, "occupancy", lambda: None)


def test_fast_two_thread_calls_stay_on_two_threads():
    f = _Fake()
    leaf = f.leaf()
    assert [leaf(i)[0] for i in range(20)] == list(range(20))  # the arguments reach the call
    assert f.ran == [2] * 20 and leaf.stalls == 0 and leaf.threads_now == 2


def test_the_first_call_is_not_judged():
    """A fresh leaf's first call is cold (its buffers' first touch, the pool waking): however slow,
    it is no stall; the second is judged."""
    f = _Fake()
    f.times[2] = 5e-3
    leaf = adaptive(f.call(1), f.call(2), 100e-6, 2, f.clock, room=None)
    leaf(0)
    assert leaf.stalls == 0 and leaf.threads_now == 2 and leaf.warm
    leaf(0)
    assert leaf.stalls == 1 and leaf.threads_now == 1 and f.ran == [2, 2]


def test_a_stall_backs_off_to_one_thread_then_probes_two_again():
    f = _Fake()
    leaf = f.leaf()
    leaf(0)
    f.times[2] = 300e-6  # the other core taken: a two-thread call stalls (3× t1: excess 200 µs × 20 = 4 ms)
    leaf(0)  # one stall after fast calls: the next call decides
    assert leaf.stalls == 0 and leaf.threads_now == 2 and leaf.suspect == pytest.approx(300e-6)
    leaf(0)  # slow again: a stall
    assert leaf.stalls == 1 and leaf.threads_now == 1
    n = f.until_two(leaf)  # MIN_BACKOFF_S of one-thread calls (the stall's worth is less)
    assert n == pytest.approx(MIN_BACKOFF_S / 100e-6, abs=1) and f.ran[3:] == [1] * n
    leaf(0)  # the probe stalls again: the back-off doubles
    assert f.ran[-1] == 2 and leaf.stalls == 2
    assert f.until_two(leaf) == pytest.approx(2 * MIN_BACKOFF_S / 100e-6, abs=1)
    f.times[2] = 60e-6  # the load gone
    leaf(0)  # a fast probe: stays on two threads, and the back-off is reset
    assert f.ran[-1] == 2 and leaf.threads_now == 2 and leaf.backoff == MIN_BACKOFF_S
    leaf(0)
    assert f.ran[-1] == 2 and leaf.stalls == 2


def test_before_a_fast_call_the_worth_takes_t2_as_t1_over_the_threads():
    """No fast two-thread call yet (t2 unknown): two threads are taken to halve t1, so a 5 ms
    stall of a 100 µs call backs off for 4.9 ms / 0.5 = 9.8 ms, under MIN_BACKOFF_S: 10 ms
    (STALL_COST × the excess, 98 ms, was the length before)."""
    f = _Fake()
    f.times[2] = 5e-3
    leaf = f.leaf()
    leaf(0)
    assert leaf._worth(5e-3 - 100e-6) == pytest.approx((5e-3 - 100e-6) / 0.5)
    assert f.until_two(leaf) * 100e-6 == pytest.approx(MIN_BACKOFF_S, abs=2e-4)
    f.times[2] = 20e-3  # a 20 ms stall: 39.8 ms, over the floor
    leaf(0)
    assert f.until_two(leaf) * 100e-6 == pytest.approx((20e-3 - 100e-6) / 0.5, abs=2e-4)


def test_after_a_fast_call_a_stall_backs_off_for_what_it_is_worth():
    """A fast two-thread call measured t2 = 60 µs (t1 = 100 µs: two threads save 40 % of the
    time): a 5 ms stall then backs off for the time whose lost savings equal it, 4.9 ms / 0.4 =
    12.25 ms, not 20 × 4.9 ms (with rare stalls the long back-off cost 1.5-1.8× the fixed call);
    where two threads save little (t2 = 97 µs: 3 %), the cap of STALL_COST × the excess holds."""
    for t2, expected in ((60e-6, (5e-3 - 100e-6) / 0.4), (97e-6, STALL_COST * (5e-3 - 100e-6))):
        f = _Fake()
        f.times[2] = t2
        leaf = f.leaf()
        leaf(0)  # fast: t2 measured
        assert leaf.t2 == pytest.approx(t2)
        f.times[2] = 5e-3
        leaf(0)  # a stall, and another: the first is no hiccup
        leaf(0)
        assert f.until_two(leaf) * 100e-6 == pytest.approx(expected, abs=2e-4)


def test_slow_calls_below_a_big_stall_back_off_only_when_their_running_mean_passes_the_margin():
    """Two-thread calls of 150 µs against t1 = 100 µs (under BIG_STALL × t1: blips, or a core
    shared in part): each moves the running mean, which starts at t2 = 60 µs, by EMA_WEIGHT of
    the gap; the leaf backs off when the mean passes STALL_MARGIN × t1 (the 7th such call), for
    what the mean's excess is worth (14.7 µs / 0.4 → 37 µs: one call), with no MIN_BACKOFF_S
    floor; the probe after it is not judged; a single blip after fast calls moves nothing."""
    f = _Fake()
    leaf = f.leaf()
    leaf(0)  # fast: t2 = 60 µs
    f.times[2] = 150e-6
    assert 150e-6 < BIG_STALL * 100e-6
    mean = 60e-6
    for k in range(1, 8):
        leaf(0)
        mean += EMA_WEIGHT * (150e-6 - mean)
        assert (leaf.stalls == 1) == (mean > STALL_MARGIN * 100e-6) == (k == 7)
    assert f.until_two(leaf) == 1 and leaf.backoff == MIN_BACKOFF_S and leaf.mean2 is None
    leaf(0)  # the probe (the pool woke): not judged
    assert leaf.stalls == 1 and leaf.mean2 is None
    f.times[2] = 60e-6
    for _ in range(5):
        leaf(0)
    f.times[2] = 190e-6  # one blip
    leaf(0)
    assert leaf.stalls == 1 and leaf.threads_now == 2


def test_a_call_over_big_stall_times_t1_is_a_stall_when_the_next_call_is_slow_too():
    """After fast calls, a call over BIG_STALL × t1 waits for the next: a fast one makes it a
    hiccup (a quiet machine's: 4-8 ms now and then against t1 0.45 ms; backing off for each cost
    10 ms of one-thread calls), a slow one (over STALL_MARGIN × t1) a stall. The probe after a
    back-off needs no second call (test_a_stall_backs_off_to_one_thread_then_probes_two_again)."""
    f = _Fake()
    leaf = f.leaf()
    leaf(0)
    f.times[2] = BIG_STALL * 100e-6 * 0.99
    leaf(0)
    assert leaf.stalls == 0 and leaf.threads_now == 2 and not leaf.suspect
    f.times[2] = BIG_STALL * 100e-6 * 1.01
    leaf(0)
    assert leaf.stalls == 0 and leaf.suspect
    f.times[2] = 60e-6
    leaf(0)  # fast: a hiccup
    assert leaf.stalls == 0 and not leaf.suspect and leaf.threads_now == 2
    f.times[2] = 5e-3
    leaf(0)
    f.times[2] = STALL_MARGIN * 100e-6 * 1.01  # slow, if below BIG_STALL: the stall confirmed
    leaf(0)
    assert leaf.stalls == 1 and leaf.threads_now == 1


def test_sparse_calls_probe_once_the_back_off_has_passed_in_wall_time():
    """A plan called rarely: the back-off is wall time only, so the call after it has passed
    probes two threads again (a back-off that also ran the calls filling its period at t1 kept a
    leaf called every few ms on one thread for ~7× its period, where most two-thread calls held
    up); a call within the period still runs on one thread."""
    f = _Fake()
    f.times[2] = 300e-6
    leaf = f.leaf()
    leaf(0)  # a stall: MIN_BACKOFF_S of wall time
    f.now += MIN_BACKOFF_S / 2
    leaf(0)  # within it: one thread
    f.now += 10.0  # ten seconds between calls
    leaf(0)  # past it: the probe, which stalls again (the back-off doubles)
    assert f.ran == [2, 1, 2] and leaf.stalls == 2 and leaf.backoff == 4 * MIN_BACKOFF_S


def test_the_back_off_is_capped():
    f = _Fake()
    f.times[2] = 300e-6
    leaf = f.leaf()
    periods = []
    for _ in range(12):
        leaf(0)  # a stalled two-thread call (the first, then each probe)
        periods.append(f.until_two(leaf) * 100e-6)
    assert periods[:3] == pytest.approx([MIN_BACKOFF_S, 2 * MIN_BACKOFF_S, 4 * MIN_BACKOFF_S], abs=2e-4)
    assert max(periods) == pytest.approx(MAX_BACKOFF_S, abs=2e-4) and periods[-1] == pytest.approx(MAX_BACKOFF_S,
                                                                                                     abs=2e-4)


def test_t1_follows_faster_one_thread_calls():
    """A stale or slow t1 would let stalls pass as fast calls: t1 is lowered to the fastest
    one-thread call seen, and stalls are judged against it."""
    f = _Fake()
    leaf = f.leaf()
    f.times[2] = 300e-6  # a big stall against t1 = 100 µs
    leaf(0)
    f.times[1] = 50e-6  # the one-thread calls measure faster than the record's t1: t1 follows them
    f.until_two(leaf)
    assert leaf.t1 == pytest.approx(50e-6)
    leaf(0)  # the probe (not judged unless big): 300 > 2 × 50, a stall against the lower t1
    assert leaf.stalls == 2


def test_an_error_in_the_call_propagates_and_leaves_a_usable_leaf():
    f = _Fake()

    def boom(x):
        raise KeyError("lib")

    leaf = AdaptiveThreads(f.call(1), boom, 100e-6, 2, f.clock)
    with pytest.raises(KeyError):
        leaf(0)
    leaf.many = f.call(2)
    assert leaf(3) == (3, 2)


@pytest.mark.parametrize("t1", [0.0, -1.0, float("nan")])
def test_a_bad_one_thread_time_is_refused(t1):
    with pytest.raises(ValueError, match="one-thread time t1 must be > 0"):
        adaptive(print, print, t1)


# ---------------------------------------------------------------- the leaf in a plan (adapt=T1)


@pytest.mark.parametrize("solver", list(LIBRARY_LEAVES))
@pytest.mark.parametrize("inverse", [False, True])
def test_an_adaptive_leaf_matches_the_float64_reference_at_both_counts(solver, inverse, time_rules):
    """adapt=T1 in the tree: the call runs at two threads, and at one after a stall (forced here
    by a T1 of 1 µs, which every call exceeds; the back-off then outlasts the next calls); both
    within the fp32 bar, and the plan keeps one leaf state across calls."""
    need_library(solver)
    n, batch = 384, 6
    x = random_complex((batch, n), seed=5).astype(np.complex64)
    ref = reference(x.astype(np.complex128), inverse)
    with torch_threads(2):
        plan = trnplan.plan_many((n,), batch=batch, kind="c2c", inverse=inverse,
                                 strategy=f"({solver} {n} threads=2 adapt=1)")
        assert plan.tree.param("adapt") == 1 and plan.tree.param("threads") == 2
        # 2 threads (the first call, not judged), 2 (a stall), then 1, 1
        ys = [plan.execute(torch.from_numpy(x)) for _ in range(4)]
        assert torch.get_num_threads() == 2
    leaf = plan._native  # the root's library call, made once for the plan
    assert isinstance(leaf, AdaptiveThreads) and leaf.stalls == 1 and leaf.threads_now == 1
    for y in ys:
        assert rel_l2(y, ref) <= BAR["fp32"]


def test_a_native_adaptive_leaf_pickles_with_a_fresh_state(time_rules):
    with torch_threads(2):
        plan = trnplan.plan_many((256,), batch=4, strategy="(native 256 adapt=1 threads=2)")
        x = torch.from_numpy(random_complex((4, 256), seed=1).astype(np.complex64))
        leaf = plan.module.root
        for _ in range(2):  # the first call (not judged), then a stall (T1 = 1 µs): one thread next
            leaf(x.real.contiguous(), x.imag.contiguous())
        assert leaf._adaptive.stalls == 1 and leaf._adaptive.threads_now == 1
        again = pickle.loads(pickle.dumps(plan.module)).root
        assert isinstance(again._adaptive, AdaptiveThreads) and again._adaptive.stalls == 0
        assert not again._adaptive.warm
        re, im = again(x.real.contiguous(), x.imag.contiguous())
    ref = reference(x.numpy().astype(np.complex128), False)
    assert rel_l2(torch.complex(re, im), ref) <= BAR["fp32"]


def test_adapt_needs_a_multi_thread_count():
    with pytest.raises(PlanningError, match=r"option adapt=T1 .* needs threads=2 or more and T1 ≥ 1, got threads=1"):
        trnplan.plan_many((64,), batch=2, strategy="(native 64 threads=1 adapt=50)")
    with pytest.raises(PlanningError, match=r"needs threads=2 or more and T1 ≥ 1, got threads=None, adapt=50"):
        trnplan.plan_many((64,), batch=2, strategy="(native 64 adapt=50)")
    with pytest.raises(PlanningError, match=r"got threads=2, adapt=0"):
        trnplan.plan_many((64,), batch=2, strategy="(native 64 threads=2 adapt=0)")


# ---------------------------------------------------------------- measured planning's pick


def _timing(tree, us):
    return Timing(tree=tree, solver=tree[1:].split()[0], predicted_us=us, error=1e-7, measured_us=us,
                  measured_error=2e-8, verdict=SLOWER, vs_default=1.0, noise=0.01)


def _pick_case(one_out, many_out, one_s=100e-6, many_s=60e-6, best_tree="(native 1024 threads=1)"):
    with torch_threads(2):
        trees = Planner(get_backend("cpu")).enumerate(Problem.create((1024,), 64))
        timings = [_timing("(native 1024)", many_s * 1e6), _timing("(native 1024 threads=1)", one_s * 1e6)]
        best = next(t for t in timings if t.tree == best_tree)
        fns = {"(native 1024)": (lambda: many_out, 1), "(native 1024 threads=1)": (lambda: one_out, 1)}
        rounds = {"(native 1024)": [many_s] * 9, "(native 1024 threads=1)": [one_s] * 9}
        return adaptive_pick(best, timings, trees, fns, rounds)


def test_a_one_thread_pick_whose_twin_wins_quietly_becomes_adaptive():
    y = torch.arange(8.0)
    node, timing, figures = _pick_case((y, -y), (y.clone(), -y))
    assert str(node) == "(native 1024 adapt=100 threads=2)" and node.param("adapt") == 100
    assert timing.tree == str(node) and timing.measured_us == pytest.approx(60.0)
    assert figures == ("(native 1024 adapt=100 threads=2)", "(native 1024 threads=1)", pytest.approx(100.0),
                       pytest.approx(60.0), True)


def test_no_adaptive_leaf_where_the_outputs_differ_bitwise():
    y = torch.arange(8.0)
    z = y.clone()
    z[3] = torch.nextafter(z[3], torch.tensor(99.0))  # one ulp
    node, timing, figures = _pick_case(y, z)
    assert node is None and timing is None and figures[4] is False
    assert "outputs differ bitwise, so no adaptive count" in measure.adaptive_words(figures)
    # -0.0 and 0.0 compare equal as numbers, not as bits
    assert _pick_case(torch.zeros(2), -torch.zeros(2))[0] is None
    c = torch.ones(3, dtype=torch.complex64)  # complex outputs compared bitwise too
    assert _pick_case(c, c.clone())[0] is not None and _pick_case(c, c * (1 + 1e-7j))[0] is None


def test_no_adaptive_leaf_without_a_quiet_win():
    y = torch.arange(4.0)
    assert _pick_case(y, y, many_s=100e-6 / STALL_MARGIN * 1.01) is None  # not by the margin: one thread stays
    assert _pick_case(y, y, many_s=100e-6 / STALL_MARGIN * 0.99) is not None  # by the margin: adaptive
    assert _pick_case(y, y, many_s=100e-6 / STALL_MARGIN * 1.01, best_tree="(native 1024)") is None


def test_a_multi_thread_pick_becomes_adaptive_against_its_one_thread_twin():
    """A two-thread pick that held up in the one short load burst can still stall later (pyFFTW
    4×16385 at two threads: 1.95× the best library in a loaded bench run): where its one-thread
    twin was timed, pays less by the margin and gives the same bits, the pick runs as the adaptive
    leaf; where the bits differ, the fixed pick stays, with no record of an adaptive count."""
    y = torch.arange(4.0)
    node, timing, figures = _pick_case(y, y.clone(), best_tree="(native 1024)")
    assert str(node) == "(native 1024 adapt=100 threads=2)" and timing.tree == str(node)
    assert figures == ("(native 1024 adapt=100 threads=2)", "(native 1024 threads=1)", pytest.approx(100.0),
                       pytest.approx(60.0), True)
    z = torch.nextafter(y, torch.tensor(99.0))
    assert _pick_case(y, z, best_tree="(native 1024)") is None


def test_the_adaptive_figures_survive_the_record_and_are_explained():
    t = _timing("(native 1024 adapt=100 threads=2)", 60.0)
    t = Timing(**{**t.to_dict(), "verdict": "fastest"})
    figures = ("(native 1024 adapt=100 threads=2)", "(native 1024 threads=1)", 100.0, 60.0, True)
    record = Measurement("measure", (t,), 3, 6, 5.0, 0.1, None, "(native 1024)", adaptive=figures)
    again = Measurement.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record
    line = next(x for x in describe(again) if "threads: adaptive" in x)
    assert "threads: adaptive (2 while they pay: 60 µs; 1 under load: 100 µs;" in line
    old = record.to_dict()
    del old["adaptive"]  # a record from before the field
    assert Measurement.from_dict(old).adaptive == ()


def test_a_measured_adaptive_pick_is_stored_and_rebuilt_on_a_wisdom_hit(tmp_path, monkeypatch):
    """The load rules keep the one-thread twin (robust_pick faked to pick it), the twin's
    multi-thread call won the quiet rounds (the margin faked to 0): the plan runs the adaptive leaf, its
    record says so, and a wisdom hit builds the same leaf again."""
    real_pick = measure.robust_pick

    def one_thread(timings, *a, **k):
        p = real_pick(timings, *a, **k)
        # and no contenders: _adaptive_first would otherwise rank them, every twin "paying" here
        return attrs.evolve(p, best=next(t for t in timings if t.tree == "(native 256 threads=1)"), checks=())

    monkeypatch.setattr(measure, "robust_pick", one_thread)
    monkeypatch.setattr(measure, "STALL_MARGIN", 0.0)  # the twin's quiet win, whatever the rounds measured
    monkeypatch.setattr(measure, "background_load", lambda: contextlib.nullcontext(False))
    x = random_complex((4, 256), seed=2).astype(np.complex64)
    cache = PlanCache(tmp_path)
    with torch_threads(2):
        plan = trnplan.plan_many(256, batch=4, effort="measure", cache=cache)
        tree = str(plan.tree)
        assert tree.startswith("(native 256 adapt=") and tree.endswith(" threads=2)") and isinstance(plan._native, AdaptiveThreads)
        m = plan.provenance.measurement
        assert m.winner.tree == tree and m.adaptive[0] == tree and m.adaptive[4] is True
        assert "threads: adaptive (2 while they pay" in plan.explain(full=True)
        trnplan.clear_plan_cache()
        again = trnplan.plan_many(256, batch=4, effort="measure", cache=cache)
        assert again.provenance.origin == "wisdom hit" and str(again.tree) == tree
        assert isinstance(again._native, AdaptiveThreads)
        y = again.execute(torch.from_numpy(x))
    assert rel_l2(y, reference(x.astype(np.complex128), False)) <= BAR["fp32"]


def _first_case(mkl_same=True, mkl_loaded_us=906.0, mkl_bursts=(0.8, 0.8, 0.8)):
    """_adaptive_first on the loaded 16×4099 case (figures from a run of this machine): scipy at
    one worker is the robust pick (708 µs, 780 under load) and its two-worker twin stalled in every
    round (3.9 ms); mkl_fft at one thread (798 µs, 906 under load) has a two-thread twin at 400 µs."""
    need_library("scipy")
    need_library("mkl-fft")
    us = {"(scipy 1024 threads=1)": 708.0, "(scipy 1024)": 3900.0, "(mkl-fft 1024 threads=1)": 798.0,
          "(mkl-fft 1024)": 400.0}
    y = torch.arange(8.0)
    out = {"(scipy 1024 threads=1)": y, "(scipy 1024)": y.clone(), "(mkl-fft 1024 threads=1)": y + 1,
           "(mkl-fft 1024)": (y + 1) if mkl_same else torch.nextafter(y + 1, torch.tensor(99.0))}
    with torch_threads(2):
        trees = Planner(get_backend("cpu")).enumerate(Problem.create((1024,), 64))
        timings = [_timing(t, v) for t, v in us.items()]
        fns = {t: (lambda o=out[t]: o, 1) for t in us}
        rounds = {t: [v * 1e-6] * 9 for t, v in us.items()}
        checks = (("(scipy 1024 threads=1)", (0.7, 0.7, 0.7), 0.05, 0.8, 708.0, 780.0),
                  ("(mkl-fft 1024 threads=1)", mkl_bursts, 0.05, 0.9, 798.0, mkl_loaded_us))
        pick = measure._Pick(timings[0], "the rule", checks=checks)
        return measure._adaptive_first(pick, timings, trees, fns, rounds)


def test_the_one_thread_leaf_is_ranked_by_its_adaptive_form():
    """A contender whose adaptive form is nearer the fastest in its worse condition (its twin's
    400 µs quiet, the fastest; its own 906 µs under load, 1.16× scipy's 780) than the pick is (708 µs
    quiet, 1.77× mkl's adaptive form) goes first, as an adaptive leaf."""
    adapt, pick = _first_case()
    assert str(adapt[0]) == "(mkl-fft 1024 adapt=798 threads=2)" and adapt[2][4] is True
    assert pick.best.tree == "(mkl-fft 1024 threads=1)"
    assert pick.rule.startswith("the rule; then (mkl-fft 1024 threads=1) instead, as an adaptive leaf: 1.00× the "
                                "fastest quiet (400 µs) and 1.16× under load (906 µs), at worst 1.16×, against 1.77×")


@pytest.mark.parametrize("case", [{"mkl_same": False}, {"mkl_loaded_us": 1500.0}, {"mkl_bursts": (0.8, 1.01, 0.8)}],
                         ids=["outputs differ", "slower under load", "not confirmed"])
def test_the_robust_pick_stands_where_the_adaptive_contender_does_not_hold(case):
    """Outputs not bitwise identical (no adaptive leaf), a worse condition not better (1500 µs
    under load, 1.92× scipy's 780, against scipy's 708 µs quiet, 1.77× mkl's 400), or a contender
    not confirmed in every burst: the robust pick and its rule stay (its own twin stalled, so no
    adaptive count for it either)."""
    adapt, pick = _first_case(**case)
    assert adapt is None and pick.best.tree == "(scipy 1024 threads=1)" and pick.rule == "the rule"


def _contest(us: dict, loaded_us: dict, pick_tree: str, checks=(), busy=None, same=True, samples=None):
    """_adaptive_first with every tree of ``us`` timed in the rounds (µs), the loaded burst faked
    from ``loaded_us`` (what _loaded_times would measure under a spinner), ``pick_tree`` the
    robust pick. Returns (adapt, pick, the trees the burst was asked for)."""
    need_library("pyfftw")
    need_library("scipy")
    y = torch.arange(8.0)
    with torch_threads(2):
        trees = Planner(get_backend("cpu")).enumerate(Problem.create((1024,), 64))
        timings = [_timing(t, v) for t, v in us.items()]
        multi = {"(native 1024)", "(pyfftw 1024 threads=2)", "(scipy 1024)"}
        fns = {t: (lambda t=t: y if same or t not in multi else y + 1, 1) for t in us}
        rounds = {t: [v * 1e-6] * 9 for t, v in us.items()} | {t: [v * 1e-6 for v in vs] for t, vs in
                                                               (samples or {}).items()}
        asked = []

        def fake(runners, sync):
            names = [next(t for t, f in fns.items() if f is r) for r in runners]
            asked.extend(names)
            return [loaded_us[t] for t in names]

        real = measure._loaded_times
        measure._loaded_times = fake
        try:
            pick = measure._Pick(next(t for t in timings if t.tree == pick_tree), "the rule", checks=checks, busy=busy)
            adapt, pick = measure._adaptive_first(pick, timings, trees, fns, rounds, sync=lambda: None)
        finally:
            measure._loaded_times = real
    return adapt, pick, asked


#: 16×4099 as a quiet run of bench/measure_busy.py measured it (2026-11-27): torch.fft at two
#: threads kept as the default (620 µs quiet, ~8 ms under load, seen in the load burst of the
#: two-thread pyFFTW contender, which lost there), pyFFTW's two threads 410 µs quiet
_QUIET_4099 = {"(native 1024)": 620.0, "(native 1024 threads=1)": 950.0, "(pyfftw 1024)": 818.0,
               "(pyfftw 1024 threads=2)": 410.0, "(scipy 1024 threads=1)": 700.0, "(scipy 1024)": 690.0}
_LOADED_4099 = {"(native 1024)": 8000.0, "(native 1024 threads=1)": 950.0, "(pyfftw 1024)": 860.0,
                "(scipy 1024 threads=1)": 715.0}
_LOST = (("(pyfftw 1024 threads=2)", (0.7, 0.7, 0.7), 0.05, 0.99, 410.0, 7980.0),)


def test_a_one_thread_leaf_that_was_no_contender_wins_as_an_adaptive_leaf_over_the_pick():
    """Slower than the default on a quiet core, pyFFTW at one thread was never a contender; as an
    adaptive leaf it is the fastest quiet (its twin's 410 µs) and 1.20× scipy's 715 µs under load,
    against the kept default's adaptive form at 1.51× quiet (620 µs) and 1.33× under load: there
    the default's adaptive leaf runs its one-thread twin (950 µs), not its stalling two-thread
    call (8 ms). pyFFTW replaces the pick, and the rule says why. One burst under load timed the
    pick, its one-thread twin and the fastest one-thread leaves with a two-thread twin, all
    together."""
    adapt, pick, asked = _contest(_QUIET_4099, _LOADED_4099, "(native 1024)", checks=_LOST)
    assert str(adapt[0]) == "(pyfftw 1024 adapt=818 threads=2)" and pick.best.tree == "(pyfftw 1024)"
    assert asked == ["(native 1024)", "(native 1024 threads=1)", "(pyfftw 1024)", "(scipy 1024 threads=1)"]
    assert ("then (pyfftw 1024) instead, as an adaptive leaf: 1.00× the fastest quiet (410 µs) and 1.20× under "
            "load (860 µs), at worst 1.20×") in pick.rule
    assert ("against 1.51× for (native 1024) (1.51× the fastest quiet (620 µs) and 1.33× under load (950 µs), at "
            "one thread, as an adaptive leaf)") in pick.rule


def test_without_the_adaptive_form_the_fixed_one_thread_leaf_that_holds_up_under_load_wins():
    """Outputs of every two-thread twin differ bitwise: no adaptive forms; scipy at one worker
    (1.13× the default's 620 µs quiet, the fastest under load) still beats the stalling default
    (8 ms under load) and pyFFTW at one thread (818 µs, 1.32×), and runs as the fixed leaf."""
    adapt, pick, _ = _contest(_QUIET_4099, _LOADED_4099, "(native 1024)", checks=_LOST, same=False)
    assert pick.best.tree == "(scipy 1024 threads=1)" and (adapt is None or adapt[0] is None)
    assert "then (scipy 1024 threads=1) instead, at one thread: 1.13× the fastest quiet (700 µs)" in pick.rule


def test_the_contest_scores_each_leaf_by_the_condition_it_does_worse_in():
    """16×4099 in quiet runs of bench/measure_busy.py (2026-11-27): the default torch.fft at two
    threads held up in the load burst (640 µs) and pyFFTW's adaptive leaf did not (its twin's
    410 µs quiet, 860 under load). By the mean of the two (630 against 635 µs) the default stood,
    and the bench's quiet rounds ran it 1.36-1.38× pyFFTW's two threads; by the worse condition the
    default is 1.51× the fastest (quiet) and pyFFTW 1.34× (under load), so pyFFTW's adaptive leaf
    is the pick."""
    adapt, pick, _ = _contest(_QUIET_4099, {**_LOADED_4099, "(native 1024)": 640.0}, "(native 1024)", checks=_LOST)
    assert str(adapt[0]) == "(pyfftw 1024 adapt=818 threads=2)" and pick.best.tree == "(pyfftw 1024)"
    assert "1.34× under load (860 µs), at worst 1.34×, against 1.51× for (native 1024)" in pick.rule


def test_where_the_worse_conditions_tie_within_the_noise_the_faster_quiet_leaf_goes_first():
    """16×4099 in a quiet run of bench/measure_busy.py (2026-11-27): scipy at one worker ran 545 µs
    under load, so torch.fft's two threads (580 µs quiet, 600 under load) and pyFFTW's adaptive leaf
    (its twin's 410 quiet, 780 under load) are both ~1.4× the fastest in their worse condition, and
    the default stood where the bench then ran it 1.38× pyFFTW's two threads. Within the noise
    floor of each other, the faster quiet goes first."""
    us = {**_QUIET_4099, "(native 1024)": 580.0, "(scipy 1024)": 900.0, "(scipy 1024 threads=1)": 900.0}
    loaded = {**_LOADED_4099, "(native 1024)": 600.0, "(pyfftw 1024)": 780.0, "(scipy 1024 threads=1)": 545.0}
    adapt, pick, _ = _contest(us, loaded, "(native 1024)", checks=_LOST)
    assert str(adapt[0]) == "(pyfftw 1024 adapt=818 threads=2)" and pick.best.tree == "(pyfftw 1024)"
    assert "at worst 1.43×, against 1.41× for (native 1024)" in pick.rule
    assert pick.rule.endswith(": as near at worst, within the noise, and faster quiet")


@pytest.mark.parametrize("holds", ["(native 1024)", "(native 1024 threads=1)"])
def test_a_pick_that_holds_up_under_load_stands(holds):
    """The default's two-thread call, or its one-thread twin, measured 640 µs under load (the
    other 8 ms or 950 µs): its adaptive leaf keeps two threads under a load that does not stall
    them and runs the twin under one that does. With pyFFTW's two threads at 580 µs quiet the
    default is 1.07× the fastest quiet and the fastest under load, pyFFTW's adaptive leaf 1.34×
    under load: the pick stands, as the adaptive leaf of its one-thread twin
    (test_a_multi_thread_pick_becomes_adaptive_against_its_one_thread_twin)."""
    loaded = {**_LOADED_4099, holds: 640.0}
    adapt, pick, _ = _contest({**_QUIET_4099, "(pyfftw 1024 threads=2)": 580.0}, loaded, "(native 1024)",
                              checks=_LOST)
    assert pick.best.tree == "(native 1024)" and pick.rule == "the rule"
    assert str(adapt[0]) == "(native 1024 adapt=950 threads=2)"


def test_a_twin_that_stalled_in_the_rounds_does_not_make_its_adaptive_form_look_slow():
    """The one-thread default's two-thread twin ran 310 µs in its least disturbed rounds and
    stalled in most (median 4654 µs, a neighbour's load): the adaptive form runs whichever count
    is faster, so its quiet time is the faster median, its own 620 µs (1.07× pyFFTW's adaptive
    leaf, whose two threads ran 580 µs; 1.34× under load) — not the twin's 4654, which made
    scipy's adaptive leaf the pick (3.26× torch.fft in bench/measure_busy.py)."""
    us = {**_QUIET_4099, "(native 1024 threads=1)": 620.0, "(pyfftw 1024 threads=2)": 580.0}
    stalled = {"(native 1024)": [300.0, 310.0, 320.0] + [4654.0] * 6}
    loaded = {**_LOADED_4099, "(native 1024 threads=1)": 640.0, "(scipy 1024 threads=1)": 715.0}
    adapt, pick, _ = _contest(us, loaded, "(native 1024 threads=1)", samples=stalled)
    assert pick.best.tree == "(native 1024 threads=1)" and pick.rule == "the rule"
    assert str(adapt[0]) == "(native 1024 adapt=620 threads=2)"


def test_a_machine_too_busy_to_measure_keeps_the_default_at_an_adaptive_count():
    """The busy verdict keeps the default, torch.fft: at two threads it runs as the adaptive leaf
    of its one-thread twin (bitwise the same outputs), and no other leaf is considered or timed."""
    adapt, pick, asked = _contest(_QUIET_4099, _LOADED_4099, "(native 1024)", busy=0.3)
    assert str(adapt[0]) == "(native 1024 adapt=950 threads=2)" and pick.best.tree == "(native 1024 threads=1)"
    assert asked == [] and pick.busy == 0.3 and "the rule; run as an adaptive leaf (threads: adaptive" in pick.rule
    adapt, pick, _ = _contest(_QUIET_4099, _LOADED_4099, "(native 1024)", busy=0.3, same=False)
    assert adapt is None and pick.best.tree == "(native 1024)" and pick.rule == "the rule"


# ---------------------------------------------------------------- the run queue at the decisions


class _Room:
    """A fake run queue: whether the cores are free, and how often it was asked."""

    def __init__(self, free=True):
        self.free, self.asked = free, 0

    def __call__(self, threads):
        assert threads == 2
        self.asked += 1
        return self.free


def test_with_the_cores_free_a_slow_call_is_a_hiccup_and_fast_calls_never_ask():
    room = _Room(free=True)
    f = _Fake(room=room)
    leaf = f.leaf()
    for _ in range(10):
        leaf(0)
    assert room.asked == 0  # fast calls make no decision
    f.times[2] = 5e-3  # 50× t1, twice in a row: under the time-only rules a stall
    leaf(0)
    leaf(0)
    f.times[2] = 60e-6
    leaf(0)
    assert leaf.stalls == 0 and leaf.blips == 2 and room.asked == 2 and f.ran == [2] * 13


def test_with_a_thread_of_another_process_runnable_the_next_call_decides():
    """A big stall with the core taken waits for the next call, as under the time-only rules: a
    slow one backs off, a fast one makes it a hiccup (a thread of no process of ours runnable after
    a quiet machine's hiccup took a fifth of them for stalls when one call decided)."""
    room = _Room(free=False)
    f = _Fake(room=room)
    leaf = f.leaf()
    leaf(0)
    f.times[2] = 300e-6
    leaf(0)  # the run queue says a core is taken: the next call decides
    assert leaf.stalls == 0 and leaf.threads_now == 2 and leaf.suspect == pytest.approx(300e-6)
    leaf(0)  # slow again: a stall
    assert leaf.stalls == 1 and leaf.threads_now == 1 and leaf.suspect == 0.0 and f.ran == [2, 2, 2]
    hiccup = _Fake(room=_Room(free=False))
    leaf = hiccup.leaf()
    leaf(0)
    hiccup.times[2] = 300e-6
    leaf(0)
    hiccup.times[2] = 60e-6
    leaf(0)  # fast: the big stall was a hiccup
    assert leaf.stalls == 0 and leaf.threads_now == 2 and leaf.suspect == 0.0


def test_a_slow_run_backs_off_for_its_worth_without_asking():
    """A run of two-thread calls whose mean passes STALL_MARGIN × t1 (none over BIG_STALL × t1)
    backs off for what it is worth, by the time-only rules: the run queue is not asked (the twin
    may simply not pay here)."""
    room = _Room(free=True)
    f = _Fake(room=room)
    leaf = f.leaf()
    leaf(0)  # t2 = 60 µs
    f.times[2] = 150e-6  # 1.5× t1, under BIG_STALL: only the running mean moves
    for _ in range(40):
        leaf(0)
    assert leaf.stalls >= 1 and room.asked == 0 and f.ran.count(1) < f.ran.count(2)


def test_a_back_off_ends_early_once_the_run_queue_shows_the_cores_free():
    """During a back-off the run queue is asked every MIN_BACKOFF_S: while a core is taken the
    back-off runs on (and its probe still runs at its end: another process runnable is not a
    stalled call); once the cores are free it ends at once, long before its doubled period."""
    per = round(MIN_BACKOFF_S / 100e-6)  # one-thread calls of 100 µs in MIN_BACKOFF_S
    room = _Room(free=False)
    f = _Fake(room=room)
    leaf = f.leaf()
    leaf(0)
    f.times[2] = 5e-3
    leaf(0)  # a big stall, the core taken: the next call decides
    leaf(0)  # slow again: a stall, a back-off of MIN_BACKOFF_S
    n = f.until_two(leaf)
    assert leaf.stalls == 1 and leaf.early == 0 and room.asked >= 1 + (n - 1) // per
    leaf(0)  # its probe still runs, and stalls: the back-off doubles
    planned_end = leaf.until
    assert f.ran[-1] == 2 and leaf.stalls == 2 and planned_end - f.now > 2 * MIN_BACKOFF_S
    for _ in range(per + 1):  # the first MIN_BACKOFF_S of it
        leaf(0)
    room.free = True  # the load gone
    f.times[2] = 60e-6
    for _ in range(per + 1):
        leaf(0)
        if f.ran[-1] == 2:
            break
    assert f.ran[-1] == 2 and leaf.early == 1 and leaf.threads_now == 2
    assert f.now < planned_end  # before the doubled back-off's end


def test_an_unreadable_run_queue_leaves_the_time_only_rules():
    """/proc unreadable at a decision: the user's call does not fail, and the time-only rules
    decide that call (a lone big stall waits for the next call)."""
    def broken(threads):
        raise OSError("no /proc")

    f = _Fake(room=broken)
    leaf = f.leaf()
    leaf(0)
    f.times[2] = 5e-3
    assert leaf(0) == (0, 2)
    assert leaf.stalls == 0 and leaf.suspect == pytest.approx(5e-3) and leaf.blips == 0


def _fake_proc(tmp_path, running, states):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "loadavg").write_text(f"0.50 0.40 0.30 {running}/120 4242\n")
    for tid, state in states.items():
        (tmp_path / "task" / str(tid)).mkdir(parents=True)
        (tmp_path / "task" / str(tid) / "stat").write_bytes(f"{tid} (a (b) c) {state} 1 2 3".encode())
    return Occupancy(2, str(tmp_path / "loadavg"), str(tmp_path / "task"))


def test_the_run_queue_less_this_process_s_own_running_threads(tmp_path):
    occ = _fake_proc(tmp_path, 3, {10: "R", 11: "S", 12: "R"})  # "(a (b) c)": the state after the last ")"
    assert occ.own() == 2 and occ.others() == 1 and not occ.room(2) and occ.room(1)
    quiet = _fake_proc(tmp_path / "q", 2, {10: "R", 11: "R"})
    assert quiet.others() == 0 and quiet.room(2)


@pytest.mark.parametrize("why", ["affinity", "quota"])
def test_no_run_queue_where_it_does_not_describe_this_process_s_cores(tmp_path, monkeypatch, why):
    monkeypatch.setattr(occupancy_module.os, "cpu_count", lambda: 2)
    if why == "affinity":
        monkeypatch.setattr(occupancy_module.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    else:
        monkeypatch.setattr(occupancy_module.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
        (tmp_path / "cpu.max").write_text("50000 100000\n")
        monkeypatch.setattr(occupancy_module, "_CPU_MAX", (str(tmp_path / "cpu.max"),))
    assert occupancy_module._probe() is None


def test_a_spinning_process_is_counted(tmp_path):
    """The real /proc: a process spinning in a loop is runnable whenever it is read."""
    if occupancy_module._probe() is None:
        pytest.skip("this machine's run queue does not describe this process's cores")
    occ = Occupancy(2)
    spin = subprocess.Popen([sys.executable, "-S", "-c", measure.SPINNER])  # ends with this process too
    try:
        seen, deadline = [], time.monotonic() + 10
        while time.monotonic() < deadline and seen[-1:] != [True]:  # its exec done, it spins
            seen.append(occ.others() >= 1)
            time.sleep(0.01)
        assert seen[-1], f"the spinner never counted in {len(seen)} readings"
    finally:
        spin.kill()
        spin.wait()


class _NoShortPath(AdaptiveThreads):
    """The leaf with its short path for steady fast calls switched off: every call takes the full rules."""

    def __setattr__(self, name, value):
        object.__setattr__(self, name, False if name == "steady" else value)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("room", [None, True, False])
def test_the_short_path_decides_as_the_full_rules(seed, room):
    """A leaf with the short path (steady fast calls) and one without, driven by the same calls on
    fake clocks (quiet calls, blips, big stalls, loaded stretches; the run queue absent, free or
    taken): the same count for every call, the same stalls, back-offs and state."""
    rng = np.random.default_rng(seed)
    t1 = 100e-6
    durations = []
    for _ in range(60):  # stretches of quiet calls and of load, each with its own two-thread times
        kind = rng.choice(["quiet", "blips", "loaded"])
        scale = {"quiet": (0.55, 0.65), "blips": (0.55, 1.6), "loaded": (1.2, 40.0)}[kind]
        durations += [(t1 * rng.uniform(0.98, 1.05), t1 * rng.uniform(*scale)) for _ in range(rng.integers(5, 60))]
    runs, shortcuts = [], [0]
    for cls in (functools.partial(_Counting, counter=shortcuts), _NoShortPath):
        now, ran, i = [0.0], [], [0]

        def call(k, now=now, ran=ran, i=i):
            def run(x):
                ran.append(k)
                now[0] += durations[i[0]][k - 1]
                return x
            return run

        leaf = cls(call(1), call(2), t1, 2, lambda now=now: now[0], None if room is None else (lambda k: room))
        for i[0] in range(len(durations)):
            leaf(0)
        state = {k: getattr(leaf, k) for k in ("t1", "t2", "until", "backoff", "stalls", "blips", "early", "mean2",
                                               "suspect", "cold", "warm")}
        runs.append((ran, state))
    (fast_ran, fast_state), (full_ran, full_state) = runs
    assert fast_ran == full_ran
    for k in fast_state:
        a, b = fast_state[k], full_state[k]
        assert a == b or (isinstance(a, float) and b is not None and math.isclose(a, b, rel_tol=1e-12)), (k, a, b)
    # the sequence exercised both counts and the short path (the count of calls it served)
    assert {1, 2} <= set(fast_ran) and fast_state["stalls"] > 0 and shortcuts[0] >= 50


class _Counting(AdaptiveThreads):
    """The leaf as it is, counting the calls its short path served (``steady`` read as true there)."""

    def __init__(self, *args, counter, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "_counter", counter)

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        if name == "steady" and value:
            object.__getattribute__(self, "_counter")[0] += 1
        return value
