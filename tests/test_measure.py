"""Measured planning (effort "measure" / "patient"): picks by timing, stores and replays the
timings, honours the time limit and top K, rejects candidates measured over the bound, and
calibrates the cost model.

The timing-dependent checks use an injected *delay solver*: a leaf the cost model prices as
nearly free but whose module sleeps milliseconds per call, so the measured order is
unambiguous (orders of magnitude) on any machine, however busy. Results are checked against
numpy.fft in complex128 at the fp32 bar.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import warnings
from types import SimpleNamespace

import attrs
import numpy as np
import pytest
import torch
from support import BAR, random_complex, reference, rel_l2, torch_threads

import trnplan
from trnplan.cache import PlanCache
from trnplan.cache.store import CacheWarning
from trnplan.core import config
from trnplan.core.cost import Work
from trnplan.core.problem import Problem
from trnplan.kernels import hostlib
from trnplan.kernels.hostlib import fftw as fftw_module
from trnplan.kernels.hostlib.fftw import FFTWBudget
from trnplan.planner import learn, registry
from trnplan.planner import measure as measure_module
from trnplan.planner.measure import (
    FASTEST,
    MIN_ROUNDS,
    NOISE_FLOOR,
    NOT_TIMED_LIMIT,
    NOT_TIMED_TOP_K,
    OVER_BOUND_MEASURED,
    SLOWER,
    Measurement,
    Timing,
    beats_default,
    decide,
    paired,
    round_robin,
    spread,
)
from trnplan.planner.native import Native
from trnplan.planner.planner import CHOSEN
from trnplan.planner.solver import Solver


@pytest.fixture(autouse=True)
def _one_thread_and_default_limit():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 2-thread MKL stalls when the box is busy: timings stay sane
    config.set_timelimit(None)
    yield
    torch.set_num_threads(threads)
    config.set_timelimit(None)


class _SlowFFT(torch.nn.Module):
    def __init__(self, solver, n, inverse):
        super().__init__()
        self.solver, self.n, self.inverse = solver, n, inverse

    def forward(self, re, im):
        self.solver.calls += 1
        time.sleep(self.solver.delay_s)
        y = (torch.fft.ifft if self.inverse else torch.fft.fft)(torch.complex(re, im), norm="backward" if not self.inverse else "forward")
        if self.solver.wrong:
            y = y.conj()  # a wrong answer the accuracy model cannot see
        return y.real, y.imag


class DelaySolver(Solver):
    """Test-only leaf: priced as nearly free, runs torch.fft after sleeping ``delay_s`` per call."""

    kinds = ("c2c",)

    def __init__(self, name="slow-native", delay_s=0.003, wrong=False):
        self.name, self.delay_s, self.wrong, self.calls = name, delay_s, wrong, 0

    def why_not(self, problem, planner, forced):
        return None if problem.precision in ("fp32", "fp64") and problem.device == "cpu" else "test solver: cpu fp32/fp64"

    def plan(self, problem, planner, spec):
        error = Native().plan(problem, planner, spec).error
        # nearly free, root output packing included (direct=True: none priced)
        return self.node(problem, planner, Work(launches=0.01), error, direct=True)

    def build(self, node, ctx):
        return _SlowFFT(self, node.n, node.inverse)


@pytest.fixture
def slow():
    solver = DelaySolver()
    registry.register(solver)
    yield solver
    registry.unregister(solver.name)


def _check(plan, n, batch, seed=0):
    x = random_complex((batch, n), seed=seed)
    y = plan.execute(torch.from_numpy(x).to(torch.complex64))
    err = rel_l2(y, reference(x, plan.problem.inverse, plan.problem.norm))
    assert err <= BAR["fp32"], f"{plan.tree}: {err:.2e}"


def test_estimate_falls_for_the_delay_solver_and_measure_does_not(slow):
    est = trnplan.plan_many(256, batch=2, cache=None)
    assert est.tree.solver == "slow-native"  # the model believes it is free
    slow.calls = 0
    plan = trnplan.plan_many(256, batch=2, effort="measure", cache=None)
    assert plan.tree.solver != "slow-native"
    m = plan.provenance.measurement
    by_tree = {t.tree: t for t in m.timings}
    slow_t = by_tree["(slow-native 256)"]
    assert slow_t.estimate and slow_t.verdict == SLOWER and slow.calls >= 3
    win = m.winner
    assert win.tree == str(plan.tree) and win.measured_us < slow_t.measured_us
    assert plan.tree.measured_us == win.measured_us and plan.tree.measured_error <= BAR["fp32"]
    assert m.regret == pytest.approx(slow_t.measured_us / win.measured_us)
    assert m.regret > 1
    # the top-level verdicts follow the measurement
    chosen = [c for c in plan.candidates if c.verdict == CHOSEN]
    assert [c.solver for c in chosen] == [plan.tree.solver]
    slow_c = next(c for c in plan.candidates if c.solver == "slow-native")
    assert "measured" in slow_c.reason and "× the chosen plan" in slow_c.reason
    _check(plan, 256, 2)
    text = plan.explain(full=True)
    assert "measured candidates (effort measure" in text and "← chosen" in text and "(estimate's pick)" in text
    assert "regret of effort 'estimate'" in text


def test_timings_are_stored_and_replayed_without_measuring(slow, tmp_path):
    cache = PlanCache(tmp_path / "c")
    first = trnplan.plan_many(128, batch=4, effort="measure", cache=cache)
    record = cache.get_wisdom(first.provenance.wisdom_key)
    assert record["effort"] == "measure"
    stored = Measurement.from_dict(record["measurement"])
    assert stored.timings == first.provenance.measurement.timings
    assert record["tree"]["measured_us"] == first.tree.measured_us
    assert sum(t.measured_us is not None for t in stored.timings) >= 2
    trnplan.clear_plan_cache()
    slow.calls = 0
    again = trnplan.plan_many(128, batch=4, effort="measure", cache=cache)
    assert slow.calls == 0  # no candidate was run: the winner came from wisdom
    assert again.provenance.origin == "wisdom hit" and again.provenance.effort == "measure"
    assert str(again.tree) == str(first.tree) and again.tree.measured_us == first.tree.measured_us
    assert "measured candidates" in again.explain(full=True)
    _check(again, 128, 4)


def test_higher_effort_wisdom_answers_lower_not_the_reverse(slow, tmp_path):
    cache = PlanCache(tmp_path / "c")
    est = trnplan.plan_many(64, batch=4, cache=cache)
    assert est.tree.solver == "slow-native"
    trnplan.clear_plan_cache()
    meas = trnplan.plan_many(64, batch=4, effort="measure", cache=cache)
    assert meas.provenance.origin == "planned now"  # estimate wisdom does not answer measure
    trnplan.clear_plan_cache()
    # now the measured plan answers estimate (and wisdom_only) requests
    again = trnplan.plan_many(64, batch=4, cache=cache)
    assert again.provenance.origin == "wisdom hit" and str(again.tree) == str(meas.tree)
    trnplan.clear_plan_cache()
    only = trnplan.plan_many(64, batch=4, cache=cache, effort="wisdom_only")
    assert str(only.tree) == str(meas.tree)
    trnplan.clear_plan_cache()
    pat = trnplan.plan_many(64, batch=4, effort="patient", cache=cache)
    assert pat.provenance.origin == "planned now"  # measure wisdom does not answer patient


def test_time_limit_is_honoured(tmp_path):
    slow = DelaySolver(delay_s=0.04)
    registry.register(slow)
    try:
        trnplan.set_timelimit(0.05)
        t0 = time.perf_counter()
        plan = trnplan.plan_many(512, batch=2, effort="patient", cache=None)
        elapsed = time.perf_counter() - t0
    finally:
        registry.unregister(slow.name)
    m = plan.provenance.measurement
    assert m.limit_s == 0.05 and m.timings
    timed = [t for t in m.timings if t.measured_us is not None]
    # the estimate's pick and the default (torch.fft) are always timed; then the limit hit
    assert sorted(t.tree for t in timed) == ["(native 512)", "(slow-native 512)"]
    rest = [t for t in m.timings if t.measured_us is None]
    assert rest and all(t.verdict == NOT_TIMED_LIMIT for t in rest)
    assert slow.calls <= 3 + 2 * MIN_ROUNDS  # warm-up, two probe calls, the fewest rounds (a warm and a timed call each)
    assert plan.tree.solver == "native"  # the slow pick does not beat the default: the default is kept
    assert m.default_tree == "(native 512)" and "kept" in m.rule
    assert elapsed < 30  # bounded (a loose sanity check, not a speed assertion)


def test_top_k_and_patient(monkeypatch):
    monkeypatch.setenv("TRNPLAN_MEASURE_TOP_K", "2")
    plan = trnplan.plan_many(64, batch=2, effort="measure", cache=None)
    m = plan.provenance.measurement
    assert m.top_k == 2 and m.enumerated > 2
    # K counts beyond the always-timed: the estimate's pick and the default (one tree if they agree)
    fixed = 1 + (m.default_tree is not None and not any(t.estimate and t.default for t in m.timings))
    assert sum(t.measured_us is not None for t in m.timings) == fixed + 2
    assert sum(t.verdict == NOT_TIMED_TOP_K for t in m.timings) == m.enumerated - fixed - 2
    # the first K beyond those: the cheapest tree of each root solver before a second of any
    timed_solvers = [t.solver for t in m.timings if t.measured_us is not None and not (t.estimate or t.default)]
    assert len(set(timed_solvers)) == len(timed_solvers)
    trnplan.clear_plan_cache()
    pat = trnplan.plan_many(64, batch=2, effort="patient", cache=None)
    pm = pat.provenance.measurement
    assert pm.top_k is None and pm.enumerated == m.enumerated
    assert all(t.verdict in (FASTEST, SLOWER) for t in pm.timings), [t.verdict for t in pm.timings]
    # distinct trees, each a complete plan for the problem
    assert len({t.tree for t in pm.timings}) == len(pm.timings)
    _check(pat, 64, 2)


def test_candidates_measured_over_the_bound_are_rejected():
    wrong = DelaySolver(name="wrong-native", delay_s=0.0, wrong=True)
    registry.register(wrong)
    try:
        est = trnplan.plan_many(100, batch=2, cache=None)
        assert est.tree.solver == "wrong-native"  # the model cannot tell
        plan = trnplan.plan_many(100, batch=2, effort="measure", cache=None)
    finally:
        registry.unregister(wrong.name)
    t = next(t for t in plan.provenance.measurement.timings if t.solver == "wrong-native")
    assert t.verdict == OVER_BOUND_MEASURED and t.measured_error > 0.1
    assert plan.tree.solver != "wrong-native"
    _check(plan, 100, 2)


@pytest.mark.parametrize("shape,kind", [((1000,), "r2c"), ((64,), "c2r"), ((16, 32), "c2c"), ((8, 12, 10), "r2c")])
def test_measure_plans_real_and_nd_transforms_correctly(shape, kind):
    from trnplan.core.accuracy import measure_error

    plan = trnplan.plan_many(shape, batch=3, kind=kind, effort="measure", cache=None)
    assert plan.provenance.measurement.winner.tree == str(plan.tree)
    assert measure_error(plan) <= BAR["fp32"]
    assert plan.tree.measured_error == pytest.approx(measure_error(plan), rel=1e-6)


def test_measure_with_a_strategy_times_only_matching_trees():
    plan = trnplan.plan_many(4096, batch=2, strategy="four-step", effort="patient", cache=None)
    m = plan.provenance.measurement
    assert all(t.solver == "four-step" for t in m.timings) and m.enumerated >= 2
    assert plan.tree.solver == "four-step"
    _check(plan, 4096, 2)


def test_measure_calibrates_the_cost_model(tmp_path):
    cache = PlanCache(tmp_path / "c")
    before = trnplan.plan_many(32, batch=8, cache=cache)
    assert "not calibrated" in before.explain(full=True)
    trnplan.plan_many(256, batch=8, effort="measure", cache=cache)
    trnplan.clear_plan_cache()
    after = trnplan.plan_many(48, batch=8, cache=cache)  # a new problem, planned by estimate
    assert "calibrated from" in after.explain(full=True)
    fpd = next(k for k in cache.keys("calibration:"))
    stored = cache.get_record(fpd)
    assert len(stored["samples"]) >= 2 and stored["scales"]
    # the calibrated profile prices the same work differently from the prior
    assert after.tree.time_us > 0


def test_fit_recovers_known_multipliers():
    from trnplan.backends.cpu import CPU_PROFILE

    true = {"launches": 0.5, "fft_calls": 2.0, "fft:float32": 3.0, "bytes": 1.0, "gemm:float32": 0.8}
    rng = np.random.default_rng(0)
    samples = []
    for _ in range(200):
        terms = {"launches": rng.uniform(1, 50), "fft_calls": rng.uniform(0, 4),
                 "fft:float32": rng.uniform(1e3, 1e8), "bytes": rng.uniform(1e3, 1e8),
                 "gemm:float32": rng.uniform(0, 1e8)}
        t = sum(v * CPU_PROFILE.price(k) * true[k] for k, v in terms.items())
        samples.append((terms, t))
    cal = learn.fit(samples, CPU_PROFILE, ridge=1e-6)
    for k, v in true.items():
        assert cal.scales[k] == pytest.approx(v, rel=0.05), (k, cal.scales)
    assert cal.rms_after < 0.01 < cal.rms_before
    prof = cal.apply(CPU_PROFILE)
    assert prof.launch_us == pytest.approx(CPU_PROFILE.launch_us * cal.scales["launches"])
    assert prof.fft_gflops["float32"] == pytest.approx(CPU_PROFILE.fft_gflops["float32"] / cal.scales["fft:float32"])
    # with few samples the ridge keeps unconstrained terms at the prior
    few = learn.fit(samples[:1], CPU_PROFILE)
    assert all(1 / learn.CLIP <= v <= learn.CLIP for v in few.scales.values())


def test_calibration_record_that_is_garbage_is_dropped(tmp_path):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(16, batch=2, cache=cache)
    from trnplan.cache.fingerprint import fingerprint, fingerprint_digest

    key = f"calibration:{fingerprint_digest(fingerprint('cpu'))}:cpu"
    cache.set_record(key, {"samples": "not a list"})
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="calibration record .* is not valid"):
        plan = trnplan.plan_many(24, batch=2, cache=cache)
    assert cache.get_record(key) is None
    _check(plan, 24, 2)


def test_node_terms_price_back_to_the_prediction():
    from trnplan.backends.cpu import CPU_PROFILE

    for shape, kind in [((4096,), "c2c"), ((1000,), "r2c"), ((64, 64), "c2c"), ((97,), "c2c")]:
        tree = trnplan.plan_many(shape, batch=4, kind=kind, cache=None).tree
        for _, node in tree.walk():
            if node.solver == "precision":
                continue
            assert CPU_PROFILE.terms_time_us(node.terms) == pytest.approx(node.time_us, rel=1e-9), str(node)


@pytest.mark.parametrize("bad", [0, -1, "5", True, math.nan])
def test_bad_time_limits_are_refused(bad):
    with pytest.raises(ValueError, match="time limit must be a positive number of seconds"):
        trnplan.set_timelimit(bad)


def test_bad_environment_settings_are_refused(monkeypatch):
    monkeypatch.setenv("TRNPLAN_TIMELIMIT", "soon")
    with pytest.raises(ValueError, match="TRNPLAN_TIMELIMIT='soon' must be a positive number"):
        trnplan.plan_many(16, effort="measure", cache=None)
    monkeypatch.setenv("TRNPLAN_TIMELIMIT", "1")
    monkeypatch.setenv("TRNPLAN_MEASURE_TOP_K", "0")
    with pytest.raises(ValueError, match="TRNPLAN_MEASURE_TOP_K='0' must be a positive integer"):
        trnplan.plan_many(16, effort="measure", cache=None)


def test_registry_register_and_unregister_errors():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Native())
    with pytest.raises(KeyError, match="no solver named 'nope'"):
        registry.unregister("nope")
    solver = DelaySolver(name="tmp-solver")
    digest = registry.registry_digest()
    registry.register(solver)
    try:
        assert "tmp-solver" in trnplan.solver_names() and registry.registry_digest() != digest
    finally:
        registry.unregister("tmp-solver")
    assert registry.registry_digest() == digest


def test_cli_plan_with_effort_measure(capsys):
    from trnplan.tools.cli import main

    assert main(["plan", "64", "--batch", "4", "--effort", "measure", "--explain", "--verify"]) == 0
    out = capsys.readouterr().out
    assert "measured candidates (effort measure" in out and "verify:" in out


def test_precompiled_measured_plans_load_with_wisdom_only(tmp_path):
    from trnplan.tools.precompile import precompile

    cache = PlanCache(tmp_path / "c")
    results = precompile([{"shape": [256], "batch": 4, "effort": "measure"},
                          {"shape": [16, 16], "batch": 2, "kind": "r2c", "effort": "patient"}],
                         cache=cache, progress=False)
    assert all(r.ok for r in results)
    trnplan.clear_plan_cache()
    plan = trnplan.plan_many(256, batch=4, cache=cache, effort="wisdom_only")
    assert plan.provenance.origin == "wisdom hit" and plan.provenance.effort == "measure"
    assert plan.tree.measured_us is not None
    _check(plan, 256, 4)
    real = trnplan.plan_many((16, 16), batch=2, kind="r2c", cache=cache, effort="wisdom_only")
    assert real.provenance.effort == "patient"


def test_pyfftw_wisdom_travels_inside_the_wisdom_entry(tmp_path, monkeypatch):
    pytest.importorskip("pyfftw")
    from trnplan.kernels import hostlib

    cache = PlanCache(tmp_path / "c")
    plan = trnplan.plan_many(512, batch=2, strategy="pyfftw", cache=cache)
    record = cache.get_wisdom(plan.provenance.wisdom_key)
    assert record["host_wisdom"] and record["host_wisdom"] == hostlib.export_wisdom()
    trnplan.clear_plan_cache()
    seen = []
    monkeypatch.setattr(hostlib, "import_wisdom", lambda data: seen.append(data))
    again = trnplan.plan_many(512, batch=2, strategy="pyfftw", cache=cache)
    assert again.provenance.origin == "wisdom hit" and seen == [record["host_wisdom"]]
    _check(again, 512, 2)
    # a plan without a pyFFTW leaf carries none
    other = trnplan.plan_many(512, batch=2, strategy="scipy", cache=cache)
    assert "host_wisdom" not in cache.get_wisdom(other.provenance.wisdom_key)


def test_timing_on_a_gpu_waits_for_the_plans_gpu(monkeypatch):
    """A candidate on cuda:1 is timed up to cuda:1's synchronize: torch.cuda.synchronize() alone
    waits for the current device, which would time a cuda:1 plan by its launches. torch.cuda is
    stood in for (no GPU here)."""
    from trnplan.planner.measure import time_call

    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(device))
    device = torch.device("cuda", 1)
    _, calls, _ = time_call(lambda: None, device, budget_s=0.01)
    assert calls >= 5 and waited and all(d == device for d in waited)


# ---------------------------------------------------------------- the round-robin decision rule
def _timing(tree, us, vs=None, noise=0.0, default=False, verdict=SLOWER):
    return Timing(tree=tree, solver=tree.strip("()").split()[0], predicted_us=1.0, error=0.0, measured_us=us,
                  measured_error=0.0, verdict=verdict, default=default, noise=noise, vs_default=vs)


def test_default_kept_when_a_candidate_is_faster_only_within_the_noise():
    default = _timing("(native 64)", 10.0, vs=1.0, default=True)
    close = _timing("(pyfftw 64)", 9.9, vs=0.99, noise=0.005)  # 1 % faster: inside the 2 % floor
    noisy = _timing("(mkl-fft 64)", 9.0, vs=0.90, noise=0.15)  # 10 % faster, 15 % noise
    winner, rule = decide([default, close, noisy])
    assert winner is default and "kept" in rule


def test_default_replaced_beyond_the_noise_by_the_lowest_paired_ratio():
    default = _timing("(native 64)", 10.0, vs=1.0, default=True)
    a = _timing("(pyfftw 64)", 7.0, vs=0.70, noise=0.05)
    b = _timing("(mkl-fft 64)", 6.9, vs=0.75, noise=0.01)  # a lower median but a worse paired ratio
    over = _timing("(dft-gemm 64)", 1.0, vs=0.1, verdict=OVER_BOUND_MEASURED)
    winner, rule = decide([default, a, b, over])
    assert winner is a and "replaces the default" in rule


def test_without_a_default_the_fastest_within_the_bound_wins():
    winner, rule = decide([_timing("(stockham 64)", 5.0), _timing("(dft-gemm 64)", 4.0),
                           _timing("(butterfly 64)", 1.0, verdict=OVER_BOUND_MEASURED)])
    assert winner.tree == "(dft-gemm 64)" and "no default" in rule


def test_beats_default_uses_the_noise_floor():
    assert beats_default(0.97, 0.0) and not beats_default(0.985, 0.0)  # the 2 % floor
    assert beats_default(0.80, 0.2) and not beats_default(0.85, 0.2)


def test_paired_ratios_cancel_drift_that_hits_all_candidates_alike():
    """A machine slowing down 3× over the rounds moves both medians, not the paired ratio: the
    candidate 10 % faster in every round measures 0.90 with no noise."""
    drift = [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 3.0]
    default = [10e-6 * d for d in drift]
    cand = [9e-6 * d for d in drift]
    ratio, noise = paired(cand, default)
    assert ratio == pytest.approx(0.9) and noise == pytest.approx(0.0, abs=1e-12)
    assert spread(default) > 0.2  # the unpaired medians would carry the drift as noise


def test_round_robin_interleaves_the_candidates():
    order = []
    samples = round_robin([(lambda: order.append("a"), 2), (lambda: order.append("b"), 1)], lambda: None, 3)
    # each candidate's turn: one untimed warm call, then its timed calls; every round has each
    # candidate's turn once, the first round in the given order
    turns = {"a": ["a"] * 3, "b": ["b"] * 2}
    rounds = ["".join(order[i:i + 5]) for i in range(0, 15, 5)]
    assert rounds[0] == "aaabb" and all(r in ("aaabb", "bbaaa") for r in rounds)
    assert sorted(order) == sorted(turns["a"] * 3 + turns["b"] * 3) and [len(s) for s in samples] == [3, 3]


def test_round_robin_shuffles_the_turns_so_no_candidate_always_follows_the_same_one():
    """In a fixed order the candidate after a two-thread one always ran in its shadow (its
    spinning threads, its stall's end): the turns come in a new seeded order every round."""
    order = []
    runners = [(lambda k=k: order.append(k), 1) for k in range(4)]
    samples = round_robin(runners, lambda: None, 12)
    turns = [order[i:i + 8:2] for i in range(0, len(order), 8)]  # each turn: a warm call, a timed one
    assert all(sorted(t) == [0, 1, 2, 3] for t in turns) and turns[0] == [0, 1, 2, 3]
    after_zero = {t[t.index(0) + 1] for t in turns if t.index(0) < 3}
    assert len(after_zero) > 1 and len({tuple(t) for t in turns}) > 3
    assert all(len(s) == 12 for s in samples)
    again = []
    round_robin([(lambda k=k: again.append(k), 1) for k in range(4)], lambda: None, 12)
    assert again == order  # seeded: the same orders every time


def _replaced_by_the_rules(m) -> bool:
    """Whether the record's winner is the default, or replaced it as measure's rules allow: beyond
    the noise of the rounds (decide) or confirmed in every burst (robust_pick); an adaptive leaf
    (adaptive_pick) stands for the one-thread pick it replaced, which the same rules chose."""
    w = m.winner
    if m.adaptive and m.adaptive[0] == w.tree:
        w = next(t for t in m.timings if t.tree == m.adaptive[1])
    if w.default:
        return True
    confirmed = bool(m.confirmation) and all(r * (1 + NOISE_FLOOR) < 1 for r in m.confirmation)
    return beats_default(w.vs_default, w.noise) or confirmed


def test_the_rules_check_refuses_a_winner_neither_beyond_the_noise_nor_confirmed():
    """The check the measured-plan tests use fails where a winner replaced the default against the
    rules: within the rounds' noise with no confirmation, or with one burst that did not win."""
    default = Timing("(native 256)", "native", 10.0, 1e-7, 10.0, 1e-7, SLOWER, default=True, noise=0.0, vs_default=1.0)
    w = Timing("(pyfftw 256)", "pyfftw", 11.0, 1e-7, 9.7, 1e-7, FASTEST, noise=0.04, vs_default=0.97)

    def record(timings=(default, w), **kw):
        return Measurement("measure", timings, 2, None, 1.0, 0.1, None, "(native 256)", 2, 0.0, "r", **kw)

    assert not _replaced_by_the_rules(record())
    assert not _replaced_by_the_rules(record(confirmation=(0.9, 0.99)))
    assert _replaced_by_the_rules(record(confirmation=(0.9, 0.95)))
    assert _replaced_by_the_rules(record(timings=(default, attrs.evolve(w, vs_default=0.9))))


def test_measured_plan_records_default_threads_and_when(tmp_path):
    before = time.time()
    plan = trnplan.plan_many(256, batch=4, effort="measure", cache=PlanCache(tmp_path))
    m = plan.provenance.measurement
    assert m.default_tree == "(native 256)" and m.threads == torch.get_num_threads()
    assert before <= m.measured_at <= time.time() and m.rule
    default = next(t for t in m.timings if t.default)
    assert default.tree == "(native 256)" and default.vs_default == pytest.approx(1.0)
    timed = [t for t in m.timings if t.measured_us is not None]
    assert all(t.rounds >= MIN_ROUNDS and t.noise is not None and t.vs_default is not None for t in timed)
    # a winner other than the default beat it by the rules: beyond the noise in the rounds, or
    # confirmed in every burst (robust_pick: a contender within the rounds' noise goes to the bursts)
    assert _replaced_by_the_rules(m), m.rule
    text = plan.explain(full=True)
    assert "round-robin" in text and "(default)" in text and "rule:" in text
    # stored and read back with the new fields
    again = Measurement.from_dict(m.to_dict())
    assert again == m
    _check(plan, 256, 4)


# ---------------------------------------------------------------- wisdom you can trust (item 3)
def _as_if_from_another_process(cache, key):
    """Forget that this process measured ``key`` (a record measured here is not spot-checked here)."""
    from trnplan.plan import provide

    provide._RECHECKED.discard((str(cache.path), key))


def test_bogus_measured_wisdom_is_remeasured_and_replaced_once(slow, tmp_path):
    cache = PlanCache(tmp_path)
    key, bogus = _plant_delay_winner(cache)
    with pytest.warns(CacheWarning, match=r"now measures .*× the default \(native 256\).*re-measuring .*and replacing"):
        plan = trnplan.plan_many(256, batch=4, effort="measure", cache=cache)
    assert str(plan.tree) != bogus and plan.provenance.origin == "planned now"
    assert "re-measured" in plan.explain(full=True) and "days ago" in plan.provenance.replaced
    stored = cache.get_wisdom(key)
    assert stored["tree"] == plan.tree.to_dict()  # replaced, not first-writer-wins
    assert Measurement.from_dict(stored["measurement"]).winner.tree == str(plan.tree)
    _check(plan, 256, 4)
    trnplan.clear_plan_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # checked once per process: no second re-measure
        again = trnplan.plan_many(256, batch=4, effort="measure", cache=cache)
    assert again.provenance.origin == "wisdom hit" and str(again.tree) == str(plan.tree)


@pytest.mark.parametrize("how", ["TRNPLAN_RECHECK=0", "wisdom_only"])
def test_spot_check_is_skipped_where_nothing_may_be_timed(slow, tmp_path, monkeypatch, how):
    cache = PlanCache(tmp_path)
    _, bogus = _plant_delay_winner(cache)
    if how == "TRNPLAN_RECHECK=0":
        monkeypatch.setenv("TRNPLAN_RECHECK", "0")
        kwargs = {"effort": "measure"}
    else:
        monkeypatch.setenv("TRNPLAN_WISDOM_ONLY", "1")
        kwargs = {"effort": "measure"}
    slow.calls = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        plan = trnplan.plan_many(256, batch=4, cache=cache, **kwargs)
    assert str(plan.tree) == bogus and plan.provenance.origin == "wisdom hit"
    assert slow.calls == 0  # the stored winner was not run: nothing timed
    _check(plan, 256, 4)


def test_recheck_setting_is_a_01_switch(monkeypatch):
    monkeypatch.setenv("TRNPLAN_RECHECK", "yes")
    with pytest.raises(ValueError, match="TRNPLAN_RECHECK='yes' must be 0 or 1"):
        config.recheck()


def _plant_delay_winner(cache, n=256, batch=4):
    """A measured record whose stored winner is the delay solver's leaf (3 ms of sleep per call,
    against torch.fft's microseconds): it loses the spot check on any machine, however busy."""
    plan = trnplan.plan_many(n, batch=batch, effort="measure", cache=cache)
    key = plan.provenance.wisdom_key
    record = cache.get_wisdom(key)
    slow = trnplan.plan_many(n, batch=batch, strategy="slow-native", cache=None).tree
    m = Measurement.from_dict(record["measurement"])
    timings = [attrs.evolve(t, verdict=SLOWER) for t in m.timings if t.tree != str(slow)]
    timings.append(Timing(tree=str(slow), solver="slow-native", predicted_us=0.1, error=slow.error, measured_us=0.1,
                          measured_error=1e-7, verdict=FASTEST, vs_default=0.1, noise=0.01, rounds=5))
    # a pick measured on a quiet machine (the record this test plants may come from a busy one, where
    # measure keeps the default and marks it busy: then the spot check's reason would be the busyness)
    bogus = attrs.evolve(m, timings=tuple(timings), measured_at=time.time() - 3 * 86400, busy=None)
    cache.update_wisdom(key, {**record, "tree": slow.to_dict(), "measurement": bogus.to_dict()})
    trnplan.clear_plan_cache()
    _as_if_from_another_process(cache, key)
    return key, str(slow)


def test_an_estimate_request_replaces_a_bogus_measured_record_with_a_measured_one(slow, tmp_path):
    """An estimate request served by a measured record re-measures it at the record's effort and
    replaces it under its key: never an estimate stored under a measured key."""
    cache = PlanCache(tmp_path)
    key, bogus = _plant_delay_winner(cache)
    with pytest.warns(CacheWarning, match=r"re-measuring \(effort 'measure'\) and replacing"):
        plan = trnplan.plan_many(256, batch=4, cache=cache)  # effort "estimate"
    assert str(plan.tree) != bogus and plan.provenance.effort == "measure"
    assert plan.provenance.wisdom_key == key
    stored = cache.get_wisdom(key)
    assert stored["effort"] == "measure" and stored["tree"] == plan.tree.to_dict()
    m = Measurement.from_dict(stored["measurement"])
    assert m.winner.tree == str(plan.tree) and m.winner.tree != bogus
    _check(plan, 256, 4)


def test_a_record_measured_in_this_process_is_not_spot_checked(slow, tmp_path, monkeypatch):
    from trnplan.plan import provide

    checked = []
    real = provide.recheck
    monkeypatch.setattr(provide, "recheck", lambda *a: checked.append(a) or real(*a))
    cache = PlanCache(tmp_path)
    plan = trnplan.plan_many(256, batch=4, effort="measure", cache=cache)
    trnplan.clear_plan_cache()
    again = trnplan.plan_many(256, batch=4, effort="measure", cache=cache)
    assert again.provenance.origin == "wisdom hit" and str(again.tree) == str(plan.tree)
    assert checked == []  # it was timed a moment ago, in this process
    _check(again, 256, 4)


def test_replace_wisdom_replaces_only_the_stale_record(tmp_path):
    """The first process to re-measure a bogus record wins; a later one finds the record it read
    gone and keeps the replacement (compare and write in one transaction)."""
    cache = PlanCache(tmp_path)
    plan = trnplan.plan_many(64, batch=2, cache=cache)
    key = plan.provenance.wisdom_key
    stale = cache.get_wisdom(key)
    first = {**stale, "planning_ms": 1.0}
    second = {**stale, "planning_ms": 2.0}
    assert cache.replace_wisdom(key, first, stale) == first
    assert cache.replace_wisdom(key, second, stale) == first  # `stale` is no longer what is stored
    assert cache.get_wisdom(key) == first
    cache.forget(key)
    assert cache.replace_wisdom(key, second, stale) == second and cache.get_wisdom(key) == second


def test_round_robin_with_drift_between_rounds_keeps_the_pick(monkeypatch):
    """A fake clock: each call costs its candidate's time × the machine's slowdown in that round,
    which climbs 1× → 4× (a neighbour's load). Round-robin pairs the rounds, so the 5 % faster
    candidate replaces the default, the 1 % faster one does not (within the noise floor), and
    the drift does not move either verdict."""
    from trnplan.planner import measure

    clock = [0.0]
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    rounds = 9
    calls = [0]  # three runners, each a warm and a timed call per round: 6 calls a round
    state = {"f": 1.0}

    def runner(cost_us):
        def fn():
            clock[0] += cost_us * 1e-6 * state["f"]
        return fn

    def next_round(fn):
        def first():
            state["f"] = 1 + 3 * (calls[0] // 6) / (rounds - 1)  # this round's slowdown
            calls[0] += 1
            fn()
        return first

    costs = {"(native 64)": 10.0, "(pyfftw 64)": 9.5, "(mkl-fft 64)": 9.9}
    fns = [runner(c) for c in costs.values()]
    runners = [(next_round(f), 1) for f in fns]
    samples = round_robin(runners, lambda: None, rounds)
    assert all(len(s) == rounds for s in samples)
    base = samples[0]
    timings = [_timing("(native 64)", statistics.median(base) * 1e6, vs=1.0, default=True)]
    for tree, s in zip(list(costs)[1:], samples[1:]):
        vs, noise = paired(s, base)
        timings.append(_timing(tree, statistics.median(s) * 1e6, vs=vs, noise=noise))
    assert spread(base) > 0.25  # the drift spreads each candidate's own samples widely
    assert timings[1].vs_default == pytest.approx(0.95) and timings[1].noise == pytest.approx(0.0, abs=1e-9)
    winner, rule = decide(timings)
    assert winner.tree == "(pyfftw 64)" and "replaces the default" in rule
    winner, rule = decide([timings[0], timings[2]])  # only the 1 % faster one: the default is kept
    assert winner.tree == "(native 64)" and "kept" in rule


def test_candidates_many_times_slower_leave_the_rounds(monkeypatch):
    """After the first rounds a candidate over PRUNE × the fastest median is timed no more (its
    calls would stir the caches and the allocator between the others'), unless it must stay."""
    from trnplan.planner import measure

    clock = [0.0]
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    calls = {"fast": 0, "slow": 0, "slow-kept": 0}

    def runner(name, cost):
        def fn():
            calls[name] += 1
            clock[0] += cost
        return (fn, 1)

    runners = [runner("fast", 1e-4), runner("slow", 1e-3), runner("slow-kept", 1e-3)]
    samples = measure.timed_rounds(runners, lambda: None, 20, budget_s=10.0, keep=[False, False, True])
    assert [len(s) for s in samples] == [20, MIN_ROUNDS, 20]
    assert calls["slow"] == 2 * MIN_ROUNDS  # a warm and a timed call per round, first rounds only
    ratio, noise = paired(samples[1], samples[0])  # paired over the rounds both ran
    assert ratio == pytest.approx(10.0) and noise == pytest.approx(0.0, abs=1e-9)


def test_a_candidate_measured_faster_but_not_chosen_is_not_called_more_expensive():
    """The default kept by the noise rule while another solver's tree measured faster by its median:
    explain() must not call that candidate "more expensive" next to a ratio below 1."""
    from trnplan.planner.measure import NOT_CHOSEN_NOISE, ranked_candidates
    from trnplan.planner.planner import MORE_EXPENSIVE, Candidate

    timings = (Timing("(native 64)", "native", 10.0, 1e-7, measured_us=10.0, verdict=FASTEST, default=True),
               Timing("(pyfftw 64)", "pyfftw", 9.0, 1e-7, measured_us=7.7, verdict=SLOWER),
               Timing("(stockham 64=8x8)", "stockham", 30.0, 1e-7, measured_us=30.0, verdict=SLOWER))
    m = Measurement("measure", timings, 3, 6, 5.0, 0.1, None, "(native 64)")
    cands = (Candidate("native", CHOSEN), Candidate("pyfftw", CHOSEN), Candidate("stockham", CHOSEN))
    ranked = {c.solver: c for c in ranked_candidates(cands, m)}
    assert ranked["native"].verdict == CHOSEN
    assert ranked["pyfftw"].verdict == NOT_CHOSEN_NOISE and "measured 0.77×" in ranked["pyfftw"].reason
    assert ranked["stockham"].verdict == MORE_EXPENSIVE and "measured 3.00×" in ranked["stockham"].reason


def test_preparing_and_minimum_rounds_fit_the_time_limit(monkeypatch):
    """The time limit covers preparing the candidates and their MIN_ROUNDS rounds: on a clock that
    only preparing advances, candidates stop being prepared while their rounds would still fit,
    and the rest are 'not timed (time limit)' (the default 5 s ran 7.4 s at a 2 s limit before)."""
    from types import SimpleNamespace

    from trnplan.planner import measure as m

    clock = [0.0]
    monkeypatch.setattr(m, "time", SimpleNamespace(perf_counter=lambda: clock[0], time=lambda: 0.0))
    monkeypatch.setattr(m, "_seeded", lambda problem, device, split=False: (None, None, 1.0))
    monkeypatch.setattr(m, "_sync", lambda device: (lambda: None))

    def prepare(planner, problem, device, tree, make_plan, x, ref, ref_norm, sync):
        clock[0] += tree.prep_s
        return m._Prepared(-1, lambda: None, 4, 0.0, call_s=tree.call_s)

    monkeypatch.setattr(m, "_prepare", prepare)
    trees = [SimpleNamespace(prep_s=0.1, call_s=0.004, time_us=4000.0)]  # the estimate's pick
    trees += [SimpleNamespace(prep_s=0.15, call_s=0.004, time_us=4000.0) for _ in range(8)]
    limit = 1.0
    prepared, verdicts, _ = m._prepare_all(None, None, None, trees, [True] * len(trees), 1, None, limit, 0.0)
    reserved = MIN_ROUNDS * sum(p.round_s for p in prepared)
    assert clock[0] + reserved <= limit
    assert prepared[0].index == 0 and len(prepared) >= 3  # the pick always, and what fits
    assert set(verdicts.values()) == {NOT_TIMED_LIMIT} and len(verdicts) == len(trees) - len(prepared)


def test_fftw_planning_has_a_budget_of_its_own(monkeypatch):
    """FFTW_MEASURE's plans share the budget of fftw_budget (charged what each took), not what is
    left of the time limit; outside one, each gets the effort's FFTW limit."""
    limits = []

    class FakeFFTW:  # FFTW's planner: takes 0.4 s of the fake clock, records the limit it was given
        def __init__(self, *args, flags, threads, planning_timelimit):
            assert flags == ("FFTW_MEASURE",)
            limits.append(planning_timelimit)
            clock[0] += 0.4

    clock = [100.0]
    monkeypatch.setattr(fftw_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    fake = SimpleNamespace(FFTW=FakeFFTW)
    with hostlib.fftw_budget(1.0) as budget:
        for _ in range(4):
            fftw_module._measured_fftw(fake, (), 1, "measure")
    assert limits[:3] == pytest.approx([1.0, 0.6, 0.2])
    assert limits[3] == hostlib.MIN_FFTW_PLANNING_S  # spent: FFTW still gets its minimum
    assert budget.spent == pytest.approx(1.6)
    assert fftw_module._planning_limit("measure") == config.fftw_timelimit("measure")  # no budget: the effort's


def test_fftw_timelimit_follows_the_users_limit(monkeypatch):
    monkeypatch.delenv("TRNPLAN_FFTW_TIMELIMIT", raising=False)
    monkeypatch.delenv("TRNPLAN_TIMELIMIT", raising=False)
    assert config.fftw_timelimit("measure") == config.DEFAULT_FFTW_TIMELIMIT["measure"]
    assert config.fftw_timelimit("patient") == config.DEFAULT_FFTW_TIMELIMIT["patient"]
    monkeypatch.setenv("TRNPLAN_TIMELIMIT", "2")  # only the time limit set: FFTW's is the same
    assert config.fftw_timelimit("measure") == 2.0
    monkeypatch.setenv("TRNPLAN_FFTW_TIMELIMIT", "7")
    assert config.fftw_timelimit("measure") == 7.0
    monkeypatch.setenv("TRNPLAN_FFTW_TIMELIMIT", "-1")
    with pytest.raises(ValueError, match="TRNPLAN_FFTW_TIMELIMIT"):
        config.fftw_timelimit("measure")


def test_fftw_planning_is_left_out_of_the_time_limit(monkeypatch):
    """Candidates whose preparing was mostly FFTW's planning (its budget's ``spent``) do not use up
    the time limit; the same preparing without a budget does."""
    m = measure_module
    clock = [0.0]
    monkeypatch.setattr(m, "time", SimpleNamespace(perf_counter=lambda: clock[0], time=lambda: 0.0))
    monkeypatch.setattr(m, "_seeded", lambda problem, device, split=False: (None, None, 1.0))
    monkeypatch.setattr(m, "_sync", lambda device: (lambda: None))
    fftw = FFTWBudget(100.0)

    def prepare(planner, problem, device, tree, make_plan, x, ref, ref_norm, sync):
        clock[0] += tree.prep_s
        fftw.spent += tree.fftw_s  # of its preparing, FFTW's planning
        return m._Prepared(-1, lambda: None, 1, 0.0, call_s=0.001)

    monkeypatch.setattr(m, "_prepare", prepare)
    trees = [SimpleNamespace(prep_s=3.0, fftw_s=2.95, time_us=1000.0) for _ in range(6)]
    prepared, verdicts, _ = m._prepare_all(None, None, None, trees, [True] * 6, 1, None, 1.0, 0.0, fftw=fftw)
    assert len(prepared) == 6 and not verdicts  # 18 s on the clock, 0.3 s of it trnplan's own
    prepared, verdicts, _ = m._prepare_all(None, None, None, trees, [True] * 6, 1, None, 1.0, clock[0])
    assert len(prepared) < 6 and set(verdicts.values()) == {NOT_TIMED_LIMIT}  # counted: the limit stops it


# ---------------------------------------------------------------------------- robust picks on a busy machine
class _FakeMachine:
    """A fake clock and candidates whose cost per call depends on the burst (counted by the sleeps
    between confirmation bursts; burst 0 is the main rounds' decision) and on a background load."""

    def __init__(self, monkeypatch, costs: dict, burst_factor=None, load_factor=None):
        from trnplan.planner import measure
        self.clock, self.burst, self.loaded = 0.0, 0, False
        self.costs, self.burst_factor, self.load_factor = costs, burst_factor or {}, load_factor or {}
        self.jitter: dict = {}
        monkeypatch.setattr(measure.time, "perf_counter", lambda: self.clock)
        monkeypatch.setattr(measure.time, "sleep", self._sleep)

        @contextlib.contextmanager
        def load():
            self.loaded = True
            yield True
            self.loaded = False
        monkeypatch.setattr(measure, "background_load", load)

    def _sleep(self, s):
        self.burst += 1
        self.clock += s

    def fns(self) -> dict:
        calls: dict = {}

        def runner(tree):
            def fn():
                f = self.burst_factor.get((tree, self.burst), 1.0) * (self.load_factor.get(tree, 1.0) if self.loaded else 1.0)
                jitter = self.jitter.get(tree)
                if jitter:  # a per-call factor, cycling: rounds that scatter as on a busy machine
                    calls[tree] = calls.get(tree, -1) + 1
                    f *= jitter[calls[tree] % len(jitter)]
                self.clock += self.costs[tree] * 1e-6 * f
            return (fn, 1)
        return {tree: runner(tree) for tree in self.costs}


def _pick(machine, vs=0.8, noise=0.01, default_samples=None):
    from trnplan.planner.measure import robust_pick
    timings = [_timing("(native 64)", 10.0, vs=1.0, default=True), _timing("(pyfftw 64 threads=2)", 8.0, vs=vs, noise=noise)]
    samples = default_samples if default_samples is not None else [10e-6] * 9
    return robust_pick(timings, machine.fns(), samples, torch.device("cpu"), lambda: None)


def test_a_win_in_one_burst_is_not_taken_unless_every_burst_confirms_it(monkeypatch):
    """The main rounds saw pyFFTW at 0.8× the default; the second confirmation burst (a neighbour's
    load that stalls its threads) has it at 1.5×: not confirmed, the default is kept."""
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(pyfftw 64 threads=2)": 8.0},
                     burst_factor={("(pyfftw 64 threads=2)", 1): 1.5 / 0.8})
    pick = _pick(m)
    assert pick.best.default and "was not confirmed" in pick.rule
    assert len(pick.confirmation) == 3 and pick.confirmation[1] == pytest.approx(1.5)
    assert pick.confirmation[0] == pytest.approx(0.8) and pick.under_load is None


def test_a_confirmed_win_replaces_the_default_and_is_checked_under_load(monkeypatch):
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(pyfftw 64 threads=2)": 8.0})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    pick = _pick(m)
    assert pick.best.tree == "(pyfftw 64 threads=2)" and "confirmed in 3 bursts" in pick.rule
    assert pick.confirmation == pytest.approx((0.8, 0.8, 0.8)) and pick.under_load == pytest.approx(0.8)


def test_a_two_thread_win_that_loses_while_a_core_is_busy_keeps_the_default(monkeypatch):
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(pyfftw 64 threads=2)": 8.0},
                     load_factor={"(pyfftw 64 threads=2)": 2.0})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    pick = _pick(m)
    assert pick.best.default and "while another process kept a core busy" in pick.rule
    assert pick.under_load == pytest.approx(1.6) and pick.confirmation == pytest.approx((0.8, 0.8, 0.8))


def test_one_thread_skips_the_load_check(monkeypatch):
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(pyfftw 64 threads=2)": 8.0},
                     load_factor={"(pyfftw 64 threads=2)": 2.0})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    pick = _pick(m)
    assert pick.best.tree == "(pyfftw 64 threads=2)" and pick.under_load is None


