"""Explicit thread counts of the CPU library leaves (issue 32): the call at a set count, the
variants measured planning times, and the rules that keep the one-thread leaf unless more threads
win clearly also under load. Timing is faked (no timing assertions)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys

import attrs
import numpy as np
import pytest
import torch
from support import BAR, LIBRARY_LEAVES, need_library, random_complex, reference, rel_l2, torch_threads

import trnplan
from trnplan.backends import get_backend
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem
from trnplan.core.spec import parse_strategy
from trnplan.kernels.hostlib import in_threads, installed
from trnplan.planner import measure
from trnplan.planner.measure import SLOWER, Measurement, Timing, default_threads, describe, tree_threads
from trnplan.planner.native import thread_variants
from trnplan.planner.planner import Planner


def test_in_threads_sets_the_count_for_the_call_and_restores_it_also_on_error():
    seen = []
    with torch_threads(2):
        call = in_threads(lambda: seen.append(torch.get_num_threads()), 1)
        call()
        assert seen == [1] and torch.get_num_threads() == 2

        def fail():
            raise KeyError("x")

        with pytest.raises(KeyError):
            in_threads(fail, 1)()
        assert torch.get_num_threads() == 2
    fn = object()
    assert in_threads(fn, None) is fn
    with pytest.raises(ValueError, match="a thread count must be ≥ 1, got 0"):
        in_threads(fn, 0)


@pytest.mark.parametrize("solver", list(LIBRARY_LEAVES))
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("inverse", [False, True])
def test_a_leaf_at_an_explicit_thread_count_matches_the_float64_reference(solver, threads, inverse):
    need_library(solver)
    n, batch = 384, 6
    x = random_complex((batch, n), seed=3).astype(np.complex64)
    with torch_threads(2):
        plan = trnplan.plan_many((n,), batch=batch, kind="c2c", inverse=inverse,
                                 strategy=f"({solver} {n} threads={threads})")
        y = plan.execute(torch.from_numpy(x))
        assert torch.get_num_threads() == 2  # the caller's count is left as it was
    implicit_one = solver == "pyfftw" and threads == 1  # pyFFTW's leaf without the param is one thread
    assert str(plan.tree).startswith(f"({solver} {n}") and ("threads=" not in str(plan.tree)) == implicit_one
    assert plan.tree.param("threads") == (None if implicit_one else threads)
    assert rel_l2(y, reference(x.astype(np.complex128), inverse)) <= BAR["fp32"]


def _mkl_max_threads():
    """What MKL itself says its calls on this thread will use: ``mkl_get_max_threads`` of the
    ``libmkl_rt`` mapped into this process (the one mkl_fft loaded)."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        path = next(line.split()[-1] for line in maps if "/libmkl_rt.so" in line)
    return ctypes.CDLL(path).MKL_Get_Max_Threads()


@pytest.mark.parametrize("solver", ["native", "mkl-fft"])
def test_the_call_runs_at_the_leafs_count(solver, monkeypatch):
    """What the library sees: the leaf's count inside the call (torch's OpenMP count for torch.fft,
    MKL's own for mkl_fft), and the caller's torch count outside it."""
    need_library(solver)
    seen = []
    real = torch.fft.fft
    if solver == "native":
        monkeypatch.setattr(torch.fft, "fft", lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1])
    else:
        import mkl_fft
        real_mkl = mkl_fft.fft
        monkeypatch.setattr(mkl_fft, "fft", lambda *a, **k: (seen.append(_mkl_max_threads()), real_mkl(*a, **k))[1])
    from trnplan.planner.library import HostFFT
    from trnplan.planner.native import NativeFFT
    x = torch.from_numpy(random_complex((4, 64)).astype(np.complex64))
    with torch_threads(2):
        for k in (1, 2, None):
            leaf = NativeFFT(64, False, k) if solver == "native" else HostFFT("mkl_fft", (64,), "c2c", False, k)
            leaf.library_call()(x)
        assert torch.get_num_threads() == 2
    assert seen == [1, 2, 2]


