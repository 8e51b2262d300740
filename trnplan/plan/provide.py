"""From a problem to a ready tree, module and artifact, through the plan cache.

The protocol, per problem (FFTW's wisdom, plus artifacts):

1. Look the wisdom up under (problem digest, fingerprint digest, strategy/tol). A record that
   does not parse, or whose tree does not lower, is forgotten with a warning ("bogus wisdom is
   forgotten and re-planned, never trusted").
2. On a miss, look for the same problem under *other* fingerprints and report which fields
   differ (a warning, and a line in explain()). With ``wisdom_only`` a miss is an error that
   names the problem, the cache directory and those differences. Otherwise plan now.
3. Lower the tree to its eager module (always: it also serves autograd and the pair form).
4. For an artifact mode, load the artifact if the record names it and its sha256 matches;
   otherwise compile (never under ``wisdom_only``), store with first-writer-wins, and load what
   was stored, so concurrent processes run the same bytes.
5. Store the record (first writer wins) or add the new artifact to it.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings

import attrs
import torch

from trnplan.backends import artifacts, get_backend
from trnplan.backends.artifacts import problem_inputs
from trnplan.backends.base import PrecisionProbe
from trnplan.cache.fingerprint import diff, fingerprint, fingerprint_digest
from trnplan.cache.store import WISDOM_FORMAT, CacheWarning, PlanCache
from trnplan.core import config
from trnplan.core.errors import OverBoundError, PlanningError, WisdomMiss
from trnplan.core.node import PlanNode
from trnplan.core.spec import Spec, parse_strategy
from trnplan.kernels import hostlib
from trnplan.plan.plan import Plan
from trnplan.planner import learn
from trnplan.planner.measure import Measurement, measure, ranked_candidates
from trnplan.planner.planner import Candidate, Planner
from trnplan.planner.registry import solver_names


@attrs.define
class Provenance:
    """Where a plan came from, for explain() and tests."""

    origin: str = "planned now"  # "planned now" | "wisdom hit"
    planning_ms: float = 0.0
    searches: int = 0
    cache_path: str | None = None
    wisdom_key: str | None = None
    fingerprint: dict = attrs.Factory(dict)
    fingerprint_note: str | None = None
    compile_mode: str = "eager"
    compile_reason: str = ""
    artifact: str | None = None  # "compiled now" | "artifact hit" | None
    artifact_key: str | None = None
    artifact_bytes: int = 0
    compile_s: float = 0.0
    load_ms: float = 0.0
    load_check_s: float = 0.0  # an AOT artifact's first load in a child process (artifacts.load_check)
    #: why an artifact mode that was asked for could not be had (a failed build or load check), so the
    #: plan runs eagerly; None when it was had or not asked for (precompile reports it as a failure)
    artifact_error: str | None = None
    dynamic_batch: bool | None = None
    effort: str = "estimate"  # the effort that made the plan (a wisdom hit: the stored one's)
    measurement: object | None = None  # trnplan.planner.measure.Measurement of a measured plan
    calibration: str = ""  # the cost profile's calibration, one line (explain)
    probe: str = ""  # the device's precision probe, one line (explain)
    probe_origin: str = ""  # "probed now" | "from the plan cache" | "from this process"
    bucket: str = ""  # neuron: how the batch maps onto the compiled bucket and cores (explain)


@attrs.frozen
class Provided:
    tree: PlanNode
    candidates: tuple
    module: torch.nn.Module
    runner: object | None
    provenance: Provenance
    tol: float


def variant_digest(spec, tol, effort: str = "estimate", exportable: bool = False) -> str:
    parts = [str(spec) if spec else None, tol]
    if effort != "estimate" or exportable:  # estimate's keys are those of the versions before efforts
        parts += [effort, exportable]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:8]


#: the stored efforts a request may use, best first: wisdom from a higher effort satisfies a
#: lower one (as in FFTW), never the reverse
USABLE_EFFORTS = {"patient": ("patient",), "measure": ("patient", "measure"),
                  "estimate": ("patient", "measure", "estimate"), "wisdom_only": ("patient", "measure", "estimate")}


def wisdom_keys(problem, fpd: str, spec, tol: float, effort: str, exportable: bool) -> list[str]:
    """The wisdom keys a request may be answered from, best first (a plan is stored under its own
    effort's key). An exportable plan (torch ops only) also serves an eager request, not the reverse.
    """
    exports = (True,) if exportable else (False, True)
    return [f"wisdom:{problem.digest()}:{fpd}:{variant_digest(spec, tol, e, x)}"
            for e in USABLE_EFFORTS[effort] for x in exports]


def _warn(message: str) -> None:
    warnings.warn(message, CacheWarning, stacklevel=6)  # _warn, provide, _build_plan, _plan_many, plan_many: the caller


def _candidates_to_json(candidates) -> list:
    return [{"solver": c.solver, "verdict": c.verdict, "reason": c.reason,
             "time_us": c.node.time_us if c.node else None, "error": c.node.error if c.node else None}
            for c in candidates]


def _candidates_from_json(items) -> tuple:
    out = []
    for item in items or ():
        node = None
        if item.get("time_us") is not None:  # a stand-in node carrying the predicted numbers
            node = PlanNode(item["solver"], 0, 0, time_us=item["time_us"], error=item["error"])
        out.append(Candidate(item["solver"], item["verdict"], item.get("reason", ""), node))
    return tuple(out)


def _trusted_tree(record: dict, problem, planner) -> PlanNode:
    """The record's tree, if it is exactly what its solvers make of *this* problem.

    The tree is replayed through the planner as a forced strategy (its own s-expression), which
    re-applies every solver's applicability and parameter checks, then compared decision for
    decision (solvers, sizes, batches, directions, parameters). A record for another problem, a
    flipped direction or impossible factors is refused rather than run.
    """
    if record["problem"] != problem.to_dict():
        raise ValueError(f"it was stored for another problem ({record['problem']})")
    tree = PlanNode.from_dict(record["tree"])
    replayed = planner.plan(problem, parse_strategy(str(tree), solver_names()))
    if replayed.digest() != tree.digest():
        raise ValueError(f"its tree {tree} is not what its solvers make of this problem ({replayed})")
    return tree


def precision_probe(backend, device: torch.device, cache: PlanCache | None, fpd: str):
    """(probe, origin): the device's precision probe, from this process, the plan cache (keyed by
    the fingerprint digest) or run now and stored there."""
    if backend.has_probe(device):
        return backend.precision_probe(device), "from this process"
    key = f"probe:{fpd}:{device}"
    text = cache._get(key) if cache is not None else None
    if text is not None:
        try:
            return backend.remember_probe(device, PrecisionProbe.from_dict(json.loads(text))), "from the plan cache"
        except (ValueError, TypeError) as exc:
            _warn(f"plan cache {cache.path}: precision probe {key!r} is not valid ({exc}); probing again")
            cache._delete(key)
    probe = backend.precision_probe(device)
    if cache is not None:
        cache._add(key, json.dumps(probe.to_dict(), sort_keys=True))
    return probe, "probed now"


def _unreachable(problem, spec, planner, backend, probe) -> str:
    """Why ``planner.tol`` cannot be met: the smallest bound this precision reaches, and a
    precision that would meet the tol (for the PlanningError a tol too tight raises)."""
    tol = planner.tol(problem)

    def reaches(p, bound):
        try:
            return Planner(backend, tol=bound, probe=probe).plan(p, spec)
        except PlanningError:
            return None

    free = reaches(problem, math.inf)
    if free is None:
        return ""
    # bisect (in log scale) the smallest bound a search still meets: the cheapest tree under an
    # infinite bound is not always the most accurate one
    lo, hi = tol, free.error
    for _ in range(6):  # to within a factor (hi/lo)^(1/64): enough to name the reachable bound
        mid = math.sqrt(lo * hi)
        if reaches(problem, mid) is not None:
            hi = mid
        else:
            lo = mid
    msg = (f"tol={tol:.1e} is out of reach for precision={problem.precision!r} at n={problem.n}: the most "
           f"accurate plan its solvers find is predicted at {hi:.1e}")
    if problem.precision != "auto":
        auto = attrs.evolve(problem, precision="auto")
        pick = reaches(auto, tol) if spec is None else None
        if spec is not None:  # the same forced strategy, its mode chosen
            try:
                pick = Planner(backend, tol=tol, probe=probe).plan(auto, Spec(name="precision", children=(spec,)))
            except PlanningError:
                pick = None
        if pick is not None:
            return msg + (f"; precision={pick.param('mode')!r} meets it (predicted {pick.error:.1e}), or let "
                          f"precision='auto' choose")
    if problem.dtype == "complex64":
        wide = attrs.evolve(problem, precision="fp64", dtype="complex128")
        pick = reaches(wide, tol)
        if pick is not None:
            return msg + f"; precision='fp64' with dtype=torch.complex128 meets it (predicted {pick.error:.1e})"
    return msg + "; no precision mode reaches it"


def provide(problem, spec, device: torch.device, tol, cache: PlanCache | None, compile: str,  # noqa: C901 - not split yet (docs/architecture.md, exceptions)
            wisdom_only: bool, effort: str = "estimate") -> Provided:
    backend = get_backend(problem.device)
    fp = fingerprint(problem.device, device)
    fpd = fingerprint_digest(fp)
    probe, probe_origin = precision_probe(backend, device, cache, fpd)
    mode, mode_reason = backend.resolve_compile(compile)
    if wisdom_only and mode in backend.jit_modes:
        raise WisdomMiss(
            f"effort='wisdom_only' (or TRNPLAN_WISDOM_ONLY=1) never compiles, and compile={mode!r} compiles in "
            f"the running process (nothing of it is kept in the plan cache): use compile='aot' (precompiled into "
            f"the cache) or compile='eager' for {problem.describe()}"
        )
    profile, calibration = learn.calibrated_profile(backend.profile, cache, fpd, device)
    # an artifact holds torch ops only: host-library leaves are not candidates for it
    planner = Planner(backend, tol=tol, probe=probe, device=device, profile=profile, exportable=mode != "eager")
    if problem.precision == "auto" and spec is not None and spec.name != "precision":
        spec = Spec(name="precision", children=(spec,))  # auto with a forced strategy: choose its mode
    prov = Provenance(fingerprint=fp, compile_mode=mode, compile_reason=mode_reason,
                      cache_path=str(cache.path) if cache is not None else None,
                      probe=probe.describe(), probe_origin=probe_origin, effort=effort,
                      calibration=calibration.describe() if calibration is not None else "")
    # the resolved bound: tol=None and an explicit default tol are the same plan
    keys = wisdom_keys(problem, fpd, spec, planner.tol(problem), "wisdom_only" if wisdom_only else effort,
                       planner.exportable)
    store_key = key = (f"wisdom:{problem.digest()}:{fpd}:"
                       f"{variant_digest(spec, planner.tol(problem), effort, planner.exportable)}")
    t0 = time.perf_counter()

    # 1. wisdom (the best effort stored that serves this request)
    record = None
    if cache is not None:
        for k in keys:
            record = cache.get_wisdom(k)
            if record is not None:
                key = k
                break
    tree = module = None
    measurement = None
    if record is not None:
        try:
            tree = _trusted_tree(record, problem, planner)
            if record.get("host_wisdom"):
                hostlib.import_wisdom(record["host_wisdom"])
            module = planner.lower_plan(tree, problem, device)
            candidates = _candidates_from_json(record.get("candidates"))
            if record.get("measurement") is not None:
                measurement = Measurement.from_dict(record["measurement"])
            prov.effort = record.get("effort", "estimate")
        except Exception as exc:  # noqa: BLE001 - bogus wisdom of any kind is forgotten, never trusted
            _warn(f"plan cache {cache.path}: wisdom {key!r} does not describe a valid plan for this problem "
                  f"({type(exc).__name__}: {exc}); forgetting it and re-planning")
            cache._delete(key)
            record = tree = module = measurement = None
            key, prov.effort = store_key, effort
    if record is not None:
        prov.origin, prov.wisdom_key = "wisdom hit", key
        cache.count("wisdom_hits")
    else:
        # 2. miss: explain it, then plan (or refuse)
        note, others = None, []
        if cache is not None:
            cache.count("wisdom_misses")
            stored = cache.wisdom_for_problem(problem.digest())
            others = [r for r in stored if r.get("fingerprint") != fp]
            variants = [r for r in stored if r.get("fingerprint") == fp]
            if others:
                nearest = min((diff(r["fingerprint"], fp) for r in others), key=len)
                note = "stored wisdom for this problem has another fingerprint: " + "; ".join(nearest)
            elif variants:
                note = ("stored wisdom for this problem has another strategy or tol: " + "; ".join(
                    f"strategy {r.get('strategy')}, tol {r.get('tol')}" for r in variants[:3]))
        if wisdom_only:
            if cache is None:
                where = "no plan cache (cache=None)"
            elif cache.unusable_reason:
                where = f"the plan cache, which is unusable: {cache.unusable_reason}"
            else:
                where = f"the plan cache at {cache.path}"
            raise WisdomMiss(
                f"effort='wisdom_only' (or TRNPLAN_WISDOM_ONLY=1): no stored plan for {problem.describe()} "
                f"[digest {problem.digest()}, strategy {str(spec) if spec else 'none'}, tol {tol}] in {where}"
                + (f"; {note}" if note else "; no entry for this problem under any fingerprint")
                + ". Precompile it (trnplan precompile MANIFEST --cache-dir DIR) or plan with effort='estimate'"
            )
        if note and others:
            prov.fingerprint_note = note + " (re-planned)"
            _warn(f"plan cache {cache.path}: {note}; re-planning")
        try:
            tree, candidates = planner.search(problem, spec)
        except OverBoundError as exc:
            why = _unreachable(problem, spec, planner, backend, probe)
            raise OverBoundError(f"{why}. ({exc})" if why else str(exc), candidates=exc.candidates,
                                 tol=exc.tol) from None
        if effort in ("measure", "patient"):
            tree, measurement, samples = _measure(problem, spec, device, planner, effort, tree)
            candidates = ranked_candidates(candidates, measurement)
            learn.record(cache, fpd, device, samples, backend.profile)
        module = planner.lower_plan(tree, problem, device)
        prov.searches = planner.searches
    prov.planning_ms = (time.perf_counter() - t0) * 1e3
    prov.measurement = measurement

    # 4. artifact
    if mode != "eager" and (problem.precision == "tf32" or "mode=tf32" in str(tree)):
        # TF32 is torch's process-wide matmul flag, scoped around each eager matmul; an AOT artifact
        # would bake in whatever the flag was when it was compiled
        mode = prov.compile_mode = "eager"
        prov.compile_reason = "tf32 plans run eagerly (the TF32 matmul flag is scoped around each call)"
    host = planner.host_fallback_reason(tree)
    if mode != "eager" and host:  # neuron's host fallback: a host library runs it, nothing to compile
        mode = prov.compile_mode = "eager"
        prov.compile_reason = host
    runner = None
    artifacts = dict(record.get("artifacts", {})) if record is not None else {}
    if mode in backend.jit_modes:
        runner = _jit(problem, tree, module, device, backend, mode, prov)
    elif mode != "eager":
        runner, entry = _artifact(problem, tree, module, device, backend, mode, fpd, cache, artifacts.get(mode),
                                  wisdom_only, prov)
        if entry is not None:
            artifacts[mode] = entry
        else:
            prov.compile_mode = "eager"
    # 5. store
    if cache is not None and (record is None or artifacts != record.get("artifacts", {})):
        new = {
            "format": WISDOM_FORMAT, "problem": problem.to_dict(), "fingerprint": fp, "tree": tree.to_dict(),
            "strategy": str(spec) if spec else None, "tol": planner.tol(problem), "planning_ms": prov.planning_ms,
            "candidates": _candidates_to_json(candidates), "artifacts": artifacts, "created": time.time(),
            "effort": effort,
        }
        if measurement is not None:
            new["measurement"] = measurement.to_dict()
        if any(node.solver == "pyfftw" for _, node in tree.walk()):
            new["host_wisdom"] = hostlib.export_wisdom()  # FFTW's own plans, kept with ours
        if record is None:
            cache.add_wisdom(key, new)
        else:
            cache.update_wisdom(key, {**record, "artifacts": artifacts})
        prov.wisdom_key = key
    return Provided(tree, tuple(candidates), module, runner, prov, planner.tol(problem))


def _measure(problem, spec, device, planner, effort, estimate_node):
    """Time the candidates (trnplan.planner.measure) the way Plan.execute runs them."""
    def make_plan(tree, module):
        return Plan(problem, tree, (), module, device, provenance=Provenance(), strategy=None,
                    tol=planner.tol(problem), profile_name=planner.profile.name)

    return measure(planner, problem, spec, device, effort, estimate_node, make_plan)


def _jit(problem, tree, module, device, backend, mode, prov):
    """A runner compiled in this process (compile="inductor"); None (eager) if it fails to build."""
    # the plan's own flat (batch, points) shape: compiled static, as Plan.execute calls it
    example = tuple(t[: problem.batch] for t in problem_inputs(problem, device))
    t0 = time.perf_counter()
    try:
        runner = backend.jit_compile(module, example, mode)
    except Exception as exc:  # noqa: BLE001 - any compiler failure: the plan runs eagerly, with a warning
        _warn(f"could not compile {tree} with {mode} ({type(exc).__name__}: {str(exc)[:500]}); running eagerly")
        prov.compile_mode, prov.compile_reason = "eager", f"{mode} failed to compile ({type(exc).__name__}); eager instead"
        return None
    prov.compile_s = time.perf_counter() - t0
    prov.artifact = "compiled in process"
    return runner


#: AOT load checks that failed in this process: (fingerprint digest, mode) -> why (see _failed_load_check)
_FAILED_LOAD_CHECKS: dict[tuple[str, str], str] = {}


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
        text = cache._get(f"load_check:{fpd}:{mode}")
        if text is not None:
            try:
                why = json.loads(text)["why"]
            except (ValueError, TypeError, KeyError):
                cache._delete(f"load_check:{fpd}:{mode}")
    return why


def _remember_failed_load_check(cache, fpd: str, mode: str, why: str | None) -> None:
    if why is None:
        _FAILED_LOAD_CHECKS.pop((fpd, mode), None)
        if cache is not None:
            cache._delete(f"load_check:{fpd}:{mode}")
        return
    _FAILED_LOAD_CHECKS[(fpd, mode)] = why
    if cache is not None:
        cache._set(f"load_check:{fpd}:{mode}", json.dumps({"why": why, "when": time.time()}))


def _artifact(problem, tree, module, device, backend, mode, fpd, cache, entry, wisdom_only, prov):
    """(runner, record entry) for the artifact of ``tree``; (None, None) if it cannot be had."""
    akey = "artifact:" + hashlib.sha256((problem.digest() + tree.digest()).encode()).hexdigest()[:16] + f":{fpd}:{mode}"
    prov.artifact_key = akey
    data = None
    if cache is not None:
        cache.check_trusted()  # before any compile: an untrusted directory would waste it
    check = _wants_load_check(backend, mode)
    failed = _failed_load_check(cache, fpd, mode) if check == "yes" else None
    if failed is not None:
        # neither build (30-90 s on a GPU) nor load what would crash this process
        reason = (f"{mode} artifacts crash at load on this machine ({failed}; remembered for this fingerprint: "
                  f"torch, device and driver). TRNPLAN_AOT_LOAD_CHECK=1 checks again")
        _warn(f"not using an {mode} artifact for {tree}: {reason}; running eagerly (compile='eager' or "
              f"'inductor' avoids this warning)")
        prov.compile_reason = prov.artifact_error = reason
        return None, None
    if cache is not None and entry is not None and entry.get("key") == akey:
        data = cache.get_artifact(akey, entry.get("sha256", ""))
        if data is not None:
            prov.artifact, prov.compile_s = "artifact hit", float(entry.get("compile_s", 0.0))
            prov.dynamic_batch = entry.get("dynamic_batch")
            cache.count("artifact_hits")
            cache.count("compile_seconds_saved", prov.compile_s)
    built = data is None
    if built:
        if wisdom_only:
            raise WisdomMiss(
                f"effort='wisdom_only' (or TRNPLAN_WISDOM_ONLY=1): the plan for {problem.describe()} is stored "
                f"but its {mode} artifact {akey} is missing or damaged in "
                f"{cache.path if cache is not None else 'no cache'}; precompile it again"
            )
        example = problem_inputs(problem, device)
        t0 = time.perf_counter()
        try:
            data, facts = backend.build_artifact(module, example, mode)
        except Exception as exc:  # noqa: BLE001 - any compiler failure: the plan runs eagerly, with a warning
            _warn(f"could not build the {mode} artifact for {tree} ({type(exc).__name__}: {exc}); running eagerly")
            prov.compile_reason = f"{mode} failed to build ({type(exc).__name__}); eager instead"
            prov.artifact_error = f"{mode} failed to build ({type(exc).__name__}: {str(exc)[:300]})"
            return None, None
        prov.compile_s = time.perf_counter() - t0
        prov.artifact, prov.dynamic_batch = "compiled now", facts.get("dynamic_batch")
        if cache is not None:
            data = cache.add_artifact(akey, data)  # another process may have won: run its bytes
            cache.count("compiles")
            cache.count("compile_seconds", prov.compile_s)
        entry = {"key": akey, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                 "compile_s": prov.compile_s, "dynamic_batch": prov.dynamic_batch}
    if check != "no" and entry.get("load_check") != "ok":
        # a child process loads it first: a crash there costs this process nothing (artifacts.load_check)

        t0 = time.perf_counter()
        why = artifacts.load_check(data, device, problem_inputs(problem, device))
        prov.load_check_s = time.perf_counter() - t0
        _remember_failed_load_check(cache, fpd, mode, why)
        if why is not None:
            reason = f"the {mode} artifact did not load on this machine: {why}"
            _warn(f"{reason}; running {tree} eagerly. Later {mode} plans on this machine (this torch, device and "
                  f"driver) run eagerly without building; TRNPLAN_AOT_LOAD_CHECK=1 checks again")
            prov.compile_reason = prov.artifact_error = reason
            prov.artifact = None
            if built and cache is not None:
                cache._delete(akey)  # bytes no record will point at (a stored artifact is left as it is)
            return None, None
        entry = {**entry, "load_check": "ok"}
    t0 = time.perf_counter()
    runner = backend.load_artifact(data, mode, device)
    prov.load_ms = (time.perf_counter() - t0) * 1e3
    prov.artifact_bytes = len(data)
    return runner, entry


__all__ = ["Provenance", "Provided", "provide"]