def test_a_machine_too_busy_to_measure_keeps_the_default_and_says_so(monkeypatch):
    from trnplan.planner.measure import BUSY_NOISE, describe
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(pyfftw 64 threads=2)": 8.0})
    noisy = [10e-6, 14e-6, 7e-6, 20e-6, 9e-6, 16e-6, 6e-6, 25e-6, 11e-6]  # the default's own rounds
    assert spread(noisy) > BUSY_NOISE
    pick = _pick(m, default_samples=noisy)
    assert pick.best.default and pick.rule.startswith("not measured: machine busy (noise ")
    assert pick.busy == pytest.approx(spread(noisy)) and m.burst == 0  # nothing more was timed
    timings = (attrs.evolve(pick.best, verdict=FASTEST), _timing("(pyfftw 64 threads=2)", 8.0, vs=0.8))
    record = Measurement("measure", timings, 2, 6, 5.0, 0.1, None, "(native 64)", rule=pick.rule, busy=pick.busy)
    again = Measurement.from_dict(record.to_dict())
    assert again == record
    assert any(line.startswith("  machine busy: noise ") for line in describe(again))


class _HeldQueue:
    """A fake run queue for measure(): another process runnable whenever asked (or never)."""

    def __init__(self, held=True):
        self.held, self.asked = held, 0

    def others(self):
        self.asked += 1
        return 1 if self.held else 0


