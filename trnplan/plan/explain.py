"""explain(): a plan's problem, tree, predicted and measured costs, candidates and provenance, as text.

Two forms: the short default (:func:`render_short`: at most :data:`SHORT_LINES` lines of at most
:data:`SHORT_WIDTH` columns: the tree, the predicted and measured time, the error bound, why this
plan, where it came from), and the full report (:func:`render_explain`: every node's cost, every
candidate with its verdict, the backend fingerprint, the cost model and its calibration).
"""

from __future__ import annotations

import textwrap

import torch

from trnplan.core.cost import format_si, format_time
from trnplan.core.node import PlanNode
from trnplan.kernels import hostlib
from trnplan.plan.verify import describe_measured
from trnplan.planner.measure import describe as measure_lines
from trnplan.planner.multicore import shard_sizes
from trnplan.planner.planner import CHOSEN, WITHIN_MARGIN
from trnplan.planner.solver import root_output

#: the short explain()'s limits: one screen, one terminal width
SHORT_LINES, SHORT_WIDTH = 15, 100
_LABEL = 10  # label column width ("  why      ")
#: tree rows the short form shows before "… N more nodes"
_SHORT_TREE_ROWS = 5


def _node_line(node: PlanNode) -> str:
    params = " ".join(a for a in node.atoms()[1:])
    return f"{node.solver} n={node.n}" + (f" [{params}]" if params else "") + f" ×{node.batch}"


def render_short(plan) -> str:
    """The text of ``Plan.explain()``: the plan in at most 15 lines of at most 100 columns."""
    p, tree, pv = plan.problem, plan.tree, plan.provenance
    lines = _wrap("", f"trnplan plan — {p.describe()}", indent=2)
    lines += _tree_short(tree)
    timing = f"predicted {format_time(tree.time_us)}"
    if tree.measured_us is not None:
        timing += f"; measured {format_time(tree.measured_us)} per call (median, effort {pv.effort})"
    lines += _wrap("time", timing)
    if plan.request.backend.traffic_is_price:  # the accelerator routes: the traffic is the price
        lines += _wrap("traffic", _counted_line(plan))
    if getattr(plan.request.backend.profile, "overlaps", False):
        lines += _wrap("priced", _parts_line(plan))
    error = f"relative L2 ≤ {tree.error:.1e} predicted (bound {plan.tol:.0e})"
    if tree.measured_error is not None:
        error += f"; measured {tree.measured_error:.1e}"
    lines += _wrap("error", error)
    lines += _wrap("why", _why(plan))
    lines += _wrap("from", _origin_short(plan))
    if pv.fingerprint_note:
        lines += _wrap("note", pv.fingerprint_note)[:2]
    lines += _wrap("runs", _runs_short(plan))
    more = "explain(full=True): every node's cost, every candidate, the backend and the cost model"
    lines = lines[: SHORT_LINES - 1] + [more]
    return "\n".join(line if len(line) <= SHORT_WIDTH else line[: SHORT_WIDTH - 1] + "…" for line in lines)


def _wrap(label: str, text: str, indent: int = _LABEL + 2) -> list[str]:
    """``text`` under ``label``, wrapped to the short form's width (at most 3 lines)."""
    first = f"  {label:<{_LABEL - 1}} " if label else ""
    wrapped = textwrap.wrap(text, SHORT_WIDTH, initial_indent=first, subsequent_indent=" " * indent,
                            break_long_words=True, break_on_hyphens=False)
    return wrapped[:3]


def _tree_short(tree: PlanNode) -> list[str]:
    """The tree on one line where it fits, else one node per line (the first few)."""
    text = str(tree)
    if len(text) <= SHORT_WIDTH - _LABEL - 2:
        return [f"  {'tree':<{_LABEL - 1}} {text}"]
    rows = [("  " * d + _node_line(node)) for d, node in tree.walk()]
    shown = [f"  {'tree':<{_LABEL - 1}} {rows[0]}", *(" " * (_LABEL + 2) + r for r in rows[1:_SHORT_TREE_ROWS])]
    if len(rows) > _SHORT_TREE_ROWS:
        shown.append(" " * (_LABEL + 2) + f"… {len(rows) - _SHORT_TREE_ROWS} more node(s)")
    return shown


