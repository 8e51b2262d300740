"""The HLO / StableHLO audit: what torch-xla really hands the compiler, checked against neuronx-cc.

The ATen-level audit (:mod:`trnplan.tools.audit`) reads a ``torch.export`` graph and
maps ATen ops to HLO by inference. Where torch-xla is importable this module replaces that
guess with the lowering itself: it runs a plan's module on the ``xla`` device (XLA:CPU with
``PJRT_DEVICE=CPU`` is enough), reads the pending graph as HLO text
(``torch_xla._XLAC._get_xla_tensors_hlo``) and as StableHLO (``torch_xla.core.xla_model.
get_stablehlo``), and checks

* **ops**: every HLO and StableHLO op is on neuronx-cc's supported list (shipped as
  ``trnplan/backends/data/neuronx_cc_xla_ops.tsv`` with its source), and a ``gather`` meets the
  list's restriction ("disjoint start_index_map and remapped_offset_dims": each indexed operand
  dimension is collapsed, so no offset dimension is also indexed; our reading of that sentence);
* **types**: no ``c64``/``c128`` (no complex dtype on a NeuronCore, NCC_EVRF004), no ``f64`` (no
  FP64) and no ``s64``/``u64`` (INT64 becomes INT32; an int64 index must not reach the device);
* **shapes**: static (no ``<=`` bounded or ``?`` dimension, ``mhlo.is_dynamic = false``);
* **host fallback**: ``torch_xla.debug.metrics.executed_fallback_ops()`` gained nothing while the
  module ran (an ATen op torch-xla cannot lower runs on the CPU; ``torch.fft.fft`` shows up as
  ``aten::_fft_c2c``).

:class:`CompileCounter` reads torch-xla's compile counters (``UncachedCompile``,
``CachedCompile``, and ``DynamoExtractCompiledGraph`` for ``torch.compile(backend="openxla")``),
which is how the torch-xla lane proves "one compile per (plan, shape)" on XLA:CPU, where the
persistent compile cache does not work (../shared/neuron/runtimes.md §4).

What XLA:CPU cannot show: whether neuronx-cc compiles the module (only that each op is on its
list), its auto-cast, NEFF compile time, or TorchNeuron's eager fallback. torch_xla is imported
lazily: this module imports anywhere, and its parsers run without torch-xla.
"""

from __future__ import annotations

import collections
import functools
import math
import re
from typing import ClassVar

import attrs
import torch

from trnplan.backends.data import read_table
from trnplan.core import state

