"""The Neuron lowering audit: will neuronx-cc be handed only what it takes? Runs anywhere.

``audit(plan_or_problem)`` (or ``audit(module, example_inputs=...)`` for any module) exports the
lowered module with :func:`torch.export.export` (static shapes, the same ATen graph torch-xla
records for ``torch_neuronx.trace``: composite ops already decomposed) and checks every node:

* **dtypes** — float32, bfloat16, float16, int32 and bool only (Trn1/Trn2 data types,
  about-neuron/arch/neuron-features/data-types.rst). Complex is refused (NCC_EVRF004), float64 is
  refused (no FP64 on device), int64 only as a constant index operand (neuronx-cc converts INT64
  to INT32; a computed int64 value is flagged);
* **ops** — no ``aten::fft_*`` (0 % supported, api-torch-neuronx-analyze.rst), no ``unfold`` (the
  seed project's XLA failure), nothing outside the allowlist shipped as
  ``trnplan/backends/data/neuron_aten_allowlist.tsv`` (derived from the operator lists in the
  Neuron SDK docs; the file says which line came from where);
* **shapes** — static: a data-dependent size (``nonzero``, boolean masks) is refused
  (api-torch-neuronx-trace.rst, NCC_EMOD025).

Each finding names the op, why, its source location (file:line and the code) and the solver whose
lowering produced it. The audit tests our lowering against the *documented* limits; it is no
substitute for ``torch_neuronx.analyze()`` or a compile on a Neuron host.
"""

from __future__ import annotations

import functools
import re
import warnings

import attrs
import torch

from trnplan.backends import get_backend
from trnplan.backends.artifacts import problem_inputs
from trnplan.backends.data import read_table
from trnplan.core import state
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem
from trnplan.core.spec import parse_strategy
from trnplan.plan.plan import Plan
from trnplan.planner import Planner, registry
from trnplan.planner.library import HOST_LIBRARIES
from trnplan.planner.registry import solver_names

ALLOWLIST_FILE = "neuron_aten_allowlist.tsv"
#: real dtypes a NeuronCore computes in (data-types.rst: FP32, FP16, BF16, TF32, cFP8, UINT8, INT32)
DEVICE_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16",
                 torch.int32: "int32", torch.bool: "bool"}
#: ops refused by name, with the documented reason (checked before the allowlist)
DENIED = {
    "fft": "aten::fft_* is not supported by neuronx-cc (torch.fft.fft: 0% supported, failureAt neuronx-cc, "
           "api-torch-neuronx-analyze.rst)",
    "unfold": "unfold has no Neuron lowering (the seed project's XLA failure); use a reshape of a padded tensor",
    "nonzero": "data-dependent output shape: torch_neuronx.trace forbids it (api-torch-neuronx-trace.rst)",
    "masked_select": "data-dependent output shape: torch_neuronx.trace forbids it (api-torch-neuronx-trace.rst)",
    "unique": "data-dependent output shape: torch_neuronx.trace forbids it (api-torch-neuronx-trace.rst)",
    "sort": "aten::sort is not supported by neuronx-cc (api-torch-neuronx-trace.rst)",
    "triangular_solve": "NCC_EVRF001/NCC_EUOC002 (compiler/error-codes/EVRF001.rst)",
    "complex": "builds a complex tensor: no complex dtype on a NeuronCore (NCC_EVRF004)",
    "view_as_complex": "builds a complex tensor: no complex dtype on a NeuronCore (NCC_EVRF004)",
    "view_as_real": "reads a complex tensor: no complex dtype on a NeuronCore (NCC_EVRF004)",
}
#: the host-only precision and why
HOST_ONLY_PRECISION = {"fp64": "fp64 has no device path: trn1/trn2 have no FP64 (data-types.rst); fp64 plans run "
                               "on the host (device='cpu')"}


@functools.lru_cache(maxsize=1)
def allowlist() -> dict[str, str]:
    """``{"aten::mm": "listed", ...}``: the ATen ops the audit accepts and each one's source."""
    return read_table(ALLOWLIST_FILE)


