"""The adaptive thread count of a library leaf (issue 32): two threads while they pay, one while
the other core is busy. The clock and the calls are faked (no timing assertions)."""

from __future__ import annotations

import contextlib
import json
import pickle

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
from trnplan.kernels.hostlib.threads import (
    BIG_STALL,
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

    def __init__(self, t1=100e-6, t2=60e-6):
        self.now, self.times, self.ran = 0.0, {1: t1, 2: t2}, []

    def clock(self):
        return self.now

    def call(self, k):
        def run(x):
            self.ran.append(k)
            self.now += self.times[k]
            return (x, k)

        return run

    def leaf(self, t1=100e-6):
        return adaptive(self.call(1), self.call(2), t1, 2, self.clock)

    def until_two(self, leaf):
        """Calls until the leaf runs two threads again: how many ran on one."""
        n = 0
        while leaf.threads_now == 1:
            leaf(0)
            n += 1
        return n


def test_fast_two_thread_calls_stay_on_two_threads():
    f = _Fake()
    leaf = f.leaf()
    assert [leaf(i)[0] for i in range(20)] == list(range(20))  # the arguments reach the call
    assert f.ran == [2] * 20 and leaf.stalls == 0 and leaf.threads_now == 2


def test_a_stall_backs_off_to_one_thread_then_probes_two_again():
    f = _Fake()
    leaf = f.leaf()
    leaf(0)
    f.times[2] = 300e-6  # the other core taken: a two-thread call stalls (3× t1: excess 200 µs × 20 = 4 ms)
    leaf(0)
    assert leaf.stalls == 1 and leaf.threads_now == 1
    n = f.until_two(leaf)  # MIN_BACKOFF_S of one-thread calls (the stall's 4 ms cost is less)
    assert n == pytest.approx(MIN_BACKOFF_S / 100e-6, abs=1) and f.ran[2:] == [1] * n
    leaf(0)  # the probe stalls again: the back-off doubles
    assert f.ran[-1] == 2 and leaf.stalls == 2
    assert f.until_two(leaf) == pytest.approx(2 * MIN_BACKOFF_S / 100e-6, abs=1)
    f.times[2] = 60e-6  # the load gone
    leaf(0)  # a fast probe: stays on two threads, and the back-off is reset
    assert f.ran[-1] == 2 and leaf.threads_now == 2 and leaf.backoff == MIN_BACKOFF_S
    leaf(0)
    assert f.ran[-1] == 2 and leaf.stalls == 2


def test_a_costly_stall_backs_off_for_at_least_its_cost_times_stall_cost():
    """Before any fast two-thread call (nothing says what two threads save): STALL_COST × the excess."""
    f = _Fake()
    f.times[2] = 5e-3  # a 5 ms stall of a 100 µs call: 4.9 ms excess × 20 ≈ 98 ms at one thread
    leaf = f.leaf()
    leaf(0)
    n = f.until_two(leaf)
    assert n * 100e-6 == pytest.approx(STALL_COST * (5e-3 - 100e-6), abs=2e-4)


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
        leaf(0)  # a stall
        assert f.until_two(leaf) * 100e-6 == pytest.approx(expected, abs=2e-4)


def test_a_small_stall_backs_off_for_what_it_is_worth_without_the_floor():
    """A two-thread call of 150 µs against t1 = 100 µs (under BIG_STALL × t1: noise or another
    pool waking, not a core held for a scheduler slice): the 50 µs excess over the 40 % two
    threads save is worth 125 µs, two calls at one thread, not MIN_BACKOFF_S (100 calls); the
    doubling is left as it was, so a big stall next still backs off for MIN_BACKOFF_S."""
    f = _Fake()
    leaf = f.leaf()
    leaf(0)  # fast: t2 = 60 µs
    f.times[2] = 150e-6
    assert 150e-6 < BIG_STALL * 100e-6
    leaf(0)
    assert leaf.stalls == 1 and f.until_two(leaf) == 2 and leaf.backoff == MIN_BACKOFF_S
    f.times[2] = BIG_STALL * 100e-6 * 1.5  # a big stall (excess 200 µs, worth 500 µs): the floor
    leaf(0)
    assert leaf.stalls == 2 and f.until_two(leaf) == pytest.approx(MIN_BACKOFF_S / 100e-6, abs=1)
    assert leaf.backoff == 2 * MIN_BACKOFF_S


def test_sparse_calls_still_run_the_back_off_in_calls():
    """A plan called rarely: the wall time of the back-off passes between two calls, but the
    calls that fill it at t1 still run on one thread before the next probe."""
    f = _Fake()
    f.times[2] = 300e-6
    leaf = f.leaf()
    leaf(0)  # a stall: MIN_BACKOFF_S, i.e. 100 calls of 100 µs
    for _ in range(3):
        f.now += 10.0  # ten seconds between calls
        leaf(0)
    assert f.ran == [2, 1, 1, 1] and leaf.left == round(MIN_BACKOFF_S / 100e-6) - 3


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


def test_the_stall_threshold_is_t1_times_the_margin_and_t1_follows_faster_one_thread_calls():
    f = _Fake(t2=100e-6 * STALL_MARGIN * 0.99)  # slower than one thread, but within the margin
    leaf = f.leaf()
    leaf(0)
    assert leaf.stalls == 0
    f.times[2] = 100e-6 * STALL_MARGIN * 1.01
    leaf(0)
    assert leaf.stalls == 1
    f.times[1] = 50e-6  # the one-thread calls measure faster than the record's t1: t1 follows them
    f.until_two(leaf)
    assert leaf.t1 == pytest.approx(50e-6)
    f.times[2] = 60e-6  # 60 > 50 × 1.1: now a stall against the lower t1
    leaf(0)
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
def test_an_adaptive_leaf_matches_the_float64_reference_at_both_counts(solver, inverse):
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
        ys = [plan.execute(torch.from_numpy(x)) for _ in range(3)]  # 2 threads (stalls), then 1, 1
        assert torch.get_num_threads() == 2
    leaf = plan._native  # the root's library call, made once for the plan
    assert isinstance(leaf, AdaptiveThreads) and leaf.stalls == 1 and leaf.threads_now == 1
    for y in ys:
        assert rel_l2(y, ref) <= BAR["fp32"]


def test_a_native_adaptive_leaf_pickles_with_a_fresh_state():
    with torch_threads(2):
        plan = trnplan.plan_many((256,), batch=4, strategy="(native 256 adapt=1 threads=2)")
        x = torch.from_numpy(random_complex((4, 256), seed=1).astype(np.complex64))
        leaf = plan.module.root
        leaf(x.real.contiguous(), x.imag.contiguous())  # a stall (T1 = 1 µs): one thread next
        assert leaf._adaptive.stalls == 1
        again = pickle.loads(pickle.dumps(plan.module)).root
        assert isinstance(again._adaptive, AdaptiveThreads) and again._adaptive.stalls == 0
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


def test_no_adaptive_leaf_without_a_quiet_win_or_for_a_multi_thread_pick():
    y = torch.arange(4.0)
    assert _pick_case(y, y, many_s=100e-6 / STALL_MARGIN * 1.01) is None  # not by the margin: one thread stays
    assert _pick_case(y, y, many_s=100e-6 / STALL_MARGIN * 0.99) is not None  # by the margin: adaptive
    assert _pick_case(y, y, best_tree="(native 1024)") is None  # already the multi-thread tree


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
    """A contender whose adaptive form is expected faster (the mean of its twin's quiet time and
    its own loaded time: (400 + 906) / 2 against (708 + 780) / 2) goes first, as an adaptive leaf."""
    adapt, pick = _first_case()
    assert str(adapt[0]) == "(mkl-fft 1024 adapt=798 threads=2)" and adapt[2][4] is True
    assert pick.best.tree == "(mkl-fft 1024 threads=1)"
    assert pick.rule.startswith("the rule; then (mkl-fft 1024 threads=1) instead, as an adaptive leaf: expected 653 µs")


@pytest.mark.parametrize("case", [{"mkl_same": False}, {"mkl_loaded_us": 1200.0}, {"mkl_bursts": (0.8, 1.01, 0.8)}],
                         ids=["outputs differ", "slower under load", "not confirmed"])
def test_the_robust_pick_stands_where_the_adaptive_contender_does_not_hold(case):
    """Outputs not bitwise identical (no adaptive leaf), a mean not better ((400 + 1200) / 2 = 800
    against 744), or a contender not confirmed in every burst: the robust pick and its rule stay
    (its own twin stalled, so no adaptive count for it either)."""
    adapt, pick = _first_case(**case)
    assert adapt is None and pick.best.tree == "(scipy 1024 threads=1)" and pick.rule == "the rule"
