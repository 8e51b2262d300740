"""Measured planning: the efforts "measure" and "patient" (FFTW_MEASURE / FFTW_PATIENT).

The cost model guesses; measured planning times. For one problem:

1. :meth:`Planner.enumerate <trnplan.planner.planner.Planner.enumerate>` lists every complete
   tree the solvers try at the top level within the accuracy bound (each solver's variants:
   the library leaves, four-step splits, Bluestein lengths, real and nd methods, precision
   modes …; their children chosen by the model), sorted by predicted time.
2. "measure" times the model's best ``K`` of them (:func:`trnplan.core.config.measure_top_k`,
   default 6, ``TRNPLAN_MEASURE_TOP_K``); "patient" times all of them.
3. Each is lowered and run the way :meth:`Plan.execute <trnplan.plan.plan.Plan.execute>` runs it
   (its fast path included) on the seeded verification input on the plan's device: one
   warm-up call, then the median of repeats (calls grouped so that each sample lasts ≥ 50 µs;
   CUDA synchronised). Its error against float64 numpy.fft is measured on the same output.
4. The winner is the fastest whose *measured* error is within the bound. Every candidate's
   predicted and measured time and error go into the wisdom entry (explain() prints them), so
   a later ``plan_many`` — in this process or another — replays the winner without timing.

The time limit (:func:`trnplan.core.config.set_timelimit`, ``TRNPLAN_TIMELIMIT``; default 5 s for
measure, 30 s for patient) is checked before each candidate and caps each candidate's repeats;
the model's pick is always timed. Candidates not reached are listed as "not timed (time limit)".

The measured times also calibrate the cost model (:mod:`trnplan.planner.learn`), and the
result records the *regret* of the estimate: the measured time of the model's pick over the
measured best.
"""

from __future__ import annotations

import math
import statistics
import time

import attrs
import numpy as np
import torch

from trnplan.core import config
from trnplan.core.accuracy import reference, seeded_input
from trnplan.core.cost import format_time
from trnplan.core.errors import PlanningError
from trnplan.planner.planner import CHOSEN, MORE_EXPENSIVE

FASTEST = "fastest"
SLOWER = "slower"
OVER_BOUND_MEASURED = "over the bound (measured)"
NOT_TIMED_LIMIT = "not timed (time limit)"
NOT_TIMED_TOP_K = "not timed (outside the top K)"
FAILED = "failed"

#: calls are grouped so that one timed sample lasts at least this long (timer resolution, noise)
MIN_SAMPLE_S = 50e-6
#: per-candidate timing budget and repeat bounds
CANDIDATE_BUDGET_S = 0.15
MIN_REPEATS, MAX_REPEATS = 5, 200


@attrs.frozen
class Timing:
    """One candidate tree of a measured plan.

    Attributes
    ----------
    tree : str
        The tree's s-expression (usable as ``strategy=``).
    solver : str
        Its root solver.
    predicted_us, error : float
        The cost and accuracy models' predictions.
    measured_us, measured_error : float or None
        Median time per call and relative L2 error vs float64 numpy.fft; None when not timed.
    verdict : str
        fastest, slower, over the bound (measured), not timed (time limit / outside the top K),
        or failed (with the reason).
    estimate : bool
        The cost model's own pick (what effort "estimate" would run).
    calls : int
        Calls timed.
    """

    tree: str
    solver: str
    predicted_us: float
    error: float
    measured_us: float | None = None
    measured_error: float | None = None
    verdict: str = ""
    estimate: bool = False
    calls: int = 0

    def to_dict(self) -> dict:
        return attrs.asdict(self)


