"""Fit the CPU leaves' cost model on this machine, and report its error on sizes it never saw.

:func:`fit_cpu_model` times the FFT library leaves — torch.fft (``native``, and ``real
method=lib`` for r2c), pyFFTW, mkl_fft, scipy — *through trnplan's own plans*
(``plan_many(strategy=...).execute``, so the glue around each library call is in the time),
round-robin per size, warm, at torch's current thread count. It fits one
:class:`~trnplan.core.cost.LeafCost` per leaf on a TRAINING grid (powers of two, smooth
composites, primes and large prime factors, batch 1 to 512) and reports the rms log-error
``sqrt(mean(log(predicted / measured)²))`` on a disjoint HELD-OUT grid (other lengths, other
batches), for the fitted model and for the uncalibrated constants. The fit is stored in the plan
cache under this machine's fingerprint and the thread count (:mod:`trnplan.planner.leafcost`),
with its held-out error, which the estimate's margin rule uses as sigma.

    trnplan calibrate [--quick] [--threads 1,2]      (or python bench/calibrate.py --fit in a checkout)

Timing runs in this process and is as good as the machine is quiet.
"""

from __future__ import annotations

import functools
import math
import statistics
import time

import attrs
import torch

from trnplan.backends import get_backend
from trnplan.cache import records
from trnplan.cache.fingerprint import fingerprint, fingerprint_digest
from trnplan.core import timing
from trnplan.core.cost import LeafCost
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem
from trnplan.plan.api import plan_many
from trnplan.planner import leafcost, native
from trnplan.planner.registry import solvers

#: the leaves fitted, by solver name: the strategy that forces each, and the kinds it is timed on
LEAVES = {"native": ("(native)", ("c2c",)), "real": ("(real method=lib)", ("r2c",)),
          "pyfftw": ("(pyfftw)", ("c2c", "r2c")), "mkl-fft": ("(mkl-fft)", ("c2c", "r2c")),
          "scipy": ("(scipy)", ("c2c", "r2c"))}
#: points of one grid stay below this many complex values per call (2^20: 8 MB of complex64)
MAX_POINTS = 1 << 20
#: (lengths, batches) of the two grids; no length and no batch is in both
TRAIN = ((16, 64, 256, 1024, 4096, 16384, 65536, 96, 360, 1000, 6000, 24000, 127, 997, 4093, 16411, 2 * 1009,
          64 * 113, 3 * 257, 13 * 331),
         (1, 8, 64, 512))
HELDOUT = ((32, 512, 2048, 8192, 32768, 262144, 192, 720, 1536, 5000, 12000, 509, 2039, 8191, 3 * 1021,
            5 * 29 * 113, 128 * 67, 11 * 211),
           (2, 16, 128, 1024))
#: the r2c points (length, batch) of each grid
TRAIN_R2C = ((1024, 64), (4096, 8), (360, 512), (65536, 1), (256, 1), (16384, 8), (96, 64), (4093, 8), (64, 512))
HELDOUT_R2C = ((2048, 16), (720, 128), (12000, 2), (512, 2), (32768, 2), (192, 1024), (2039, 16))


@attrs.frozen
class FitReport:
    """What :func:`fit_cpu_model` did.

    Attributes
    ----------
    threads : int
        torch's intra-op threads during the timings.
    rms_train, rms_heldout : float
        rms log-error of the fitted model on the training and held-out timings.
    rms_default : float
        rms log-error of the uncalibrated constants on the same held-out timings.
    per_leaf : dict
        leaf → (rms_train, rms_heldout, rms_default, timings).
    grid : dict
        ``train`` and ``heldout``: the (leaf, kind, n, batch, measured µs) timed.
    seconds : float
        Wall time of the whole fit.
    leaves : dict
        leaf → fitted :class:`~trnplan.core.cost.LeafCost`.
    stored : bool
        Whether the fit was written to the plan cache.
    """

    threads: int
    rms_train: float
    rms_heldout: float
    rms_default: float
    per_leaf: dict
    grid: dict
    seconds: float
    leaves: dict
    stored: bool = False

    def describe(self) -> str:
        """A few lines for a terminal or a bench table."""
        lines = [(f"cost model fit at {self.threads} thread(s) in {self.seconds:.0f} s: rms log-error held-out "
                  f"{self.rms_heldout:.2f} (×{math.exp(self.rms_heldout):.2f}), train {self.rms_train:.2f}, "
                  f"uncalibrated constants on the held-out grid {self.rms_default:.2f}")]
        for name, (tr, ho, de, count) in self.per_leaf.items():
            lines.append(f"  {name:<8} held-out {ho:.2f}  train {tr:.2f}  uncalibrated {de:.2f}  ({count} timings)")
        return "\n".join(lines)