XLA_OPS_FILE = "neuronx_cc_xla_ops.tsv"
#: element types that must not reach a NeuronCore, and why (data-types.rst, EVRF004.rst)
FORBIDDEN_TYPES = {
    "c64": "complex64: no complex dtype on a NeuronCore (NCC_EVRF004)",
    "c128": "complex128: no complex dtype on a NeuronCore (NCC_EVRF004)",
    "f64": "float64: no FP64 on a NeuronCore (data-types.rst)",
    "s64": "int64: INT64 is converted to INT32 on a NeuronCore; keep indices int32 (data-types.rst)",
    "u64": "uint64: no 64-bit integers on a NeuronCore (data-types.rst)",
}
#: HLO text op names and StableHLO op names → the name on neuronx-cc's list
_HLO_TO_NEURON = {
    "abs": "Abs", "add": "Add", "all-gather": "Allgather", "all-reduce": "Allreduce", "atan2": "Atan2",
    "batch-norm-training": "Batchnorm", "batch-norm-grad": "Batchnormgrad", "batch-norm-inference": "Batchnorminference",
    "bitcast-convert": "BitcastConvertType", "broadcast": "Broadcast", "ceil": "Ceil", "clamp": "Clamp",
    "compare": "Compare", "concatenate": "Concatenate", "constant": "Constant", "convert": "ConvertElementType",
    "cosine": "Cos", "custom-call": "Customcall", "divide": "Div", "dot": "Dot", "dynamic-update-slice":
    "DynamicUpdateSlice", "exponential": "Exp", "floor": "Floor", "gather": "Gather",
    "get-tuple-element": "GetTupleElement", "iota": "Iota", "log": "Log", "and": "LogicalAnd", "not": "LogicalNot",
    "maximum": "Max", "minimum": "Min", "multiply": "Mul", "negate": "Neg", "pad": "Pad", "power": "Pow",
    "reduce": "Reduce", "reshape": "Reshape", "reverse": "Rev (reverse)", "rng-bit-generator": "RngBitGenerator",
    "rsqrt": "Rsqrt", "scatter": "Scatter", "select": "Select", "select-and-scatter": "SelectAndScatter",
    "shift-right-logical": "ShiftRightLogical", "sign": "Sign", "sine": "Sin", "slice": "Slice", "sqrt": "Sqrt",
    "subtract": "Sub", "tanh": "Tanh", "transpose": "Transpose", "tuple": "Tuple",
}
_STABLEHLO_TO_NEURON = {
    **{k.replace("-", "_"): v for k, v in _HLO_TO_NEURON.items()},
    "dot_general": "DotGeneral", "broadcast_in_dim": "BroadcastInDim",
}
#: HLO instructions that are structure, not computation
_STRUCTURAL = {"parameter", "return"}
#: the HLO ops trnplan's GEMM-only trees lower to (measured on XLA:CPU, torch-xla 2.9; the lane
#: asserts every plan stays inside it, so a new op in a lowering is a visible decision). ``reduce``
#: is the sum over the k-chunks of a dft-gemm with n > 128 (an Add reduction, which neuronx-cc
#: allows); ``reverse`` the Hermitian mirror of the real solver's half method; ``gather`` the
#: butterfly's bit reversal (index_select); ``abs``, ``compare`` and ``maximum`` (a Max reduce)
#: the split modes' per-row power-of-two scale (kernels.gemm.power_of_two_scale)
PLAN_HLO_OPS = frozenset({"abs", "add", "broadcast", "compare", "concatenate", "constant", "convert", "dot",
                          "gather", "maximum", "multiply", "negate", "pad", "reduce", "reshape", "reverse", "slice",
                          "subtract", "transpose", "tuple", "get-tuple-element"})
PLAN_STABLEHLO_OPS = frozenset({"abs", "add", "broadcast_in_dim", "compare", "concatenate", "constant", "convert",
                                "dot_general", "gather", "maximum", "multiply", "negate", "pad", "reduce", "reshape",
                                "reverse", "slice", "subtract", "transpose", "tuple", "get_tuple_element"})

_HLO_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.+?)\s+([a-z][a-z0-9\-]*)\(", re.MULTILINE)
_HLO_TYPE = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128|f8\w*)\[([^\]]*)\]")
#: an op is ``stablehlo.x`` not preceded by ``#`` (``#stablehlo.gather<...>`` is an attribute) nor followed
#: by ``=`` (``mhlo.is_dynamic = false`` is a module attribute)
_STABLEHLO_OP = re.compile(r"(?<![#\w.])(?:stablehlo|mhlo|chlo)\.([a-z_]+)\b(?!\s*=)")
_STABLEHLO_TYPE = re.compile(r"tensor<((?:[\d?]+x)*)(complex<\w+>|\w+)>")
_MLIR_TO_HLO_TYPE = {"i1": "pred", "complex<f32>": "c64", "complex<f64>": "c128"}


@functools.lru_cache(maxsize=1)
def neuronx_cc_ops() -> dict[str, str]:
    """``{"Dot": "", "Gather": "Supports only ...", ...}``: neuronx-cc's XLA op list and restrictions."""
    return read_table(XLA_OPS_FILE)


def _mlir_type(name: str) -> str:
    if name in _MLIR_TO_HLO_TYPE:
        return _MLIR_TO_HLO_TYPE[name]
    m = re.fullmatch(r"(u?)i(\d+)", name)
    if m:
        return f"{'u' if m.group(1) else 's'}{m.group(2)}"
    return name


@attrs.frozen
class Parsed:
    """What one HLO or StableHLO text holds: op counts, element types, dynamic dimensions, gathers."""

    ops: dict
    types: frozenset
    dynamic: tuple = ()  # the shapes with a dynamic or bounded dimension
    gathers: tuple = ()  # the HLO text of each gather instruction


