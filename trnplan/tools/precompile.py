"""Precompiling plans at container build time, from a TOML manifest or a list of dicts.

A manifest lists problems; each is planned (and compiled, for an artifact mode) into a plan
cache, so that production can run with ``TRNPLAN_WISDOM_ONLY=1`` and never plan or compile.
The format (``trnplan precompile --help`` prints it too)::

    [defaults]            # optional: keys applied to every [[plan]] that does not set them
    compile = "auto"

    [[plan]]
    shape = [4096]        # transform shape (an int is accepted for 1-D)
    batch = 64
    kind = "c2c"          # optional keys: kind, inverse, precision, dtype, norm, device, cores,
    inverse = false       #   effort, strategy, tol, compile, verify (plan_many's arguments)
    backward = true       # also the adjoint plan autograd's backward pass runs (training)
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import inspect
import multiprocessing
import os
import signal
import sys
import threading
import time
from pathlib import Path

import attrs
import torch

from trnplan.cache import PlanCache, default_cache
from trnplan.core.errors import TrnplanError
from trnplan.core.problem import Problem
from trnplan.core.progress import Progress
from trnplan.plan.api import plan_many, plan_many_uncached
from trnplan.plan.plan import adjoint_arguments

#: manifest keys and the types they take (plan_many's arguments)
KEYS = {
    "shape": (list, int), "batch": (int,), "kind": (str,), "inverse": (bool,), "precision": (str,),
    "dtype": (str,), "norm": (str,), "device": (str,), "cores": (int,), "effort": (str,),
    "strategy": (str,), "tol": (float, int), "compile": (str,), "verify": (bool,), "backward": (bool,),
}
_DTYPES = {"complex64": torch.complex64, "complex128": torch.complex128}


def _defaults_of(fn) -> dict:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items() if k != "shape"}


class ManifestError(TrnplanError, ValueError):
    """The manifest cannot be read or names something plan_many does not take."""


@attrs.frozen
class PrecompileResult:
    """The outcome of one manifest entry."""

    index: int
    problem: str
    tree: str | None
    origin: str | None
    compile_mode: str | None
    compile_s: float
    artifact_bytes: int
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def load_manifest(path) -> list[dict]:
    """Read and validate a TOML manifest; return its plan entries (defaults applied)."""
    try:
        import tomllib  # deferred: stdlib from Python 3.11; the fallback below is for 3.10
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    path = Path(path)
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc}") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8 (toml.io, "Spec"); say where it is not
        raise ManifestError(f"manifest {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                            f"{exc.start}); TOML files are UTF-8: save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"manifest {path} is not valid TOML: {exc}") from None
    unknown = set(data) - {"plan", "defaults"}
    if unknown:
        raise ManifestError(f"manifest {path}: unknown top-level table(s) {sorted(unknown)}; use [[plan]] and "
                            f"optionally [defaults]")
    plans = data.get("plan")
    if not isinstance(plans, list) or not plans:
        raise ManifestError(f"manifest {path} lists no [[plan]] entries")
    defaults = data.get("defaults", {})
    validate_entry(defaults, "[defaults]", need_shape=False)
    for i, entry in enumerate(plans):
        validate_entry(entry, f"[[plan]] #{i + 1}", need_shape=False)  # a table, before merging
    return [validate_entry({**defaults, **entry}, f"[[plan]] #{i + 1}") for i, entry in enumerate(plans)]


def validate_entry(entry: dict, where: str = "entry", need_shape: bool = True) -> dict:
    if not isinstance(entry, dict):
        raise ManifestError(f"{where} must be a table of keys, got {type(entry).__name__}")
    for key, value in entry.items():
        if key not in KEYS:
            raise ManifestError(f"{where}: unknown key {key!r}; allowed keys: {', '.join(KEYS)}")
        if isinstance(value, bool) and bool not in KEYS[key] or not isinstance(value, KEYS[key]):
            names = " or ".join(t.__name__ for t in KEYS[key])
            raise ManifestError(f"{where}: {key} must be {names}, got {value!r}")
    if need_shape and "shape" not in entry:
        raise ManifestError(f"{where}: 'shape' is required (e.g. shape = [4096])")
    shape = entry.get("shape", [1])
    lengths = shape if isinstance(shape, list) else [shape]
    if not lengths or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in lengths):
        raise ManifestError(f"{where}: shape must be a positive integer or a non-empty list of them "
                            f"(e.g. shape = [4096] or [256, 256]), got {shape!r}")
    for key in ("batch", "cores"):
        if key in entry and entry[key] < 1:
            raise ManifestError(f"{where}: {key} must be a positive integer, got {entry[key]!r}")
    if "dtype" in entry and entry["dtype"] not in _DTYPES:
        raise ManifestError(f"{where}: dtype must be 'complex64' or 'complex128', got {entry['dtype']!r}")
    if entry.get("compile") == "inductor":
        raise ManifestError(f"{where}: compile = 'inductor' compiles in the running process and keeps nothing in "
                            f"the plan cache, so there is nothing to precompile; use compile = 'aot' (or 'auto')")
    return entry


#: the command line's problem syntax (``trnplan precompile c2c:4096@64 r2c:256x256@8``), as
#: FFTW's ``fftw-wisdom`` takes problems on its command line
PROBLEM_SYNTAX = "[KIND:]SHAPE[@BATCH], KIND c2c (default), c2c-inv, r2c or c2r; SHAPE like 4096 or 256x256"
_KIND_TOKENS = {"c2c": {"kind": "c2c"}, "c2c-inv": {"kind": "c2c", "inverse": True}, "r2c": {"kind": "r2c"},
                "c2r": {"kind": "c2r"}}


def parse_problem(text: str) -> dict:
    """A manifest entry from the command line's syntax :data:`PROBLEM_SYNTAX`.

    ``"c2c:4096@64"`` → ``{"kind": "c2c", "shape": [4096], "batch": 64}``; ``"r2c:256x256@8"`` →
    a 2-D r2c of batch 8; ``"c2c-inv:1024"`` → an inverse c2c of batch 1 (or the command's
    ``--batch``). Raises :class:`ManifestError` naming the syntax.
    """
    kind, _, rest = text.rpartition(":")
    body, at, batch = rest.partition("@")
    try:
        shape = [int(n) for n in body.split("x")]
        extra = {"batch": int(batch)} if at else {}
    except ValueError:
        shape, extra = [], {}
    if (kind and kind not in _KIND_TOKENS) or not shape or min(shape) < 1 or extra.get("batch", 1) < 1:
        raise ManifestError(f"{text!r} is neither a manifest file nor a problem {PROBLEM_SYNTAX} "
                            f"(e.g. c2c:4096@64 or r2c:256x256@8)")
    return {**_KIND_TOKENS[kind or "c2c"], "shape": shape, **extra}


def with_adjoints(entries: list[dict]) -> list[dict]:
    """The entries with each ``backward = true`` entry followed by its adjoint's entry.

    The adjoint is the plan autograd's backward pass runs (:meth:`trnplan.Plan.adjoint`): without
    it, ``loss.backward()`` under ``TRNPLAN_WISDOM_ONLY=1`` raises WisdomMiss. It is planned with
    the entry's tol, compile, effort and device, as ``Plan.adjoint`` asks for it (no strategy: a
    forced forward tree says nothing about the adjoint's)."""
    out = []
    for entry in entries:
        entry = dict(entry)
        backward = entry.pop("backward", False)
        out.append(entry)
        if not backward:
            continue
        kwargs = _plan_kwargs(entry)
        try:
            problem = Problem.create(kwargs["shape"], kwargs.get("batch", 1), kind=kwargs.get("kind", "c2c"),
                                     inverse=kwargs.get("inverse"), dtype=kwargs.get("dtype", torch.complex64),
                                     precision=kwargs.get("precision"), norm=kwargs.get("norm", "backward"),
                                     cores=kwargs.get("cores", 1))
        except (TypeError, ValueError):
            continue  # the entry itself fails in its own row, with plan_many's message
        adjoint = adjoint_arguments(problem)
        out.append({**{k: v for k, v in entry.items() if k != "strategy"}, **adjoint, "shape": list(problem.shape),
                    "dtype": problem.dtype})
    return out


