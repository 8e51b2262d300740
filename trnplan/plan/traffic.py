"""What a plan's graph moves, counted on the lowered graph itself (explain()'s "counted" line).

The cost model (:mod:`trnplan.core.cost`) *predicts* the memory traffic of a tree from each
solver's own account. This module *counts* it on the graph the device's compiler receives: the
plan's module is captured with ``torch.compile(fullgraph=True, dynamic=False)`` through
AOTAutograd with a recording backend, which is the ATen graph TorchNeuron's ``"neuron"`` backend
lowers to StableHLO (../shared/neuron/runtimes.md §2 and §4; tests/test_torchneuron_graph.py
captures it the same way), on fake tensors: nothing is computed and no device is needed.

Every node of that graph is read as one of three kinds:

* **views** (``view``, ``slice``, ``permute``, ``expand`` …) move nothing: they re-index a tensor
  whose bytes the op consuming them reads;
* **elementwise** ops (``add``, ``mul``, ``neg`` …) fuse: a connected region of them (through
  views) reads each tensor that enters it once and writes each value that leaves it once — what
  XLA's loop fusion and neuronx-cc's engine pipelining do with them;
* every other op (``mm``, ``bmm``, ``cat``, ``clone``, ``constant_pad_nd``, ``index_select``,
  ``sum`` …) is **not fused**: it reads each tensor input (a view as the view's size, an
  ``expand`` too: a batched GEMM whose matrix is broadcast over the batch reads it once per
  batch item — XLA:CPU materializes the broadcast, tests/xla/test_traffic_xla.py; whether
  neuronx-cc reuses the stationary matrix instead is unmeasured) and writes its output.

The count is what the graph asks to move between device memory and the engines if every
non-fused op makes one pass through HBM: an upper bound where the compiler keeps intermediates
on chip (24 MiB of SBUF per NeuronCore-v2), exact where it cannot. It does not include the
split/pack of complex tensors at a plan's boundary (``Plan.execute``), which is not in the module.
"""

from __future__ import annotations

import itertools
import math
import threading
import types

import attrs
import torch

#: ATen ops that only re-index their input (no bytes move)
VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "expand", "slice", "select", "permute", "transpose", "t", "unsqueeze",
    "squeeze", "alias", "as_strided", "detach", "split", "split_with_sizes", "unbind", "narrow", "movedim",
    "view_as", "expand_as", "lift_fresh", "lift_fresh_copy",
})
#: ATen ops that a compiler fuses with their elementwise neighbours (one pass for the region)
ELEMENTWISE_OPS = frozenset({
    "add", "sub", "mul", "div", "neg", "_to_copy", "to", "where", "rsub", "reciprocal", "sqrt", "abs", "fill",
    "zeros_like", "full_like", "scalar_tensor", "copy",
})


@attrs.frozen
class OpTraffic:
    """One non-fused op (or fused elementwise region) of the graph: what it reads and writes."""

    op: str  # "aten::mm", or "fused: aten::mul×4, aten::add×2"
    bytes_in: int
    bytes_out: int
    shape: tuple = ()  # the output's shape (the first output's for several)

    @property
    def bytes(self) -> int:
        return self.bytes_in + self.bytes_out


@attrs.frozen
class Traffic:
    """The count of one graph: its non-fused ops and their bytes."""

    ops: tuple = ()  # OpTraffic, in graph order
    graphs: int = 1  # graphs the capture produced (1 for every plan: fullgraph=True)
    #: beyond ``bytes``: what a compiler that materializes views adds (XLA:CPU does,
    #: tests/xla/test_traffic_xla.py): each broadcast operand of a non-fused op written before the
    #: op reads it, and each output that is a strided view, or one of several views of one buffer,
    #: copied into a buffer of its own (read and written)
    materialized: int = 0

    @property
    def bytes(self) -> int:
        return sum(o.bytes for o in self.ops)

    def by_op(self) -> dict[str, int]:
        """Bytes per op name (fused regions under "fused elementwise")."""
        out: dict[str, int] = {}
        for o in self.ops:
            key = "fused elementwise" if o.op.startswith("fused") else o.op
            out[key] = out.get(key, 0) + o.bytes
        return out

    def describe(self) -> str:
        parts = sorted(self.by_op().items(), key=lambda kv: -kv[1])
        top = ", ".join(f"{k.removeprefix('aten::')} {_mb(v)}" for k, v in parts[:4])
        graphs = f"{self.graphs} graph{'s' if self.graphs != 1 else ''}"
        return f"{graphs}, {_mb(self.bytes)} in {len(self.ops)} non-fused ops ({top})"


