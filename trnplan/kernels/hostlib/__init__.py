"""Glue to the host-CPU FFT libraries that trnplan can use as leaf solvers.

Three libraries, each optional (``pip install 'trnplan[fftw]'`` / ``'trnplan[mkl]'``):

``scipy`` — :mod:`scipy.fft`
    pocketfft (Reinecke's C++ header library) behind scipy's public API. Threads over the
    batch only (``workers=``): a single 1-D transform runs on one thread.

Every leaf takes an explicit thread count (``threads``; :mod:`~trnplan.kernels.hostlib.threads`
for the libraries that follow torch's OpenMP count), so that measured planning can time a
one-thread and a two-thread variant of each and keep the one that holds up under load.
``pyfftw`` — :mod:`pyfftw`
    FFTW 3 (Frigo & Johnson, "The design and implementation of FFTW3", Proc. IEEE 93(2), 2005).
    Plans are made once per (shape, dtype, kind, direction, calling thread, rigor) and reused,
    from FFTW's wisdom where it knows the problem, else with ``FFTW_ESTIMATE`` (FFTW's heuristic
    planner: no timing) or, inside measured planning (:func:`fftw_rigor`), ``FFTW_MEASURE``
    within the planning time limit; single-threaded (FFTW's thread pool stalled against torch's OpenMP
    threads: see :func:`~trnplan.kernels.hostlib.fftw._fftw_threads`); what FFTW learns while measuring (its *wisdom*) is
    exported and imported with :func:`export_wisdom` / :func:`import_wisdom`, and
    :func:`prepare` has FFTW decide when a trnplan plan is built, so the decision is stored
    with the plan and a new process reads it back instead of re-measuring (bitwise the same
    results). Imported so that its calls reach its own FFTW, not MKL's FFTW3 wrappers of the
    same names, and checked (:func:`~trnplan.kernels.hostlib.fftw.import_pyfftw`).
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

Layout: this module decides presence and imports (:func:`installed`, :func:`library_module`),
makes the leaves (:func:`transform`, :func:`prepare`) and moves FFTW's wisdom
(:func:`export_wisdom`, :func:`import_wisdom`); one module per library holds that library's call,
given the imported module (:mod:`~trnplan.kernels.hostlib.pocketfft`,
:mod:`~trnplan.kernels.hostlib.mklfft`, and :mod:`~trnplan.kernels.hostlib.fftw`, which also keeps
FFTW's plans, rigor, planning budget and wisdom text); :mod:`~trnplan.kernels.hostlib.arrays` is the
torch ↔ numpy glue they share.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import warnings
from collections.abc import Callable

import torch

from trnplan.core import state
from trnplan.core.errors import PlanningError
from trnplan.kernels.hostlib import fftw
from trnplan.kernels.hostlib.arrays import _as_numpy, numpy_leaf
from trnplan.kernels.hostlib.fftw import FFTW_PLANS, MIN_FFTW_PLANNING_S, fftw_budget, fftw_rigor
from trnplan.kernels.hostlib.mklfft import _mkl_call, _mkl_thread_setter, in_mkl_threads
from trnplan.kernels.hostlib.pocketfft import _r2r_call, _scipy_call
from trnplan.kernels.hostlib.threads import AdaptiveThreads, adaptive, in_threads

__all__ = [
    "FFTW_PLANS",
    "LIBRARIES",
    "MIN_FFTW_PLANNING_S",
    "AdaptiveThreads",
    "adaptive",
    "available",
    "broken_reason",
    "export_wisdom",
    "fftw_budget",
    "fftw_rigor",
    "import_wisdom",
    "in_mkl_threads",
    "in_threads",
    "installed",
    "library_module",
    "not_itself",
    "prepare",
    "r2r_call",
    "transform",
    "unusable",
]

#: library key -> (module that holds the transforms, distribution whose version is reported)
LIBRARIES = {"scipy": ("scipy.fft", "scipy"), "pyfftw": ("pyfftw", "pyfftw"), "mkl_fft": ("mkl_fft", "mkl_fft")}

#: library key -> why importing it failed in this process (an installed but broken library:
#: from then on this process treats it as absent, see :func:`installed`)
_BROKEN: dict[str, str] = {}
#: the libraries of _BROKEN that imported but whose calls are another library's (fftw.NotFFTW)
_NOT_ITSELF: set[str] = set()


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
    """Import library ``name``'s transform module (and pyFFTW's builders) — the only import of it.

    pyFFTW is imported binding its own FFTW first, and checked to be FFTW
    (:func:`~trnplan.kernels.hostlib.fftw.import_pyfftw`): once MKL has run in a process its FFTW3
    wrappers are global symbols, and a pyFFTW imported the usual way after that calls MKL."""
    modname, _dist = LIBRARIES[name]
    if name == "pyfftw":
        module = fftw.import_pyfftw(modname)
        importlib.import_module("pyfftw.builders")
        return module
    return importlib.import_module(modname)


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
    except fftw.NotFFTW as exc:  # imported, but its calls are another library's: the fix is not a reinstall
        _BROKEN[name] = str(exc)
        _NOT_ITSELF.add(name)
        warnings.warn(f"{name} {_distribution_version(name)}: {exc}; trnplan plans without it in this process",
                      stacklevel=2)
        return None
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install (a missing shared library: OSError)
        _BROKEN[name] = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"{name} {_distribution_version(name)} is installed but importing it failed "
                      f"({_BROKEN[name]}); trnplan plans without it in this process. Reinstall it "
                      f"(pip install --force-reinstall {LIBRARIES[name][1]}) or uninstall it", stacklevel=2)
        return None


def broken_reason(name: str) -> str | None:
    """Why library ``name`` failed to import in this process, or None (absent, or not tried)."""
    return _BROKEN.get(name)


def not_itself(name: str) -> bool:
    """Whether library ``name`` imported in this process but its calls are another library's
    (:class:`~trnplan.kernels.hostlib.fftw.NotFFTW`), so that it reads as absent."""
    return name in _NOT_ITSELF


def unusable(name: str) -> str | None:
    """Why installed library ``name`` cannot be used in this process, and the fix, in words; None
    where it can (or is not installed, or not tried)."""
    broken = _BROKEN.get(name)
    if broken is None:
        return None
    version = _distribution_version(name)
    if name in _NOT_ITSELF:
        return f"{name} {version} is installed, but {broken}"
    return (f"{name} {version} is installed, but importing it failed ({broken}): reinstall it "
            f"(pip install --force-reinstall {LIBRARIES[name][1]}) or uninstall it")


def available() -> dict[str, str | None]:
    """Which host FFT libraries are installed, and their versions (without importing them).

    Returns
    -------
    dict of str to (str or None)
        ``{"scipy": "1.17.1", "pyfftw": "0.15.1", "mkl_fft": None}``: library name to its
        distribution's version (:func:`installed`), or ``None`` where it is not installed.
    """
    return dict(zip(LIBRARIES, map(installed, LIBRARIES)))


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
        The call's thread count. Default: pyFFTW one (:func:`~trnplan.kernels.hostlib.fftw._fftw_threads`);
        scipy (``workers=``) and mkl_fft (MKL's OpenMP count, :func:`~trnplan.kernels.hostlib.threads.in_threads`)
        torch's thread count at each call.

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
    module = library_module(library)
    if module is None:
        why = unusable(library)
        if why is not None:
            raise PlanningError(f"the plan has a {library} leaf and {why}; planning again in this process leaves it out")
        raise PlanningError(f"the plan has a {library} leaf and {library} is not installed: install it "
                            f"(pip install {LIBRARIES[library][1]}) or plan again without it")
    shape = tuple(shape)
    if library == "pyfftw":  # the whole call on tensors, to keep the per-call work small
        return fftw._pyfftw_call(module, shape, kind, inverse, norm, threads or fftw._fftw_threads())
    make = {"scipy": _scipy_call, "mkl_fft": _mkl_call}[library]
    return numpy_leaf(make(module, shape, kind, inverse, norm, threads), kind)


def r2r_call(shape: tuple, kind: str, inverse: bool, norm: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """pocketfft's (scipy's) DCT/DST as a callable on CPU real tensors, norm included.

    Parameters
    ----------
    shape : tuple of int
        The transform shape, over the input's trailing axes.
    kind : str
        ``"dct1"`` … ``"dst4"``.
    inverse : bool
        scipy.fft's ``idct``/``idst`` (``idctn``/``idstn``) of ``kind`` instead.
    norm : {"backward", "ortho", "forward"}
        scipy.fft's meaning.

    Returns
    -------
    callable
        ``f(x)`` with ``x`` real of shape ``(..., *shape)``, any strides, returning a new tensor
        of its shape and dtype (any leading dims: ``any_leading``); its attribute ``on_numpy`` is the
        same transform of a numpy array.

    Raises
    ------
    PlanningError
        scipy is not installed or its import failed (as :func:`transform`).
    """
    module = library_module("scipy")
    if module is None:
        raise PlanningError(f"the plan has a scipy r2r leaf and scipy cannot be imported "
                            f"({broken_reason('scipy') or 'not installed'}): pip install scipy, or plan again "
                            f"without it")
    run = _r2r_call(module, tuple(shape), kind[:3], int(kind[3]), inverse, norm)

    def call(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(run(_as_numpy(x)))  # a real output of the input's dtype: not numpy_leaf's widening

    call.on_numpy = run  # the same transform on a numpy array (the scipy.fft backend's arrays: no tensor made)
    call.any_leading = True  # any leading dims, as one batch (the axes are the trailing ones): Plan's direct call
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
        pyFFTW's thread count (default :func:`~trnplan.kernels.hostlib.fftw._fftw_threads`).
    """
    pyfftw = library_module("pyfftw") if library == "pyfftw" else None
    if pyfftw is not None:
        fftw.prepare_plan(pyfftw, shape, kind, inverse, batch, dtype, threads)


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
    return fftw.export_wisdom(pyfftw)


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
    fftw.import_wisdom(pyfftw, blob)


def _reset() -> None:
    """A fresh process's host libraries: no FFTW plan kept or counted, FFTW's own wisdom empty (where
    pyFFTW was imported), no import failure remembered, the distributions' metadata read again."""
    fftw.reset()
    _BROKEN.clear()
    _NOT_ITSELF.clear()
    for memo in _MEMOS:
        memo.cache_clear()


#: bound here, not looked up at reset: tests monkeypatch ``_import_library`` and ``installed``
_MEMOS = (_distribution_version, _import_library, _mkl_thread_setter)


state.register("kernels.hostlib", _reset)