@attrs.frozen
class Finding:
    """One offending node of the exported graph."""

    op: str
    reason: str
    location: str = ""  # "path/file.py:81: y = self.gemm(x).sum(0)"
    solver: str | None = None  # the trnplan solver whose lowering made it (None: not a solver's module)
    module: str = ""  # the nn.Module path and class, e.g. "root.gemm (Gemm)"

    def __str__(self) -> str:
        who = f"solver {self.solver}" if self.solver else "no trnplan solver"
        return f"{self.op}: {self.reason}\n      at {self.location or '(no source location)'} [{who}; {self.module}]"


@attrs.frozen
class AuditReport:
    """What the audit found. ``ok`` is true when the graph holds nothing the Neuron path refuses.

    ``host_only`` is set (and ``ok`` true) for a plan that never reaches the device: fp64, or a
    host FFT library leaf (the Trainium backend's host fallback); nothing is exported then.
    """

    subject: str
    findings: tuple = ()
    ops: tuple = ()  # (("aten::mm", 2), ...) every op of the graph and its count
    host_only: str | None = None
    tree: str | None = None
    note: str | None = None  # e.g. that plan_many would run this problem on the host instead

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def offending_ops(self) -> tuple[str, ...]:
        return tuple(sorted({f.op for f in self.findings}))

    def __str__(self) -> str:
        head = (f"neuron lowering audit — {self.subject}" + (f"\n  tree  {self.tree}" if self.tree else "")
                + (f"\n  note  {self.note}" if self.note else ""))
        if self.host_only:
            return f"{head}\n  HOST ONLY (not audited for the device): {self.host_only}"
        ops = ", ".join(f"{op}×{n}" for op, n in self.ops)
        if self.ok:
            return f"{head}\n  OK: {sum(n for _, n in self.ops)} nodes, every op allowed ({ops})"
        lines = [head, f"  FAILED: {len(self.findings)} finding(s)"]
        lines += [f"  - {f}" for f in self.findings]
        return "\n".join(lines)


# ---------------------------------------------------------------------- entry point
def audit(target, example_inputs=None, *, strategy=None, tol: float | None = None) -> AuditReport:
    """Audit the Neuron lowering of a plan, a problem, or any module.

    Parameters
    ----------
    target : trnplan.Plan, trnplan.Problem or torch.nn.Module (or callable)
        A Plan: its lowered module as built. A Problem: planned on the Neuron cost profile (as
        ``device="neuron"``, artifact mode, so no host-library leaves inside the graph) and lowered
        on the CPU. A module: exported as is with ``example_inputs``.
    example_inputs : tuple of torch.Tensor, optional
        Required for a module; for a plan or problem, random ``(batch, points)`` float tensors.
    strategy : str, optional
        For a Problem: force a solver or tree, as ``plan_many(strategy=)``.
    tol : float, optional
        For a Problem: the error bound to plan to (default: the precision's bar). The CI grid
        plans at ``tol=1``: the audit judges the lowering, and on Neuron the accuracy model rules
        out the split modes at their bars (products rounded before accumulation).

    Returns
    -------
    AuditReport
        ``.ok``, ``.findings`` (op, reason, source location, solver), ``.host_only``.
    """

    if isinstance(target, Problem):
        return _audit_problem(target, strategy, tol)
    if isinstance(target, Plan):
        host = _host_only(target.problem, target.tree)
        subject = f"plan {target.problem.describe()}"
        if host:
            return AuditReport(subject, host_only=host, tree=str(target.tree))
        example = example_inputs or _problem_inputs(target.problem)
        return _audit_module(target.module, example, subject, str(target.tree))
    if example_inputs is None:
        raise TypeError("audit(module) needs example_inputs=(tensor, ...): the shapes the module will be traced with")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    name = type(target).__name__
    return _audit_module(target, tuple(example_inputs), f"module {name}", None)


def _problem_inputs(problem):
    return problem_inputs(problem, torch.device("cpu"))


def _host_only(problem, tree) -> str | None:
    if problem.precision in HOST_ONLY_PRECISION:
        return HOST_ONLY_PRECISION[problem.precision]
    if tree is not None:
        host = {s.name for s in HOST_LIBRARIES}
        if tree.solver in host:
            return (f"the plan is the host FFT library {tree.solver!r} (the Trainium backend's host fallback): "
                    f"it runs on the host CPU, nothing is traced for the device")
    return None