def _why(plan) -> str:
    """Why this plan, in a sentence: forced, measured fastest, or the cost model's pick."""
    if plan.strategy:
        return f"the strategy was forced: {plan.strategy}"
    m = plan.provenance.measurement
    if m is not None:
        w, timed = m.winner, sum(t.measured_us is not None for t in m.timings)
        if w.default:
            return (f"the device's own FFT: none of the {timed} timed tree(s) measured faster beyond the noise "
                    f"(effort {m.effort})")
        vs = f", {w.vs_default:.2g}× the time of the device's own FFT {m.default_tree}" if w.vs_default is not None else ""
        return f"measured fastest of {timed} timed tree(s) (effort {m.effort}){vs}"
    kept = next((c for c in plan.candidates if c.verdict == WITHIN_MARGIN and c.node is not None), None)
    if kept is not None:
        ratio = kept.node.time_us / max(plan.tree.time_us, 1e-9)
        return (f"the device's own FFT, kept: the cheapest other tree, {kept.node}, is predicted at "
                f"{ratio:.2f}× its time, inside the cost model's error (effort 'measure' times both)")
    viable = sum(c.node is not None for c in plan.candidates)
    if viable <= 1:
        return "the only applicable plan within the accuracy bound"
    return f"the cheapest predicted of {viable} candidate plans within the accuracy bound"


def _origin_short(plan) -> str:
    pv = plan.provenance
    if pv.origin == "wisdom hit":
        return f"plan cache {pv.cache_path} (effort {pv.effort}), loaded in {format_time(pv.planning_ms * 1e3)}"
    where = f"stored in {pv.cache_path}" if pv.wisdom_key else "not stored (no plan cache)"
    return f"planned now in {format_time(pv.planning_ms * 1e3)} (effort {pv.effort}); {where}"


def _runs_short(plan) -> str:
    pv = plan.provenance
    if pv.artifact == "artifact hit":
        return f"{pv.compile_mode} artifact ({pv.artifact_bytes / 1e6:.2f} MB), loaded in {pv.load_ms:.1f} ms"
    if pv.artifact == "compiled now":
        return f"{pv.compile_mode} artifact, compiled now in {pv.compile_s:.1f} s"
    if pv.compile_mode == "dynamo" or pv.artifact == "compiled in process":
        return f"{pv.compile_mode}: compiled in this process in {pv.compile_s:.1f} s on {plan.device}"
    if pv.runs_on:
        return pv.runs_on
    return f"eager torch on {plan.device}"


def render_explain(plan) -> str:
    """The text of :meth:`Plan.explain`: the header, the tree with each subtree's predicted
    totals, the measured candidates (efforts measure/patient), the top-level candidates."""
    lines = [*_header(plan), "", (f"plan tree (each line: the subtree's predicted totals on the "
                                 f"{plan.profile_name!r} cost profile)"), *_tree_rows(plan.tree)]
    if plan.provenance.measurement is not None:
        lines += ["", *measure_lines(plan.provenance.measurement)]
    return "\n".join([*lines, "", "candidates at the top level", *_candidate_rows(plan)])


def _origin(plan) -> str:
    """Where the plan came from: a wisdom hit, or planned now (and stored or not)."""
    pv = plan.provenance
    if pv.origin == "wisdom hit":
        origin = (f"wisdom hit in {pv.cache_path} (key {pv.wisdom_key}, effort {pv.effort}), loaded in "
                  f"{pv.planning_ms:.1f} ms")
    else:
        origin = f"planned now in {pv.planning_ms:.1f} ms ({pv.searches} sub-problem searches, effort {pv.effort})"
        origin += f"; stored as {pv.wisdom_key}" if pv.wisdom_key else " (no plan cache)"
    if plan.cache_hits:
        origin += f"; returned from the in-process plan cache {plan.cache_hits} time(s) since"
    return origin + (f", strategy forced: {plan.strategy}" if plan.strategy else "")


