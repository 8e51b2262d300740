"""Steps 4-5 of the build pipeline for a compiled plan: a graph compiled in this process (jit modes),
or an artifact kept in the plan cache (AOT, a Neuron trace) — loaded if the record names it and its
sha256 matches, else compiled (never under ``wisdom_only``), stored first-writer-wins and loaded as
stored, so concurrent processes run the same bytes; a child process loads it first where the
backend asks (the load check), and a failure there is remembered per fingerprint."""

from __future__ import annotations

import hashlib
import time

from trnplan.backends import artifacts
from trnplan.backends.artifacts import problem_inputs
from trnplan.cache import records
from trnplan.core import config, state
from trnplan.core.errors import WisdomMiss
from trnplan.plan.provenance import warn


def jit_runner(req, decision, facts: dict):
    """A runner compiled in this process (compile="inductor"); None (eager) if it fails to build."""
    problem, mode = req.problem, req.mode
    # the plan's own flat (batch, points) shape: compiled static, as Plan.execute calls it
    example = tuple(t[: problem.batch] for t in problem_inputs(problem, req.device))
    t0 = time.perf_counter()
    try:
        runner = req.backend.jit_compile(decision.module, example, mode)
    except Exception as exc:  # noqa: BLE001 - any compiler failure: the plan runs eagerly, with a warning
        warn(f"could not compile {decision.tree} with {mode} ({type(exc).__name__}: {str(exc)[:500]}); "
             f"running eagerly")
        facts.update(compile_mode="eager", compile_reason=f"{mode} failed to compile ({type(exc).__name__}); "
                                                          f"eager instead")
        return None
    facts.update(compile_s=time.perf_counter() - t0, artifact="compiled in process")
    return runner


#: AOT load checks that failed in this process: (fingerprint digest, mode) -> why (see _failed_load_check)
_FAILED_LOAD_CHECKS: dict[tuple[str, str], str] = {}
state.register("plan.failed_load_checks", _FAILED_LOAD_CHECKS.clear)


def _wants_load_check(backend, mode: str) -> str:
    """"no", "yes" or "fresh" (yes, and ignore a remembered failure) for an artifact of ``mode``."""
    setting = config.aot_load_check()
    if mode != "aot" or setting == "0" or (setting == "auto" and not backend.load_check_artifacts):
        return "no"
    return "fresh" if setting == "1" else "yes"


def _failed_load_check(cache, fpd: str, mode: str) -> str | None:
    """Why AOT artifacts do not load on this fingerprint, if a load check said so before."""
    why = _FAILED_LOAD_CHECKS.get((fpd, mode))
    if why is None and cache is not None:
        why = cache.get_record(records.load_check_key(fpd, mode), _load_check_why)
    return why


def _load_check_why(record: dict) -> str:
    """A ``load_check:`` record's reason (see PlanCache.get_record's damaged-record policy)."""
    why = record["why"]
    if not isinstance(why, str) or not why:
        raise TypeError(f"'why' must be a text, got {why!r}")
    return why


def _remember_failed_load_check(cache, fpd: str, mode: str, why: str | None) -> None:
    if why is None:
        _FAILED_LOAD_CHECKS.pop((fpd, mode), None)
        if cache is not None:
            cache.forget(records.load_check_key(fpd, mode))
        return
    _FAILED_LOAD_CHECKS[(fpd, mode)] = why
    if cache is not None:
        cache.set_record(records.load_check_key(fpd, mode), {"why": why, "when": time.time()})


def artifact_runner(req, decision, entry: dict | None, facts: dict):
    """(runner, record entry) for the artifact of the tree; (None, None) if it cannot be had."""
    tree, mode, cache = decision.tree, req.mode, req.cache
    akey = records.artifact_key(req.digest, tree.digest(), req.fpd, mode)
    facts["artifact_key"] = akey
    if cache is not None:
        cache.check_trusted()  # before any compile: an untrusted directory would waste it
    check = _wants_load_check(req.backend, mode)
    failed = _failed_load_check(cache, req.fpd, mode) if check == "yes" else None
    if failed is not None:
        # neither build (30-90 s on a GPU) nor load what would crash this process
        reason = (f"{mode} artifacts crash at load on this machine ({failed}; remembered for this fingerprint: "
                  f"torch, device and driver). TRNPLAN_AOT_LOAD_CHECK=1 checks again")
        warn(f"not using an {mode} artifact for {tree}: {reason}; running eagerly (compile='eager' or "
             f"'inductor' avoids this warning)")
        facts.update(compile_reason=reason, artifact_error=reason)
        return None, None
    data = _stored_artifact(cache, akey, entry, facts)
    built = data is None
    if built:
        data, entry = _compile_artifact(req, decision, akey, facts)
        if data is None:
            return None, None
    if check != "no" and entry.get("load_check") != "ok":
        if not _load_check(req, tree, data, built, akey, facts):
            return None, None
        entry = {**entry, "load_check": "ok"}
    t0 = time.perf_counter()
    try:
        runner = req.backend.load_artifact(data, mode, req.device)
    except Exception as exc:  # noqa: BLE001 - any loader failure: the plan runs eagerly, with a warning
        return _broken_artifact(req, tree, akey, exc, facts), None
    facts.update(load_ms=(time.perf_counter() - t0) * 1e3, artifact_bytes=len(data))
    return runner, entry