def _audit_problem(problem, strategy, tol) -> AuditReport:
    problem = attrs.evolve(problem, device="neuron")
    subject = f"problem {problem.describe()}" + (f", strategy {strategy}" if strategy else "")
    if problem.precision in HOST_ONLY_PRECISION:
        return AuditReport(subject, host_only=HOST_ONLY_PRECISION[problem.precision])

    backend = get_backend("neuron")
    spec = parse_strategy(strategy, solver_names()) if strategy is not None else None
    note = None
    if spec is None:
        # the device plan is what is audited; say so when plan_many would take the host fallback
        chosen = Planner(backend, exportable=True, tol=tol).plan(problem)
        if _host_only(problem, chosen):
            note = (f"plan_many would run this on the host ({chosen}, the host fallback); audited: the plan a "
                    f"NeuronCore would get")
        host = {s.name for s in HOST_LIBRARIES}
        planner = Planner(backend, exportable=True, tol=tol, solvers=[s for s in registry.solvers() if s.name not in host])
    else:
        planner = Planner(backend, exportable=True, tol=tol)
    try:
        tree = planner.plan(problem, spec)  # PlanningError if the forced solver does not apply
    except PlanningError as exc:
        if note is None:
            raise
        return AuditReport(subject, host_only=f"no device plan meets the bound ({str(exc)[:200]}…); "
                                              f"plan_many runs it on the host", tree=str(chosen))
    host = _host_only(problem, tree)
    if host:
        return AuditReport(subject, host_only=host, tree=str(tree))
    module = planner.lower_plan(tree, problem, torch.device("cpu"))
    report = _audit_module(module, _problem_inputs(problem), subject, str(tree))
    return attrs.evolve(report, note=note)


# ---------------------------------------------------------------------- the graph check
def _audit_module(module, example, subject: str, tree: str | None) -> AuditReport:
    if isinstance(module, torch.nn.Module):
        module = module.eval()
    else:
        fn = module

        class _Wrap(torch.nn.Module):
            def forward(self, *args):
                return fn(*args)

        module = _Wrap()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # export's deprecation chatter is not a finding
            exported = torch.export.export(module, tuple(example), strict=False)
    except Exception as exc:  # noqa: BLE001 - any export failure is the finding
        return AuditReport(subject, findings=(_export_failure(exc),), tree=tree)
    findings, ops = [], {}
    constants = _constant_inputs(exported)
    for node in exported.graph.nodes:
        if node.op == "placeholder":
            finding = _check_value(node, "input", int64_ok=node.name in constants)
            if finding is not None:
                findings.append(finding)
            continue
        if node.op != "call_function":
            continue
        op = _op_name(node.target)
        ops[op] = ops.get(op, 0) + 1
        reason = _op_reason(op)
        if reason is not None:
            findings.append(_finding(node, op, reason))
            continue
        finding = _check_value(node, op, int64_ok=False)
        if finding is not None:
            findings.append(finding)
    return AuditReport(subject, findings=tuple(findings), ops=tuple(sorted(ops.items())), tree=tree)


def _constant_inputs(exported) -> set:
    """Placeholder names that hold the module's own buffers and constants (not user inputs)."""
    sig = exported.graph_signature
    out = set()
    for spec in sig.input_specs:
        if spec.kind.name in ("BUFFER", "CONSTANT_TENSOR", "PARAMETER"):
            out.add(spec.arg.name)
    return out


def _op_name(target) -> str:
    """``aten.mm.default`` → ``aten::mm``; other callables by their qualified name."""
    name = getattr(target, "name", None)
    if callable(name):
        qual = name()  # "aten::mm" or "aten::mm.out"
        return qual.split(".", 1)[0]
    return getattr(target, "__qualname__", None) or str(target)