@attrs.frozen
class Measurement:
    """What measured planning did for one problem (stored with the wisdom, shown by explain()).

    Attributes
    ----------
    effort : str
        "measure" or "patient".
    timings : tuple of Timing
        Every enumerated candidate, in predicted order.
    enumerated : int
        Candidate trees the planner enumerated.
    top_k : int or None
        How many the effort times by the model's rank (None: all, "patient").
    limit_s, elapsed_s : float
        The time limit and the time spent timing.
    regret : float or None
        Measured time of the estimate's pick over the measured best (1.0: the model was right).
    """

    effort: str
    timings: tuple
    enumerated: int
    top_k: int | None
    limit_s: float
    elapsed_s: float
    regret: float | None

    @property
    def winner(self) -> Timing:
        return next(t for t in self.timings if t.verdict == FASTEST)

    def to_dict(self) -> dict:
        return {"effort": self.effort, "timings": [t.to_dict() for t in self.timings], "enumerated": self.enumerated,
                "top_k": self.top_k, "limit_s": self.limit_s, "elapsed_s": self.elapsed_s, "regret": self.regret}

    @classmethod
    def from_dict(cls, data: dict) -> Measurement:
        timings = tuple(Timing(**t) for t in data["timings"])
        if not any(t.verdict == FASTEST for t in timings):
            raise ValueError("a measurement record without a winner")
        return cls(data["effort"], timings, int(data["enumerated"]), data.get("top_k"), float(data["limit_s"]),
                   float(data["elapsed_s"]), data.get("regret"))


def time_call(fn, device: torch.device, budget_s: float):
    """(median µs per call, calls made, the warm-up call's result) of ``fn()``, within about
    ``budget_s`` (at least 3 timed repeats, so a slow candidate overruns a tiny budget)."""
    # the plan's GPU: torch.cuda.synchronize() alone waits for the current device, so a plan on
    # cuda:1 would be timed by its launches only
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    out = fn()
    sync()  # warm-up: lazy initialisation, library plans, caches
    t0 = time.perf_counter()
    fn()
    sync()
    first = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(MIN_SAMPLE_S / first))
    repeats = int(min(MAX_REPEATS, max(MIN_REPEATS, budget_s / (first * inner))))
    if first * inner * MIN_REPEATS > budget_s:  # a slow candidate: fewer repeats, never below 3
        repeats = max(3, int(budget_s / (first * inner)))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples) * 1e6, repeats * inner + 2, out


def measure(planner, problem, spec, device: torch.device, effort: str, estimate_node, make_plan):
    """Time the candidates of ``problem`` and return (winner node, Measurement, samples).

    Parameters
    ----------
    planner : Planner
        Enumerates and lowers the candidates.
    problem, spec
        The problem and the (optional) strategy that restricts the candidates.
    device : torch.device
        Where the candidates run.
    effort : {"measure", "patient"}
    estimate_node : PlanNode
        The cost model's pick (always timed first).
    make_plan : callable
        ``make_plan(tree, module)`` → an object with ``run(x)`` that runs the tree as a Plan does.

    Returns
    -------
    (PlanNode, Measurement, list of (terms, measured µs))
        The winner (with ``measured_us`` and ``measured_error`` set), the record, and the samples
        for the cost model's calibration.

    Raises
    ------
    PlanningError
        No timed candidate measured within the accuracy bound.
    """
    tol = planner.tol(problem)
    # the estimate's pick first (always timed), then the rest by predicted time
    trees = [estimate_node] + [t for t in planner.enumerate(problem, spec) if t.digest() != estimate_node.digest()]
    top_k = None if effort == "patient" else config.measure_top_k()
    limit = config.timelimit(effort)

    x64 = seeded_input(problem)
    ref = reference(problem, x64)
    dtype = problem.real_dtype if problem.real_input else problem.torch_dtype
    x = torch.from_numpy(x64).to(dtype=dtype).to(device)  # cast on the host: no complex128 on a device
    ref_norm = float(np.linalg.norm(ref)) or 1.0

    timings, nodes, samples = [], {}, []
    start = time.perf_counter()
    for i, tree in enumerate(trees):
        base = {"tree": str(tree), "solver": tree.solver, "predicted_us": tree.time_us, "error": tree.error,
                    "estimate": i == 0}
        spent = time.perf_counter() - start
        if top_k is not None and i >= top_k:
            timings.append(Timing(**base, verdict=NOT_TIMED_TOP_K))
            continue
        if i > 0 and spent >= limit:
            timings.append(Timing(**base, verdict=NOT_TIMED_LIMIT))
            continue
        left = len(trees) - i if top_k is None else min(top_k, len(trees)) - i
        budget = min(CANDIDATE_BUDGET_S, max(limit - spent, 0.0) / max(left, 1))
        try:
            module = planner.lower_plan(tree, problem, device)
            plan = make_plan(tree, module)
            with torch.no_grad():
                us, calls, y = time_call(lambda plan=plan: plan.run(x), device, budget)
            y = y.detach().cpu().numpy()
            err = float(np.linalg.norm(y.astype(ref.dtype) - ref) / ref_norm)
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot run here is skipped, with the reason
            timings.append(Timing(**base, verdict=f"{FAILED}: {type(exc).__name__}: {exc}"[:300]))
            continue
        ok = err <= tol  # also rejects NaN
        timings.append(Timing(**base, measured_us=us, measured_error=err, calls=calls,
                              verdict=SLOWER if ok else OVER_BOUND_MEASURED))
        nodes[str(tree)] = tree
        if all(node.solver != "multicore" for _, node in tree.walk()):  # shards overlap: not a sum of terms
            samples.append((dict(tree.terms), us))
    elapsed = time.perf_counter() - start
    ok = [t for t in timings if t.verdict == SLOWER]
    if not ok:
        detail = "; ".join(f"{t.tree}: {t.verdict}" + (f" ({t.measured_error:.1e})" if t.measured_error else "")
                           for t in timings if t.verdict != NOT_TIMED_TOP_K)
        raise PlanningError(f"effort={effort!r}: no candidate for {problem.describe()} measured within the bound "
                            f"{tol:.1e}: {detail}")
    best = min(ok, key=lambda t: t.measured_us)
    timings = [attrs.evolve(t, verdict=FASTEST) if t is best else t for t in timings]
    est = timings[0]
    regret = est.measured_us / best.measured_us if est.measured_us and est.verdict in (FASTEST, SLOWER) else None
    winner = attrs.evolve(nodes[best.tree], measured_us=best.measured_us, measured_error=best.measured_error)
    timings.sort(key=lambda t: t.predicted_us)
    return winner, Measurement(effort, tuple(timings), len(trees), top_k, limit, elapsed, regret), samples