def _runs(plan) -> str:
    """How the plan runs: an artifact loaded or compiled now, compiled in process, or eager."""
    pv = plan.provenance
    if pv.artifact == "artifact hit":
        runs = (f"{pv.compile_mode} artifact {pv.artifact_key} ({pv.artifact_bytes / 1e6:.2f} MB) loaded in "
                f"{pv.load_ms:.1f} ms, no compile: {pv.compile_s:.1f} s of compile saved")
    elif pv.compile_mode in ("dynamo", "lazy"):
        runs = f"{pv.compile_reason}; compiled on {plan.device} in {pv.compile_s:.1f} s in this process"
    elif pv.artifact == "compiled in process":
        runs = (f"{pv.compile_mode}: torch.compile'd in this process in {pv.compile_s:.1f} s (static batch "
                f"{plan.problem.batch}; kept in no plan cache, so every new process compiles it again)")
    elif pv.artifact == "compiled now":
        runs = (f"{pv.compile_mode} artifact compiled now in {pv.compile_s:.1f} s "
                f"({pv.artifact_bytes / 1e6:.2f} MB, batch {'dynamic' if pv.dynamic_batch else 'static'})"
                + (f", stored as {pv.artifact_key}" if pv.cache_path else ""))
    else:
        runs = f"eager torch on {plan.device}; compile {pv.compile_mode!r}: {pv.compile_reason}"
    if pv.artifact and pv.load_check_s:
        runs += f"; loaded first in a child process, which it did not crash ({pv.load_check_s:.1f} s)"
    return runs


def _header(plan) -> list[str]:
    p, tree, pv, backend = plan.problem, plan.tree, plan.provenance, plan.request.backend

    def optional(label: str, text, when) -> list[str]:
        return [f"  {label:<10} {text}"] if when else []

    return [
        f"trnplan plan — {p.describe()}",
        f"  digest     {p.digest()}",
        f"  origin     {_origin(plan)}",
        *optional("note", pv.fingerprint_note, pv.fingerprint_note),
        *optional("re-measured", pv.replaced, pv.replaced),
        f"  runs       {_runs(plan)}",
        "  backend    " + ", ".join(f"{k} {v}" for k, v in pv.fingerprint.items()),
        f"  tree       {tree}",
        (f"  predicted  {format_time(tree.time_us)}, {format_si(tree.flops)} flop, {format_si(tree.bytes)}B moved, "
         f"{tree.launches:.0f} ops; relative L2 error ≤ {tree.error:.1e} (bound {plan.tol:.0e})"),
        *optional("traffic", _counted_line(plan), backend.traffic_is_price),
        *optional("priced", _parts_line(plan, full=True), getattr(backend.profile, "overlaps", False)),
        *optional("measured", f"{format_time(tree.measured_us or 0.0)} per call (median, effort {pv.effort})",
                  tree.measured_us is not None),
        *optional("accuracy", describe_measured(tree.measured_error), tree.measured_error is not None),
        *optional("probe", f"{pv.probe}; {pv.probe_origin}", pv.probe),
        f"  scale      {p.scale:.6g} (norm={p.norm!r})",
        *optional("cores", _cores_line(plan) if p.cores > 1 else "", p.cores > 1 and backend.process_shards),
        *optional("runs on", pv.runs_on, pv.runs_on),
        *optional("bucket", pv.bucket, pv.bucket),
        *optional("runtime", pv.runtime, pv.runtime),
        *optional("jit cache", pv.compile_cache, pv.compile_cache),
        *optional("fallback", pv.fallback, pv.fallback),
        f"  cost model {plan.profile_name!r} profile, {pv.calibration or 'not calibrated (effort measure calibrates it)'}",
        *optional("libraries", _libraries() if backend.host_libraries else "", backend.host_libraries),
        *optional("estimate", _margin_line(plan), _margin_line(plan)),
    ]


def _parts_line(plan, full: bool = False) -> str:
    """The predicted time by kind of cost where the profile overlaps engine and data movement
    (the accelerators): what the overlap hid is the part a plain sum would have added."""
    parts = plan.request.backend.profile.parts(plan.tree.terms)
    why = ("; each stage costs the larger of its engine and its DMA time, which run concurrently on a NeuronCore"
           if full else "")
    return (f"launches and ops {format_time(parts['fixed'])} + engines {format_time(parts['engine'])} + "
            f"DMA {format_time(parts['dma'])} − overlapped {format_time(parts['overlap'])}{why}")