def _mb(b: float) -> str:
    return f"{b / 1e6:.3g} MB"


# ---------------------------------------------------------------------- capture
_COUNT = itertools.count()
_LOCK = threading.Lock()  # one capture at a time: Dynamo's tracing state is process-wide


def _run(module, *inputs):
    return module(*inputs)


def capture(module: torch.nn.Module, inputs) -> list:
    """The forward ATen graphs AOTAutograd hands a compiler for ``module(*inputs)`` (one for a plan).

    Compiled through a function with a code object of its own (Dynamo's recompile limit is per
    code object; the same trick as :class:`trnplan.backends.accel.CompiledRunner`), on fake
    copies of ``inputs``: the recording backend returns the graph uncompiled and nothing runs on
    a device.
    """
    from torch._dynamo.backends.common import aot_autograd  # torch's own, not trnplan's: allowed here

    graphs: list = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    fn = _run.__code__.replace(co_name=f"_trnplan_traffic_{next(_COUNT)}")
    own = types.FunctionType(fn, _run.__globals__, fn.co_name)
    compiled = torch.compile(own, backend=aot_autograd(fw_compiler=record), fullgraph=True, dynamic=False)
    with _LOCK, torch.no_grad():
        compiled(module.eval(), *inputs)
    return graphs


# ---------------------------------------------------------------------- counting
def _name(target) -> str:
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return schema.name.split("::", 1)[1]
    return getattr(target, "__name__", str(target))


def _nbytes(val) -> int:
    if isinstance(val, torch.Tensor):
        return math.prod(val.shape) * val.element_size()
    if isinstance(val, (tuple, list)):
        return sum(_nbytes(v) for v in val)
    return 0


def _kind(node) -> str:
    if node.op != "call_function":
        return node.op
    name = _name(node.target)
    if name in VIEW_OPS or name == "getitem":
        return "view"
    return "elementwise" if name in ELEMENTWISE_OPS else "op"


def _read_size(node) -> int:
    """Bytes a fused elementwise region reads from ``node``: an ``expand`` (a broadcast) its source, once."""
    if node.op == "call_function" and _name(node.target) in ("expand", "expand_as"):
        return _read_size(node.args[0])
    return _nbytes(node.meta.get("val"))


def _through_views(node):
    """The non-view node whose bytes ``node`` (a chain of views) re-indexes."""
    while _kind(node) == "view" and node.all_input_nodes:
        node = node.all_input_nodes[0]
    return node


def _broadcast(node) -> bool:
    """Whether ``node`` (through its views) is an ``expand`` of a smaller tensor."""
    while _kind(node) == "view":
        if node.op == "call_function" and _name(node.target) in ("expand", "expand_as"):
            return True
        if not node.all_input_nodes:
            return False
        node = node.all_input_nodes[0]
    return False