def test_measured_planning_watches_the_run_queue_after_each_round(monkeypatch):
    """measure() asks the run queue after every round of its main timing and keeps the count; a
    core held in every round makes no verdict (a "machine busy" one kept torch.fft where mkl_fft
    ran 2.7× faster) and is said in the record and explain()."""
    queue = _HeldQueue()
    monkeypatch.setattr(measure_module, "occupancy", lambda: queue)
    with torch_threads(2):
        plan = trnplan.plan_many((64,), batch=4, effort="measure")
    m = plan.provenance.measurement
    # every round asked (and the load bursts after them, which start no spinner of their own here)
    assert m.held[0] == m.held[1] >= measure_module.MIN_ROUNDS and queue.asked > m.held[1]
    # the pick stands: the held rounds make no verdict of their own (this machine's noise may)
    assert measure_module.held_core(m) and "another process runnable" not in m.rule
    again = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again == m
    assert (f"  run queue: another process runnable after {m.held[0]} of {m.held[1]} rounds: measured with a "
            "core held, so the next process that uses this record measures again") in measure_module.describe(again)


def test_a_core_held_in_fewer_than_half_the_rounds_is_wisdom_as_before():
    BUSY_HELD, describe, held_core = measure_module.BUSY_HELD, measure_module.describe, measure_module.held_core
    timings = (attrs.evolve(_timing("(native 64)", 10.0, vs=1.0, default=True), verdict=FASTEST),)
    record = Measurement("measure", timings, 1, 6, 5.0, 0.1, None, "(native 64)", held=(9, 20))
    assert 9 < BUSY_HELD * 20 and not held_core(record) and held_core(attrs.evolve(record, held=(10, 20)))
    assert "  run queue: another process runnable after 9 of 20 rounds" in describe(record)
    assert not held_core(attrs.evolve(record, held=()))  # not watched


