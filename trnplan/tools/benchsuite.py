"""The benchmark suite: trnplan's plans against the FFT libraries, one table per thread count.

    trnplan bench [--quick] [--out DIR] [--docs PATH] [--threads 1,2] [--rows ID,ID] ...
    python bench/suite.py --quick

Two row sets (``--rows seed``, ``--rows planner``, or row ids). ``seed`` is the seed project's
grid (complex64 unless noted): 1-D c2c fft of 256 … 65536 points, batched 32×1024 and 128×1024,
the Bluestein lengths 127, 997 and 4097, fft2 256² and 1024², fftn 32×64×64, the STFT of 16 000
real samples (n_fft 256, hop 64, Hann window) and rfft of 1024, 4096 and 65536 real points
(float32). ``planner`` (issue 19) holds the sizes the planner was seen losing on (512×192,
2048×512, 64×6000, 1×262144, 8×16385), batched short and mid lengths (256×64, 16×1000, 64×4096)
and the Taylor–Green example's rfftn of 3 × 64³. Columns:

* ``trnplan (estimate)``: ``plan_many(shape, batch, kind)`` through the table's fresh plan
  cache, then ``plan.execute(x)``;
* ``trnplan (measure)``: the same with ``effort="measure"``;
* ``forced NAME``: ``plan_many(..., strategy=NAME)`` for every registered solver (n/a when the
  solver does not apply);
* the libraries, each called the way a PyTorch user calls it on the row's tensor, returning a
  result: torch.fft, numpy.fft, scipy.fft (workers 1 and 2) and mkl_fft as
  ``torch.from_numpy(f(x.numpy()))``; pyFFTW (builders, FFTW_MEASURE, 1 and 2 threads, planned
  outside the timed loop) called on the tensor's data; a library that does not import is
  recorded as absent. ``pyfftw execute-only`` (the prebuilt object executed on its own buffers:
  FFTW's floor, transforming nothing new) is shown but is not a competitor.

Each table (threads 1, threads 2) runs in its own process with a fresh plan cache, so every ratio
of a table comes from one process. Within a row all columns are timed in round-robin rounds after
a warm-up, so drift on a noisy machine hits them alike; each cell gets enough calls for
``--cell-seconds`` (0.2 s, at least ``--min-repeats`` = 5) and reports the median. Derived per
row: the best library (the fastest library column); measure / best against issue 19's goal
(≤ 1.05× where the best takes ≥ 50 µs, ≤ best + 3 µs below); estimate / torch.fft (goal ≤ 1.05:
never slower than the call it replaces); estimate / measure (the estimate's regret); and the
execute overhead: ``plan.execute(x)`` minus the plan's library leaf called directly
(``plan.module.root.library_call(norm)(x)``), for plans whose root has one (goal ≤ 2 µs). Every
trnplan column is checked once against numpy.fft in complex128 (relative L2); a cell over 1e-5 is
flagged.

Writes ``results.json``, ``results.md`` and (with matplotlib) ``time_per_size.png`` to ``--out``;
``--docs PATH`` puts results.md between the ``<!-- bench-suite:start -->`` and
``<!-- bench-suite:end -->`` markers of that file, and the goal lines of every table between its
``<!-- bench-summary:start -->`` and ``<!-- bench-summary:end -->`` markers (the top of
docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import torch

from trnplan._version import __version__
from trnplan.cache import default_cache
from trnplan.core import timing
from trnplan.core.errors import NotSupportedYet, PlanningError
from trnplan.kernels import hostlib
from trnplan.kernels.hostlib import in_mkl_threads, in_threads
from trnplan.plan.api import plan_many
from trnplan.plan.plan import Plan
from trnplan.planner.registry import solver_names
from trnplan.stft import stft
from trnplan.tools.calibrate import fit_cpu_model

__all__ = ["PLANNER_ROWS", "QUICK_ROWS", "ROWS", "ROW_SETS", "add_parser", "main", "markdown", "meets_best_goal",
           "replace_docs_section", "run_table", "summary_lines", "summary_markdown"]

#: relative L2 error (vs numpy.fft in complex128) above which a trnplan cell is flagged: ~170 u32,
#: 10× the engine's fp32 bar of 1e-6 (tests/conftest.py), so only a real accuracy fault trips it
ERROR_FLAG = 1e-5
#: the goals the summary counts rows against (issue 19, "the planner never loses"): measure within
#: 5 % of the best library column where that takes ≥ 50 µs, within 3 µs of it below; the estimate
#: within 5 % of torch.fft (the call it replaces); execute ≤ 2 µs over its library leaf
GOAL_VS_BEST = 1.05
GOAL_SMALL_US, GOAL_SMALL_SLACK_US = 50.0, 3.0
GOAL_VS_TORCH = 1.05
GOAL_REGRET = (1.5, 1.1)
GOAL_OVERHEAD_US = 2.0

DOCS_BEGIN, DOCS_END = "<!-- bench-suite:start -->", "<!-- bench-suite:end -->"
DOCS_HEADING = "## Benchmark suite (`trnplan bench`)"
DEFAULT_OUT = os.path.join("bench", "out", "suite")

EST, MEAS = "trnplan (estimate)", "trnplan (measure)"
#: the library columns "best library" is the fastest of: each transforms the caller's tensor and
#: hands back a result (a numpy array from the library, a tensor from torch)
LIBRARIES = ("torch.fft", "numpy.fft", "scipy.fft w1", "scipy.fft w2", "pyfftw w1", "pyfftw w2", "mkl_fft")
#: library columns that use more threads than torch's in a 1-thread table: not competitors there
#: (a table compares at one thread budget: the best library uses at most the table's threads)
LIBRARY_THREADS = {"scipy.fft w2": 2, "pyfftw w2": 2}
#: library columns a run at torch threads > 1 may add (``run_row(one_thread=True)``): torch.fft and
#: mkl_fft called at one thread (torch's count, :func:`trnplan.kernels.hostlib.in_threads`; MKL's
#: own thread-local count for mkl_fft, :func:`trnplan.kernels.hostlib.in_mkl_threads`, which
#: ``MKL_NUM_THREADS`` cannot override: through torch's count alone the "w1" column ran two threads
#: in bench/measure_busy.py's children, which set that variable); measured planning times those
#: calls too, so the best library includes them
ONE_THREAD_LIBRARIES = ("torch.fft w1", "mkl_fft w1")
#: informational, not a competitor: a prebuilt FFTW object executed on its own input buffer with no
#: argument: it transforms no new data (a copy of the row's input planted once) and returns FFTW's
#: internal output array, overwritten by the next call: FFTW's floor, not a call that could replace torch.fft
PYFFTW_EXECUTE = "pyfftw execute-only"
#: the suffix of a library column's second call (``run_row(null=True)``): the measurement's floor
AGAIN = " [again]"

STFT_N, STFT_NFFT, STFT_HOP = 16000, 256, 64


@dataclass(frozen=True)
class Row:
    """One benchmark row.

    Attributes
    ----------
    id : str
        Short name used by ``--rows`` and as the JSON key, e.g. ``"fft-1x4096"``.
    op : str
        ``"fft"``, ``"fft2"``, ``"fftn"``, ``"rfft"`` or ``"stft"``.
    shape : tuple of int
        Transform shape (for ``"stft"``: the signal length).
    batch : int
        Transforms per call.
    """

    id: str
    op: str
    shape: tuple
    batch: int = 1

    @property
    def kind(self) -> str:
        return "r2c" if self.op in ("rfft", "rfftn", "stft") else "c2c"

    @property
    def label(self) -> str:
        dims = "×".join(map(str, self.shape))
        if self.op == "stft":
            return f"stft {dims} (n_fft {STFT_NFFT}, hop {STFT_HOP})"
        if self.op in ("fft", "rfft") or self.batch > 1:
            return f"{self.op} {self.batch}×{dims}"
        return f"{self.op} {dims}"

    @property
    def one_d_batch_one(self) -> bool:
        """A 1-D c2c transform at batch 1 (the rows of the time-per-size plot)."""
        return self.op == "fft" and self.batch == 1


def _fft(n, batch=1):
    return Row(f"fft-{batch}x{n}", "fft", (n,), batch)


#: the planner rows (issue 19): the sizes the issue measured trnplan losing on (512×192 …
#: 8×16385), batched short and mid lengths, a 1000-point (2³·5³) length, and the Taylor–Green
#: example's r2c of three 64³ fields (examples/taylor_green.py)
PLANNER_ROWS = (
    _fft(192, 512), _fft(512, 2048), _fft(6000, 64), _fft(262144, 1), _fft(16385, 8),
    _fft(64, 256), _fft(1000, 16), _fft(4096, 64),
    Row("rfftn-3x64x64x64", "rfftn", (64, 64, 64), 3),
)


ROWS = (
    *(_fft(n) for n in (256, 1024, 4096, 16384, 65536)),
    _fft(1024, 32), _fft(1024, 128),
    *(_fft(n) for n in (127, 997, 4097)),  # Bluestein lengths (prime, prime, 17·241)
    Row("fft2-256x256", "fft2", (256, 256)), Row("fft2-1024x1024", "fft2", (1024, 1024)),
    Row("fftn-32x64x64", "fftn", (32, 64, 64)),
    Row(f"stft-{STFT_N}", "stft", (STFT_N,)),
    *(Row(f"rfft-1x{n}", "rfft", (n,)) for n in (1024, 4096, 65536)),
)
QUICK_ROWS = ("fft-1x256", "fft-1x4096", "fft-32x1024", "fft2-256x256", "fft-512x192")
#: named row sets for --rows
ROW_SETS = {"seed": tuple(r.id for r in ROWS), "planner": tuple(r.id for r in PLANNER_ROWS)}
ROWS_BY_ID = {r.id: r for r in (*ROWS, *PLANNER_ROWS)}


# ------------------------------------------------------------------------------ the libraries
def _versions() -> dict:
    out = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
           "trnplan": __version__}
    hostlib.library_module("pyfftw")  # pyFFTW bound to its own FFTW, not MKL's wrappers (fftw.import_pyfftw)
    for name in ("scipy", "pyfftw", "mkl_fft", "matplotlib"):
        try:
            out[name] = getattr(__import__(name), "__version__", "unknown")
        except ImportError:
            out[name] = None
    return out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _library_fns(row: Row, x: torch.Tensor, threads: int, one_thread: bool = False) -> dict:
    """Column name → callable (or the string reason it is absent) for every library column.

    Every library column takes the row's tensor and returns a tensor, as the call a PyTorch user
    would write: ``torch.from_numpy(f(x.numpy()))`` for the numpy-based libraries (0.5 µs each
    way, measured), torch.fft on the tensor. Plus :data:`PYFFTW_EXECUTE`, FFTW's floor.
    """
    fns: dict = {}
    if row.op == "stft":
        w = torch.hann_window(STFT_NFFT)
        fns["torch.fft"] = lambda: torch.stft(x, STFT_NFFT, STFT_HOP, window=w, return_complex=True)
        for name in (*LIBRARIES[1:], PYFFTW_EXECUTE):
            fns[name] = "n/a: no STFT in this library"
        return fns
    name = {"fft": "fft", "rfft": "rfft", "fft2": "fftn", "fftn": "fftn", "rfftn": "rfftn"}[row.op]
    axes = tuple(range(-len(row.shape), 0))
    kw = {"axes": axes} if name.endswith("n") else {}
    tf = getattr(torch.fft, name)
    fns["torch.fft"] = (lambda: tf(x, dim=axes)) if kw else (lambda: tf(x))
    fns["numpy.fft"] = _numpy_call(getattr(np.fft, name), x, **kw)
    fns.update(_scipy_fns(name, x, kw))
    fns.update(_pyfftw_fns(name, x, kw))
    try:
        import mkl_fft  # deferred: optional (the mkl extra); absent, the column says so

        fns["mkl_fft"] = _numpy_call(getattr(mkl_fft, name), x, **kw)
    except ImportError as exc:
        fns["mkl_fft"] = f"absent: {exc}"
    if one_thread:  # the calls that follow torch's OpenMP count, at one thread
        for col, base in zip(ONE_THREAD_LIBRARIES, ("torch.fft", "mkl_fft")):
            at_one = in_mkl_threads if base == "mkl_fft" else in_threads
            fns[col] = base if isinstance(fns[base], str) else at_one(fns[base], 1)
    return fns


def _numpy_call(fn, x: torch.Tensor, **kw):
    """``torch.from_numpy(fn(x.numpy(), **kw))``: a numpy-based library's call on the row's tensor,
    as a PyTorch user writes it. The tensor's numpy view is taken in the call, as the plan's leaf
    takes it: a view made once outside the timed call left out that step (and whatever it does to
    the allocator between calls), and the same mkl_fft call measured 1.02× faster than the plan's
    leaf in paired rounds (4×16385, 2026-11-27)."""
    return lambda: torch.from_numpy(fn(x.numpy(), **kw))


def _scipy_fns(name: str, x: torch.Tensor, kw: dict) -> dict:
    try:
        import scipy.fft  # deferred: optional (the bench extra)
    except ImportError as exc:  # scipy is the bench extra, not a dependency
        return {"scipy.fft w1": f"absent: {exc}", "scipy.fft w2": f"absent: {exc}"}
    sf = getattr(scipy.fft, name)
    return {f"scipy.fft w{w}": _numpy_call(sf, x, workers=w, **kw) for w in (1, 2)}


def _pyfftw_fns(name: str, x: torch.Tensor, kw: dict) -> dict:
    """pyFFTW with 1 and 2 threads, prebuilt (FFTW_MEASURE, outside the timed loop), called on the
    row's data: pyFFTW's ``__call__`` points the plan at an aligned array (copying a misaligned
    one) and returns the object's own output array, overwritten by the next call — no output
    allocation, which favours pyFFTW; and its execute-only floor (:data:`PYFFTW_EXECUTE`)."""
    pyfftw = hostlib.library_module("pyfftw")  # with its builders, bound to its own FFTW (fftw.import_pyfftw)
    if pyfftw is None:  # optional (the fftw extra): absent, the columns say so
        why = hostlib.unusable("pyfftw") or "not installed"
        return {c: f"absent: {why}" for c in ("pyfftw w1", "pyfftw w2", PYFFTW_EXECUTE)}
    build = getattr(pyfftw.builders, name)
    xnp = x.numpy()
    fns: dict = {}
    for w in (1, 2):
        # FFTW_MEASURE overwrites the array it plans on: the builder plans on its own copy
        fftw = build(xnp.copy(), planner_effort="FFTW_MEASURE", threads=w, **kw)
        fns[f"pyfftw w{w}"] = (lambda f=fftw: torch.from_numpy(f(x.numpy())))
    fns[PYFFTW_EXECUTE] = build(xnp.copy(), planner_effort="FFTW_MEASURE", threads=1, **kw)
    return fns


# ------------------------------------------------------------------------------ trnplan columns
def _plan_or_reason(row: Row, **kw):
    """``plan_many`` for the row, or the string reason it is not available."""
    try:
        # through the table's fresh cache (TRNPLAN_CACHE_DIR), where the cost-model fit is stored
        return plan_many(row.shape, batch=row.batch, kind=row.kind, **kw)
    except NotSupportedYet as exc:
        return f"not available: {exc}"
    except PlanningError as exc:
        return f"n/a: {str(exc).splitlines()[0][:200]}"


def _trnplan_columns(row: Row, x: torch.Tensor, forced: bool = True) -> dict:
    """Column name → Plan (or a callable for the STFT row, or the reason it is not available);
    the ``forced NAME`` columns only where ``forced``."""
    if row.op == "stft":
        w = torch.hann_window(STFT_NFFT)
        cols = {EST: lambda: stft(x, STFT_NFFT, STFT_HOP, window=w, return_complex=True),
                MEAS: "n/a: trnplan.stft takes no effort argument"}
        for name in solver_names():
            cols[f"forced {name}"] = "n/a: trnplan.stft takes no strategy argument"
        return cols
    cols = {EST: _plan_or_reason(row), MEAS: _plan_or_reason(row, effort="measure")}
    for name in solver_names() if forced else ():
        cols[f"forced {name}"] = _plan_or_reason(row, strategy=name)
    return cols


def _reference(row: Row, x: torch.Tensor) -> np.ndarray:
    """numpy.fft in complex128 (float64 for real input) of the complex64/float32 input."""
    x64 = x.numpy().astype(np.float64 if row.kind == "r2c" else np.complex128)
    if row.op == "stft":
        w = torch.hann_window(STFT_NFFT).numpy().astype(np.float64)
        pad = STFT_NFFT // 2
        frames = np.lib.stride_tricks.sliding_window_view(np.pad(x64, pad, mode="reflect"), STFT_NFFT)[::STFT_HOP]
        return np.fft.rfft(frames * w).T
    axes = tuple(range(-len(row.shape), 0))
    if row.op == "rfftn":
        return np.fft.rfftn(x64, axes=axes)
    return np.fft.rfft(x64) if row.op == "rfft" else np.fft.fftn(x64, axes=axes)


def _rel_l2(y, ref) -> float:
    y = y.detach().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def _input(row: Row, rng) -> torch.Tensor:
    shape = row.shape if row.op == "stft" else (row.batch, *row.shape)
    if row.kind == "r2c":
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return torch.from_numpy(z.astype(np.complex64))


# ------------------------------------------------------------------------------ timing
#: a bench cell's sample: calls in a row lasting about this long. On a busy machine the scheduler
#: takes the CPU away for 4-12 ms every ~2 ms of calls (bench/dropin.py's measurement here); a
#: sample of ~100 µs rarely holds such a stall, and the median over the rounds leaves those out
CELL_SAMPLE_S = 100e-6


def time_cells(fns: dict, cell_seconds: float, min_repeats: int, max_repeats: int = 10000,
               rounds: int = 5, keep_samples: bool = False) -> dict:
    """Median, min and count of per-call times (µs) of each callable, timed side by side.

    trnplan's one timer (:func:`trnplan.core.timing.round_robin`): each callable is warmed up, its
    call time estimated, and it is given ``clamp(cell_seconds / estimate, min_repeats,
    max_repeats)`` timed calls in samples of about :data:`CELL_SAMPLE_S` (at least ``rounds``
    samples), one sample per round-robin round, so that drift on a busy machine hits every column
    alike; each round starts every callable with one untimed call (it re-warms the caches the
    other columns evicted). The rounds stop once twice ``cell_seconds`` per cell has passed and
    every cell has ``rounds`` samples and ``min_repeats`` calls, so a loaded machine cannot stretch
    a row without bound.

    Parameters
    ----------
    fns : dict of str to callable
        The cells of one row (each synchronises its device itself, where it has one).
    cell_seconds : float
        Target timed seconds per cell.
    min_repeats, max_repeats : int
        Bounds on the number of timed calls per cell.
    rounds : int, default 5
        The least number of samples per cell (round-robin rounds).
    keep_samples : bool, default False
        Also return each cell's per-round samples (``"samples_us"``: µs per call, one per round,
        the rounds aligned across cells), for per-round ratios (:func:`per_round_ratio`).

    Returns
    -------
    dict of str to dict
        ``{"us": median, "min_us": min, "repeats": count}`` per callable: the median and the least
        of its samples' per-call times, and its timed calls.
    """
    runners, wanted = [], []
    for fn in fns.values():
        fn()
        inner, one = timing.calls_per_sample(fn, timing.no_sync, CELL_SAMPLE_S)
        want = int(min(max(math.ceil(cell_seconds / one), min_repeats), max_repeats))
        runners.append((fn, max(1, min(inner, want // max(rounds, 1)))))
        wanted.append(want)
    most = max((math.ceil(w / inner) for w, (_, inner) in zip(wanted, runners)), default=1)
    least = max([rounds, *(math.ceil(min_repeats / inner) for _, inner in runners)])
    samples = timing.round_robin(runners, timing.no_sync, max(most, least), stop_s=2 * cell_seconds * len(fns),
                                 min_rounds=least)
    out = {k: {"us": statistics.median(v) * 1e6, "min_us": min(v) * 1e6, "repeats": len(v) * inner}
           for k, v, (_, inner) in zip(fns, samples, runners)}
    if keep_samples:
        for k, v in zip(fns, samples):
            out[k]["samples_us"] = [t * 1e6 for t in v]
    return out


def per_round_ratio(ours: list, libraries: dict) -> float | None:
    """The plan's time over the best library's, from paired per-round ratios.

    Every column is timed once per round (:func:`time_cells`), so a neighbour's load burst lands
    on the round's columns alike and cancels in the round's ratio, where a ratio of medians
    compares one column's loaded rounds with another's quiet ones. Per library, the median over
    the rounds of ``ours[r] / library[r]``; the result is the largest of those: the ratio to the
    library that is fastest against the plan, paired round by round. (Dividing each round by the
    least of all libraries' samples instead compares the plan with the luckiest of ten noisy
    samples: biased against any one column, the plan's own call included.)

    Parameters
    ----------
    ours : list of float
        One trnplan column's per-round samples.
    libraries : dict of str to list of float
        Each library column's per-round samples (the same rounds).

    Returns
    -------
    float or None
        The largest per-library median per-round ratio; None without samples or libraries.
    """
    ratios = [statistics.median(a / b for a, b in zip(ours, v)) for v in libraries.values() if v and ours]
    return max(ratios) if ratios else None


def null_ratio(libraries: dict, again: dict) -> tuple:
    """The measurement's floor: :func:`per_round_ratio` of a second call of the best library.

    The best library is the column that, taken as the plan, scores least against all columns
    (itself included) by :func:`per_round_ratio`; chosen from the first calls' samples alone, so
    the second call's samples (timed in the same rounds, a call built anew) carry their own noise
    as a plan's call does. Its score is what a planner that picked that library in hindsight and
    added no cost would get: the ratio's noise floor on this machine, for the same rounds.

    Parameters
    ----------
    libraries : dict of str to list of float
        Each library column's per-round samples.
    again : dict of str to list of float
        The same columns' second calls' per-round samples (the same rounds).

    Returns
    -------
    (str or None, float or None)
        The best library and its second call's ratio; ``(None, None)`` without samples.
    """
    scores = {c: per_round_ratio(v, libraries) for c, v in libraries.items() if v and again.get(c)}
    scores = {c: r for c, r in scores.items() if r is not None}
    if not scores:
        return None, None
    best = min(scores, key=scores.get)
    return best, per_round_ratio(again[best], libraries)


def mean_time_ratio(ours: list, libraries: dict) -> float | None:
    """The plan's mean time per call over the library with the least mean, over the same rounds.

    What a loop of calls costs in total: a stalled round counts with its full time, where a
    median of per-round ratios (:func:`per_round_ratio`) leaves it out. On a loaded 2-core machine
    a two-thread library that stalls in a third of its rounds (15 ms against 650 µs) has the better
    median and by far the worse total; an adaptive leaf that backs off to one thread pays ~1.5×
    in the median and saves in the total. Both are reported; neither alone is the user's cost.

    Parameters
    ----------
    ours : list of float
        One trnplan column's per-round samples.
    libraries : dict of str to list of float
        Each library column's per-round samples (the same rounds).

    Returns
    -------
    float or None
        ``mean(ours) / min(mean(v) for v in libraries)``; None without samples or libraries.
    """
    means = [statistics.fmean(v) for v in libraries.values() if v]
    return statistics.fmean(ours) / min(means) if ours and means else None


# ------------------------------------------------------------------------------ one table
def run_row(row: Row, threads: int, cell_seconds: float, min_repeats: int, rng, rounds: int = 5,
            forced: bool = True, one_thread: bool = False, null: bool = False) -> dict:
    """Time every column of one row in this process; return the row's JSON record.

    ``rounds`` is the least number of round-robin rounds (:func:`time_cells`); ``forced=False``
    leaves out the ``forced NAME`` columns; ``one_thread`` adds :data:`ONE_THREAD_LIBRARIES` and
    the derived ``measure_vs_best_per_round`` (:func:`per_round_ratio`). ``null`` (with
    ``one_thread``) times every library column twice, the second a call built anew in the same
    rounds, and adds the derived ``null_library`` and ``null_vs_best_per_round``
    (:func:`null_ratio`): what a planner that picked the best library in hindsight and called it
    with no overhead would score by the same statistic, the measurement's own floor."""
    x = _input(row, rng)
    ref = _reference(row, x)
    cells: dict = {}
    fns: dict = {}
    ours = _trnplan_columns(row, x, forced)
    for col, got in {**ours, **_library_fns(row, x, threads, one_thread)}.items():
        if isinstance(got, str):
            cells[col] = {"us": None, "status": got.split(":", 1)[0], "reason": got}
            continue
        cell: dict = {"us": None, "status": "ok"}
        if isinstance(got, Plan):
            plan = got
            fns[col] = (lambda p=plan: p.execute(x))
            cell["tree"] = str(plan.tree)
            if col in (EST, MEAS) and hasattr(plan.module.root, "library_call"):
                # the leaf alone: what execute() adds on top of it is the overhead
                leaf = plan.module.root.library_call(plan.problem.norm)
                fns[col + " [leaf]"] = (lambda f=leaf: f(x))
        else:
            fns[col] = got
            if row.op == "stft" and col == EST:
                # trnplan.stft runs one batched r2c plan over all frames; this is its tree
                frames = 1 + row.shape[0] // STFT_HOP
                cell["tree"] = str(_plan_or_reason(Row("", "rfft", (STFT_NFFT,), frames)).tree)
        if col in ours:  # a trnplan column: checked once against numpy.fft in complex128
            cell["error"] = _rel_l2(fns[col](), ref)
            cell["error_flag"] = cell["error"] > ERROR_FLAG
        cells[col] = cell
    if null:  # the second calls: timed, not cells of the row
        fns.update({c + AGAIN: f for c, f in _library_fns(row, x, threads, one_thread).items()
                    if c in (*LIBRARIES, *ONE_THREAD_LIBRARIES) and not isinstance(f, str)})
    timed = time_cells(fns, cell_seconds, min_repeats, rounds=rounds, keep_samples=one_thread)
    samples = {col: t.pop("samples_us", None) for col, t in timed.items()}
    for col, t in timed.items():
        if col.endswith(" [leaf]"):
            base = cells[col[: -len(" [leaf]")]]
            base["leaf_us"] = t["us"]
            base["overhead_us"] = timed[col[: -len(" [leaf]")]]["us"] - t["us"]
        elif not col.endswith(AGAIN):
            cells[col].update(t)
    derived = derive(cells, threads)
    if one_thread:
        derived.update(_per_round(samples, threads, null))
    return {"id": row.id, "label": row.label, "op": row.op, "shape": list(row.shape), "batch": row.batch,
            "kind": row.kind, "dtype": "float32" if row.kind == "r2c" else "complex64", "cells": cells,
            "derived": derived}


def _per_round(samples: dict, threads: int, null: bool) -> dict:
    """The derived figures of paired rounds: the measured plan's per-round and mean-time ratios to
    the best library (:func:`per_round_ratio`, :func:`mean_time_ratio`), and with ``null`` the
    floor (:func:`null_ratio`)."""
    libs = {c: samples[c] for c in (*LIBRARIES, *ONE_THREAD_LIBRARIES) if samples.get(c)
            and LIBRARY_THREADS.get(c, 1) <= threads}
    out = {"measure_vs_best_per_round": per_round_ratio(samples.get(MEAS) or [], libs),
           "measure_vs_best_mean": mean_time_ratio(samples.get(MEAS) or [], libs)}
    if null:
        out["null_library"], out["null_vs_best_per_round"] = null_ratio(libs, {c: samples.get(c + AGAIN) for c in libs})
    return out


def derive(cells: dict, threads: int | None = None) -> dict:
    """The derived columns of one row from its cells (see the module docstring); the best library
    among the columns using at most ``threads`` threads (all when None)."""
    libs = {c: cells[c]["us"] for c in (*LIBRARIES, *ONE_THREAD_LIBRARIES) if c in cells and cells[c].get("us") is not None
            and (threads is None or LIBRARY_THREADS.get(c, 1) <= threads)}
    best = min(libs, key=libs.get) if libs else None
    est, meas, tfft = (cells.get(c, {}).get("us") for c in (EST, MEAS, "torch.fft"))
    best_us = libs[best] if best else None

    def ratio(a, b):
        return a / b if a is not None and b else None

    return {"best_library": best, "best_library_us": best_us,
            "measure_vs_best": ratio(meas, best_us), "estimate_vs_best": ratio(est, best_us),
            "measure_goal": meets_best_goal(meas, best_us), "estimate_goal": meets_best_goal(est, best_us),
            "estimate_vs_torch": ratio(est, tfft), "measure_vs_torch": ratio(meas, tfft),
            "regret": ratio(est, meas),
            "overhead_us": cells.get(EST, {}).get("overhead_us"),
            "measure_overhead_us": cells.get(MEAS, {}).get("overhead_us"),
            "flagged": sorted(c for c, v in cells.items() if v.get("error_flag"))}


def meets_best_goal(us: float | None, best_us: float | None) -> bool | None:
    """Whether a trnplan cell meets issue 19's goal against the best library column: within
    :data:`GOAL_VS_BEST` × where the best takes ≥ :data:`GOAL_SMALL_US`, within
    :data:`GOAL_SMALL_SLACK_US` µs of it below (None: a cell not timed)."""
    if us is None or best_us is None:
        return None
    if best_us >= GOAL_SMALL_US:
        return us <= GOAL_VS_BEST * best_us
    return us <= best_us + GOAL_SMALL_SLACK_US


def fit_cost_model(threads: int, seconds: float | None) -> dict:
    """Fit the CPU leaf cost model in this process (:func:`trnplan.tools.calibrate.fit_cpu_model`, the
    quick grids), store it in the table's plan cache, and report its error on the held-out grid."""
    t0 = time.perf_counter()
    try:
        report = fit_cpu_model(default_cache(), threads=threads, quick=True, seconds=seconds)
    except Exception as exc:  # noqa: BLE001 - a failed fit is reported in the table, the bench goes on
        return {"error": f"{type(exc).__name__}: {exc}"[:300], "seconds": time.perf_counter() - t0}
    return {"rms_train": report.rms_train, "rms_heldout": report.rms_heldout, "rms_default": report.rms_default,
            "train_points": len(report.grid["train"]), "heldout_points": len(report.grid["heldout"]),
            "stored": report.stored, "seconds": report.seconds,
            "per_leaf": {k: list(v[:3]) for k, v in report.per_leaf.items()}}


def run_table(threads: int, row_ids, cell_seconds: float, min_repeats: int, fit_seconds: float | None = 40.0) -> dict:
    """One table: every row at ``threads`` torch threads, all in this process; first (unless
    ``fit_seconds`` is None) the cost model's fit, so the estimate columns plan with it."""
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    load_before = os.getloadavg()
    rows = []
    t_start = time.perf_counter()
    cost_model = fit_cost_model(threads, fit_seconds) if fit_seconds is not None else None
    if cost_model is not None:
        print(f"[threads {threads}] cost model: {_cost_model_line(cost_model)}", file=sys.stderr, flush=True)
    for i, rid in enumerate(row_ids):
        t0 = time.perf_counter()
        rows.append(run_row(ROWS_BY_ID[rid], threads, cell_seconds, min_repeats, rng))
        d = rows[-1]["derived"]
        est = rows[-1]["cells"][EST].get("us")
        print(f"[threads {threads}] {i + 1}/{len(row_ids)} {rows[-1]['label']}: estimate "
              f"{_fmt(est)} µs, best library {d['best_library']} {_fmt(d['best_library_us'])} µs "
              f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    return {"threads": threads, "torch_threads": torch.get_num_threads(),
            "mkl_num_threads": os.environ.get("MKL_NUM_THREADS"),
            "cell_seconds": cell_seconds, "min_repeats": min_repeats,
            "load_before": list(load_before), "load_after": list(os.getloadavg()), "cost_model": cost_model,
            "wall_s": time.perf_counter() - t_start, "rows": rows}


# ------------------------------------------------------------------------------ markdown
def _fmt(us) -> str:
    if us is None:
        return "—"
    return f"{us:.0f}" if us >= 1000 else f"{us:.1f}"


def _ratio(v, goal=None) -> str:
    if v is None:
        return "—"
    return f"{v:.2f}" + (" ⚠" if goal is not None and v > goal else "")


def _columns(table: dict) -> tuple[list, dict]:
    """Columns with at least one timed cell, in order; and the reasons of the dropped ones."""
    order = []
    for r in table["rows"]:
        for c in r["cells"]:
            if c not in order:
                order.append(c)
    shown, dropped = [], {}
    for c in order:
        cells = [r["cells"][c] for r in table["rows"] if c in r["cells"]]
        if any(v.get("us") is not None for v in cells):
            shown.append(c)
        else:
            dropped[c] = next((v["reason"] for v in cells if v.get("reason")), "not timed")
    return shown, dropped


def markdown_table(table: dict) -> str:
    """One thread count's table, its trees and its summary, as markdown."""
    cols, dropped = _columns(table)
    head = ["row", *cols, "best library", "measure / best", "estimate / torch.fft", "estimate / measure",
            "overhead µs"]
    lines = [(f"### {table['threads']} thread{'s' if table['threads'] > 1 else ''} "
             f"(torch threads {table['torch_threads']}; µs, median)"), "",
             "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in table["rows"]:
        d = r["derived"]
        cells = []
        for c in cols:
            v = r["cells"].get(c, {})
            cells.append(_fmt(v.get("us")) + (" ⚠err" if v.get("error_flag") else ""))
        miss = " ⚠" if d.get("measure_goal") is False else ""
        lines.append(f"| {r['label']} | " + " | ".join(cells)
                     + f" | {d['best_library'] or '—'} | {_ratio(d['measure_vs_best'])}{miss} "
                       f"| {_ratio(d.get('estimate_vs_torch'), GOAL_VS_TORCH)} | {_ratio(d['regret'], GOAL_REGRET[0])} "
                       f"| {_fmt(d['overhead_us'])} |")
    lines += ["", "| row | estimate tree | measure tree | trnplan max error |", "|---|---|---|---:|"]
    for r in table["rows"]:
        errs = [v["error"] for v in r["cells"].values() if v.get("error") is not None]
        trees = [f"`{r['cells'][c]['tree']}`" if r["cells"].get(c, {}).get("tree") else "—" for c in (EST, MEAS)]
        lines.append(f"| {r['label']} | {trees[0]} | {trees[1]} | {f'{max(errs):.1e}' if errs else '—'} |")
    notes = [f"{c} ({why})" for c, why in dropped.items() if not c.startswith("forced ")]
    forced = [c.removeprefix("forced ") for c in dropped if c.startswith("forced ")]
    if forced:
        notes.append("forced solvers that apply to no row here: " + ", ".join(forced))
    if notes:
        lines += ["", "Columns left out (no timed cell; kept in results.json): " + "; ".join(notes) + "."]
    lines += ["", f"Summary, {table['threads']} thread(s), {len(table['rows'])} rows:", "",
              *(f"- {line}" for line in summary_lines(table))]
    return "\n".join(lines)


def _count(rows: list, key: str, goal: float | None = None) -> str:
    """"k of n rows" meeting ``goal`` (a bound on a ratio) or true (a goal flag); n counts timed rows."""
    vals = [d.get(key) for d in rows if d.get(key) is not None]
    if not vals:
        return "not measured"
    met = sum((v <= goal) if goal is not None else bool(v) for v in vals)
    return f"{met} of {len(vals)} rows"


def summary_lines(table: dict) -> list:
    """The goal counts of one table (issue 19's "done when"), one line each."""
    rows = [r["derived"] for r in table["rows"]]
    flagged = sum(len(d["flagged"]) for d in rows)
    misses = [f"{r['label']} ({_ratio(r['derived']['measure_vs_best'])}× {r['derived']['best_library']})"
              for r in table["rows"] if r["derived"].get("measure_goal") is False]
    return [
        (f"trnplan (measure) within {GOAL_VS_BEST}× the best library (≥ {GOAL_SMALL_US:g} µs) or "
         f"{GOAL_SMALL_SLACK_US:g} µs of it (below): **{_count(rows, 'measure_goal')}**"
         + (f"; missed: {', '.join(misses)}" if misses else "")),
        (f"trnplan (estimate) within {GOAL_VS_TORCH}× torch.fft: **{_count(rows, 'estimate_vs_torch', GOAL_VS_TORCH)}** "
         f"(measure: {_count(rows, 'measure_vs_torch', GOAL_VS_TORCH)}; estimate against the best-library goal: "
         f"{_count(rows, 'estimate_goal')})"),
        _cost_model_line(table.get("cost_model")),
        (f"regret estimate / measure ≤ {GOAL_REGRET[0]}: {_count(rows, 'regret', GOAL_REGRET[0])}; "
         f"≤ {GOAL_REGRET[1]}: {_count(rows, 'regret', GOAL_REGRET[1])}"),
        (f"execute overhead ≤ {GOAL_OVERHEAD_US:g} µs over its library leaf (estimate plans with a library leaf at "
         f"the root): {_count(rows, 'overhead_us', GOAL_OVERHEAD_US)}"),
        f"trnplan cells over {ERROR_FLAG:g} relative L2 error: {flagged}",
    ]


def _cost_model_line(report: dict | None) -> str:
    if not report:
        return "cost model: not fitted in this run (no held-out error measured)"
    if report.get("error"):
        return f"cost model: the fit failed ({report['error']})"
    return (f"cost model (fitted at the start of this table on {report['train_points']} leaf timings): rms "
            f"log-error **{report['rms_heldout']:.2f}** on the held-out grid of {report['heldout_points']} "
            f"(goal ≤ 0.3; uncalibrated constants {report['rms_default']:.2f} there; {report['rms_train']:.2f} on "
            f"the training grid; {report['seconds']:.0f} s)")


def markdown(result: dict) -> str:
    """results.md: the header, one table per thread count, and the plot line."""
    m = result["machine"]
    versions = ", ".join(f"{k} {m['versions'][k]}" for k in ("torch", "numpy", "scipy", "pyfftw", "mkl_fft", "trnplan")
                         if m["versions"].get(k))
    parts = [(f"Measured {result['when']} on {m['cpu']} ({m['cores']} cores), Python {m['versions']['python']}, "
             f"{versions}; `trnplan bench{' --quick' if result['quick'] else ''}`, {result['wall_s']:.0f} s."),
             "",
             ("Median µs per call of warm plans (complex64; rfft, rfftn and STFT rows float32 in). Each table "
             "ran in its own process with a fresh plan cache; the columns of a row were timed in round-robin "
             "rounds, so read ratios within a row. Library columns take the row's tensor and return a result, "
             "as a PyTorch user would call them (`torch.from_numpy(f(x.numpy()))`; pyFFTW: a prebuilt "
             "FFTW_MEASURE object with 1 or 2 threads called on the tensor's data, returning its own output "
             "array; scipy.fft with workers 1 and 2); the best library is the fastest using at most the "
             "table's threads (w2 columns are shown but do not compete in the 1-thread table); `pyfftw execute-only` (FFTW's floor: the prebuilt "
             "object executed on its own buffers, transforming nothing new) is shown but is not a "
             "competitor. measure / best: trnplan (measure) over the fastest library column (⚠: misses the "
             "goal, ≤ 1.05× at ≥ 50 µs, ≤ best + 3 µs below); estimate / torch.fft: the estimate against "
             "the call it replaces (⚠ above 1.05); estimate / measure: the estimate's regret (⚠ above 1.5); "
             "overhead: `plan.execute(x)` minus its library leaf called directly (goal ≤ 2 µs). ⚠err: "
             "relative L2 error vs numpy.fft complex128 over 1e-5.")]
    for table in result["tables"]:
        parts += ["", markdown_table(table)]
    parts += ["", result["plot"]]
    return "\n".join(parts) + "\n"


# ------------------------------------------------------------------------------ plot and docs
SUMMARY_BEGIN, SUMMARY_END = "<!-- bench-summary:start -->", "<!-- bench-summary:end -->"


def summary_markdown(result: dict) -> str:
    """The goal lines of every table, for the top of docs/benchmarks.md (its summary markers)."""
    m = result["machine"]
    lines = [(f"`trnplan bench` of {result['when']} on {m['cpu']} ({m['cores']} cores), "
             f"{len(result['settings']['rows'])} rows (seed grid and planner rows), the full tables below:")]
    for table in result["tables"]:
        lines += ["", f"{table['threads']} thread(s):", "", *(f"- {line}" for line in summary_lines(table))]
    return "\n".join(lines)


def plot(result: dict, path: str) -> str:
    """Write the log-log time-per-size plot; return the line results.md gets about it."""
    try:
        import matplotlib  # deferred: optional (the plot extra); absent, no plot

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("Plot skipped: matplotlib is not importable (`pip install 'trnplan[plot]'` for "
                "time_per_size.png).")
    tables = result["tables"]
    fig, axes = plt.subplots(1, len(tables), figsize=(6.5 * len(tables), 4.8), squeeze=False)
    for ax, table in zip(axes[0], tables):
        rows = sorted((r for r in table["rows"] if ROWS_BY_ID[r["id"]].one_d_batch_one), key=lambda r: r["shape"][0])
        for col in (EST, MEAS, *LIBRARIES):
            pts = [(r["shape"][0], r["cells"][col]["us"]) for r in rows
                   if r["cells"].get(col, {}).get("us") is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", lw=2.2 if col.startswith("trnplan") else 1.2, label=col)
        ax.set(xscale="log", yscale="log", xlabel="transform size n (1-D c2c, batch 1)", ylabel="µs per call",
               title=f"{table['threads']} thread(s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"Plot: `{os.path.basename(path)}` (time per size, 1-D c2c batch-1 rows, log-log) in the output directory."


def replace_docs_section(path: str, text: str, begin: str = DOCS_BEGIN, end: str = DOCS_END,
                         heading: str = DOCS_HEADING) -> None:
    """Put ``text`` between the bench-suite markers (``begin``/``end``) of ``path``.

    Only the text between the markers changes; the rest of the file is kept byte for byte. When
    the markers are absent they are appended at the end, after a ``DOCS_HEADING`` line.

    Parameters
    ----------
    path : str
        The markdown file (created if missing).
    text : str
        The new section body (results.md's content).
    begin, end, heading : str, optional
        Other markers and heading (the summary section at the top of docs/benchmarks.md).
    """
    old = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    body = f"{begin}\n{text.rstrip()}\n{end}"
    i = old.find(begin)
    j = old.find(end, i + len(begin)) if i >= 0 else -1
    if i >= 0 and j >= 0:
        new = old[:i] + body + old[j + len(end):]
    else:  # first time: a heading of its own, outside the markers, so later runs leave it alone
        new = (old.rstrip("\n") + "\n\n" if old.strip() else "") + f"{heading}\n\n{body}\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)


# ------------------------------------------------------------------------------ command line
def _int_list(text: str) -> list:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _row_list(text: str) -> list:
    ids = []
    for v in (v.strip() for v in text.split(",") if v.strip()):
        ids.extend(ROW_SETS.get(v, (v,)))  # a set name stands for its rows
    unknown = [v for v in ids if v not in ROWS_BY_ID]
    if unknown or not ids:
        raise argparse.ArgumentTypeError(f"unknown row id(s) {', '.join(unknown) or text!r}; known: {', '.join(ROWS_BY_ID)}")
    return ids


def _configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--quick", action="store_true",
                   help=f"rows {', '.join(QUICK_ROWS)}, threads 1 only, shorter cells (under ~90 s)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    p.add_argument("--docs", default=None, metavar="PATH",
                   help=f"also write results.md between the {DOCS_BEGIN} / {DOCS_END} markers of PATH "
                        "(appended at the end if absent)")
    p.add_argument("--threads", type=_int_list, default=None,
                   help="thread counts, one table (and one process) each (default 1,2; --quick: 1)")
    p.add_argument("--rows", type=_row_list, default=None,
                   help="comma-separated row ids or set names (" + ", ".join(ROW_SETS) + "; default: every "
                        "set, or --quick's rows); known ids: " + ", ".join(ROWS_BY_ID))
    p.add_argument("--cell-seconds", type=float, default=None,
                   help="target timed seconds per cell (default 0.2; --quick 0.1)")
    p.add_argument("--min-repeats", type=int, default=5, help="fewest timed calls per cell (default 5)")
    p.add_argument("--fit-seconds", type=float, default=40.0,
                   help="seconds for the cost model's fit at the start of each table (default 40; 0: no fit, "
                        "the estimate plans with the uncalibrated model)")
    p.add_argument("--table-threads", type=int, default=None, help=argparse.SUPPRESS)  # internal: one table
    p.add_argument("--table-json", default=None, help=argparse.SUPPRESS)  # internal: where it goes
    p.set_defaults(command="bench")
    return p


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``bench`` subcommand to the ``trnplan`` CLI's subparsers.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers`` returned.

    Returns
    -------
    argparse.ArgumentParser
        The ``bench`` parser; its defaults set ``command="bench"``.
    """
    p = subparsers.add_parser(
        "bench", help="run the benchmark suite: trnplan vs the FFT libraries, one table per thread count",
        description="Time trnplan (estimate, measure, every forced solver) against torch.fft, numpy.fft, "
                    "scipy.fft, pyFFTW and mkl_fft on the seed grid; write results.json, results.md and "
                    "time_per_size.png to --out.")
    return _configure(p)


def _table_in_subprocess(threads: int, args) -> dict:
    fd, path = tempfile.mkstemp(prefix=f"trnplan-bench-t{threads}-", suffix=".json")
    os.close(fd)
    env = dict(os.environ, MKL_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    # a fresh plan cache per table: planning (measure, the cost-model fit) is part of what the table
    # shows, and the user's cache is left alone
    cache_dir = tempfile.mkdtemp(prefix="trnplan-bench-cache-")
    env["TRNPLAN_CACHE_DIR"] = cache_dir
    cmd = [sys.executable, "-m", "trnplan.tools.benchsuite", "--table-threads", str(threads), "--table-json", path,
           "--rows", ",".join(args.rows), "--cell-seconds", str(args.cell_seconds),
           "--min-repeats", str(args.min_repeats), "--fit-seconds", str(args.fit_seconds)]
    try:
        proc = subprocess.run(cmd, env=env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the threads-{threads} table process exited with status {proc.returncode}")
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    finally:
        os.unlink(path)
        if cache_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)


def main(args) -> int:
    """Run the suite (or, with the internal ``--table-threads``, one table) and write the outputs.

    Parameters
    ----------
    args : argparse.Namespace
        As parsed by the ``bench`` parser (:func:`add_parser`).

    Returns
    -------
    int
        0 on success (timings never fail the command); 2 when a table process failed.
    """
    if args.cell_seconds is None:
        args.cell_seconds = 0.1 if args.quick else 0.2
    if args.rows is None:
        args.rows = list(QUICK_ROWS if args.quick else ROWS_BY_ID)
    if args.min_repeats < 1 or args.cell_seconds < 0:
        print("error: --min-repeats must be ≥ 1 and --cell-seconds ≥ 0", file=sys.stderr)
        return 2
    if args.table_threads is not None:  # internal: this process is one table
        table = run_table(args.table_threads, args.rows, args.cell_seconds, args.min_repeats,
                          args.fit_seconds if args.fit_seconds > 0 else None)
        with open(args.table_json, "w", encoding="utf-8") as f:
            json.dump(table, f)
        return 0
    threads = args.threads or ([1] if args.quick else [1, 2])
    t0 = time.perf_counter()
    tables = []
    for t in threads:
        print(f"table: {t} thread(s), {len(args.rows)} rows", file=sys.stderr, flush=True)
        try:
            tables.append(_table_in_subprocess(t, args))
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    result = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "quick": bool(args.quick),
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
                    "versions": _versions(),
                    "torch_threads": {str(t["threads"]): t["torch_threads"] for t in tables}},
        "settings": {"rows": args.rows, "threads": threads, "cell_seconds": args.cell_seconds,
                     "min_repeats": args.min_repeats, "error_flag": ERROR_FLAG,
                     "goals": {"measure_vs_best": GOAL_VS_BEST, "regret": list(GOAL_REGRET),
                               "overhead_us": GOAL_OVERHEAD_US}},
        "tables": tables,
    }
    os.makedirs(args.out, exist_ok=True)
    result["plot"] = plot(result, os.path.join(args.out, "time_per_size.png"))
    result["wall_s"] = time.perf_counter() - t0
    text = markdown(result)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
        f.write(text)
    if args.docs:
        replace_docs_section(args.docs, text)
        replace_docs_section(args.docs, summary_markdown(result), SUMMARY_BEGIN, SUMMARY_END,
                             "## Summary of the last `trnplan bench`")
    print(text)
    print(f"wrote {args.out}/results.json, results.md{'' if 'skipped' in result['plot'] else ', time_per_size.png'}"
          f"{f' and the section of {args.docs}' if args.docs else ''} in {result['wall_s']:.0f} s", file=sys.stderr)
    return 0


def _standalone_parser() -> argparse.ArgumentParser:
    return _configure(argparse.ArgumentParser(prog="python -m trnplan.tools.benchsuite",
                                              description=__doc__.splitlines()[0]))


if __name__ == "__main__":
    sys.exit(main(_standalone_parser().parse_args()))
