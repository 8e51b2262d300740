"""Glue to the host-CPU FFT libraries that trnplan can use as leaf solvers.

Three libraries, each optional (``pip install 'trnplan[fftw]'`` / ``'trnplan[mkl]'``):

``scipy`` — :mod:`scipy.fft`
    pocketfft (Reinecke's C++ header library) behind scipy's public API. Threads over the
    batch only (``workers=``): a single 1-D transform runs on one thread.
``pyfftw`` — :mod:`pyfftw`
    FFTW 3 (Frigo & Johnson, "The design and implementation of FFTW3", Proc. IEEE 93(2), 2005).
    Plans are made once per (shape, dtype, kind, direction, calling thread, rigor) and reused,
    from FFTW's wisdom where it knows the problem, else with ``FFTW_ESTIMATE`` (FFTW's heuristic
    planner: no timing) or, inside measured planning (:func:`fftw_rigor`), ``FFTW_MEASURE``
    within the planning time limit; single-threaded (FFTW's thread pool stalled against torch's OpenMP
    threads: see :func:`_fftw_threads`); what FFTW learns while measuring (its *wisdom*) is
    exported and imported with :func:`export_wisdom` / :func:`import_wisdom`, and
    :func:`prepare` has FFTW decide when a trnplan plan is built, so the decision is stored
    with the plan and a new process reads it back instead of re-measuring (bitwise the same
    results).
``mkl_fft`` — :mod:`mkl_fft`
    Intel MKL's DFTI through Intel's NumPy-style wrapper (its own MKL, not torch's). Its MKL is
    ``libmkl_gnu_thread``, on the GNU OpenMP runtime torch loaded: one thread pool with torch's,
    whose thread count (``torch.set_num_threads``) it follows; set explicitly per call where the
    ``mkl`` service module is present.

All three run on host memory: the callables here take and return CPU torch tensors, sharing
memory with numpy (``Tensor.numpy()`` / ``torch.from_numpy``, no copy where the library allows
it). The solvers built on them (:mod:`trnplan.planner.library`) are CPU-only leaves and are never
exported into artifacts (``compile='aot'``): an AOTInductor package runs torch ops only.

Whether a library is installed is read from its distribution's metadata (:func:`installed`), with
no import: planning, the plan cache's fingerprint and ``explain()`` ask only that, so a process
that loads a cached plan without a library leaf never imports scipy, pyFFTW or mkl_fft (they took
448 ms of a 463 ms warm start, issue 19). :func:`library_module` imports a library, only to build
or run its leaf. Tests simulate a missing library by monkeypatching :func:`installed`, and a
broken install (installed, import fails) by making ``_import_library`` raise.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import functools
import importlib
import importlib.metadata
import importlib.util
import math
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import torch

from trnplan.core import config, state
from trnplan.core.errors import PlanningError

#: library key -> (module that holds the transforms, distribution whose version is reported)
LIBRARIES = {"scipy": ("scipy.fft", "scipy"), "pyfftw": ("pyfftw", "pyfftw"), "mkl_fft": ("mkl_fft", "mkl_fft")}

#: FFTW objects kept alive (each holds a plan and two aligned scratch arrays); least recently
#: used beyond this many are dropped and re-made (quickly, from FFTW's wisdom) if asked again
FFTW_CACHE_SIZE = 64

#: library key -> why importing it failed in this process (an installed but broken library:
#: from then on this process treats it as absent, see :func:`installed`)
_BROKEN: dict[str, str] = {}


@functools.cache
def _distribution_version(name: str) -> str | None:
    """The installed version of library ``name``'s distribution, read from its metadata, or None
    where its top-level module cannot be found. Imports nothing of the library: importing
    scipy.fft, pyFFTW and mkl_fft took 448 ms of a 463 ms warm ``plan_many`` (issue 19), where
    this takes ~1 ms each (``importlib.metadata``, which torch has already imported)."""
    modname, dist = LIBRARIES[name]
    try:
        # the top-level package only: find_spec of "scipy.fft" would import scipy to find it
        if importlib.util.find_spec(modname.split(".")[0]) is None:
            return None
    except (ImportError, ValueError):  # a sys.modules entry set to None, or a spec-less module
        return None
    try:
        meta = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"  # importable without distribution metadata (a source tree on sys.path)
    # the Version header only: Distribution.version parses the whole METADATA as email headers,
    # 3 ms for scipy's (its license text is in there), three times the rest of the lookup
    for line in (meta.read_text("METADATA") or meta.read_text("PKG-INFO") or "").splitlines():
        if line.startswith("Version:"):
            return line.partition(":")[2].strip()
        if not line:  # end of the headers
            break
    return meta.version


def installed(name: str) -> str | None:
    """The version of host library ``name`` if it is installed and usable here, else None.

    Cheap and import-free: it reads the distribution's metadata (``importlib.metadata``), so
    planning, the plan cache's fingerprint and ``explain()`` ask it without importing the library.
    A library whose import failed earlier in this process (:func:`library_module`) reads as
    absent from then on.

    The one place that decides presence: tests monkeypatch it to simulate a missing library
    (and ``_import_library`` to simulate an installed one whose import fails).

    Parameters
    ----------
    name : {"scipy", "pyfftw", "mkl_fft"}
        A key of :data:`LIBRARIES`.

    Returns
    -------
    str or None
        The distribution's version (``"unknown"`` where the module is importable but has no
        distribution metadata), or None.
    """
    if name in _BROKEN:
        return None
    return _distribution_version(name)


@functools.cache
def _import_library(name: str):
    """Import library ``name``'s transform module (and pyFFTW's builders) — the only import of it."""
    modname, _dist = LIBRARIES[name]
    module = importlib.import_module(modname)
    if name == "pyfftw":
        importlib.import_module("pyfftw.builders")
    return module


def library_module(name: str):
    """The imported module of library ``name`` (a key of :data:`LIBRARIES`), or None if absent.

    Imports the library on first use: called only to build or run a leaf of that library (or to
    export and import FFTW's wisdom), never to plan. An installed library whose import fails (a
    broken install, e.g. a missing shared library) warns once, is recorded so that
    :func:`installed` reads it as absent in this process, and gives None.

    Parameters
    ----------
    name : {"scipy", "pyfftw", "mkl_fft"}

    Returns
    -------
    module or None
        :mod:`scipy.fft`, :mod:`pyfftw` or :mod:`mkl_fft`; None where the library is not
        installed or its import failed (:func:`broken_reason` says why).

    Warns
    -----
    UserWarning
        The library is installed but its import failed (once per process).
    """
    if installed(name) is None:
        return None
    try:
        return _import_library(name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install (a missing shared library: OSError)
        _BROKEN[name] = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"{name} {_distribution_version(name)} is installed but importing it failed "
                      f"({_BROKEN[name]}); trnplan plans without it in this process. Reinstall it "
                      f"(pip install --force-reinstall {LIBRARIES[name][1]}) or uninstall it", stacklevel=2)
        return None


def broken_reason(name: str) -> str | None:
    """Why library ``name`` failed to import in this process, or None (absent, or not tried)."""
    return _BROKEN.get(name)


def available() -> dict[str, str | None]:
    """Which host FFT libraries are installed, and their versions (without importing them).

    Returns
    -------
    dict of str to (str or None)
        ``{"scipy": "1.17.1", "pyfftw": "0.15.1", "mkl_fft": None}``: library name to its
        distribution's version (:func:`installed`), or ``None`` where it is not installed.
    """
    return {name: installed(name) for name in LIBRARIES}


def _scale(norm: str | None, inverse: bool, n: int) -> float:
    """torch.fft's factor for ``norm`` (None: unscaled) on a transform of ``n`` points."""
    if norm is None:
        return 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "backward") == inverse else 1.0