_MKL_ENV_CHILD = """
import ctypes, torch
import mkl_fft
import trnplan
path = next(line.split()[-1] for line in open("/proc/self/maps") if "/libmkl_rt.so" in line)
get = ctypes.CDLL(path).MKL_Get_Max_Threads
seen, real = [], mkl_fft.fft
mkl_fft.fft = lambda *a, **k: (seen.append(get()), real(*a, **k))[1]
torch.set_num_threads(2)
plan = trnplan.plan_many((64,), batch=4, strategy="(mkl-fft 64 threads=1)")
plan.execute(torch.zeros(4, 64, dtype=torch.complex64))
print(seen, get())
"""


def test_mkl_leaf_count_holds_under_mkl_num_threads(tmp_path):
    """MKL_NUM_THREADS takes precedence over OpenMP's count (oneMKL developer guide), so a
    ``threads=1`` mkl_fft leaf that only set torch's count ran two threads where the variable says
    2 (the bench's children set it): the leaf sets MKL's own thread-local count. A fresh process,
    because MKL reads the variable once."""
    need_library("mkl-fft")
    env = dict(os.environ, MKL_NUM_THREADS="2", OMP_NUM_THREADS="2", TRNPLAN_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _MKL_ENV_CHILD], env=env, capture_output=True, text=True, check=False,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[1]", "2"]  # one thread inside the call, the variable's 2 after it


def test_scipy_gets_the_leafs_workers(monkeypatch):
    need_library("scipy")
    import scipy.fft
    seen = []
    real = scipy.fft.fft
    monkeypatch.setattr(scipy.fft, "fft", lambda *a, **k: (seen.append(k["workers"]), real(*a, **k))[1])
    from trnplan.planner.library import HostFFT
    x = torch.from_numpy(random_complex((4, 64)).astype(np.complex64))
    with torch_threads(2):
        for k in (1, 2, None):
            HostFFT("scipy", (64,), "c2c", False, k).library_call()(x)
    assert seen == [1, 2, 2]


def test_the_other_thread_count_is_a_measured_variant_only():
    """With torch at 2 threads each library leaf's other count is enumerated, priced as the leaf
    (so it never changes the estimate's pick); at 1 thread there is none."""
    problem = Problem.create((1024,), 64)
    with torch_threads(1):
        one = {str(t) for t in Planner(get_backend("cpu")).enumerate(problem)}
    with torch_threads(2):
        planner = Planner(get_backend("cpu"))
        two = {str(t): t for t in planner.enumerate(problem)}
        pick = str(planner.plan(problem))
    assert not any("threads=" in t for t in one)
    expected = {"(native 1024 threads=1)"}
    expected |= {f"({s} 1024 threads=1)" for s in ("mkl-fft", "scipy") if installed(LIBRARY_LEAVES[s])}
    expected |= {"(pyfftw 1024 threads=2)"} if installed("pyfftw") else set()
    assert expected <= set(two) - one
    for variant in expected:
        assert two[variant].time_us == two[measure._threadless(variant)].time_us
    assert "threads=" not in pick


def test_a_thread_count_is_refused_off_the_cpu_and_below_one():
    with pytest.raises(PlanningError, match="native's option threads must be ≥ 1, got 0"):
        trnplan.plan_many((64,), batch=2, strategy="(native 64 threads=0)")
    # on CUDA native is cuFFT, which has no thread count (no GPU here: the rule itself)
    planner = Planner(get_backend("cpu"))
    problem = Problem.create((64,), 2)
    spec = parse_strategy("(native 64 threads=1)", tuple(s.name for s in planner.solvers))
    node = planner.plan(problem, spec)
    with pytest.raises(PlanningError, match="sets a CPU library's thread count; this problem is on 'cuda'"):
        thread_variants(node, attrs.evolve(problem, device="cuda"), spec, False)