def test_a_record_measured_with_a_core_held_is_measured_again_by_the_next_process(tmp_path, monkeypatch):
    cache = PlanCache(tmp_path)
    monkeypatch.setattr(measure_module, "occupancy", lambda: _HeldQueue(held=True))
    with torch_threads(2):
        first = trnplan.plan_many((64,), batch=4, effort="measure", cache=cache)
    key = first.provenance.wisdom_key
    record = cache.get_wisdom(key)
    m = Measurement.from_dict(record["measurement"])
    assert measure_module.held_core(m)
    # not also "machine busy" by its noise (this machine's, which would be the re-measuring's reason)
    cache.update_wisdom(key, {**record, "measurement": attrs.evolve(m, busy=None).to_dict()})
    trnplan.clear_plan_cache()
    _as_if_from_another_process(cache, key)
    monkeypatch.setattr(measure_module, "occupancy", lambda: _HeldQueue(held=False))
    with torch_threads(2), pytest.warns(CacheWarning, match=r"was measured while another process held a core "
                                                            r"\(runnable after \d+ of \d+ rounds\); re-measuring"):
        again = trnplan.plan_many((64,), batch=4, effort="measure", cache=cache)
    stored = Measurement.from_dict(cache.get_wisdom(key)["measurement"])
    assert not measure_module.held_core(stored) and stored.held[0] == 0
    _check(again, 64, 4)


