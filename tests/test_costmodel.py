"""The estimate's margin rule, the CPU leaf model and its fit (trnplan.planner.leafcost,
trnplan.tools.calibrate). No timing is asserted: the fit is driven with synthetic timings."""

from __future__ import annotations

import math

import attrs
import pytest
import torch
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.backends import get_backend
from trnplan.backends.cpu import CPU_PROFILE
from trnplan.cache import CacheWarning, PlanCache, records
from trnplan.cache.fingerprint import fingerprint, fingerprint_digest
from trnplan.core.cost import LeafCost
from trnplan.core.problem import Problem
from trnplan.core.spec import parse_strategy
from trnplan.planner import leafcost
from trnplan.planner.planner import CHOSEN, WITHIN_MARGIN, Planner
from trnplan.tools import calibrate


def _search(problem, profile):
    planner = Planner(get_backend("cpu"), profile=profile)
    return planner.search(problem)


def _ratio(problem):
    """(the cheapest tree's predicted time / the default's, the default) on the uncalibrated profile."""
    free = Planner(get_backend("cpu"), profile=attrs.evolve(CPU_PROFILE, sigma=0.0))
    best, _ = free.search(problem)
    default = free.default_node(problem)
    return best.time_us / default.time_us, best, default


# ------------------------------------------------------------------ the margin rule

def test_default_kept_within_the_margin_and_replaced_beyond():
    problem = Problem.create((6000,), 64)
    ratio, best, default = _ratio(problem)
    assert best.solver != "native" and ratio < 1.0, "the fixture needs a candidate predicted faster than torch.fft"
    sigma = -math.log(ratio) / Planner.MARGIN_SIGMAS
    kept, candidates = _search(problem, attrs.evolve(CPU_PROFILE, sigma=sigma + 0.01))
    assert kept == default and str(kept) == "(native 6000)"
    loser = next(c for c in candidates if c.node is not None and c.node.digest() == best.digest())
    assert loser.verdict == WITHIN_MARGIN and "not below exp(-2·sigma)" in loser.reason
    replaced, candidates = _search(problem, attrs.evolve(CPU_PROFILE, sigma=sigma - 0.01))
    assert replaced.digest() == best.digest()
    chosen = next(c for c in candidates if c.verdict == CHOSEN)
    assert chosen.reason.startswith("margin rule") and chosen.reason.endswith("replaced")


def test_forced_strategy_and_child_problems_are_not_held_to_the_default():
    problem = Problem.create((6000,), 64)
    planner = Planner(get_backend("cpu"), profile=attrs.evolve(CPU_PROFILE, sigma=5.0))
    forced = parse_strategy("(pyfftw)", [s.name for s in planner.solvers])
    assert planner.plan(problem, forced).solver == "pyfftw"


def test_uncalibrated_estimate_keeps_torch_fft_on_smooth_sizes():
    # the rows where the uncalibrated model put a library leaf (or dft-gemm) 0.8-0.9x
    # below torch.fft: within its own error (2 sigma, sigma 1.2: a factor 11), so torch.fft stays
    for n, b in ((192, 512), (512, 2048), (6000, 64), (4096, 64), (1000, 16), (256, 1), (262144, 1)):
        plan = trnplan.plan_many(n, b, cache=None)
        assert str(plan.tree) == f"(native {n})", (n, b, plan.tree)
        x = torch.from_numpy(random_complex((b, n), seed=n).astype("complex64"))
        ref = reference(x.numpy(), inverse=False)
        assert rel_l2(plan.execute(x), ref) <= BAR["fp32"]


def test_large_prime_library_leaf_beats_the_margin():
    # a prime length: torch.fft (MKL's chirp-z) is predicted several times a library's time,
    # beyond exp(2·sigma): the rule replaces the default, and explain says so
    ratio, best, _ = _ratio(Problem.create((16411,), 8))
    plan = trnplan.plan_many(16411, 8, cache=None)
    if ratio * math.exp(Planner.MARGIN_SIGMAS * CPU_PROFILE.sigma) < 1.0:
        assert plan.tree.solver == best.solver != "native"
        assert "replaced" in plan.explain(full=True)
    else:
        assert plan.tree.solver == "native"


