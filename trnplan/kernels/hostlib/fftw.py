"""pyFFTW (FFTW 3) as a leaf: FFTW plans made once and reused, FFTW's rigor and planning budget, its wisdom.

FFTW 3 (Frigo & Johnson, "The design and implementation of FFTW3", Proc. IEEE 93(2), 2005).
Plans are made once per (shape, dtype, kind, direction, calling thread, rigor) and reused
(:func:`_fftw_plan`), from FFTW's wisdom where it knows the problem, else with ``FFTW_ESTIMATE``
(FFTW's heuristic planner: no timing) or, inside measured planning (:func:`fftw_rigor`),
``FFTW_MEASURE`` within FFTW's own planning budget (:func:`fftw_budget`); single-threaded by
default (:func:`_fftw_threads`). What FFTW learns while measuring (its *wisdom*) is exported and
imported as base64 text (:func:`export_wisdom` / :func:`import_wisdom`), so that it is stored with
a trnplan plan and a new process reads the same decision back (bitwise the same results).

The imported ``pyfftw`` module is passed in by :mod:`trnplan.kernels.hostlib`, which alone decides
whether the library is present and imports it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import importlib
import math
import os
import sys
import threading
import time
import warnings
from collections import OrderedDict

import numpy as np
import torch

from trnplan.core import config
from trnplan.kernels.hostlib.arrays import _COMPLEX, _REAL, _as_numpy, _scale


class NotFFTW(ImportError):
    """pyFFTW imported, but its FFTW calls are served by another library (MKL's FFTW3 wrappers)."""


def import_pyfftw(modname: str = "pyfftw"):
    """Import pyFFTW so that its calls reach its own FFTW, and check that they do.

    MKL carries FFTW3's C interface (its "FFTW3 wrappers": the same ``fftw_*``/``fftwf_*`` names,
    computed by MKL's DFTI). ``libmkl_rt`` loads its layers with global symbols at MKL's first call
    (mkl_fft's, or an MKL NumPy's), and a pyFFTW extension imported after that binds its FFTW calls
    to them (Python imports extensions with ``RTLD_NOW``: global symbols first). Measured here
    (2026-11-27, pyfftw 0.15.1, mkl_fft 2.3.2): after one mkl_fft call, pyFFTW's complex64
    transform of 17357 points had MKL's single-transform error, 13.6 u·√log2 n
    (:data:`trnplan.planner.native.MKL_SINGLE_SLOPE`) against FFTW's 1.1, and
    ``pyfftw.export_wisdom()`` gave MKL's empty wisdom for double and single precision; a
    measured plan's "pyfftw" leaf was MKL's call. Imported with ``RTLD_DEEPBIND`` (Linux: the
    extension's own dependencies, pyFFTW's bundled FFTW, ahead of the global symbols) it is FFTW
    whatever ran before.

    A pyFFTW imported before (by the caller) is taken as it is, and checked: FFTW's wisdom text of
    double and single precision always starts with ``(fftw-``, MKL's wrappers export none.

    Raises
    ------
    NotFFTW
        pyFFTW's double- or single-precision calls are not FFTW's (imported by other code after
        MKL ran): the message says how to import it so that they are.
    """
    flags = sys.getdlopenflags()
    deep = getattr(os, "RTLD_DEEPBIND", 0)
    if modname not in sys.modules and deep:
        # process-wide for the import's moment (an import by another thread meanwhile gets it too)
        sys.setdlopenflags(flags | deep)
    try:
        module = importlib.import_module(modname)
    finally:
        sys.setdlopenflags(flags)
    wisdom = module.export_wisdom()
    if not all(w.startswith(b"(fftw-") for w in wisdom[:2]):
        raise NotFFTW("its FFTW calls are MKL's FFTW3 wrappers (pyfftw was imported after MKL ran in this "
                      "process, and MKL's symbols took its FFTW names): its results would be MKL's, "
                      "not FFTW's. Import trnplan's host libraries before any MKL call "
                      "(trnplan.kernels.hostlib.library_module('pyfftw')), or import pyfftw first")
    return module


#: FFTW objects kept alive (each holds a plan and two aligned scratch arrays); least recently
#: used beyond this many are dropped and re-made (quickly, from FFTW's wisdom) if asked again
FFTW_CACHE_SIZE = 64


class _FFTWCall:
    """One FFTW plan (a pyfftw.FFTW object) with its scratch arrays, used by one thread.

    A call executes FFTW's new-array interface from the caller's input (no copy when its
    strides and alignment are the plan's, as for a contiguous CPU tensor: torch allocates on
    64-byte boundaries) into a fresh output array that becomes the returned tensor's memory
    (``torch.from_numpy``, no copy). A mismatched input is copied into the scratch input, and
    a multi-dimensional c2r always copies: FFTW's overwrites its input. After a call whose input is large
    (:data:`RELEASE_BYTES`) the plan is pointed back at its scratch arrays, so that it keeps no
    large caller memory alive.

    No lock: :func:`_fftw_plan` gives each calling thread its own object (FFTW's execute on one
    plan object is not thread-safe), so one object never runs in two threads at once.
    """

    def __init__(self, pyfftw, fftw, copy_input: bool, hermitian: tuple = ()):
        self.pyfftw, self.fftw, self.copy_input = pyfftw, fftw, copy_input
        #: a multi-dimensional c2r: (leading transform axes, whether the last length is even), so
        #: the copied input's DC (and Nyquist) column is made Hermitian over those axes (see call)
        self.hermitian = hermitian
        self.scratch_in, self.scratch_out = fftw.input_array, fftw.output_array
        self.out_shape, self.out_dtype = fftw.output_array.shape, fftw.output_array.dtype
        self.update, self.execute = fftw.update_arrays, fftw.execute  # bound once: 0.1 µs a call
        nbytes = fftw.output_array.nbytes
        #: output arrays this object hands out again once nothing else holds them (see _output)
        self.pool: list | None = [] if POOL_BYTES[0] <= nbytes <= POOL_BYTES[1] else None

    def _output(self) -> np.ndarray:
        """The call's output array: a pooled one no tensor holds any more, else a new one.

        np.empty + torch.from_numpy (0.17 + 0.5 µs) is the cheapest new output tensor (torch.empty
        alone costs 1.1 µs, n=256). But a large new array is often fresh memory from the OS (glibc
        serves it by mmap once other code freed large blocks), and FFTW's writes then fault its
        pages in: 512×192 complex64 (786 KB) took 85 µs right after a dft-gemm call instead of
        54, and measured planning, which interleaves candidates, timed it 2.3× slow. So outputs of
        :data:`POOL_BYTES` are pooled, two per FFTW object: a loop that drops each result before
        the next-but-one call reuses the same two buffers. A buffer is free when its reference
        count shows no tensor, view or array holds it (only this pool, and FFTW's own pointer
        to the last output).
        """
        pool = self.pool
        if pool is None:
            return np.empty(self.out_shape, self.out_dtype)
        last = self.fftw.output_array
        for i in range(len(pool)):
            # references: the pool's list, getrefcount's argument, and FFTW's own if it is the last
            if sys.getrefcount(pool[i]) == (3 if pool[i] is last else 2):
                return pool[i]
        out = np.empty(self.out_shape, self.out_dtype)
        pool.insert(0, out)
        del pool[2:]
        return out

    def __call__(self, a: np.ndarray) -> np.ndarray:
        out = self._output()
        if self.copy_input:
            np.copyto(self.scratch_in, a)
            a = self.scratch_in
            if self.hermitian:
                _hermitian_columns(a, *self.hermitian)
        try:  # pyFFTW checks shape, strides, dtype and alignment itself (0.25 µs)
            self.update(a, out)
        except ValueError:  # the rare path: strides or alignment unlike the plan's
            a, out = self._fit(a, out)
            self.update(a, out)
        self.execute()
        if a.nbytes > RELEASE_BYTES:  # small arrays stay referenced until the next call
            self.update(self.scratch_in, self.scratch_out)
        return out

    def _fit(self, a: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``a`` and ``out`` made acceptable to the plan: an aligned output, the input copied into
        the scratch input unless its strides and alignment already match."""
        fftw, pyfftw = self.fftw, self.pyfftw
        if not pyfftw.is_byte_aligned(out, fftw.output_alignment):
            out = pyfftw.empty_aligned(self.out_shape, self.out_dtype, n=fftw.output_alignment)
        if a.strides != self.scratch_in.strides or not pyfftw.is_byte_aligned(a, fftw.input_alignment):
            np.copyto(self.scratch_in, a)
            a = self.scratch_in
        return a, out


def _hermitian_columns(a: np.ndarray, axes: tuple, even: bool) -> None:
    """Make the DC column (and, for an even last length, the Nyquist column) of the half
    spectrum ``a`` Hermitian over the leading transform ``axes``, in place: ``v[k] ← (v[k] +
    conj(v[-k])) / 2``.

    torch.fft.irfftn and numpy's (inverse c2c over the leading axes, then a c2r of the last that
    ignores the imaginary parts of its DC and Nyquist bins) read exactly that projection of a
    non-Hermitian input; FFTW's multi-dimensional c2r assumes Hermitian input, and what it makes
    of any other depends on the algorithm FFTW_MEASURE picked, which depends on timing: random
    complex input to a (6, 10) c2r measured 1e-7 from numpy in one process and 0.28 in another
    that had run MKL transforms on worker threads first (found by the suite's order-dependent
    failures, issue 19). Projected, every algorithm computes the same transform.
    """
    for j in (0, a.shape[-1] - 1) if even else (0,):
        col = a[..., j]
        mirrored = np.roll(np.flip(col, axis=axes), 1, axis=axes)  # v[-k]: index k -> (n - k) mod n
        col[...] = (col + mirrored.conj()) * 0.5


#: output sizes (bytes) the pyFFTW leaf pools (:meth:`_FFTWCall._output`): below, a new array is
#: heap memory and cheap; above, two pooled buffers per FFTW object would hold too much memory
POOL_BYTES = (64 * 1024, 16 * 2**20)

#: after a call, a plan is pointed back at its scratch arrays when the caller's input is larger
#: than this, so it keeps no large caller memory alive; smaller ones stay referenced until the
#: next call (re-pointing costs ~0.25 µs, a tenth of a small transform's whole call)
RELEASE_BYTES = 1 << 20

_FFTW: OrderedDict = OrderedDict()
_FFTW_LOCK = threading.Lock()

#: FFTW plans made in this process: ``from_wisdom`` were read from FFTW's wisdom
#: (``FFTW_WISDOM_ONLY`` succeeded: the same algorithm as the process that stored it),
#: ``measured`` were timed by FFTW itself (its wisdom had no answer, so the algorithm it picks
#: may differ from another process's). The build pipeline compares ``measured`` before and after
#: lowering a cached plan, and stores the new wisdom when it moved.
FFTW_PLANS = {"from_wisdom": 0, "measured": 0, "estimated": 0}

#: How FFTW plans a problem its wisdom does not know: the effort of the trnplan plan being made.
#: "estimate": FFTW_ESTIMATE, FFTW's heuristics with no timing. FFTW_MEASURE at estimate made
#: ``plan_many(1000003, 2)`` take 7-12 minutes (Bluestein's leaves of m = 2,025,000: 432 s of
#: FFTW_MEASURE alone, issue 34, where torch.fft takes 60 ms); FFTW_ESTIMATE plans that length in
#: 14 ms here, and n = 65536 in 0.2 ms against 3.4 s measured (its plan ran 1.3x slower: 178 vs
#: 136 µs, busy machine). "measure" / "patient": FFTW_MEASURE, bounded by the effort's FFTW budget
#: (:func:`trnplan.core.config.fftw_timelimit`, as FFTW's own ``planning_timelimit``).
_RIGOR: contextvars.ContextVar[str] = contextvars.ContextVar("trnplan_fftw_rigor", default="estimate")


@contextlib.contextmanager
def fftw_rigor(effort: str):
    """Within this block, pyFFTW leaves that are built plan as ``effort`` asks (see :data:`_RIGOR`)."""
    token = _RIGOR.set(effort if effort in ("measure", "patient") else "estimate")
    try:
        yield
    finally:
        _RIGOR.reset(token)


class FFTWBudget:
    """The seconds FFTW's own planner may still spend on the FFTW_MEASURE plans made within
    :func:`fftw_budget` (``left``), and what it has spent there (``spent``: measured planning does
    not count it in its time limit)."""

    def __init__(self, seconds: float):
        self.left, self.spent = seconds, 0.0


#: the budget of the measured planning under way (:func:`fftw_budget`; None: none)
_BUDGET: contextvars.ContextVar[FFTWBudget | None] = contextvars.ContextVar("trnplan_fftw_budget", default=None)
#: the least planning time FFTW is given (FFTW then plans as with little more than its estimate)
MIN_FFTW_PLANNING_S = 0.01


@contextlib.contextmanager
def fftw_budget(seconds: float):
    """Within this block, the FFTW_MEASURE plans made share ``seconds`` of FFTW's planning time
    (:func:`trnplan.core.config.fftw_timelimit`); yields the :class:`FFTWBudget`.

    FFTW_MEASURE cut short by its ``planning_timelimit`` returns about its estimate's plan (n =
    262144 at two threads: 720 µs for any limit from 0.01 to 2.5 s, 471 µs unbounded, which took
    5.0 s), so the plans are not squeezed into what is left of measured planning's time limit
    (they were, and a measured plan's pyFFTW leaf then ran up to 1.8× the user's own FFTW_MEASURE
    plan): they have a budget of their own, and the first plans made, the model's best
    candidates', get the most of it.
    """
    budget = FFTWBudget(seconds)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def _planning_limit(rigor: str) -> float:
    """FFTW's ``planning_timelimit`` for a measured plan: what is left of the budget
    (:func:`fftw_budget`), else the effort's FFTW limit; at least :data:`MIN_FFTW_PLANNING_S`."""
    budget = _BUDGET.get()
    limit = budget.left if budget is not None else config.fftw_timelimit(rigor)
    return max(limit, MIN_FFTW_PLANNING_S)