def _plan_kwargs(entry: dict) -> dict:
    kwargs = dict(entry)
    shape = kwargs.pop("shape")
    if "dtype" in kwargs:
        kwargs["dtype"] = _DTYPES[kwargs["dtype"]]
    return {"shape": tuple(shape) if isinstance(shape, list) else shape, **kwargs}


def _precompile_one(index: int, entry: dict, cache_path: str | None) -> PrecompileResult:
    cache = PlanCache(cache_path) if cache_path is not None else default_cache()
    kwargs = _plan_kwargs(entry)
    label = f"{kwargs['shape']} × batch {kwargs.get('batch', 1)}"
    t0 = time.perf_counter()
    try:
        # past the in-process LRU: its plan may predate this cache's contents (e.g. after a clear)
        args = {**_defaults_of(plan_many), **kwargs, "cache": cache}
        plan = plan_many_uncached(**args)
    except Exception as exc:  # noqa: BLE001 - one bad entry must not stop the others
        return PrecompileResult(index, label, None, None, None, 0.0, 0, time.perf_counter() - t0,
                                f"{type(exc).__name__}: {exc}")
    finally:
        if cache_path is not None:
            # closing merges SQLite's write-ahead log into the database, so a read-only image
            # built from this directory sees every plan
            cache.close()
    pv = plan.provenance
    # an artifact asked for and not had: the plan is stored, but production would run it eagerly
    error = (f"compile={args['compile']!r} asked for, but the plan is stored without an artifact and runs "
             f"eagerly: {pv.artifact_error}") if pv.artifact_error else None
    return PrecompileResult(index, plan.problem.describe(), str(plan.tree), pv.origin, pv.compile_mode,
                            pv.compile_s, pv.artifact_bytes, time.perf_counter() - t0, error)