def test_dft_gemm_within_the_error_does_not_replace_torch_fft_at_256():
    # a profile (e.g. one recalibrated from loaded-machine timings) whose GEMM rate makes
    # dft-gemm 256 look cheaper than torch.fft: 1 x 256 measured 13x slower as dft-gemm
    problem = Problem.create((256,), 1)
    fast_gemm = attrs.evolve(CPU_PROFILE, gemm_gflops={"float32": 5e4, "float64": 5e4}, launch_us=0.5,
                          bandwidth_gbs=5e3, sigma=0.0)
    best, _ = _search(problem, fast_gemm)
    default = Planner(get_backend("cpu"), profile=fast_gemm).default_node(problem)
    assert best.solver == "dft-gemm", "the fixture needs dft-gemm predicted cheapest"
    assert best.time_us * math.exp(Planner.MARGIN_SIGMAS * CPU_PROFILE.sigma) > default.time_us
    chosen, candidates = _search(problem, attrs.evolve(fast_gemm, sigma=CPU_PROFILE.sigma))
    assert str(chosen) == "(native 256)"
    assert next(c for c in candidates if c.solver == "dft-gemm").verdict == WITHIN_MARGIN


def test_explain_states_the_rule_sigma_and_its_source():
    text = trnplan.plan_many(6000, 64, cache=None).explain(full=True)
    estimate = next(line for line in text.splitlines() if line.lstrip().startswith("estimate"))
    assert f"sigma {CPU_PROFILE.sigma:.2f}" in estimate and "uncalibrated" in estimate
    assert "kept: (pyfftw 6000)" in estimate or "kept:" in estimate
    assert WITHIN_MARGIN in text


# ------------------------------------------------------------------ the fit

TRUE = LeafCost(call_us=4.0, gflops=(30.0, 45.0, 20.0), batch_gain=1.7, prime_scale=0.5)


def _synthetic(points, cost=TRUE, leaf="pyfftw"):
    table = calibrate._prime_table(leaf)
    return [(leafcost.LeafShape.of(Problem.create((n,), b, kind=kind), table),
             leafcost.leaf_time_us(cost, leafcost.LeafShape.of(Problem.create((n,), b, kind=kind), table)))
            for kind, n, b in points]


def test_fit_recovers_known_constants_from_synthetic_timings():
    prior = calibrate.prior_cost("pyfftw", CPU_PROFILE)
    train = _synthetic(calibrate.grid_points("train", quick=False))
    fitted = leafcost.fit_leaf(train, prior, ridge=1e-10)
    assert fitted.call_us == pytest.approx(TRUE.call_us, rel=0.02)
    assert fitted.gflops == pytest.approx(TRUE.gflops, rel=0.02)
    assert fitted.batch_gain == pytest.approx(TRUE.batch_gain, rel=0.02)
    assert fitted.prime_scale == pytest.approx(TRUE.prime_scale, rel=0.05)
    heldout = _synthetic(calibrate.grid_points("heldout", quick=False))
    assert leafcost.rms_log(fitted, heldout) < 0.01 < leafcost.rms_log(prior, heldout)


@pytest.mark.parametrize("quick", [False, True])
def test_held_out_grid_is_disjoint_from_the_training_grid(quick):
    train, held = calibrate.grid_points("train", quick), calibrate.grid_points("heldout", quick)
    assert {n for _, n, _ in train}.isdisjoint(n for _, n, _ in held)
    assert {b for _, _, b in train}.isdisjoint(b for _, _, b in held)
    assert {k for k, _, _ in train} == {k for k, _, _ in held} == {"c2c", "r2c"}


class _FakePlan:
    def __init__(self, problem):
        self.problem = problem