def _measured_fftw(pyfftw, args: tuple, threads: int, rigor: str):
    """A pyfftw.FFTW object planned with FFTW_MEASURE within :func:`_planning_limit`, its time
    charged to the budget (:func:`fftw_budget`)."""
    budget = _BUDGET.get()
    t0 = time.perf_counter()
    try:
        return pyfftw.FFTW(*args, flags=("FFTW_MEASURE",), threads=threads, planning_timelimit=_planning_limit(rigor))
    finally:
        if budget is not None:
            took = time.perf_counter() - t0
            budget.left -= took
            budget.spent += took


def _out_shape(shape: tuple, kind: str, batch_shape: tuple) -> tuple:
    """The output array's shape for an input of ``batch_shape``."""
    if kind == "r2c":
        return (*batch_shape[:-1], shape[-1] // 2 + 1)
    if kind == "c2r":
        return (*batch_shape[:-1], shape[-1])
    return batch_shape


def _new_fftw(pyfftw, shape: tuple, dtype: np.dtype, kind: str, inverse: bool, threads: int, batch_shape: tuple,
              rigor: str = "estimate"):
    """A pyfftw.FFTW object for ``batch_shape`` inputs: from FFTW's wisdom when it knows the
    problem (wisdom of a measured plan serves an estimate too), else planned with ``rigor``'s
    flag (:data:`_RIGOR`; counted in :data:`FFTW_PLANS`).

    The aligned arrays are those pyfftw.builders used before (input preserved where FFTW can,
    simd-aligned arrays), so wisdom stored by earlier versions stays valid.
    """
    out_dtype = (_REAL if kind == "c2r" else _COMPLEX)[dtype]
    template = pyfftw.empty_aligned(batch_shape, dtype)
    output = pyfftw.empty_aligned(_out_shape(shape, kind, batch_shape), out_dtype)
    args = (template, output, tuple(range(-len(shape), 0)), "FFTW_BACKWARD" if inverse else "FFTW_FORWARD")
    flag = "FFTW_ESTIMATE" if rigor == "estimate" else "FFTW_MEASURE"
    try:
        fftw = pyfftw.FFTW(*args, flags=(flag, "FFTW_WISDOM_ONLY"), threads=threads)
        FFTW_PLANS["from_wisdom"] += 1
    except RuntimeError:  # "No FFTW wisdom is known for this plan."
        if rigor == "estimate":
            fftw = pyfftw.FFTW(*args, flags=(flag,), threads=threads)
            FFTW_PLANS["estimated"] += 1
        else:
            fftw = _measured_fftw(pyfftw, args, threads, rigor)
            FFTW_PLANS["measured"] += 1
    return fftw


def _fftw_plan(pyfftw, shape: tuple, dtype: np.dtype, kind: str, inverse: bool, threads: int, batch_shape: tuple,
               rigor: str = "estimate"):
    """The cached :class:`_FFTWCall` for an input of ``batch_shape`` (made on first use).

    One per calling thread: a plan object is re-pointed at each call's arrays, so threads sharing
    one would have to run one at a time (the multicore solver's shards of equal size did, at half
    speed); FFTW's wisdom makes the second thread's plan cheap, and the same algorithm.
    """
    # the transform shape too: a c2r input of (…, 8, 5) is the half spectrum of both 8×8 and 8×9
    key = (tuple(shape), batch_shape, dtype, kind, inverse, threads, threading.get_ident(), rigor)
    with _FFTW_LOCK:
        hit = _FFTW.get(key)
        if hit is not None:
            _FFTW.move_to_end(key)
            return hit
    # FFTW's multi-dimensional c2r overwrites its input (FFTW has no input-preserving algorithm for
    # it); a 1-D c2r is planned with FFTW_PRESERVE_INPUT (pyFFTW's default), so it reads in place
    destroys = kind == "c2r" and len(shape) > 1
    # the leading transform axes, counted in a column a[..., j] (which has lost the last axis)
    hermitian = (tuple(range(1 - len(shape), 0)), shape[-1] % 2 == 0) if destroys else ()
    measured = FFTW_PLANS["measured"]
    call = _FFTWCall(pyfftw, _new_fftw(pyfftw, shape, dtype, kind, inverse, threads, batch_shape, rigor),
                     copy_input=destroys, hermitian=hermitian)
    with _FFTW_LOCK:  # built outside the lock (MEASURE takes ms to s), re-checked after
        hit = _FFTW.get(key)
        if hit is not None:
            return hit
        if FFTW_PLANS["measured"] != measured:
            # FFTW's wisdom now knows this problem: an estimate plan made before it would not be
            # the one a new process given this wisdom makes (an exported record, a pickled plan),
            # so later plans look it up anew (plans holding the old object keep it)
            for stale in [k for k in _FFTW if k[:6] == key[:6] and k[7] == "estimate"]:
                del _FFTW[stale]
        _FFTW[key] = call
        while len(_FFTW) > FFTW_CACHE_SIZE:
            _FFTW.popitem(last=False)
    return call


def _fftw_threads() -> int:
    """FFTW's default thread count: one (a measured plan may pick torch's count instead: the
    pyFFTW solver's ``threads`` variant, timed round-robin against torch.fft, see below).

    pyFFTW's wheel ships its own libgomp, so FFTW's threads are a second OpenMP pool beside
    torch's; each pool's workers spin after a parallel region, and on 2 cores a thread of the
    other pool then waits a scheduler timeslice. Issue 19 (quiet machine, torch 2 threads):
    pyFFTW at 2 threads took 4074 µs at 512×192 where torch.fft took 49. bench/threads.py,
    here under load (indicative): 2 threads gained 1.5-1.9× on large transforms when nothing
    interfered (1×262144: 340 vs 628 µs), lost at 1×4096 (8.9 vs 4.4 µs), and in some runs
    stalled 8-16 ms per call. The wait policy cannot be changed once libgomp is loaded (it
    reads OMP_WAIT_POLICY at load). One thread never stalls; docs/user-guide.md, *Threads*.

    On the quiet machine (lead, 18:15 UTC, torch 2 threads, `trnplan bench --rows planner`)
    prebuilt pyFFTW at 2 threads was the fastest library on 7 of 9 rows, 1.4-1.9× torch.fft
    (512×192: 27.6 vs 52.3 µs; 64×4096: 115 vs 172), and a 2-thread FFTW call right after a
    torch matmul on the OpenMP pool showed no stall (64×4096: +124 µs over the matmul alone,
    118 µs cold). So the estimate keeps one thread, and measured planning also times the
    torch-thread variant, in the conditions of execution: round-robin with torch.fft, whose
    calls keep torch's pool hot; a stalling variant measures slow and is not picked, and the
    spot check on reuse replaces a pick that turned slow.
    """
    return 1


def _pyfftw_call(pyfftw, shape, kind, inverse, norm, threads: int):
    """The pyFFTW transform on torch tensors (the other libraries' calls take numpy arrays and
    :func:`transform` wraps them; this one is the whole call, to keep the per-call work small)."""
    n = math.prod(shape)
    scale = _scale(norm, inverse, n)
    rigor = _RIGOR.get()  # of the plan this leaf belongs to: later batch shapes plan the same way
    plans: dict = {}  # this callable's plans by input (shape, dtype, thread): skips the shared lock
    get_ident, from_numpy = threading.get_ident, torch.from_numpy

    def call(x: torch.Tensor) -> torch.Tensor:
        try:
            a = x.numpy()
        except RuntimeError:  # grad-tracking, conj or neg views: resolved (the rare path)
            a = _as_numpy(x)
        key = (a.shape, a.dtype, get_ident())
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = _fftw_plan(pyfftw, shape, a.dtype, kind, inverse, threads, a.shape, rigor)
        out = plan(a)
        if scale != 1.0:
            np.multiply(out, scale, out=out)  # a Python float keeps float32/complex64
        return from_numpy(out)

    return call




def prepare_plan(pyfftw, shape: tuple, kind: str, inverse: bool, batch: int, dtype: torch.dtype,
                 threads: int | None) -> None:
    """Make the FFTW plan of :func:`~trnplan.kernels.hostlib.prepare` (inputs of ``(batch, *in_shape)``) now."""
    shape = tuple(shape)
    in_shape = (*shape[:-1], shape[-1] // 2 + 1) if kind == "c2r" else shape
    real = np.dtype(np.float64 if dtype == torch.float64 else np.float32)
    np_dtype = real if kind == "r2c" else np.dtype(_COMPLEX[real])
    _fftw_plan(pyfftw, shape, np_dtype, kind, inverse, threads or _fftw_threads(), (batch, *in_shape), _RIGOR.get())


def export_wisdom(pyfftw) -> dict:
    """FFTW's wisdom in this process: ``{"pyfftw": [double, single, long double]}``, base64 text."""
    return {"pyfftw": [base64.b64encode(bytes(w)).decode("ascii") for w in pyfftw.export_wisdom()]}


def import_wisdom(pyfftw, blob) -> None:
    """Give FFTW the wisdom ``blob`` (the ``"pyfftw"`` entry of :func:`export_wisdom`); a malformed
    or rejected entry warns and is ignored (FFTW then measures again)."""
    try:
        if isinstance(blob, (str, bytes)) or len(blob) != 3:
            raise ValueError(f"expected 3 base64 strings (double, single, long double), got {type(blob).__name__}")
        decoded = tuple(base64.b64decode(s, validate=True) for s in blob)
        ok = pyfftw.import_wisdom(decoded)
    except (ValueError, TypeError, binascii.Error) as exc:
        warnings.warn(f"ignoring malformed pyFFTW wisdom ({exc}); FFTW will measure again", stacklevel=3)
        return
    rejected = [prec for prec, good, text in zip(("double", "single", "long double"), ok, decoded)
                if text and not good]
    if rejected:
        warnings.warn(f"FFTW rejected the {', '.join(rejected)} wisdom given to it; it will measure again",
                      stacklevel=3)


def reset() -> None:
    """No FFTW plan kept or counted, and FFTW's own wisdom empty (where pyFFTW was imported)."""
    with _FFTW_LOCK:
        _FFTW.clear()
        FFTW_PLANS.update(dict.fromkeys(FFTW_PLANS, 0))
    pyfftw = sys.modules.get("pyfftw")
    if pyfftw is not None:
        pyfftw.forget_wisdom()
