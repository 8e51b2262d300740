"""From a problem to a ready tree, module and artifact, through the plan cache.

The protocol, per problem (FFTW's wisdom, plus artifacts), one function per step:

0. ``_request``: resolve the request once — backend, fingerprint, precision probe, compile mode,
   the (calibrated) planner, the wisdom keys that may answer it.
1. ``_look_up``: the wisdom under (problem digest, fingerprint digest, strategy/tol, effort).
2. ``_trust``: replay the record's tree through its solvers and lower it. A record that does not
   parse, or whose tree is not what its solvers make of this problem or does not lower, is
   forgotten with a warning ("bogus wisdom is forgotten and re-planned, never trusted").
3. ``_plan_or_measure``: on a miss, report the same problem under *other* fingerprints (a
   warning, and a line in explain()); with ``wisdom_only`` a miss is an error that names the
   problem, the cache directory and those differences. Otherwise plan now (effort "measure" /
   "patient": time the candidates) and lower the tree to its eager module (always: it also
   serves autograd and the pair form).
4. ``_build``: for an artifact mode, load the artifact if the record names it and its sha256
   matches; otherwise compile (never under ``wisdom_only``), store with first-writer-wins, and
   load what was stored, so concurrent processes run the same bytes.
5. ``_store``: store the record (first writer wins) or add the new artifact to it.

The result carries an immutable :class:`~trnplan.plan.provenance.Provenance`, made once at the end.
This module is the pipeline's straight line and its measured-wisdom spot check; the steps' own jobs
are modules beside it: :mod:`~trnplan.plan.probe` (the precision probe, its deferral),
:mod:`~trnplan.plan.trust` (replaying stored trees, what this process already trusted),
:mod:`~trnplan.plan.artifact` (jit compiles, artifacts and their load checks),
:mod:`~trnplan.plan.unreachable` (why a tol is out of reach) and :mod:`~trnplan.plan.provenance`
(what it hands back). Key formats and the planner's records are the cache layer's
(:mod:`trnplan.cache.records`).
"""

from __future__ import annotations

import functools
import logging
import time

import attrs
import torch

from trnplan.cache import records
from trnplan.cache.fingerprint import diff, fingerprint, fingerprint_digest
from trnplan.cache.store import WISDOM_FORMAT, PlanCache
from trnplan.core import config, state
from trnplan.core.errors import OverBoundError, PlanningError, WisdomMiss
from trnplan.core.node import PlanNode
from trnplan.core.progress import Progress
from trnplan.core.spec import Spec
from trnplan.kernels import hostlib
from trnplan.plan.artifact import artifact_runner, jit_runner
from trnplan.plan.plan import Plan
from trnplan.plan.probe import assumed_probe, precision_probe
from trnplan.plan.provenance import Provenance, Provided, warn
from trnplan.plan.trust import candidates_from_json, candidates_to_json, forget, remember_trusted, trusted_tree
from trnplan.plan.unreachable import unreachable
from trnplan.planner.measure import NOISE_FLOOR, Measurement, held_core, measure, ranked_candidates, recheck
from trnplan.planner.planner import Planner

_LOG = logging.getLogger(__name__)


# ---------------------------------------------------------------------- the pipeline
@attrs.frozen
class _Request:
    """Step 0: the request (:class:`~trnplan.plan.request.PlanRequest`) resolved for one build —
    fingerprint, probe, compile mode, the calibrated planner, the wisdom keys."""

    request: object  # the PlanRequest
    problem: object
    spec: Spec | None
    device: torch.device
    cache: PlanCache | None
    effort: str
    wisdom_only: bool
    backend: object
    fp: dict
    fpd: str
    planner: Planner
    mode: str
    mode_reason: str
    probe: str
    probe_origin: str
    calibration: str
    keys: tuple  # the wisdom keys that may answer, best first
    store_key: str  # where a new plan is stored
    #: the resolved bound (the planner's for the problem): tol=None and an explicit default tol are the same plan
    tol: float

    @property
    def digest(self) -> str:
        return self.request.digest