def parse_hlo(text: str) -> Parsed:
    """Parse HLO text (``HloModule ... ENTRY ...``): op counts, element types, dynamic shapes, gathers."""
    ops: collections.Counter = collections.Counter()
    gathers = []
    for m in _HLO_INSTR.finditer(text):
        op = m.group(2)
        if op not in _STRUCTURAL:
            ops[op] += 1
        if op == "gather":
            gathers.append(text[m.start():text.find("\n", m.start())].strip())
    types, dynamic = set(), []
    for m in _HLO_TYPE.finditer(text):
        types.add(m.group(1))
        if "<=" in m.group(2) or "?" in m.group(2):
            dynamic.append(m.group(0))
    return Parsed(dict(ops), frozenset(types), tuple(dynamic), tuple(gathers))


def parse_stablehlo(text: str) -> Parsed:
    """Parse StableHLO MLIR text: op counts, element types (in HLO spelling), dynamic shapes."""
    ops = collections.Counter(op for op in _STABLEHLO_OP.findall(text) if op not in _STRUCTURAL)
    types, dynamic = set(), []
    for m in _STABLEHLO_TYPE.finditer(text):
        if m.group(2) == "index":  # ``dense<[0, 1]> : tensor<2xindex>``: a layout attribute, no data
            continue
        types.add(_mlir_type(m.group(2)))
        if "?" in m.group(1):
            dynamic.append(m.group(0))
    if "mhlo.is_dynamic = true" in text:
        dynamic.append("mhlo.is_dynamic = true")
    return Parsed(dict(ops), frozenset(types), tuple(dynamic))


def _dims(instr: str, attr: str) -> set[int]:
    m = re.search(attr + r"=\{([\d,\s]*)\}", instr)
    return {int(d) for d in m.group(1).split(",") if d.strip()} if m else set()


def gather_finding(instr: str) -> str | None:
    """Why a gather breaks neuronx-cc's rule, or ``None``.

    The rule reads "Supports only disjoint start_index_map and remapped_offset_dims". The offset
    dimensions of a gather are the operand dimensions that are *not* collapsed, remapped into the
    output; we read the rule as: no operand dimension is both indexed (start_index_map) and kept as
    an offset dimension, i.e. every indexed dimension is collapsed (an inference: the docs give no
    example). ``index_select`` lowers to exactly that shape.
    """
    indexed, collapsed = _dims(instr, "start_index_map"), _dims(instr, "collapsed_slice_dims")
    kept = indexed - collapsed
    if kept:
        return (f"gather indexes operand dimension(s) {sorted(kept)} that it also keeps as offset dimensions "
                f"(neuronx-cc: {neuronx_cc_ops().get('Gather', 'restricted')}): {instr[:160]}")
    return None


def findings(hlo: Parsed, stablehlo: Parsed | None = None) -> list[str]:
    """Everything the HLO (and StableHLO) break of neuronx-cc's documented limits, one line each."""
    allowed = neuronx_cc_ops()
    out = []
    for name, parsed, table in (("HLO", hlo, _HLO_TO_NEURON), ("StableHLO", stablehlo, _STABLEHLO_TO_NEURON)):
        if parsed is None:
            continue
        for op in sorted(parsed.ops):
            if table.get(op) not in allowed:
                out.append(f"{name} op {op!r} is not on neuronx-cc's supported list ({XLA_OPS_FILE})")
        for t in sorted(parsed.types & set(FORBIDDEN_TYPES)):
            out.append(f"{name} holds {t} tensors: {FORBIDDEN_TYPES[t]}")
        for shape in parsed.dynamic[:3]:
            out.append(f"{name} has a dynamic shape {shape}: neuronx-cc needs static shapes (NCC_EMOD025)")
    out += [f for f in map(gather_finding, hlo.gathers) if f]
    return out


#: the HLO dumps torch-xla's compiler writes under ``XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text"``:
#: the module as handed to the compiler (before XLA:CPU's own passes), which is what neuronx-cc receives
DUMP_GLOB = "*before_optimizations.txt"


def audit_dump(directory, seen: set | None = None) -> dict[str, list[str]]:
    """``{file: findings}`` for every executed graph torch-xla dumped under ``directory`` that is not
    in ``seen`` (file names; updated): each graph's ops and element types against neuronx-cc's
    documented limits (:func:`findings`). Every graph counts, not only a plan's module: the complex
    split and pack at a plan's boundary, the pad and crop of a bucket and the precision probe are
    graphs that run on the device too (runtimes.md §4)."""
    import pathlib

    seen = set() if seen is None else seen
    out = {}
    for path in sorted(pathlib.Path(directory).rglob(DUMP_GLOB)):
        if path.name in seen:
            continue
        seen.add(path.name)
        out[path.name] = findings(parse_hlo(path.read_text()))
    return out