def test_confirmation_and_load_figures_survive_the_record_and_are_explained():
    from trnplan.planner.measure import describe
    timings = (_timing("(native 64)", 10.0, vs=1.0, default=True),
               attrs.evolve(_timing("(pyfftw 64 threads=2)", 8.0, vs=0.8), verdict=FASTEST))
    record = Measurement("measure", timings, 2, 6, 5.0, 0.1, None, "(native 64)", rule="r",
                         confirmation=(0.81, 0.79, 0.8), under_load=0.85)
    again = Measurement.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record
    lines = describe(again)
    assert any(line.startswith("  confirmation: 0.81×, 0.79×, 0.80× the default in 3 bursts") for line in lines)
    assert any(line.startswith("  under load: 0.85× the default") for line in lines)


def test_fftws_planning_seconds_survive_the_record_and_are_explained():
    describe = measure_module.describe
    timings = (_timing("(native 64)", 10.0, vs=1.0, default=True),
               attrs.evolve(_timing("(pyfftw 64 threads=2)", 8.0, vs=0.8), verdict=FASTEST))
    record = Measurement("measure", timings, 2, 6, 5.0, 10.8, None, "(native 64)", rule="r", fftw_s=9.32)
    again = Measurement.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record
    assert "10.80 s spent (of which FFTW_MEASURE 9.32 s, not counted in the limit)" in describe(again)[0]
    old = record.to_dict()
    del old["fftw_s"]  # a record from before the field
    assert Measurement.from_dict(old).fftw_s == 0.0 and "of which" not in describe(Measurement.from_dict(old))[0]