def _request(request, fp: dict, assumed=None) -> _Request:
    """Step 0 for ``request`` on fingerprint ``fp``. ``assumed``: (probe, origin) to plan with instead
    of the device's probe (see _probe_can_wait)."""
    problem, spec, device, cache, effort = request.problem, request.spec, request.device, request.cache, request.effort
    backend = request.backend
    fpd = fingerprint_digest(fp)
    if effort in ("measure", "patient"):
        refused = backend.measure_unavailable_reason()
        if refused is not None:
            raise PlanningError(f"effort={effort!r} times the candidates where the plan runs, and {refused}: plan "
                                f"{problem.describe()} with effort='estimate' here, or measure where it runs")
    probe, probe_origin = assumed if assumed is not None else precision_probe(backend, device, cache, fpd)
    mode, mode_reason = backend.resolve_compile(request.compile)
    if request.wisdom_only and mode in backend.jit_modes:
        raise WisdomMiss(
            f"effort='wisdom_only' (or TRNPLAN_WISDOM_ONLY=1) never compiles, and compile={mode!r} compiles in "
            f"the running process (nothing of it is kept in the plan cache): use compile='aot' (precompiled into "
            f"the cache) or compile='eager' for {problem.describe()}"
        )
    # calibrated by this machine's measurements (the calibration is part of the provenance and of
    # what this process trusts), the leaves fitted here at these threads, if any: the fit is read when
    # the planner first prices a node (a wisdom hit replayed by this process never does)
    profile, calibration = records.calibrated(backend.profile, cache, fpd, device)
    threads = torch.get_num_threads()
    # an artifact holds torch ops only: host-library leaves are not candidates for it
    planner = Planner(backend, tol=request.tol, probe=probe, device=device, exportable=mode != "eager",
                      lazy_profile=functools.partial(_fitted_profile, profile, cache, fpd, threads))
    if problem.precision == "auto" and spec is not None and spec.name != "precision":
        spec = Spec(name="precision", children=(spec,))  # auto with a forced strategy: choose its mode
    bound = planner.tol(problem)
    keys, store_key = records.request_keys(request.digest, fpd, spec, bound,
                                           "wisdom_only" if request.wisdom_only else effort, effort,
                                           planner.exportable)
    return _Request(request, problem, spec, device, cache, effort, request.wisdom_only, backend, fp, fpd, planner,
                    mode, mode_reason, probe.describe(), probe_origin,
                    calibration.describe() if calibration is not None else "", keys, store_key, bound)


def _fitted_profile(profile, cache, fpd: str, threads: int):
    """The planner's ``lazy_profile``: ``profile`` with this machine's leaf fit at ``threads``, read by
    the cache layer when the planner first prices a node (the planner itself never calls the cache)."""
    return records.fitted(profile, cache, fpd, threads)


@attrs.frozen
class _Decision:
    """Steps 1-3: the tree, its lowered module and where they came from."""

    tree: PlanNode
    module: torch.nn.Module
    candidates: object  # a tuple; a wisdom hit's, a call that reads them from its record (Plan.candidates)
    key: str  # the wisdom key it was found under, or will be stored under
    origin: str  # "wisdom hit" | "planned now"
    effort: str
    record: dict | None = None  # the stored record of a wisdom hit
    measurement: Measurement | None = None
    searches: int = 0
    fingerprint_note: str | None = None
    #: a measured record found to lose to the default on reuse: why it was re-measured (stored
    #: over the old record, not first-writer-wins)
    replaced: str | None = None
    #: (key, record) of that stale record, as read: replaced only if still stored (one transaction)
    stale: tuple | None = None
    #: artifacts built while measuring (Neuron: each timed candidate is a NEFF), by tree: reused
    prebuilt: dict = attrs.Factory(dict)


def _look_up(req: _Request) -> tuple[dict | None, str]:
    """Step 1: the best stored record that serves this request, and its key."""
    if req.cache is not None:
        record, key = req.cache.first_wisdom(req.keys)
        if record is not None:
            return record, key
    return None, req.store_key