def _op_reason(op: str) -> str | None:
    if not op.startswith("aten::"):
        if op in ("getitem", "operator.getitem") or op.endswith("getitem"):
            return None  # tuple unpacking, no computation
        if op.startswith(("sym_", "_operator.")) or op in ("mul", "add", "floordiv", "sub", "ge", "gt", "le", "lt",
                                                           "eq", "ne", "mod"):
            return "symbolic shape arithmetic: a data-dependent shape (torch_neuronx.trace needs static shapes)"
        return f"{op} is not an ATen op: the Neuron lowering cannot be judged (not on the allowlist)"
    if op in ("aten::_assert_scalar", "aten::sym_constrain_range", "aten::sym_constrain_range_for_size"):
        return "a runtime check of a data-dependent size: torch_neuronx.trace needs static shapes (NCC_EMOD025)"
    bare = op[len("aten::"):].lstrip("_")
    for key, why in DENIED.items():
        if bare == key or bare.startswith(key + "_") or (key == "fft" and "fft" in bare):
            return why
    if op not in allowlist():
        return ("not on the Neuron allowlist (trnplan/backends/data/neuron_aten_allowlist.tsv, from the Neuron SDK's "
                "operator lists); check it with torch_neuronx.analyze() before adding it")
    return None


def _check_value(node, op: str, int64_ok: bool) -> Finding | None:
    """A finding for a node whose value has a dtype or a shape the device refuses."""
    values = node.meta.get("val")
    if values is None:
        return None
    for val in values if isinstance(values, (tuple, list)) else (values,):
        if not isinstance(val, torch.Tensor):
            continue
        if any(not isinstance(s, int) for s in val.shape):
            return _finding(node, op, f"data-dependent shape {tuple(val.shape)}: torch_neuronx.trace needs static "
                                      f"shapes (pad or bucket; NCC_EMOD025)")
        dt = val.dtype
        if dt in DEVICE_DTYPES or (dt == torch.int64 and int64_ok):
            continue
        if dt.is_complex:
            why = f"{dt} value: no complex dtype on a NeuronCore (NCC_EVRF004); use split re/im tensors"
        elif dt == torch.float64:
            why = "float64 value: no FP64 on trn1/trn2 (data-types.rst); fp64 runs on the host"
        elif dt == torch.int64:
            why = "int64 computed on device: neuronx-cc narrows INT64 to INT32 (data-types.rst); use int32"
        else:
            why = f"{dt} is not a NeuronCore compute dtype here (float32, bfloat16, float16, int32, bool)"
        return _finding(node, op, why)
    return None


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def _finding(node, op: str, reason: str) -> Finding:
    return Finding(op, reason, _location(node), *_solver_of(node))


def _location(node) -> str:
    trace = node.meta.get("stack_trace") or ""
    frames = _FRAME.findall(trace)
    if not frames:
        return ""
    path, line, _fn, code = frames[-1]  # the innermost frame: the line that called the op
    return f"{path}:{line}: {code.strip()}"


@functools.lru_cache(maxsize=1)
def _solver_modules() -> dict[str, str]:
    """Python module of each solver's class → solver name (the planner/ module that lowers it)."""
    out: dict[str, str] = {}
    for solver in registry.solvers():
        out.setdefault(type(solver).__module__, solver.name)
    return out


def _solver_of(node) -> tuple[str | None, str]:
    """(solver name, "module path (Class)") of the innermost module on the node's stack that a
    solver's lowering built; kernels (Gemm, twiddles) are attributed to the solver that used them."""
    stack = node.meta.get("nn_module_stack") or {}
    entries = list(stack.values())
    where = ""
    if entries:
        path, cls = entries[-1][:2]
        where = f"{path or '<root>'} ({_class_name(cls).rsplit('.', 1)[-1]})"
    solvers = _solver_modules()
    for path, cls in (e[:2] for e in reversed(entries)):
        module_name = _class_name(cls).rsplit(".", 1)[0]
        if module_name in solvers:
            return solvers[module_name], where
    return None, where


def _class_name(cls) -> str:
    return cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"