def grid_points(which: str, quick: bool) -> list[tuple[str, int, int]]:
    """(kind, n, batch) of the ``train`` or ``heldout`` grid; ``quick`` keeps two batches per
    length (rotating), for a run of well under a minute."""
    lengths, batches = TRAIN if which == "train" else HELDOUT
    r2c = TRAIN_R2C if which == "train" else HELDOUT_R2C
    points = []
    for i, n in enumerate(lengths):
        fits = [b for b in batches if n * b <= MAX_POINTS]
        points += [("c2c", n, b) for b in ({fits[(i + k) % len(fits)] for k in range(2)} if quick else fits)]
    return points + [("r2c", n, b) for n, b in r2c]


def _plans(kind: str, n: int, b: int) -> dict:
    """The leaves' plans for one point (a leaf that is not installed or declines is left out)."""
    out = {}
    for name, (strategy, kinds) in LEAVES.items():
        if kind not in kinds:
            continue
        try:
            out[name] = plan_many(n, b, kind=kind, strategy=strategy, cache=None, effort="estimate", compile="eager")
        except PlanningError:
            continue
    return out


def time_round_robin(plans: dict, x, rounds: int, target_us: float = 300.0) -> dict:
    """Median µs per call of each plan on ``x``: trnplan's one timer
    (:func:`trnplan.core.timing.round_robin`), ``rounds`` rounds in turn, each sample ``k`` calls in a
    row (enough for ``target_us``) so the clock's resolution does not matter."""
    runners = []
    for plan in plans.values():
        fn = functools.partial(plan.execute, x)
        fn()
        runners.append((fn, timing.calls_per_sample(fn, timing.no_sync, target_us * 1e-6)[0]))
    samples = timing.round_robin(runners, timing.no_sync, rounds)
    return {name: statistics.median(v) * 1e6 for name, v in zip(plans, samples)}


def _prime_table(name: str):
    solver = next((s for s in solvers() if s.name == name), None)
    return getattr(solver, "prime_slowdown", native.PRIME_SLOWDOWN)


def _shape(name: str, plan) -> leafcost.LeafShape:
    return leafcost.LeafShape.of(plan.problem, _prime_table(name))


def time_grid(points, rounds: int, deadline: float) -> list[tuple[str, str, int, int, float]]:
    """(leaf, kind, n, batch, µs) for every leaf at every point, until ``deadline`` (perf_counter)."""
    out = []
    for kind, n, b in points:
        if time.perf_counter() > deadline:
            break
        plans = _plans(kind, n, b)
        x = torch.randn(b, n) if kind == "r2c" else torch.randn(b, n, dtype=torch.complex64)
        for name, us in time_round_robin(plans, x, rounds).items():
            out.append((name, kind, n, b, us))
    return out


def prior_cost(name: str, profile, batch: int = 2) -> LeafCost:
    """The uncalibrated constants of leaf ``name`` as a :class:`LeafCost` at the current threads
    (at the root, where no packing is priced): what the fit starts from and is compared with."""
    solver = next((s for s in solvers() if s.name == name), None)
    speed = getattr(solver, "speed", (1.0, 1.0, 1.0))
    excess = getattr(solver, "call_excess_us", 0.0)
    tf = leafcost.thread_factor(name, profile, batch)
    rate = profile.fft_gflops["float32"]
    return LeafCost(profile.fft_launch_us + excess, tuple(rate / (s * tf) for s in speed))