def _materialized_outputs(nodes) -> int:
    """Bytes a compiler moves to return the graph's outputs as buffers of their own: an output
    that is a strided view, or one of several outputs viewing one buffer, is read and written."""
    out = next((n for n in nodes if n.op == "output"), None)
    if out is None:
        return 0
    results = [a for a in out.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
    bases = [_through_views(a) for a in results]
    total = 0
    for a, base in zip(results, bases, strict=True):
        if _kind(a) == "view" and (not a.meta["val"].is_contiguous() or bases.count(base) > 1):
            total += 2 * _nbytes(a.meta["val"])
    return total


def count_graph(gm) -> Traffic:
    """Count the bytes in and out of each non-fused op (and fused elementwise region) of an FX graph."""
    nodes = list(gm.graph.nodes)
    region = _elementwise_regions(nodes)
    ops, done = [], set()
    materialized = _materialized_outputs(nodes)
    for node in nodes:
        kind = _kind(node)
        if kind == "op":
            materialized += sum(_nbytes(a.meta.get("val")) for a in node.all_input_nodes if _broadcast(a))
            val = node.meta.get("val")
            ops.append(OpTraffic(f"aten::{_name(node.target)}", sum(_nbytes(a.meta.get("val")) for a in node.all_input_nodes),
                                 _nbytes(val), tuple(val.shape) if isinstance(val, torch.Tensor) else ()))
        elif kind == "elementwise" and region[node] not in done:
            done.add(region[node])
            ops.append(_region_traffic([n for n in nodes if region.get(n) == region[node]], region))
    return Traffic(tuple(ops), materialized=materialized)


def _elementwise_regions(nodes) -> dict:
    """Elementwise node → region id: connected components of elementwise nodes, linked through views."""
    parent: dict = {n: n for n in nodes if _kind(n) == "elementwise"}

    def find(n):
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in parent:
        for a in n.all_input_nodes:
            src = _through_views(a)
            if src in parent:
                parent[find(src)] = find(n)
    return {n: find(n) for n in parent}


def _region_traffic(members, region) -> OpTraffic:
    inside = set(members)
    reads = {}
    for n in members:
        for a in n.all_input_nodes:
            if _through_views(a) not in inside:
                reads[a] = _read_size(a)
    writes = sum(_nbytes(n.meta.get("val")) for n in members if _used_outside(n, inside))
    names: dict[str, int] = {}
    for n in members:
        names[_name(n.target)] = names.get(_name(n.target), 0) + 1
    label = "fused: " + ", ".join(f"aten::{k}×{v}" for k, v in names.items())
    last = members[-1].meta.get("val")
    return OpTraffic(label, sum(reads.values()), writes, tuple(last.shape) if isinstance(last, torch.Tensor) else ())


def _used_outside(node, inside) -> bool:
    """Whether ``node``'s value leaves its region (read by a non-member, through views, or returned)."""
    stack = list(node.users)
    while stack:
        u = stack.pop()
        if u in inside:
            continue
        if _kind(u) == "view":
            stack.extend(u.users)
            continue
        return True
    return False


def count_module(module: torch.nn.Module, inputs) -> Traffic:
    """Capture ``module(*inputs)`` (see :func:`capture`) and count its graph."""
    graphs = capture(module, inputs)
    counts = [count_graph(g) for g in graphs]
    return Traffic(tuple(o for c in counts for o in c.ops), graphs=len(graphs),
                   materialized=sum(c.materialized for c in counts))


def plan_inputs(problem, device) -> tuple[torch.Tensor, ...]:
    """Zero ``(batch, points)`` float tensors a plan's module takes (re and im, or one real input)."""
    n = math.prod(problem.in_shape)
    count = 1 if problem.real_input else 2
    return tuple(torch.zeros(problem.batch, n, dtype=problem.real_dtype, device=device) for _ in range(count))


def count_plan(plan) -> Traffic:
    """The count of ``plan.module``'s graph, captured on its own device's tensors (meta: shapes only).

    A plan whose module is a host library call (a native or library leaf at the root) has no
    device graph to count: its count is that library's call, reported as one op by the capture.
    """
    return count_module(plan.module, plan_inputs(plan.problem, plan.device))


__all__ = ["ELEMENTWISE_OPS", "VIEW_OPS", "OpTraffic", "Traffic", "capture", "count_graph", "count_module",
           "count_plan", "plan_inputs"]