def _trust(req: _Request, record: dict, key: str) -> _Decision | None:
    """Step 2: the record's tree, replayed and lowered — or None, the record forgotten, if it is bogus."""
    problem = req.problem
    try:
        tree, replayed = trusted_tree(record, req, key)
        if record.get("host_wisdom"):
            hostlib.import_wisdom(record["host_wisdom"])
        # FFTW plans made in this process without wisdom (estimated or measured), before and after
        plans = hostlib.FFTW_PLANS
        fftw_before = plans["measured"] + plans["estimated"]
        with hostlib.fftw_rigor(record.get("effort", "estimate")):  # as the process that stored it
            module = req.planner.lower_plan(tree, problem, req.device)
        fftw_measured = plans["measured"] + plans["estimated"] != fftw_before  # the record lacked FFTW's decision
        # explain()'s list, as stand-in nodes made when first asked (parse_wisdom checked its fields)
        candidates = functools.partial(candidates_from_json, record.get("candidates"))
        stored = record.get("measurement")
        measurement = Measurement.from_dict(stored) if stored is not None else None
        effort = record.get("effort", "estimate")
    except Exception as exc:  # noqa: BLE001 - bogus wisdom of any kind is forgotten, never trusted
        warn(f"plan cache {req.cache.path}: wisdom {key!r} does not describe a valid plan for this problem "
             f"({type(exc).__name__}: {exc}); forgetting it and re-planning")
        forget(req, key)
        return None
    if replayed:  # one this process trusted before is remembered already
        remember_trusted(req, key, record, tree)
    if fftw_measured:  # keep the decision FFTW made now, so that later processes reproduce this one
        record = {**record, "host_wisdom": hostlib.export_wisdom()}
        req.cache.update_wisdom(key, record)
    req.cache.count("wisdom_hits")
    return _Decision(tree, module, candidates, key, "wisdom hit", effort, record=record, measurement=measurement)


def _miss_note(req: _Request) -> tuple[str | None, bool]:
    """Why the cache had no answer (other fingerprints, other strategy/tol), and whether it was another
    fingerprint (a re-plan the user is warned of)."""
    if req.cache is None:
        return None, False
    req.cache.count("wisdom_misses")
    stored = req.cache.wisdom_for_problem(req.digest)
    others = [r for r in stored if r.get("fingerprint") != req.fp]
    variants = [r for r in stored if r.get("fingerprint") == req.fp]
    if others:
        nearest = min((diff(r["fingerprint"], req.fp) for r in others), key=len)
        return "stored wisdom for this problem has another fingerprint: " + "; ".join(nearest), True
    if variants:
        return ("stored wisdom for this problem has another strategy or tol: " + "; ".join(
            f"strategy {r.get('strategy')}, tol {r.get('tol')}" for r in variants[:3])), False
    return None, False


def _refuse_miss(req: _Request, tol, note: str | None) -> WisdomMiss:
    """The wisdom_only error for a miss: the problem, the cache directory and the differences."""
    cache, problem = req.cache, req.problem
    if cache is None:
        where = "no plan cache (cache=None)"
    elif cache.unusable_reason:
        where = f"the plan cache, which is unusable: {cache.unusable_reason}"
    else:
        where = f"the plan cache at {cache.path}"
    return WisdomMiss(
        f"effort='wisdom_only' (or TRNPLAN_WISDOM_ONLY=1): no stored plan for {problem.describe()} "
        f"[digest {req.digest}, strategy {str(req.spec) if req.spec else 'none'}, tol {tol}] in {where}"
        + (f"; {note}" if note else "; no entry for this problem under any fingerprint")
        + ". Precompile it (trnplan precompile MANIFEST --cache-dir DIR) or plan with effort='estimate'"
    )


def _plan_or_measure(req: _Request) -> _Decision:
    """Step 3: plan now (the model's pick, or the fastest measured), after explaining the miss."""
    note, other_fingerprint = _miss_note(req)
    if req.wisdom_only:
        raise _refuse_miss(req, req.request.tol, note)
    if other_fingerprint:
        warn(f"plan cache {req.cache.path}: {note}; re-planning")
    problem, planner = req.problem, req.planner
    try:
        tree, candidates = planner.search(problem, req.spec)
    except OverBoundError as exc:
        failed = exc  # ``exc`` is unbound when the except block ends: the message reads it later

        def message() -> str:  # made when read: the reachable bound is a bisection of searches
            why = unreachable(problem, req.spec, planner, req.backend, planner.probe)
            return f"{why}. ({failed})" if why else str(failed)

        raise OverBoundError(message, candidates=exc.candidates, tol=exc.tol) from None
    measurement, prebuilt = None, {}
    with hostlib.fftw_rigor(req.effort):  # FFTW_MEASURE only in measured planning
        if req.effort in ("measure", "patient"):
            tree, measurement, samples = _measure(req, tree, prebuilt)
            candidates = ranked_candidates(candidates, measurement)
            records.add_calibration_samples(req.cache, req.fpd, req.device, samples, req.backend.profile)
        module = planner.lower_plan(tree, problem, req.device)
    return _Decision(tree, module, tuple(candidates), req.store_key, "planned now", req.effort,
                     measurement=measurement, searches=planner.searches,
                     fingerprint_note=note + " (re-planned)" if other_fingerprint else None, prebuilt=prebuilt)