def _counted_line(plan) -> str:
    """The traffic counted on the module's lowered graph beside the model's figure for the module
    (the accelerator routes, where a plan runs compiled whole and its traffic is the price)."""
    model = plan.tree.bytes - root_output(plan.problem).bytes  # the complex pack runs outside the module
    if any(node.solver in HOST_SOLVERS for _, node in plan.tree.walk()):
        return "not counted: a host library leaf runs outside the device graph"
    try:
        count = plan.traffic()
    except Exception as exc:  # noqa: BLE001 - a capture that fails must not stop explain()
        return f"not counted: the graph could not be captured ({type(exc).__name__}: {str(exc)[:120]})"
    ratio = f" ({model / count.bytes:.2f}× the count)" if count.bytes else ""
    return f"counted {count.describe()} on the lowered graph; predicted {format_si(model)}B{ratio}"


def _margin_line(plan) -> str:
    """The estimate's margin rule as applied at the root (trnplan.planner.planner), or ""."""
    if plan.provenance.measurement is not None:
        return ""
    chosen = next((c for c in plan.candidates if c.verdict == CHOSEN and c.reason.startswith("margin rule")), None)
    return chosen.reason if chosen is not None else ""


#: leaves that call a host FFT library (no device graph to count)
HOST_SOLVERS = frozenset({"native", "scipy", "pyfftw", "mkl-fft"})


def _tree_rows(tree: PlanNode) -> list[str]:
    rows = [("  " * d + _node_line(node), node) for d, node in tree.walk()]
    width = max(len(r[0]) for r in rows) + 2
    return [f"  {text:<{width}} {format_si(node.flops):>7} flop  {format_si(node.bytes):>7}B  "
            f"{format_time(node.time_us):>10}  err ≤ {node.error:.1e}" for text, node in rows]


def _candidate_rows(plan) -> list[str]:
    if not plan.candidates:
        return ["  (not recorded with this wisdom)"]
    width = max(len(c.solver) for c in plan.candidates) + 2
    rows = []
    for c in plan.candidates:
        pred = f"{format_time(c.node.time_us):>10}  err {c.node.error:.1e}" if c.node is not None else f"{'—':>10}  {'':11}"
        why = (c.reason if c.verdict != CHOSEN or plan.provenance.measurement is not None
               else f"cheapest predicted: {plan.tree}" if not c.reason
               else c.reason.rpartition("; ")[2])
        rows.append(f"  {c.solver:<{width}} {c.verdict:<24} {pred}  {why}")
    return rows


def _cores_line(plan) -> str:
    """explain()'s account of cores=C: which nodes split their batch, and the predicted speedup."""
    split = [node for _, node in plan.tree.walk() if node.solver == "multicore"]
    unsplit = [c.node.time_us for c in plan.candidates
               if c.node is not None and c.solver != "multicore" and c.verdict in (CHOSEN, "more expensive")]
    if split:
        parts = [f"{n.param('shards')} shards of {'/'.join(map(str, sorted(set(shard_sizes(n.batch, n.param('shards'))), reverse=True)))} "
                 f"(n={n.n} ×{n.batch}; per-core child {n.children[0]})" for n in split]
        speed = (f"; predicted speedup {min(unsplit) / plan.tree.time_us:.2f}× over the best unsplit plan"
                 if unsplit and plan.tree.solver == "multicore" else "")
        return f"{plan.problem.cores}: " + "; ".join(parts) + speed
    multi = next((c for c in plan.candidates if c.solver == "multicore"), None)
    why = (f"the split plan is predicted at {multi.node.time_us / plan.tree.time_us:.2f}× the chosen plan's time"
           if multi is not None and multi.node is not None else (multi.reason if multi is not None else ""))
    return f"{plan.problem.cores}: no node splits its batch ({why})"


def _libraries() -> str:
    """Which FFT libraries are candidates on this host (explain())."""
    found = [f"torch.fft {torch.__version__}"]
    absent = []
    for name, version in hostlib.available().items():
        (found if version else absent).append(f"{name} {version}" if version else name)
    return "available: " + ", ".join(found) + (f"; not installed: {', '.join(absent)}" if absent else "")


__all__ = ["SHORT_LINES", "SHORT_WIDTH", "render_explain", "render_short"]