def _pick_among(machine, timings, threads=2, default_samples=None):
    from trnplan.planner.measure import robust_pick
    samples = default_samples if default_samples is not None else [10e-6] * 9
    return robust_pick(timings, machine.fns(), samples, torch.device("cpu"), lambda: None)


def test_a_slow_noisy_candidate_does_not_make_the_machine_busy(monkeypatch):
    """The quiet 512×192 case: a dft-gemm 20× slower (noise 240 %) and the 2-thread pyFFTW variant
    (35 % noise, no faster than the default) once lifted the median candidate noise over BUSY_NOISE
    and the default was kept although mkl_fft was 0.8× its time. Only the contenders count."""
    from trnplan.planner.measure import BUSY_NOISE, contenders
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(mkl-fft 64)": 8.0, "(dft-gemm 64)": 200.0,
                                   "(pyfftw 64 threads=2)": 11.0})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    timings = [_timing("(native 64)", 10.0, vs=1.0, default=True), _timing("(mkl-fft 64)", 8.0, vs=0.8, noise=0.03),
               _timing("(dft-gemm 64)", 200.0, vs=20.0, noise=2.4), _timing("(pyfftw 64 threads=2)", 11.0, vs=1.1, noise=0.35)]
    assert statistics.median(t.noise for t in timings[1:]) > BUSY_NOISE  # what the old rule judged
    assert [t.tree for t in contenders(timings)] == ["(mkl-fft 64)"]
    pick = _pick_among(m, timings)
    assert pick.best.tree == "(mkl-fft 64)" and pick.busy is None and "confirmed in 3 bursts" in pick.rule
    assert [c[0] for c in pick.checks] == ["(mkl-fft 64)"] and pick.checks[0][3] == pytest.approx(0.8)