def _eager_reason(req: _Request, tree: PlanNode) -> str | None:
    """Why an artifact mode asked for runs eagerly anyway (TF32, the host fallback), or None."""
    if req.problem.precision == "tf32" or "mode=tf32" in str(tree):
        # TF32 is torch's process-wide matmul flag, scoped around each eager matmul; an AOT artifact
        # would bake in whatever the flag was when it was compiled
        return "tf32 plans run eagerly (the TF32 matmul flag is scoped around each call)"
    return req.planner.host_fallback_reason(tree)  # a host library runs it: nothing to compile


def _build(req: _Request, decision: _Decision) -> tuple[object, dict, dict]:
    """Steps 4-5: the runner of the asked-for artifact (None: eager), the record's artifact entries,
    and the provenance facts of the compile."""
    facts = {"compile_mode": req.mode, "compile_reason": req.mode_reason}
    entries = dict(decision.record.get("artifacts", {})) if decision.record is not None else {}
    if req.mode == "eager":
        return None, entries, facts
    eager = _eager_reason(req, decision.tree)
    if eager is not None:
        return None, entries, {"compile_mode": "eager", "compile_reason": eager}
    if req.mode in req.backend.jit_modes:
        return jit_runner(req, decision, facts), entries, facts
    runner, entry = artifact_runner(req, decision, entries.get(req.mode), facts)
    if entry is not None:
        entries[req.mode] = entry
    else:
        facts["compile_mode"] = "eager"
    return runner, entries, facts


def _store(req: _Request, decision: _Decision, entries: dict, planning_ms: float, retree: bool = False) -> None:
    """Step 6: store a new record (first writer wins), or the stored record's new artifact entries and
    (``retree``: verified) tree, in one write."""
    cache, record = req.cache, decision.record
    if cache is None or (record is not None and entries == record.get("artifacts", {}) and not retree):
        return
    if record is not None:
        cache.update_wisdom(decision.key, {**record, "artifacts": entries,
                                           **({"tree": decision.tree.to_dict()} if retree else {})})
        return
    new = _new_record(req, decision, entries, planning_ms)
    if decision.measurement is not None:  # measured here and now: no spot check of it in this process
        _RECHECKED.add((str(cache.path), decision.key))
    if decision.stale is None:
        if cache.add_wisdom(decision.key, new) is new:  # stored (no other process was first): trusted here
            remember_trusted(req, decision.key, new, decision.tree)
    elif decision.stale[0] == decision.key:  # a stale measured record: the new measurement replaces it
        cache.replace_wisdom(decision.key, new, decision.stale[1])
    else:  # it answered from another variant's key (an exportable plan for an eager request)
        cache.forget(decision.stale[0])
        cache.add_wisdom(decision.key, new)


def commit(got: Provided, tree: PlanNode | None = None) -> None:
    """Store what :func:`provide` decided (step 6), with ``tree`` in place of its tree: the same tree
    with its measured error, once ``verify=True`` has measured it (verify before store)."""
    req, decision, entries, planning_ms = got.pending
    retree = tree is not None and tree is not decision.tree
    _store(req, attrs.evolve(decision, tree=tree) if retree else decision, entries, planning_ms, retree)


def reject(got: Provided) -> None:
    """A provided plan failed verification: nothing of it is stored, and the stored wisdom that
    answered (if any) is forgotten, so it is not replayed either."""
    req, decision, _, _ = got.pending
    if req.cache is not None and decision.record is not None:
        forget(req, decision.key)


