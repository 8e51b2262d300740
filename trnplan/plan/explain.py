"""explain(): a plan's problem, tree, predicted and measured costs, candidates and provenance, as text."""

from __future__ import annotations

import torch

from trnplan.core.cost import format_si, format_time
from trnplan.core.node import PlanNode
from trnplan.kernels import hostlib
from trnplan.plan.verify import describe_measured
from trnplan.planner.measure import describe as measure_lines
from trnplan.planner.multicore import shard_sizes
from trnplan.planner.planner import CHOSEN


def _node_line(node: PlanNode) -> str:
    params = " ".join(a for a in node.atoms()[1:])
    return f"{node.solver} n={node.n}" + (f" [{params}]" if params else "") + f" ×{node.batch}"


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
    elif pv.compile_mode == "dynamo":
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
    p, tree, pv = plan.problem, plan.tree, plan.provenance

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
        *optional("measured", f"{format_time(tree.measured_us or 0.0)} per call (median, effort {pv.effort})",
                  tree.measured_us is not None),
        *optional("accuracy", describe_measured(tree.measured_error), tree.measured_error is not None),
        *optional("probe", f"{pv.probe}; {pv.probe_origin}", pv.probe),
        f"  scale      {p.scale:.6g} (norm={p.norm!r})",
        *optional("cores", _cores_line(plan) if p.cores > 1 else "", p.cores > 1 and p.device != "neuron"),
        *optional("runs on", pv.runs_on, pv.runs_on),
        *optional("bucket", pv.bucket, pv.bucket),
        *optional("runtime", pv.runtime, pv.runtime),
        *optional("jit cache", pv.compile_cache, pv.compile_cache),
        f"  cost model {plan.profile_name!r} profile, {pv.calibration or 'not calibrated (effort measure calibrates it)'}",
        *optional("libraries", _libraries() if p.device == "cpu" else "", p.device == "cpu"),
        *optional("estimate", _margin_line(plan), _margin_line(plan)),
    ]


def _margin_line(plan) -> str:
    """The estimate's margin rule as applied at the root (trnplan.planner.planner), or ""."""
    if plan.provenance.measurement is not None:
        return ""
    chosen = next((c for c in plan.candidates if c.verdict == CHOSEN and c.reason.startswith("margin rule")), None)
    return chosen.reason if chosen is not None else ""


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


__all__ = ["render_explain"]