def ranked_candidates(candidates, measurement: Measurement):
    """The top-level candidates with verdicts from the measurement: the winner's solver is chosen."""
    winner = measurement.winner
    best_by_solver: dict = {}
    for t in measurement.timings:
        if t.measured_us is not None and t.verdict in (FASTEST, SLOWER):
            cur = best_by_solver.get(t.solver)
            if cur is None or t.measured_us < cur:
                best_by_solver[t.solver] = t.measured_us
    out = []
    for c in candidates:
        if c.solver == winner.solver:
            out.append(attrs.evolve(c, verdict=CHOSEN, reason=f"fastest measured: {winner.tree}"))
        elif c.verdict in (CHOSEN, MORE_EXPENSIVE):
            t = best_by_solver.get(c.solver)
            why = (f"measured {t / winner.measured_us:.2f}× the chosen plan's time" if t is not None
                   else "not timed (see the measured candidates)")
            out.append(attrs.evolve(c, verdict=MORE_EXPENSIVE, reason=why))
        else:
            out.append(c)
    return tuple(out)


def describe(m: Measurement) -> list[str]:
    """explain()'s lines for a measurement."""
    scope = "all" if m.top_k is None else f"the model's best {min(m.top_k, m.enumerated)} of"
    lines = [(f"measured candidates (effort {m.effort}: {scope} {m.enumerated} candidate tree(s) timed, "
             f"time limit {m.limit_s:g} s, {m.elapsed_s:.2f} s spent; median per call after a warm-up)")]
    width = min(max(len(t.tree) for t in m.timings) + 2, 72)
    for t in m.timings:
        meas = f"{_us(t.measured_us):>10}" if t.measured_us is not None else f"{'—':>10}"
        err = f"{t.measured_error:.1e}" if t.measured_error is not None else "—"
        mark = " ← chosen" if t.verdict == FASTEST else ""
        est = " (estimate's pick)" if t.estimate else ""
        tree = t.tree if len(t.tree) <= width else t.tree[: width - 1] + "…"
        lines.append(f"  {tree:<{width}} predicted {_us(t.predicted_us):>10}  measured {meas}  err {err:<7}  "
                     f"{t.verdict}{mark}{est}")
    if m.regret is not None:
        lines.append(f"  regret of effort 'estimate': its pick measured {m.regret:.2f}× the fastest")
    return lines


def _us(us: float | None) -> str:
    return "—" if us is None or not math.isfinite(us) else format_time(us)


__all__ = ["Measurement", "Timing", "describe", "measure", "ranked_candidates", "time_call"]