def _export_failure(exc: Exception) -> Finding:
    text = f"{type(exc).__name__}: {exc}"
    data_dependent = any(s in text for s in ("data-dependent", "DataDependent", "GuardOnDataDependent", "unbacked"))
    reason = ("torch.export failed on a data-dependent shape or branch (torch_neuronx.trace needs static shapes "
              "and control flow): " if data_dependent else "torch.export could not capture the module, so "
              "torch_neuronx.trace cannot either: ")
    frames = _FRAME.findall(text)
    location = f"{frames[-1][0]}:{frames[-1][1]}: {frames[-1][3].strip()}" if frames else ""
    return Finding("<export>", reason + text.splitlines()[0][:300], location)


# ---------------------------------------------------------------------- the CI grid
#: representative problems of the CI audit: (label, Problem.create kwargs)
GRID_SIZES = (
    ("64", {"shape": 64}),
    ("256", {"shape": 256}),
    ("1000", {"shape": 1000}),
    ("4096", {"shape": 4096}),
    ("4097", {"shape": 4097}),
    ("r2c 256", {"shape": 256, "kind": "r2c"}),
    ("c2r 256", {"shape": 256, "kind": "c2r"}),
    ("nd 32x32", {"shape": (32, 32)}),
)
GRID_PRECISIONS = ("fp32", "bf16", "bf16x3", "bf16x6", "fp64")


def audit_grid(solvers=None, precisions=GRID_PRECISIONS, sizes=GRID_SIZES, batch: int = 4, tol: float = 1.0):
    """Audit every solver × precision × size on the Neuron profile.

    Yields ``(solver, precision, label, outcome)`` where outcome is an :class:`AuditReport`, or a
    string saying why the solver does not apply (forced, it declines: not a failure).
    """

    for solver in solvers or solver_names():
        for precision in precisions:
            for label, kw in sizes:
                kw = dict(kw)
                dtype = torch.complex128 if precision == "fp64" else torch.complex64
                problem = Problem.create(kw.pop("shape"), batch, precision=precision, dtype=dtype, device="neuron",
                                         **kw)
                try:
                    outcome = audit(problem, strategy=solver, tol=tol)
                except PlanningError as exc:
                    outcome = f"not applicable: {str(exc).splitlines()[0][:160]}"
                yield solver, precision, label, outcome


__all__ = ["AuditReport", "Finding", "allowlist", "audit", "audit_graph", "audit_grid"]


# ---------------------------------------------------------------------- captured graphs
#: ops that only move between complex and real views or conjugate: accepted by audit_graph where the
#: runtime holds complex (``complex_ok``), refused otherwise (DENIED, or not on the allowlist)
COMPLEX_OPS = frozenset({"aten::view_as_real", "aten::view_as_complex", "aten::complex", "aten::_conj",
                         "aten::conj", "aten::conj_physical", "aten::real", "aten::imag"})


def audit_graph(gm, *, complex_ok: bool = False, subject: str = "captured graph") -> AuditReport:
    """Audit an FX graph a compile backend was handed (e.g. AOTAutograd's forward graph of a model
    that calls torch.fft under :func:`trnplan.install`) with the same op and dtype rules as
    :func:`audit`.

    Parameters
    ----------
    gm : torch.fx.GraphModule
        The graph, as a recording backend (``aot_autograd(fw_compiler=record)``) received it.
    complex_ok : bool, default False
        Accept complex values (a runtime that holds complex, e.g. XLA:CPU); the ops must still be
        on the allowlist and no FFT op may remain.
    subject : str
        What the report calls the graph.
    """
    findings, ops = [], {}
    for node in gm.graph.nodes:
        if node.op not in ("placeholder", "call_function"):
            continue
        op = "input" if node.op == "placeholder" else _op_name(node.target)
        if node.op == "call_function":
            ops[op] = ops.get(op, 0) + 1
            reason = None if complex_ok and op in COMPLEX_OPS else _op_reason(op)
            if reason is not None:
                findings.append(_finding(node, op, reason))
                continue
        finding = _check_value(node, op, int64_ok=node.op == "placeholder")
        if finding is not None and not (complex_ok and "complex" in finding.reason):
            findings.append(finding)
    return AuditReport(subject, findings=tuple(findings), ops=tuple(sorted(ops.items())))


state.register("tools.audit.allowlist", allowlist.cache_clear)
state.register("tools.audit.solver_modules", _solver_modules.cache_clear)