def _new_record(req: _Request, decision: _Decision, entries: dict, planning_ms: float) -> dict:
    """The wisdom record of a plan made now."""
    tree = decision.tree
    new = {
        "format": WISDOM_FORMAT, "problem": req.problem.to_dict(), "fingerprint": req.fp, "tree": tree.to_dict(),
        "strategy": str(req.spec) if req.spec else None, "tol": req.tol, "planning_ms": planning_ms,
        "candidates": candidates_to_json(decision.candidates), "artifacts": entries, "created": time.time(),
        "effort": req.effort,
    }
    if decision.measurement is not None:
        new["measurement"] = decision.measurement.to_dict()
    if any(node.solver == "pyfftw" for _, node in tree.walk()):
        new["host_wisdom"] = hostlib.export_wisdom()  # FFTW's own plans, kept with ours
    return new


def provide(request) -> Provided:
    """The plan of ``request`` (a :class:`~trnplan.plan.request.PlanRequest`) through the plan cache:
    look up -> trust -> plan or measure (lowering the tree) -> build the artifact -> store, as the
    module docstring describes. A request that verifies is stored by :func:`commit` once verified.
    On a terminal, a step that takes over a second shows a progress line
    (:class:`~trnplan.core.progress.Progress`)."""
    problem = request.problem
    with Progress(f"trnplan: planning {problem.kind}:{'x'.join(map(str, problem.shape))}@{problem.batch}"):
        got = _provide(request)
        if not request.verify:
            commit(got)
    return got


def _provide(request) -> Provided:
    fp = fingerprint(request.problem.device, request.device, request.backend)  # once per build
    req = _request(request, fp, assumed=assumed_probe(request, fp))
    tentative = _tentative_tree(req) if req.probe_origin == "assumed" else None
    if req.probe_origin == "assumed" and (tentative is None or req.planner.host_fallback_reason(tentative) is None):
        # a NeuronCore plan wins under the assumed probe: plan with the real one (it runs now)
        req = _request(request, fp)
    t0 = time.perf_counter()
    record, key = _look_up(req)
    decision = _trust(req, record, key) if record is not None else None
    stale = _recheck(req, decision) if decision is not None and decision.measurement is not None else None
    if stale is not None:
        req, decision = _remeasure(req, decision, stale)
    elif decision is None:
        decision = _plan_or_measure(req)
    planning_ms = (time.perf_counter() - t0) * 1e3
    runner, entries, facts = _build(req, decision)
    cache = req.cache
    provenance = Provenance(
        origin=decision.origin, planning_ms=planning_ms, searches=decision.searches,
        cache_path=str(cache.path) if cache is not None else None,
        wisdom_key=decision.key if cache is not None else None, fingerprint=req.fp,
        fingerprint_note=decision.fingerprint_note, effort=decision.effort, measurement=decision.measurement,
        replaced=decision.replaced,
        calibration=req.calibration, probe=req.probe, probe_origin=req.probe_origin, **facts)
    _log_decision(req.problem, decision, provenance)
    return Provided(decision.tree, decision.candidates, decision.module, runner, provenance, req.tol,
                    pending=(req, decision, entries, planning_ms))


def _log_decision(problem, decision, provenance: Provenance) -> None:
    """The planning decision on the ``logging`` module (logger ``trnplan.plan.provide``): INFO, one line
    per plan (a wisdom hit at DEBUG), and the measured rule at DEBUG. Nothing is printed unless the
    application configures logging (``logging.basicConfig(level=logging.INFO)``)."""
    level = logging.DEBUG if decision.origin == "wisdom hit" else logging.INFO
    if _LOG.isEnabledFor(level):
        _LOG.log(level, "%s: %s (%s in %.1f ms, effort %s%s)", problem.describe(), decision.tree, decision.origin,
                 provenance.planning_ms, decision.effort,
                 f", stored as {provenance.wisdom_key}" if provenance.wisdom_key else ", not stored")
    if decision.measurement is not None and _LOG.isEnabledFor(logging.DEBUG):
        _LOG.debug("%s: %s", problem.describe(), decision.measurement.rule)


def _tentative_tree(req: _Request) -> PlanNode | None:
    """The tree this request would get, without side effects (no counts, warnings or forgetting):
    the stored one if it is trusted, else the search's pick (None if the search raises)."""
    record, _key = _look_up(req)
    tree = None
    if record is not None:
        try:
            tree = trusted_tree(record, req, _key)[0]
        except Exception:  # noqa: BLE001 - bogus wisdom: the real pass forgets it (with a warning) and plans
            tree = None
    if tree is None:
        try:
            tree = req.planner.search(req.problem, req.spec)[0]
        except PlanningError:
            return None  # the real pass raises it, with its explanation
    return tree