def test_a_noisy_near_tie_is_confirmed_in_bursts_rather_than_dropped(monkeypatch):
    """0.92× the default with 16 % paired noise is not a win beyond the noise in the main rounds
    (decide keeps the default), but every confirmation burst has it faster: it replaces the default."""
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(mkl-fft 64)": 9.2})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    timings = [_timing("(native 64)", 10.0, vs=1.0, default=True), _timing("(mkl-fft 64)", 9.2, vs=0.92, noise=0.16)]
    assert decide(timings)[0].default
    pick = _pick_among(m, timings)
    assert pick.best.tree == "(mkl-fft 64)" and pick.confirmation == pytest.approx((0.92,) * 3)
    assert pick.under_load is None and pick.busy is None  # one torch thread: no load check


def test_a_noisy_near_tie_that_bursts_cannot_settle_is_marked_busy(monkeypatch):
    """The contender's per-round ratios scatter over BUSY_NOISE across the bursts and one burst has
    it slower: not confirmed, and the record says the machine was too busy, with the noise."""
    from trnplan.planner.measure import BUSY_NOISE, describe
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(mkl-fft 64)": 9.2},
                     burst_factor={("(mkl-fft 64)", 1): 1.3})
    m.jitter["(mkl-fft 64)"] = [0.6, 1.0, 1.5, 0.8, 1.2, 1.7]
    timings = [_timing("(native 64)", 10.0, vs=1.0, default=True), _timing("(mkl-fft 64)", 9.2, vs=0.92, noise=0.16)]
    pick = _pick_among(m, timings)
    assert pick.best.default and pick.busy is not None and pick.busy > BUSY_NOISE
    assert pick.rule.startswith(f"not measured: machine busy (noise {pick.busy:.0%}") and "not confirmed" in pick.rule
    record = Measurement("measure", (attrs.evolve(pick.best, verdict=FASTEST), timings[1]), 2, 6, 5.0, 0.1, None,
                         "(native 64)", rule=pick.rule, confirmation=pick.confirmation, busy=pick.busy, checks=pick.checks)
    again = Measurement.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record
    lines = describe(again)
    assert any(line.startswith("  contender (mkl-fft 64): ") and "per burst (noise " in line for line in lines)
    assert any(line.startswith("  machine busy: noise ") for line in lines)


def test_a_noisy_default_does_not_hide_a_win_beyond_its_noise(monkeypatch):
    """The default's own rounds scatter by 32 % (torch.fft's 2 threads stalled by a neighbour's
    load), but a one-thread leaf measures 0.2× its time: beyond that scatter, so it goes on to the
    confirmation and replaces the default instead of the record being marked busy."""
    from trnplan.planner.measure import BUSY_NOISE
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(pyfftw 64)": 2.0})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    noisy = [10e-6, 14e-6, 7e-6, 20e-6, 9e-6, 16e-6, 6e-6, 25e-6, 11e-6]
    assert spread(noisy) > BUSY_NOISE
    timings = [_timing("(native 64)", 10.0, vs=1.0, default=True), _timing("(pyfftw 64)", 2.0, vs=0.2, noise=0.3)]
    pick = _pick_among(m, timings, default_samples=noisy)
    assert pick.best.tree == "(pyfftw 64)" and pick.busy is None and pick.confirmation == pytest.approx((0.2,) * 3)