def _broken_artifact(req, tree, akey: str, exc: Exception, facts: dict) -> None:
    """An artifact whose bytes match their sha256 but do not load (a damaged or foreign build, a
    bundle made for another torch): forget the bytes, run eagerly, say so. A loader crash that
    kills the process is the load check's business (TRNPLAN_AOT_LOAD_CHECK)."""
    mode = req.mode
    reason = f"the {mode} artifact {akey} did not load ({type(exc).__name__}: {str(exc)[:300]})"
    warn(f"{reason}; forgetting it and running {tree} eagerly (a later plan builds it again)")
    facts.update(compile_reason=f"{reason}; eager instead", artifact_error=reason, artifact=None)
    if req.cache is not None:
        req.cache.forget(akey)


def _stored_artifact(cache, akey: str, entry: dict | None, facts: dict) -> bytes | None:
    """The artifact the record names, if it is stored and its sha256 matches."""
    if cache is None or entry is None or entry.get("key") != akey:
        return None
    data = cache.get_artifact(akey, entry.get("sha256", ""))
    if data is not None:
        compile_s = float(entry.get("compile_s", 0.0))
        facts.update(artifact="artifact hit", compile_s=compile_s, dynamic_batch=entry.get("dynamic_batch"))
        cache.count("artifact_hits")
        cache.count("compile_seconds_saved", compile_s)
    return data


def _compile_artifact(req, decision, akey: str, facts: dict):
    """(bytes, record entry) of a new artifact, stored first-writer-wins; (None, None) if it fails to build."""
    problem, tree, mode, cache = req.problem, decision.tree, req.mode, req.cache
    if req.wisdom_only:
        raise WisdomMiss(
            f"effort='wisdom_only' (or TRNPLAN_WISDOM_ONLY=1): the plan for {problem.describe()} is stored "
            f"but its {mode} artifact {akey} is missing or damaged in "
            f"{cache.path if cache is not None else 'no cache'}; precompile it again"
        )
    example = problem_inputs(problem, req.device)
    t0 = time.perf_counter()
    # a compiler's logs stay under the plan cache (Neuron's compiler_workdir)
    keep = {"workdir": str(cache.path / "compile" / akey.split(":")[1])} if (
        req.backend.keeps_compiler_logs and cache is not None) else {}
    try:
        if str(tree) in decision.prebuilt:  # built, and timed, while measuring
            data, built, seconds = decision.prebuilt[str(tree)]
            t0 -= seconds
        else:
            data, built = req.backend.build_artifact(decision.module, example, mode, **keep)
    except Exception as exc:
        if not req.backend.build_failure_fallback():
            raise  # Neuron: a CompileError naming the compiler's log, unless the host fallback was asked for
        warn(f"could not build the {mode} artifact for {tree} ({type(exc).__name__}: {exc}); running eagerly")
        facts.update(compile_reason=f"{mode} failed to build ({type(exc).__name__}); eager instead",
                     artifact_error=f"{mode} failed to build ({type(exc).__name__}: {str(exc)[:300]})")
        return None, None
    compile_s = time.perf_counter() - t0
    facts.update(compile_s=compile_s, artifact="compiled now", dynamic_batch=built.get("dynamic_batch"))
    if cache is not None:
        data = cache.add_artifact(akey, data)  # another process may have won: run its bytes
        cache.count("compiles")
        cache.count("compile_seconds", compile_s)
    entry = {"key": akey, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
             "compile_s": compile_s, "dynamic_batch": built.get("dynamic_batch")}
    return data, entry


def _load_check(req, tree, data: bytes, built: bool, akey: str, facts: dict) -> bool:
    """A child process loads the artifact first: a crash there costs this process nothing
    (artifacts.load_check). False, remembered per fingerprint, if it did not load."""
    problem, mode, cache = req.problem, req.mode, req.cache
    t0 = time.perf_counter()
    why = artifacts.load_check(data, req.device, problem_inputs(problem, req.device))
    facts["load_check_s"] = time.perf_counter() - t0
    _remember_failed_load_check(cache, req.fpd, mode, why)
    if why is None:
        return True
    reason = f"the {mode} artifact did not load on this machine: {why}"
    warn(f"{reason}; running {tree} eagerly. Later {mode} plans on this machine (this torch, device and "
         f"driver) run eagerly without building; TRNPLAN_AOT_LOAD_CHECK=1 checks again")
    facts.update(compile_reason=reason, artifact_error=reason, artifact=None)
    if built and cache is not None:
        cache.forget(akey)  # bytes no record will point at (a stored artifact is left as it is)
    return False


__all__ = ["artifact_runner", "jit_runner"]