#: prctl(2)'s PR_SET_PDEATHSIG: the signal this process gets when the thread that started it ends
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Worker initializer: the worker ends when the precompiling process does, however it ends.

    A pool's workers block reading the task queue, whose writing end they hold themselves, so
    they never see an end of file: after a SIGKILL or SIGTERM of ``trnplan precompile --jobs 2``
    they ran forever (issue 34). On Linux the kernel kills them with the parent
    (``PR_SET_PDEATHSIG``); elsewhere a daemon thread polls the parent's pid once a second.
    """
    armed = False
    if sys.platform.startswith("linux"):
        try:
            armed = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent:  # the parent was gone before the signal was armed
        os._exit(1)
    if not armed:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="trnplan-parent-watch").start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def precompile(problems, *, cache=None, jobs: int = 1, progress: bool | None = None) -> list[PrecompileResult]:
    """Plan and compile every problem into a plan cache.

    Parameters
    ----------
    problems : list of dict, or a path to a TOML manifest
        Each dict holds ``plan_many`` arguments (``shape`` required; see :data:`KEYS`), and
        optionally ``backward=True``: also precompile the adjoint plan that autograd's backward
        pass runs (:meth:`trnplan.Plan.adjoint`), for training under ``TRNPLAN_WISDOM_ONLY=1``.
        It is one more entry in the results, after its forward one.
    cache : PlanCache, str or Path, optional
        Where to store; default the process-wide default cache.
    jobs : int, default 1
        Worker processes. Entries are independent; concurrent writers are safe (first writer
        wins), so several ``precompile`` runs may also share one cache directory.
    progress : bool, optional
        None (default): a progress bar on standard error where it is a terminal (redrawn in
        place, with the entry being planned), nothing in a pipe or a log; True: one line per
        finished entry on standard error, terminal or not (for build logs); False: nothing.

    Returns
    -------
    list of PrecompileResult
        In manifest order; ``result.ok`` is False where an entry failed (its ``error`` says why).

    Examples
    --------
    >>> import trnplan  # doctest: +SKIP
    >>> results = trnplan.precompile([{"shape": [4096], "batch": 64}], cache="/opt/trnplan")  # doctest: +SKIP
    """
    if isinstance(problems, (str, Path)):
        entries = load_manifest(problems)
    else:
        entries = [validate_entry(dict(p), f"problem #{i + 1}") for i, p in enumerate(problems)]
    entries = with_adjoints(entries)
    if isinstance(cache, PlanCache):
        cache_path = str(cache.path)
    else:
        cache_path = str(cache) if cache is not None else None
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive int, got {jobs!r}")
    results: list[PrecompileResult | None] = [None] * len(entries)
    done = 0
    # on a terminal (progress None) the bar is redrawn in place; progress=True prints lines instead
    with Progress(f"trnplan precompile: {len(entries)} plan(s)", enabled=None if progress is None else False) as bar:

        def report(result: PrecompileResult):
            nonlocal done
            done += 1
            results[result.index] = result
            status = "ok" if result.ok else "FAILED"
            bar.update(done / len(entries), f"{done}/{len(entries)} {status} {result.problem}")
            if progress:
                width = 20
                filled = "#" * (width * done // len(entries)) + "-" * (width - width * done // len(entries))
                print(f"[{filled}] {done}/{len(entries)} {status} {result.problem} ({result.seconds:.1f} s)",
                      file=sys.stderr, flush=True)

        _run_entries(entries, cache_path, jobs, report)
    return results


def _run_entries(entries, cache_path, jobs: int, report) -> None:
    if jobs == 1 or len(entries) == 1:
        for i, entry in enumerate(entries):
            report(_precompile_one(i, entry, cache_path))
        return
    # spawn: torch and forked OpenMP pools do not mix
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_die_with_parent,
                                                initargs=(os.getpid(),)) as pool:
        futures = [pool.submit(_quiet_precompile_one, i, e, cache_path) for i, e in enumerate(entries)]
        for future in concurrent.futures.as_completed(futures):
            report(future.result())


def _quiet_precompile_one(index: int, entry: dict, cache_path: str | None) -> PrecompileResult:
    """:func:`_precompile_one` in a worker process: its planning draws no progress line of its own
    (the parent's bar counts the entries; several workers drawing on one terminal would garble it)."""
    with Progress("precompile worker", enabled=False):
        return _precompile_one(index, entry, cache_path)


def summary_table(results) -> str:
    """A plain-text table: problem, plan, origin, compile mode and seconds, artifact size, status."""
    rows = [("#", "problem", "plan", "origin", "compile", "compile s", "artifact", "status")]
    for r in results:
        rows.append((str(r.index + 1), r.problem, (r.tree or "—")[:48], r.origin or "—", r.compile_mode or "—",
                     f"{r.compile_s:.1f}", f"{r.artifact_bytes / 1e6:.2f} MB" if r.artifact_bytes else "—",
                     "ok" if r.ok else "FAILED: " + (r.error or "")[:80]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