@attrs.frozen
class XlaAuditReport:
    """What the lowering on the ``xla`` device holds. ``ok``: nothing neuronx-cc's limits refuse."""

    subject: str
    hlo_ops: dict
    stablehlo_ops: dict
    types: frozenset
    findings: tuple = ()
    fallback_ops: tuple = ()  # ATen ops torch-xla ran on the CPU while the module ran
    hlo: str = attrs.field(default="", repr=False)
    stablehlo: str = attrs.field(default="", repr=False)

    @property
    def ok(self) -> bool:
        return not self.findings and not self.fallback_ops

    def __str__(self) -> str:
        head = f"xla lowering audit — {self.subject}"
        hlo = ", ".join(f"{op}×{n}" for op, n in sorted(self.hlo_ops.items()))
        shlo = ", ".join(sorted(self.stablehlo_ops))
        lines = [head, f"  HLO ops        {hlo}", f"  StableHLO ops  {shlo}",
                 f"  element types  {', '.join(sorted(self.types))}",
                 f"  host fallback  {', '.join(self.fallback_ops) or 'none'}"]
        if self.ok:
            lines.append("  OK: every op on neuronx-cc's list; no complex, f64 or 64-bit integer; static shapes")
        else:
            lines += ["  FAILED:"] + [f"  - {f}" for f in self.findings]
            lines += [f"  - {op} ran on the host (torch-xla fallback)" for op in self.fallback_ops]
        return "\n".join(lines)


# ---------------------------------------------------------------------- torch-xla side
def available() -> bool:
    """Whether torch-xla can be imported here (the audit needs it; the parsers do not)."""
    import importlib.util

    return importlib.util.find_spec("torch_xla") is not None


def _fallback_counts() -> dict[str, int]:
    import torch_xla.debug.metrics as met

    return {op: met.counter_value(op) or 0 for op in met.executed_fallback_ops()}


class CompileCounter:
    """torch-xla's compile counters over a block: ``with CompileCounter() as c: ...; c.uncached``.

    The block's end syncs (``torch_xla.sync()``), which compiles and runs the pending graph of
    every *live* xla tensor: keep the outputs referenced until the block ends, or nothing runs.

    ``uncached``: graphs XLA compiled (``UncachedCompile``); ``cached``: graphs served from
    torch-xla's in-process compile cache (``CachedCompile``); ``dynamo``: graphs
    ``torch.compile(backend="openxla")`` extracted (``DynamoExtractCompiledGraph``).
    """

    NAMES: ClassVar[dict[str, str]] = {"uncached": "UncachedCompile", "cached": "CachedCompile",
                                       "dynamo": "DynamoExtractCompiledGraph"}

    def _read(self) -> dict[str, int]:
        import torch_xla.debug.metrics as met

        return {k: met.counter_value(v) or 0 for k, v in self.NAMES.items()}

    def __enter__(self):
        self._start = self._read()
        self._end = None
        return self

    def __exit__(self, *exc):
        import torch_xla

        torch_xla.sync()
        self._end = self._read()

    def _delta(self, key: str) -> int:
        end = self._end if self._end is not None else self._read()
        return end[key] - self._start[key]

    @property
    def uncached(self) -> int:
        return self._delta("uncached")

    @property
    def cached(self) -> int:
        return self._delta("cached")

    @property
    def dynamo(self) -> int:
        return self._delta("dynamo")


def lowered_text(outputs) -> tuple[str, str]:
    """(HLO text, StableHLO text) of the pending graph that computes ``outputs`` (xla tensors).

    Call before anything syncs them: after a sync the tensors are device data and the graph is gone.
    """
    import torch_xla
    import torch_xla.core.xla_model as xm

    outputs = list(outputs)
    return torch_xla._XLAC._get_xla_tensors_hlo(outputs), xm.get_stablehlo(outputs)