def _samples(rows, name, plans_shape) -> list:
    return [(plans_shape(kind, n, b), us) for leaf, kind, n, b, us in rows if leaf == name]


def fit_rows(train, heldout, profile) -> tuple[dict, dict]:
    """Fit each leaf on ``train`` rows and score it on ``heldout`` rows: (leaves, per_leaf)."""
    def shape_of(name):
        return lambda kind, n, b: leafcost.LeafShape.of(Problem.create((n,), b, kind=kind), _prime_table(name))

    leaves, per_leaf = {}, {}
    for name in sorted({row[0] for row in train}):
        tr, ho = _samples(train, name, shape_of(name)), _samples(heldout, name, shape_of(name))
        prior = prior_cost(name, profile)
        fitted = leafcost.fit_leaf(tr, prior)
        leaves[name] = fitted
        per_leaf[name] = (leafcost.rms_log(fitted, tr), leafcost.rms_log(fitted, ho), leafcost.rms_log(prior, ho),
                          len(tr) + len(ho))
    return leaves, per_leaf


def _pooled(leaves, rows, profile, prior: bool = False) -> float:
    sq = []
    for name, kind, n, b, us in rows:
        if name not in leaves:
            continue
        cost = prior_cost(name, profile, b) if prior else leaves[name]
        shape = leafcost.LeafShape.of(Problem.create((n,), b, kind=kind), _prime_table(name))
        sq.append(math.log(leafcost.leaf_time_us(cost, shape) / us) ** 2)
    return math.sqrt(sum(sq) / len(sq)) if sq else float("nan")


def fit_cpu_model(cache=None, threads: int | None = None, quick: bool = False, seconds: float | None = None,
                  store: bool = True) -> FitReport:
    """Time the CPU leaves, fit the leaf cost model, score it on the held-out grid, store it.

    Parameters
    ----------
    cache : PlanCache, optional
        Where the fit is stored (under this machine's fingerprint and ``threads``); None: not stored.
    threads : int, optional
        torch's intra-op threads for the timings (restored after); default: the current count.
    quick : bool, default False
        Two batches per length and 5 rounds (about 10 s here, quiet), instead of every batch
        and 9 rounds (about 15-30 s).
    seconds : float, optional
        Stop timing new points after this long (the grids alternate train and held-out points,
        so both stay covered); default 40 quick, 600 otherwise.
    store : bool, default True
        Write the fit into ``cache``.

    Returns
    -------
    FitReport
    """
    start = time.perf_counter()
    before = torch.get_num_threads()
    threads = before if threads is None else threads
    torch.set_num_threads(threads)
    try:
        limit = start + (seconds if seconds is not None else 40.0 if quick else 600.0)
        rounds = 5 if quick else 9
        train_pts, held_pts = grid_points("train", quick), grid_points("heldout", quick)
        share = (limit - start) * len(train_pts) / max(1, len(train_pts) + len(held_pts))
        train = time_grid(train_pts, rounds, start + share)
        heldout = time_grid(held_pts, rounds, limit)
        profile = get_backend("cpu").profile
        leaves, per_leaf = fit_rows(train, heldout, profile)
    finally:
        torch.set_num_threads(before)
    report = FitReport(threads, _pooled(leaves, train, profile), _pooled(leaves, heldout, profile),
                       _pooled(leaves, heldout, profile, prior=True), per_leaf,
                       {"train": train, "heldout": heldout}, time.perf_counter() - start, leaves)
    if store and cache is not None and leaves:
        fpd = fingerprint_digest(fingerprint("cpu"))
        records.store_leaf_fit(cache, fpd, threads, leaves, {
            "rms_heldout": report.rms_heldout, "rms_train": report.rms_train, "rms_default": report.rms_default,
            "heldout": heldout})
        report = attrs.evolve(report, stored=True)
    return report


__all__ = ["FitReport", "fit_cpu_model", "grid_points", "time_round_robin"]