def test_fit_cpu_model_stores_a_fit_the_planner_uses(tmp_path, monkeypatch):
    # the timings are synthetic (each leaf follows a known LeafCost), so nothing here is timed
    truth = {"native": TRUE, "pyfftw": attrs.evolve(TRUE, gflops=(60.0, 60.0, 60.0), batch_gain=1.0)}

    def plans(kind, n, b):
        return {name: _FakePlan(Problem.create((n,), b, kind=kind)) for name in truth if kind == "c2c"}

    def times(plans, x, rounds):
        return {name: leafcost.leaf_time_us(truth[name], calibrate._shape(name, p)) for name, p in plans.items()}

    monkeypatch.setattr(calibrate, "_plans", plans)
    monkeypatch.setattr(calibrate, "time_round_robin", times)
    cache = PlanCache(tmp_path / "c")
    report = calibrate.fit_cpu_model(cache, threads=torch.get_num_threads(), quick=True)
    assert report.stored and set(report.leaves) == set(truth)
    assert report.rms_heldout < 0.02 < report.rms_default
    assert "held-out" in report.describe()

    fpd = fingerprint_digest(fingerprint("cpu"))
    profile, _ = records.planning_profile(CPU_PROFILE, cache, fpd, "cpu", torch.get_num_threads())
    assert profile.sigma_fitted == pytest.approx(report.rms_heldout)
    planner = Planner(get_backend("cpu"), profile=profile)
    problem = Problem.create((4096,), 64)
    native = planner.default_node(problem)
    shape = leafcost.LeafShape.of(problem, calibrate._prime_table("native"), half=1.0)
    assert native.time_us == pytest.approx(leafcost.leaf_time_us(report.leaves["native"], shape), rel=1e-6)
    sigma, source = planner.margin_sigma(native)
    assert sigma == profile.sigma_fitted and source.startswith("fitted")
    # a tree with a solver the fit does not cover is compared with the uncalibrated error
    four = planner.plan(problem, parse_strategy("(four-step)", [s.name for s in planner.solvers]))
    assert planner.margin_sigma(four, native)[0] == CPU_PROFILE.sigma

    plan = trnplan.plan_many(4096, 64, cache=cache)  # plan_many reads the stored fit
    assert "fitted" in plan.explain(full=True)
    x = torch.from_numpy(random_complex((64, 4096), seed=1).astype("complex64"))
    assert rel_l2(plan.execute(x), reference(x.numpy(), inverse=False)) <= BAR["fp32"]


def test_a_corrupt_stored_fit_is_ignored_with_a_warning(tmp_path):
    cache = PlanCache(tmp_path / "c")
    fpd = fingerprint_digest(fingerprint("cpu"))
    cache.set_record(records.leafmodel_key(fpd, torch.get_num_threads()), {"leaves": {"native": {"call_us": 1}}})
    with pytest.warns(CacheWarning, match="leafmodel record .* is not valid.*forgetting it"):
        profile, _ = records.planning_profile(CPU_PROFILE, cache, fpd, "cpu", torch.get_num_threads())
    assert profile.leaves == {} and profile.sigma_fitted is None


def test_uncalibrated_threaded_leaves_depend_on_the_thread_count(monkeypatch):
    problem = Problem.create((4096,), 64)
    times = {}
    for threads in (1, CPU_PROFILE.threads):
        monkeypatch.setattr(torch, "get_num_threads", lambda t=threads: t)
        planner = Planner(get_backend("cpu"))
        times[threads] = {s: planner.plan(problem, parse_strategy(f"({s})", [x.name for x in planner.solvers])).time_us
                          for s in ("native", "pyfftw")}
    assert times[1]["native"] > times[CPU_PROFILE.threads]["native"]
    assert times[1]["pyfftw"] == times[CPU_PROFILE.threads]["pyfftw"]  # pyFFTW leaves run single-threaded


def test_a_profile_without_a_measured_error_compares_plainly():
    cuda = get_backend("cuda")
    planner = Planner(cuda, profile=leafcost.fitted_profile(cuda.profile, None, 1))
    sigma, source = planner.margin_sigma()
    assert sigma == 0.0 and "plain comparison" in source


def test_a_fitted_leaf_beyond_its_margin_wins_over_a_cheaper_tree_within_its_own():
    # dft-gemm predicted cheapest but held to the uncalibrated sigma (5: a factor 150); pyFFTW's
    # fitted leaf predicted at a quarter of the fitted default's time with a fitted sigma of 0.1
    problem = Problem.create((256,), 1)
    leaves = {"native": LeafCost(call_us=20.0, gflops=(40.0, 40.0, 40.0)),
              "pyfftw": LeafCost(call_us=5.0, gflops=(40.0, 40.0, 40.0))}
    profile = attrs.evolve(CPU_PROFILE, gemm_gflops={"float32": 5e4, "float64": 5e4}, launch_us=0.5,
                           bandwidth_gbs=1e4, leaves=leaves, sigma=5.0, sigma_fitted=0.1,
                           sigma_source="fitted (test); trees with other solvers: uncalibrated (test)")
    free, _ = _search(problem, attrs.evolve(profile, sigma=0.0, sigma_fitted=0.0))
    assert free.solver == "dft-gemm", "the fixture needs dft-gemm predicted cheapest"
    chosen, candidates = _search(problem, profile)
    assert str(chosen) == "(pyfftw 256)"
    rows = {c.solver: c for c in candidates}
    assert rows["pyfftw"].verdict == CHOSEN and rows["pyfftw"].reason.endswith("replaced")
    assert "sigma 0.10, fitted (test)" in rows["pyfftw"].reason
    assert rows["dft-gemm"].verdict == WITHIN_MARGIN