def _unscaled(norm: str | None, inverse: bool) -> str:
    """The norm name that means "no scaling" when ``norm`` is None (as NativeFFT does)."""
    return norm or ("forward" if inverse else "backward")


def _as_numpy(x: torch.Tensor) -> np.ndarray:
    """Zero-copy numpy view of a CPU tensor (conj/neg views and grad-tracking tensors resolved)."""
    try:
        return x.numpy()  # refuses grad-tracking, conj and neg views: resolved below (the rare path)
    except RuntimeError:
        return x.detach().resolve_conj().resolve_neg().numpy()


#: complex dtype of the output for each input dtype, and real dtype of a c2r output
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128,
            np.dtype(np.complex64): np.complex64, np.dtype(np.complex128): np.complex128}
_REAL = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}


def transform(library: str, shape: tuple, kind: str, inverse: bool,
              norm: str | None = None, threads: int | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """A callable running one library's transform on CPU torch tensors.

    Parameters
    ----------
    library : {"scipy", "pyfftw", "mkl_fft"}
    shape : tuple of int
        The transform shape (real lengths for r2c/c2r), over the input's trailing axes.
    kind : {"c2c", "r2c", "c2r"}
    inverse : bool
    norm : {"backward", "ortho", "forward"} or None
        torch.fft's meaning; None is unscaled (a forward sum, an inverse without 1/n).
    threads : int, optional
        pyFFTW's thread count (default :func:`_fftw_threads`: one); the other libraries follow
        torch's thread count and ignore it.

    Returns
    -------
    callable
        ``f(x)`` with ``x`` of shape ``(batch, *in_shape)`` — complex for c2c/c2r, real for r2c,
        any strides — returning a tensor of shape ``(batch, *out_shape)`` of torch.fft's dtype.

    Raises
    ------
    PlanningError
        The library is not installed, or it is installed but its import fails (a broken install):
        the message says which, and the fix. A broken library then reads as absent in this
        process (:func:`installed`), so planning again leaves it out.
    """
    if library_module(library) is None:
        broken = broken_reason(library)
        if broken is not None:
            raise PlanningError(
                f"the plan has a {library} leaf and {library} {_distribution_version(library)} is installed, but "
                f"importing it failed ({broken}): reinstall it (pip install --force-reinstall "
                f"{LIBRARIES[library][1]}) or uninstall it; planning again in this process leaves it out")
        raise PlanningError(f"the plan has a {library} leaf and {library} is not installed: install it "
                            f"(pip install {LIBRARIES[library][1]}) or plan again without it")
    shape = tuple(shape)
    if library == "pyfftw":
        return _pyfftw_call(shape, kind, inverse, norm, threads or _fftw_threads())
    make = {"scipy": _scipy_call, "mkl_fft": _mkl_call}[library]
    run = make(shape, kind, inverse, norm)

    want = _REAL if kind == "c2r" else _COMPLEX

    def call(x: torch.Tensor) -> torch.Tensor:
        try:
            a = x.numpy()
        except RuntimeError:  # grad-tracking, conj or neg views: resolved (the rare path)
            a = _as_numpy(x)
        r = run(a)
        if r.dtype != want[a.dtype]:  # a library that widened (none of the three does for these kinds)
            r = r.astype(want[a.dtype])
        return torch.from_numpy(r)

    return call


# ---------------------------------------------------------------------- scipy.fft
def _scipy_call(shape, kind, inverse, norm):
    sfft = library_module("scipy")
    rank, nrm = len(shape), _unscaled(norm, inverse)
    axes = tuple(range(-rank, 0))
    if kind == "c2c":
        fn = (sfft.ifft if inverse else sfft.fft) if rank == 1 else (sfft.ifftn if inverse else sfft.fftn)
        if rank == 1:
            return lambda a: fn(a, axis=-1, norm=nrm, workers=torch.get_num_threads())
        return lambda a: fn(a, axes=axes, norm=nrm, workers=torch.get_num_threads())
    if kind == "r2c":
        if rank == 1:
            return lambda a: sfft.rfft(a, axis=-1, norm=nrm, workers=torch.get_num_threads())
        return lambda a: sfft.rfftn(a, axes=axes, norm=nrm, workers=torch.get_num_threads())
    if rank == 1:
        return lambda a: sfft.irfft(a, n=shape[-1], axis=-1, norm=nrm, workers=torch.get_num_threads())
    return lambda a: sfft.irfftn(a, s=shape, axes=axes, norm=nrm, workers=torch.get_num_threads())


# ---------------------------------------------------------------------- mkl_fft
@functools.cache
def _mkl_thread_setter():
    """``mkl.set_num_threads_local`` of the ``mkl`` service module, or None where it is absent
    (mkl_fft itself takes no thread argument; MKL then follows the OpenMP thread count torch
    sets: ``mkl_get_max_threads()`` read 1 after ``torch.set_num_threads(1)``, 2 after ``(2)``)."""
    try:
        return importlib.import_module("mkl").set_num_threads_local
    except (ImportError, AttributeError):
        return None


def _in_torch_threads(fn):
    """``fn`` run with MKL's thread count set to torch's for the call, where the ``mkl`` service
    module can set it; else ``fn`` itself (no per-call wrapper: MKL already follows torch's count)."""
    setter = _mkl_thread_setter()
    if setter is None:
        return fn

    def scoped(*args, **kwargs):
        previous = setter(torch.get_num_threads())
        try:
            return fn(*args, **kwargs)
        finally:
            setter(previous)

    return scoped


def _mkl_call(shape, kind, inverse, norm):
    mfft = library_module("mkl_fft")
    rank, nrm = len(shape), _unscaled(norm, inverse)
    axes = tuple(range(-rank, 0))
    # mkl_fft 2.3.2 quirks: rfftn/irfftn/fftn without ``s`` take the norm's n from the *whole*
    # array shape (batch included), and irfft without ``n`` assumes an even length: always pass
    # the lengths. fftn over some axes of a batched array loops in Python over the other axes
    # (one MKL call per batch item: 65× torch.fft at 16384 × 64), so c2c of rank ≥ 2 runs as one
    # batched 1-D call per axis; a per-axis norm multiplies out to the whole transform's.
    if kind == "c2c":
        fn = mfft.ifft if inverse else mfft.fft
        fn_n = mfft.ifftn if inverse else mfft.fftn

        if rank == 1:  # the common leaf: one batched call, n implied by the input (c2c: in = out length)
            one = _in_torch_threads(fn)
            return lambda a: one(_no_zero_strides(a), None, -1, nrm)

        def c2c(a):
            if a.shape[0] == 1:  # one transform: MKL's own N-D call (3.3× the
                # per-axis calls at 1024², 5× at 32×64×64 in `trnplan bench`)
                return fn_n(a[0], s=shape, axes=tuple(range(rank)), norm=nrm)[None]
            for axis in reversed(axes):
                a = fn(a, n=a.shape[axis], axis=axis, norm=nrm)
            return a

        run = _in_torch_threads(c2c)
        return lambda a: run(_no_zero_strides(a))
    if kind == "r2c":
        f = _in_torch_threads(mfft.rfft if rank == 1 else mfft.rfftn)
    else:
        f = _in_torch_threads(mfft.irfft if rank == 1 else mfft.irfftn)
    if rank == 1:
        return lambda a: f(_no_zero_strides(a), n=shape[-1], axis=-1, norm=nrm)
    return lambda a: f(_no_zero_strides(a), s=shape, axes=axes, norm=nrm)


def _no_zero_strides(a: np.ndarray) -> np.ndarray:
    """``a``, copied to contiguous memory if an axis has stride 0 (a broadcast view, as from
    ``Tensor.expand``): mkl_fft 2.3.2 returns wrong values for those (irfftn of a (8, 4, 10)
    view with strides (10, 0, 1) was off by 68 %, found by tests/test_fft_api.py)."""
    return np.ascontiguousarray(a) if 0 in a.strides and a.size > 1 else a


# ---------------------------------------------------------------------- pyFFTW
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

    def __init__(self, fftw, copy_input: bool, hermitian: tuple = ()):
        self.fftw, self.copy_input = fftw, copy_input
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
        fftw = self.fftw
        pyfftw = library_module("pyfftw")
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
#: 136 µs, busy machine). "measure" / "patient": FFTW_MEASURE, bounded by the effort's time limit
#: (:func:`trnplan.core.config.timelimit`, as FFTW's own ``planning_timelimit``).
_RIGOR: contextvars.ContextVar[str] = contextvars.ContextVar("trnplan_fftw_rigor", default="estimate")


@contextlib.contextmanager
def fftw_rigor(effort: str):
    """Within this block, pyFFTW leaves that are built plan as ``effort`` asks (see :data:`_RIGOR`)."""
    token = _RIGOR.set(effort if effort in ("measure", "patient") else "estimate")
    try:
        yield
    finally:
        _RIGOR.reset(token)


#: ``time.perf_counter()`` by which measured planning must be done timing (None: no deadline), set by
#: :func:`fftw_deadline`: an FFTW_MEASURE plan made while candidates are prepared gets the time left
#: as its ``planning_timelimit``, not the whole limit (a threaded n = 65536 plan took 2.8 s of a 2 s
#: limit before, busy machine)
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("trnplan_fftw_deadline", default=None)
#: the least planning time FFTW is given (FFTW then plans as with little more than its estimate)
MIN_FFTW_PLANNING_S = 0.01


@contextlib.contextmanager
def fftw_deadline(deadline: float | None):
    """Within this block, FFTW_MEASURE plans end by ``deadline`` (a ``time.perf_counter()`` value)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _planning_limit(rigor: str) -> float:
    """FFTW's ``planning_timelimit`` for a measured plan: the effort's limit, or less where a
    deadline (:func:`fftw_deadline`) leaves less."""
    limit = config.timelimit(rigor)
    deadline = _DEADLINE.get()
    if deadline is not None:
        limit = min(limit, max(deadline - time.perf_counter(), MIN_FFTW_PLANNING_S))
    return limit


def _out_shape(shape: tuple, kind: str, batch_shape: tuple) -> tuple:
    """The output array's shape for an input of ``batch_shape``."""
    if kind == "r2c":
        return (*batch_shape[:-1], shape[-1] // 2 + 1)
    if kind == "c2r":
        return (*batch_shape[:-1], shape[-1])
    return batch_shape


def _new_fftw(shape: tuple, dtype: np.dtype, kind: str, inverse: bool, threads: int, batch_shape: tuple,
              rigor: str = "estimate"):
    """A pyfftw.FFTW object for ``batch_shape`` inputs: from FFTW's wisdom when it knows the
    problem (wisdom of a measured plan serves an estimate too), else planned with ``rigor``'s
    flag (:data:`_RIGOR`; counted in :data:`FFTW_PLANS`).

    The aligned arrays are those pyfftw.builders used before (input preserved where FFTW can,
    simd-aligned arrays), so wisdom stored by earlier versions stays valid.
    """
    pyfftw = library_module("pyfftw")
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
            fftw = pyfftw.FFTW(*args, flags=(flag,), threads=threads, planning_timelimit=_planning_limit(rigor))
            FFTW_PLANS["measured"] += 1
    return fftw


def _fftw_plan(shape: tuple, dtype: np.dtype, kind: str, inverse: bool, threads: int, batch_shape: tuple,
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
    call = _FFTWCall(_new_fftw(shape, dtype, kind, inverse, threads, batch_shape, rigor), copy_input=destroys,
                     hermitian=hermitian)
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


def _pyfftw_call(shape, kind, inverse, norm, threads: int):
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
            plan = plans[key] = _fftw_plan(shape, a.dtype, kind, inverse, threads, a.shape, rigor)
        out = plan(a)
        if scale != 1.0:
            np.multiply(out, scale, out=out)  # a Python float keeps float32/complex64
        return from_numpy(out)

    return call


def prepare(library: str, shape: tuple, kind: str, inverse: bool, batch: int, dtype: torch.dtype,
            threads: int | None = None) -> None:
    """Make the library's plan for inputs of ``(batch, *in_shape)`` now rather than at the first call.

    For pyFFTW this is where FFTW decides its algorithm (from wisdom, or by measuring), so that
    what it decided is in :func:`export_wisdom` when a trnplan plan's record is stored, and a
    process that loads the record reads the same decision back. The other libraries decide
    nothing per process: a no-op for them.

    Parameters
    ----------
    library : {"scipy", "pyfftw", "mkl_fft"}
    shape : tuple of int
        The transform shape (real lengths for r2c/c2r).
    kind : {"c2c", "r2c", "c2r"}
    inverse : bool
    batch : int
        The leading dimension the transform will be called with.
    dtype : torch.dtype
        The real dtype of the computation (torch.float32 or torch.float64).
    threads : int, optional
        pyFFTW's thread count (default :func:`_fftw_threads`).
    """
    if library != "pyfftw" or library_module("pyfftw") is None:
        return
    shape = tuple(shape)
    in_shape = (*shape[:-1], shape[-1] // 2 + 1) if kind == "c2r" else shape
    real = np.dtype(np.float64 if dtype == torch.float64 else np.float32)
    np_dtype = real if kind == "r2c" else np.dtype(_COMPLEX[real])
    _fftw_plan(shape, np_dtype, kind, inverse, threads or _fftw_threads(), (batch, *in_shape), _RIGOR.get())


def export_wisdom() -> dict | None:
    """What FFTW has learned in this process, to store beside a plan.

    Returns
    -------
    dict or None
        ``{"pyfftw": [double, single, long double]}``, each FFTW's wisdom text base64-encoded;
        None when pyFFTW is not installed.
    """
    pyfftw = library_module("pyfftw")
    if pyfftw is None:
        return None
    return {"pyfftw": [base64.b64encode(bytes(w)).decode("ascii") for w in pyfftw.export_wisdom()]}


def import_wisdom(data: dict | None) -> None:
    """Give FFTW wisdom from :func:`export_wisdom` back, so that its plans need no re-measuring.

    Parameters
    ----------
    data : dict or None
        What :func:`export_wisdom` returned. None, an empty dict or one without a ``"pyfftw"``
        entry is ignored, as is everything when pyFFTW is not installed.

    Warns
    -----
    UserWarning
        The entry is malformed (not base64, or FFTW rejects it): it is ignored, and FFTW plans
        by measuring as if there were no wisdom.
    """
    if not data:
        return
    blob = data.get("pyfftw") if isinstance(data, dict) else None
    pyfftw = library_module("pyfftw")
    if not blob or pyfftw is None:
        return
    try:
        if isinstance(blob, (str, bytes)) or len(blob) != 3:
            raise ValueError(f"expected 3 base64 strings (double, single, long double), got {type(blob).__name__}")
        decoded = tuple(base64.b64decode(s, validate=True) for s in blob)
        ok = pyfftw.import_wisdom(decoded)
    except (ValueError, TypeError, binascii.Error) as exc:
        warnings.warn(f"ignoring malformed pyFFTW wisdom ({exc}); FFTW will measure again", stacklevel=2)
        return
    rejected = [prec for prec, good, text in zip(("double", "single", "long double"), ok, decoded)
                if text and not good]
    if rejected:
        warnings.warn(f"FFTW rejected the {', '.join(rejected)} wisdom given to it; it will measure again",
                      stacklevel=2)


def _reset() -> None:
    """A fresh process's host libraries: no FFTW plan kept or counted, FFTW's own wisdom empty (where
    pyFFTW was imported), no import failure remembered, the distributions' metadata read again."""
    with _FFTW_LOCK:
        _FFTW.clear()
        FFTW_PLANS.update(dict.fromkeys(FFTW_PLANS, 0))
    pyfftw = sys.modules.get("pyfftw")
    if pyfftw is not None:
        pyfftw.forget_wisdom()
    _BROKEN.clear()
    for memo in _MEMOS:
        memo.cache_clear()


#: bound here, not looked up at reset: tests monkeypatch ``_import_library`` and ``installed``
_MEMOS = (_distribution_version, _import_library, _mkl_thread_setter)


state.register("kernels.hostlib", _reset)