def test_a_load_sensitive_two_thread_variant_gives_way_to_a_one_thread_leaf(monkeypatch):
    """pyFFTW with 2 threads wins quietly (0.6×) but measures 1.2× the default while another process
    keeps a core busy; the 1-thread leaf wins in both (0.8×): the 1-thread leaf is chosen, not the
    default, and explain() shows both contenders' confirmation and load figures."""
    from trnplan.planner.measure import describe
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(pyfftw 64 threads=2)": 6.0, "(pyfftw 64)": 8.0},
                     load_factor={"(pyfftw 64 threads=2)": 2.0})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    timings = [_timing("(native 64)", 10.0, vs=1.0, default=True),
               _timing("(pyfftw 64 threads=2)", 6.0, vs=0.6, noise=0.35), _timing("(pyfftw 64)", 8.0, vs=0.8, noise=0.01)]
    assert decide(timings)[0].tree == "(pyfftw 64 threads=2)"  # what the main rounds alone would pick
    pick = _pick_among(m, timings)
    assert pick.best.tree == "(pyfftw 64)" and pick.under_load == pytest.approx(0.8)
    figures = {c[0]: (c[1], c[3]) for c in pick.checks}
    assert figures["(pyfftw 64 threads=2)"][0] == pytest.approx((0.6,) * 3)
    assert figures["(pyfftw 64 threads=2)"][1] == pytest.approx(1.2)
    record = Measurement("measure", (timings[0], attrs.evolve(pick.best, verdict=FASTEST), timings[1]), 3, 6, 5.0, 0.1,
                         None, "(native 64)", rule=pick.rule, confirmation=pick.confirmation, under_load=pick.under_load,
                         checks=pick.checks)
    lines = describe(record)
    assert any(line.startswith("  contender (pyfftw 64 threads=2): 0.60×, 0.60×, 0.60× the default per burst")
               and "1.20× under load (" in line for line in lines)


def test_confirmed_contenders_are_ranked_by_their_own_times_not_by_ratios_to_a_stalling_default(monkeypatch):
    """The 64×1024 case on a loaded machine: torch.fft (the default) and mkl_fft share OpenMP's pool
    and stall in the same rounds (3 of 5, 50×), scipy's own pool does not. mkl_fft's ratio to the
    default is 0.2× in every round; scipy's is 0.03× in the stalled rounds, so its lower-quartile
    ratio looks 7× better although its own time is 7× mkl_fft's. Both are confirmed; the own
    lower-quartile times rank them, and mkl_fft wins."""
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(mkl-fft 64)": 2.0, "(scipy 64)": 14.0})
    stall = [50.0] * 6 + [1.0] * 4  # per call (one untimed, one timed a round): rounds 1-3 of 5 stall
    m.jitter.update({"(native 64)": stall, "(mkl-fft 64)": stall})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    timings = [_timing("(native 64)", 500.0, vs=1.0, default=True), _timing("(mkl-fft 64)", 100.0, vs=0.2, noise=0.0),
               _timing("(scipy 64)", 14.0, vs=0.03, noise=1.0)]
    pick = _pick_among(m, timings)
    figures = {c[0]: c for c in pick.checks}
    assert statistics.median(figures["(scipy 64)"][1]) < statistics.median(figures["(mkl-fft 64)"][1])
    assert figures["(mkl-fft 64)"][4] == pytest.approx(2.0) and figures["(scipy 64)"][4] == pytest.approx(14.0)
    assert pick.best.tree == "(mkl-fft 64)" and "lowest mean of its own quiet and loaded times" in pick.rule


def test_a_two_thread_variant_that_also_wins_under_load_is_kept(monkeypatch):
    """The variant loses some of its lead under load (0.6× → 0.75×) but still beats the one-thread
    leaf (0.8× in both) on the mean of the two conditions: the variant wins."""
    m = _FakeMachine(monkeypatch, {"(native 64)": 10.0, "(pyfftw 64 threads=2)": 6.0, "(pyfftw 64)": 8.0},
                     load_factor={"(pyfftw 64 threads=2)": 1.25})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    timings = [_timing("(native 64)", 10.0, vs=1.0, default=True),
               _timing("(pyfftw 64 threads=2)", 6.0, vs=0.6, noise=0.05), _timing("(pyfftw 64)", 8.0, vs=0.8, noise=0.01)]
    pick = _pick_among(m, timings)
    assert pick.best.tree == "(pyfftw 64 threads=2)" and pick.under_load == pytest.approx(0.75)


def test_background_load_keeps_a_core_busy_and_ends():
    from trnplan.planner.measure import background_load

    def children():
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            return {int(p) for p in f.read().split()}

    before = children()
    with background_load() as loaded:
        assert loaded
        (pid,) = children() - before
        time.sleep(0.2)
        with open(f"/proc/{pid}/stat") as f:
            utime = int(f.read().rsplit(")", 1)[1].split()[11])  # clock ticks spent spinning
        assert utime > 0
    assert pid not in children() and not os.path.exists(f"/proc/{pid}")  # killed and reaped


def test_the_background_load_ends_with_a_killed_planning_process():
    """A process killed (SIGKILL, so no ``finally``) while its load block runs leaves no spinner
    behind: the spinner stops once its parent is gone."""
    code = ("import os, sys, time\nfrom trnplan.planner.measure import background_load\n"
            "with background_load() as loaded:\n"
            "    print(open(f'/proc/self/task/{os.getpid()}/children').read().split()[0], flush=True)\n"
            "    time.sleep(60)\n")
    planner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "TRNPLAN_RUN_QUEUE": "0"})
    try:
        spinner = int(planner.stdout.readline())
        planner.send_signal(signal.SIGKILL)
        planner.wait()
        deadline, state = time.monotonic() + 10, "R"
        while time.monotonic() < deadline and state not in ("", "Z", "X"):
            try:
                with open(f"/proc/{spinner}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                state = ""  # exited and reaped
            time.sleep(0.02)
        assert state in ("", "Z", "X"), f"the spinner {spinner} still runs ({state}) after its parent was killed"
    finally:
        planner.kill()


def test_no_second_load_where_the_run_queue_shows_one(monkeypatch):
    """Another process already runnable (the run queue): the load block starts no spinner of its
    own, and says the machine is loaded."""
    def children():
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            return {int(p) for p in f.read().split()}

    queue = _HeldQueue(held=True)
    monkeypatch.setattr(measure_module, "occupancy", lambda: queue)
    before = children()
    with measure_module.background_load() as loaded:
        assert loaded and children() == before and queue.asked == 1
    queue.held = False
    with measure_module.background_load() as loaded:
        assert loaded and len(children() - before) == 1  # a quiet machine: the spinner as before


def test_spot_check_needs_every_burst_to_find_the_winner_slower(monkeypatch):
    """recheck's rules are measure's: bursts separated in time, the ratio of the most favourable
    burst (stale only if every burst has the winner slower), and nothing decided when busy."""
    from trnplan.planner import measure
    problem = Problem.create((64,), 2)
    record = Measurement("measure", (_timing("(native 64)", 10.0, vs=1.0, default=True),
                                     attrs.evolve(_timing("(pyfftw 64)", 8.0, vs=0.8), verdict=FASTEST)),
                         2, 6, 5.0, 0.1, None, "(native 64)")

    class Stub:
        solvers = registry.solvers()
        backend = trnplan.backends.get_backend("cpu")

        def plan(self, problem, spec):
            return spec

        def lower_plan(self, tree, problem, device):
            return None

    class Run:
        def run(self, x):
            return x

    def fake(slow_bursts, default_jitter=0.0):
        def bursts(runners, sync, count, rounds, burst_s, gap_s):
            out = []
            for b in range(count):
                base = [10e-6 * (1 + default_jitter * (r % 2)) for r in range(rounds)]
                out.append([base, [v * (1.3 if b in slow_bursts else 0.8) for v in base]])
            return out
        monkeypatch.setattr(measure, "bursts", bursts)
        return measure.recheck(Stub(), problem, torch.device("cpu"), record, lambda tree, module: Run())

    ratio, _ = fake({0, 2})  # one burst still has the winner faster: not stale
    assert ratio == pytest.approx(0.8)
    ratio, _ = fake({0, 1, 2})
    assert ratio == pytest.approx(1.3)
    ratio, noise = fake({0, 1, 2}, default_jitter=1.0)  # the default's own samples scatter by 50 %: busy
    assert ratio == pytest.approx(1.3) and ratio <= 1 + noise  # within the busy machine's noise: not stale