#: measured records already spot-checked in this process ((cache directory, wisdom key)): once each
_RECHECKED: set = set()
state.register("plan.rechecked", _RECHECKED.clear)


def _recheck(req: _Request, decision: _Decision) -> str | None:
    """Why a reused measured record must be re-measured, or None: its winner, timed round-robin
    against the default once per process (:func:`trnplan.planner.measure.recheck`), is slower
    beyond the noise ("FFTW forgets bogus wisdom"). Skipped for wisdom_only (nothing is timed
    there), with ``TRNPLAN_RECHECK=0``, and where the default won or there is none."""
    m = decision.measurement
    if (m is None or req.wisdom_only or req.cache is None or not config.recheck()
            or (str(req.cache.path), decision.key) in _RECHECKED):
        return None
    _RECHECKED.add((str(req.cache.path), decision.key))
    if m.busy is not None:  # the default was kept because the machine was too busy to tell
        return (f"measured wisdom {decision.key!r} ({m.effort}, {_age(m)}) was taken on a machine too busy to "
                f"measure (noise {m.busy:.0%}); the default was kept")
    if held_core(m):  # measured while another process held a core: its "quiet" rounds were not
        return (f"measured wisdom {decision.key!r} ({m.effort}, {_age(m)}) was measured while another process "
                f"held a core (runnable after {m.held[0]} of {m.held[1]} rounds)")
    try:
        checked = recheck(req.planner, req.problem, req.device, m, _plan_maker(req))
    except Exception:  # noqa: BLE001 - a check that cannot run (a tree no longer built here) leaves the record
        return None
    if checked is None:
        return None
    ratio, noise = checked
    if ratio <= 1.0 + max(noise, NOISE_FLOOR):
        return None
    return (f"measured wisdom {decision.key!r} ({m.effort}, {_age(m)}) picked {m.winner.tree}, which now "
            f"measures {ratio:.2f}× the default {m.default_tree} (noise {noise:.1%})")


def _remeasure(req: _Request, decision: _Decision, stale: str) -> tuple[_Request, _Decision]:
    """Re-measure a stale measured record at its own effort (an "estimate" request it answered
    must not put an estimate under a measured key), to be stored over it: (request, decision)."""
    effort = decision.measurement.effort
    warn(f"plan cache {req.cache.path}: {stale}; re-measuring (effort {effort!r}) and replacing the record")
    key = records.wisdom_key(req.digest, req.fpd, req.spec, req.tol, effort, req.planner.exportable)
    again = attrs.evolve(req, effort=effort, store_key=key)
    fresh = _plan_or_measure(again)
    return again, attrs.evolve(fresh, replaced=stale, stale=(decision.key, decision.record))


def _age(m: Measurement) -> str:
    age = m.age_s()
    if age is None:
        return "measured before round-robin timing"
    hours = age / 3600
    return f"measured {hours:.1f} h ago" if hours < 48 else f"measured {hours / 24:.0f} days ago"


def _plan_maker(req: _Request, prebuilt=None):
    """``make_plan(tree, module)`` for measured planning: a Plan that runs ``tree`` as execute does."""
    problem, device, planner = req.problem, req.device, req.planner
    backend = planner.backend
    request = req.request

    def make_plan(tree, module):
        # a host-fallback candidate runs eagerly on the host, where its plan would run
        runner, built = (None, None) if planner.host_fallback_reason(tree) else backend.measure_runner(
            tree, module, problem, device)
        if built is not None and prebuilt is not None:
            prebuilt[str(tree)] = built
        return Plan(request, tree, (), module, provenance=Provenance(), runner=runner, tol=planner.tol(problem),
                    profile_name=planner.profile.name)

    return make_plan


def _measure(req: _Request, estimate_node, prebuilt=None):
    """Time the candidates (trnplan.planner.measure) the way Plan.execute runs them: where a plan
    runs an artifact on a device the eager module does not reach (Neuron), each candidate is built
    and timed there (``backend.measure_runner``) and its bytes kept in ``prebuilt`` for the winner."""
    return measure(req.planner, req.problem, req.spec, req.device, req.effort, estimate_node,
                   _plan_maker(req, prebuilt))


__all__ = ["Provenance", "Provided", "commit", "provide", "reject"]