def audit_module(module: torch.nn.Module, example_inputs, *, subject: str = "module") -> XlaAuditReport:
    """Run ``module`` on the xla device and audit the graph it records.

    Parameters
    ----------
    module : torch.nn.Module
        Moved to the xla device (``module.to(device)``) if it is not there.
    example_inputs : tuple of torch.Tensor
        Host or xla tensors; moved to the device and synced first, so the audited graph holds the
        module's work only (a ``torch.randn`` made on the device would add an RNG to it).
    subject : str
        What the report names.
    """
    import torch_xla

    dev = torch_xla.device()
    module = module.to(dev)
    inputs = [t.to(dev) for t in example_inputs]
    torch_xla.sync()
    before = _fallback_counts()
    out = module(*inputs)
    out = out if isinstance(out, (tuple, list)) else (out,)
    hlo_text, stablehlo_text = lowered_text(out)
    torch_xla.sync()
    after = _fallback_counts()
    fallback = tuple(sorted(op for op, n in after.items() if n > before.get(op, 0)))
    hlo, shlo = parse_hlo(hlo_text), parse_stablehlo(stablehlo_text)
    return XlaAuditReport(subject, hlo.ops, shlo.ops, hlo.types | shlo.types, tuple(findings(hlo, shlo)),
                          fallback, hlo_text, stablehlo_text)


def example_inputs(problem, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Seeded host ``(batch, points)`` float32 inputs in a plan module's calling convention."""
    import math

    g = torch.Generator().manual_seed(seed)
    n = math.prod(problem.in_shape)
    count = 1 if problem.real_input else 2
    return tuple(torch.randn(problem.batch, n, generator=g, dtype=problem.real_dtype) for _ in range(count))


def audit_plan(plan, seed: int = 0) -> XlaAuditReport:
    """Audit a :class:`~trnplan.Plan`'s lowered module on the xla device (its norm included)."""
    return audit_module(plan.module, example_inputs(plan.problem, seed),
                        subject=f"plan {plan.problem.describe()}: {plan.tree}")



# ---------------------------------------------------------------------- traffic of the optimized HLO
#: bytes per element of an HLO element type
HLO_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "f16": 2, "bf16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
                "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16}
#: HLO instructions that move no data of their own (names, structure, re-interpretations)
_HLO_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "iota", "after-all"}
_HLO_TRAFFIC_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*([a-z]\w*)\[([\d,]*)\](?:\{[^}]*\})?\s+([\w\-]+)\((.*?)\)")


@attrs.frozen
class HloTraffic:
    """What the ENTRY computation of an optimized HLO module moves: each instruction that is not
    free (a fusion, a dot, a copy …) reads its operands and writes its result."""

    ops: tuple = ()  # (opcode, bytes in, bytes out)

    @property
    def bytes(self) -> int:
        return sum(i + o for _, i, o in self.ops)


def hlo_traffic(text: str) -> HloTraffic:
    """Count the traffic of ``text``'s ENTRY computation (XLA's optimized HLO, as
    ``--xla_dump_to`` writes it: ``*after_optimizations.txt``). A fused operand is counted whole
    (an upper bound where the fusion reads a slice of it)."""
    entry = text[text.index("ENTRY"):] if "ENTRY" in text else text
    entry = entry[: entry.find("\n}") + 1] if "\n}" in entry else entry
    sizes, ops = {}, []
    for line in entry.splitlines():
        m = _HLO_TRAFFIC_INSTR.match(line)
        if m is None:
            continue
        name, etype, dims, opcode, operands = m.groups()
        size = HLO_ITEMSIZE.get(etype, 4) * math.prod(int(d) for d in dims.split(",") if d)
        sizes[name] = size
        if opcode in _HLO_FREE:
            continue
        reads = sum(sizes.get(o, 0) for o in re.findall(r"%([\w.\-]+)", operands))
        ops.append((opcode, reads, size))
    return HloTraffic(tuple(ops))

__all__ = [
    "DUMP_GLOB",
    "FORBIDDEN_TYPES",
    "HLO_ITEMSIZE",
    "PLAN_HLO_OPS",
    "PLAN_STABLEHLO_OPS",
    "CompileCounter",
    "HloTraffic",
    "Parsed",
    "XlaAuditReport",
    "audit_dump",
    "audit_module",
    "audit_plan",
    "available",
    "example_inputs",
    "findings",
    "gather_finding",
    "hlo_traffic",
    "lowered_text",
    "neuronx_cc_ops",
    "parse_hlo",
    "parse_stablehlo",
]


state.register("tools.xla_audit.neuronx_cc_ops", neuronx_cc_ops.cache_clear)