def test_tree_threads_reads_explicit_and_implicit_counts(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert tree_threads("(native 64 threads=1)") == 1 and tree_threads("(native 64)") == 2
    assert tree_threads("(pyfftw 64)") == 1 and tree_threads("(pyfftw 64 threads=2)") == 2
    assert tree_threads("(mkl-fft 64)") == 2 and tree_threads("(scipy 64 threads=1)") == 1
    assert tree_threads("(four-step 64=8x8 (mkl-fft 8 threads=1) (mkl-fft 8 threads=1))") == 2  # torch ops too


def test_the_timed_set_takes_a_leafs_other_thread_count_with_it():
    planner = Planner(get_backend("cpu"))
    with torch_threads(2):
        trees = planner.enumerate(Problem.create((1024,), 64))
    timed = measure._timed_set(trees, 2, 0)
    names = [str(t) for t, on in zip(trees, timed) if on]
    for t in names:
        twin = measure._threadless(t)
        assert all(measure._threadless(u) != twin or u in names for u in map(str, trees))
    assert len(names) > 2


# ---------------------------------------------------------------- the default's thread count (faked)
class _Runner:
    """A candidate whose per-call seconds depend on whether the background load is on."""

    def __init__(self, clock, quiet_s, loaded_s):
        self.clock, self.quiet_s, self.loaded_s = clock, quiet_s, loaded_s

    def __call__(self):
        self.clock[0] += self.loaded_s if self.clock[1] else self.quiet_s


def _default_case(monkeypatch, multi_quiet, multi_loaded, twin_s=10e-6, start_load=True):
    clock = [0.0, False]  # seconds, load on
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(measure.time, "sleep", lambda s: None)

    @contextlib.contextmanager
    def load():
        clock[1] = True
        yield start_load
        clock[1] = False

    monkeypatch.setattr(measure, "background_load", load)
    trees = ["(mkl-fft 64)", "(native 64)", "(native 64 threads=1)"]
    prepared = [measure._Prepared(i, _Runner(clock, q, lo), 1, 1e-7) for i, (q, lo) in
                enumerate([(8e-6, 8e-6), (multi_quiet, multi_loaded), (twin_s, twin_s)])]
    samples = [[8e-6] * 9, [multi_quiet] * 9, [twin_s] * 9]  # the quiet rounds
    return default_threads(trees, prepared, samples, 1, 2, lambda: None, 1e-6)


def test_a_two_thread_default_that_stalls_under_load_gives_way_to_its_one_thread_twin(monkeypatch):
    """torch.fft at 2 threads 0.6× its one-thread call quietly, 50× under load (a stalled OpenMP
    barrier): the one-thread call is the default."""
    i, figures = _default_case(monkeypatch, 6e-6, 500e-6)
    assert i == 2 and figures == pytest.approx(("(native 64)", "(native 64 threads=1)", 0.6, 50.0,
                                                "(native 64 threads=1)"))


def test_a_two_thread_default_that_wins_in_both_conditions_stays(monkeypatch):
    i, figures = _default_case(monkeypatch, 6e-6, 9e-6)
    assert i == 1 and figures[3] == pytest.approx(0.9) and figures[4] == "(native 64)"
    i, figures = _default_case(monkeypatch, 6e-6, 9.8e-6)  # under load inside LOAD_MARGIN: not clearly
    assert i == 2 and figures[4] == "(native 64 threads=1)"


def test_a_two_thread_default_that_loses_quietly_is_not_timed_under_load(monkeypatch):
    i, figures = _default_case(monkeypatch, 12e-6, 1.0)
    assert i == 2 and figures[2] == pytest.approx(1.2) and figures[3] is None


def test_the_default_threads_figures_survive_the_record_and_are_explained():
    t = Timing(tree="(native 64 threads=1)", solver="native", predicted_us=1.0, error=0.0, measured_us=10.0,
               measured_error=0.0, verdict="fastest", default=True, vs_default=1.0)
    figures = ("(native 64)", "(native 64 threads=1)", 0.6, 50.0, "(native 64 threads=1)")
    record = Measurement("measure", (t,), 3, 6, 5.0, 0.1, None, "(native 64 threads=1)", default_threads=figures)
    again = Measurement.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record
    line = next(x for x in describe(again) if x.startswith("  default's threads: "))
    assert "(native 64) measured 0.60× (native 64 threads=1) in the rounds, 50.00× under load" in line
    assert line.endswith("the default is (native 64 threads=1)")
    old = record.to_dict()
    del old["default_threads"]  # a record from before the field
    assert Measurement.from_dict(old).default_threads == ()


def test_a_multi_thread_contender_must_beat_the_one_thread_one_clearly_under_load(monkeypatch):
    """Both confirmed; the 2-thread pyFFTW has the lower mean of quiet and loaded times (6 and
    8.2 µs against 8 and 8 µs) but under load it is not LOAD_MARGIN faster: the one-thread leaf."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    two = Timing(tree="(pyfftw 64 threads=2)", solver="pyfftw", predicted_us=1.0, error=0.0, verdict=SLOWER)
    one = attrs.evolve(two, tree="(pyfftw 64)")
    ratios = {two.tree: ((0.6,) * 3, 0.0, 6e-6), one.tree: ((0.8,) * 3, 0.0, 8e-6)}
    best, lost = measure._load_pick([two, one], ratios, {two.tree: (0.82, 8.2e-6), one.tree: (0.8, 8e-6)})
    assert best is one and lost == []
    best, _ = measure._load_pick([two, one], ratios, {two.tree: (0.7, 7e-6), one.tree: (0.8, 8e-6)})
    assert best is two


def _t(tree, vs, noise=0.01):
    return Timing(tree=tree, solver=tree.strip("()").split()[0], predicted_us=1.0, error=0.0, measured_us=10.0 * vs,
                  measured_error=0.0, verdict=SLOWER, noise=noise, vs_default=vs)


def test_contenders_keep_places_for_the_one_thread_leaves(monkeypatch):
    """Four 2-thread variants faster in the rounds than any one-thread leaf: only the best of them
    goes on, beside the one-thread ones (at 1 torch thread every leaf is one-thread: the best 3)."""
    from trnplan.planner.measure import CONFIRM_MAX, contenders
    default = attrs.evolve(_t("(native 64 threads=1)", 1.0), default=True)
    multi = [_t("(pyfftw 64 threads=2)", 0.5), _t("(mkl-fft 64)", 0.55), _t("(scipy 64)", 0.6), _t("(native 64)", 0.62)]
    single = [_t("(pyfftw 64)", 0.8), _t("(mkl-fft 64 threads=1)", 0.85)]
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    picked = [t.tree for t in contenders([default, *multi, *single])]
    assert picked == ["(pyfftw 64 threads=2)", "(pyfftw 64)", "(mkl-fft 64 threads=1)"]
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert len(contenders([default, *multi, *single])) == CONFIRM_MAX


def test_a_stalling_two_thread_contender_does_not_mark_the_machine_busy(monkeypatch):
    """In the second confirmation burst the 2-thread contender stalls (10× its time) and the
    one-thread one ties the default: neither is confirmed, and the record is not marked busy —
    the 2-thread one's scatter is its stall, and the one-thread one measured steadily."""
    clock = [0.0]
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(measure.time, "sleep", lambda s: None)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    calls: dict = {}

    def runner(tree, quiet, second):  # µs per call; ``second`` in the second burst (calls 11-20)
        def fn():
            calls[tree] = calls.get(tree, 0) + 1
            clock[0] += (second if 11 <= calls[tree] <= 20 else quiet) * 1e-6
        return (fn, 1)

    fns = {"(native 64 threads=1)": runner("d", 10.0, 10.0), "(pyfftw 64 threads=2)": runner("m", 5.0, 50.0),
           "(pyfftw 64)": runner("o", 9.0, 10.0)}
    default = attrs.evolve(_t("(native 64 threads=1)", 1.0), default=True)
    timings = [default, _t("(pyfftw 64 threads=2)", 0.5, 0.5), _t("(pyfftw 64)", 0.9)]
    pick = measure.robust_pick(timings, fns, [10e-6] * 9, torch.device("cpu"), lambda: None)
    assert pick.best.default and "was not confirmed" in pick.rule and pick.busy is None
    stalled = next(c for c in pick.checks if c[0] == "(pyfftw 64 threads=2)")
    assert stalled[1] == pytest.approx((0.5, 5.0, 0.5)) and stalled[2] > measure.BUSY_NOISE
