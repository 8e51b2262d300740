"""Plan: the executable (Problem + PlanNode tree + lowered module), plan_many, and explain().

``plan_many`` is the front door: it validates the request, asks the planner for a tree, lowers
it to a torch module on split (re, im) tensors, and keeps the ready Plan in a bounded
in-process LRU keyed by the problem digest, so asking twice returns the same plan without
re-planning (the LRU is filled outside its lock and re-checked after, as pocketfft does).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import torch

from trnplan.backends import get_backend
from trnplan.cache import PlanCache, default_cache
from trnplan.core import config
from trnplan.core.errors import BackendUnavailable, PlanningError
from trnplan.core.node import PlanNode
from trnplan.core.problem import EFFORTS, Problem
from trnplan.core.spec import Spec, parse_strategy
from trnplan.plan.provide import provide
from trnplan.plan.verify import describe_measured
from trnplan.planner.measure import describe as measure_lines
from trnplan.planner.planner import CHOSEN, PlanModule
from trnplan.planner.real import hermitian_weights
from trnplan.planner.registry import solver_names

__all__ = ["Plan", "PlanModule", "plan_many", "clear_plan_cache", "plan_cache_info"]


class Plan:
    """An executable FFT plan. Build one with :func:`plan_many`; run it with :meth:`execute`.

    Attributes
    ----------
    problem : Problem
        What this plan computes.
    tree : PlanNode
        How: the planner's decision, printable (``str(plan.tree)``) and JSON-serialisable.
    candidates : tuple of Candidate
        Every solver the planner considered at the top level, with its verdict.
    device : torch.device
        Where it runs; inputs must live there.
    module : torch.nn.Module
        The lowered transform on split ``(re, im)`` tensors of shape ``(batch, n)``.
    """

    def __init__(self, problem: Problem, tree: PlanNode, candidates, module: PlanModule,
                 device: torch.device, *, provenance, runner=None, strategy: str | None, tol: float,
                 profile_name: str):
        self.problem, self.tree, self.candidates = problem, tree, tuple(candidates)
        self.module, self.device = module, device
        self.provenance, self.strategy, self.tol = provenance, strategy, tol
        self.profile_name = profile_name
        # a compiled artifact runs the whole transform (norm included); the eager module stays
        # for the pair form's autograd, which an AOT/NEFF artifact does not carry
        self._runner = runner
        self.cache_hits = 0
        self._in_flat = (problem.batch, math.prod(problem.in_shape))
        self._lib_in = (problem.batch, *problem.in_shape)
        # (shape, dtype, device) signatures already validated: repeated calls skip the checks
        self._accepted: set = set()
        self._native = None
        if runner is None and hasattr(module.root, "library_call"):
            self._native = module.root.library_call(problem.norm)
        self._adjoint: Plan | None = None
        self._weights: dict = {}  # device -> Hermitian weights of the real kinds' backward
        #: how to plan the adjoint the same way (cache, compile, tol); set by plan_many
        self._plan_options: dict = {}

    # ------------------------------------------------------------------ running
    def execute(self, x):
        """Run the transform.

        Parameters
        ----------
        x : torch.Tensor or (torch.Tensor, torch.Tensor)
            The input on the plan's device, any layout (contiguous or not), whose trailing
            dimensions are the plan's input shape and whose leading dimensions multiply to the
            plan's batch:

            * c2c: complex (``dtype``), trailing shape ``shape``; or a pair ``(re, im)`` of real
              tensors of the matching real dtype (float32 for complex64);
            * r2c: real (float32 for complex64, float64 for complex128), trailing shape ``shape``;
            * c2r: complex, trailing shape ``(*shape[:-1], shape[-1] // 2 + 1)``; or a pair.

        Returns
        -------
        torch.Tensor or (torch.Tensor, torch.Tensor)
            c2c: complex of the input's shape (a pair when a pair came in); r2c: complex with
            trailing shape ``(*shape[:-1], shape[-1] // 2 + 1)``; c2r: real with trailing shape
            ``shape``. Like torch.fft.irfft, c2r ignores the imaginary parts of the DC and (even
            ``shape[-1]``) Nyquist bins.

        Raises
        ------
        TypeError
            ``x`` is not a tensor or pair of tensors, is real where complex is expected (or the
            reverse), or has the wrong dtype.
        ValueError
            The shape or batch does not match the plan, or ``x`` is on another device.

        Notes
        -----
        Differentiable: when ``x`` requires grad, the backward pass runs the adjoint transform
        (:meth:`adjoint`) as another cached plan.
        """
        p = self.problem
        if isinstance(x, torch.Tensor):
            signature = (x.shape, x.dtype, x.device)
            if signature not in self._accepted:
                self._check_tensor(x)
                self._check_layout(x, "x")
                self._accept(signature)
            if x.requires_grad and torch.is_grad_enabled():
                return _PlanFunction.apply(self, x)
            return self._run(x)
        if isinstance(x, (tuple, list)):
            if p.real_input:
                raise TypeError(f"this r2c plan takes one real {_name(p.real_dtype)} tensor, not a pair")
            re, im = self._check_pair(x)
            lead = re.shape[: re.ndim - p.rank]
            out = self._split_module(re, im)(re.reshape(self._in_flat), im.reshape(self._in_flat))
            return tuple(t.reshape(*lead, *p.out_shape) for t in out) if len(out) == 2 else out[0].reshape(*lead, *p.out_shape)
        raise TypeError(
            f"execute() takes {self._wanted()}; got {type(x).__name__}"
        )

    __call__ = execute

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        """The transform of a validated tensor, outside autograd."""
        p = self.problem
        if self._native is not None and x.shape == self._lib_in:
            return self._native(x)  # already (batch, *in_shape): no reshape (each costs µs per call)
        lead = x.shape[: x.ndim - p.rank]
        if self._native is not None:
            y = self._native(x.reshape(self._lib_in))
        else:
            z = x if x.shape == self._in_flat else x.reshape(self._in_flat)
            out = self._split_module()(z) if p.real_input else self._split_module()(z.real, z.imag)
            y = out[0] if p.real_output else torch.complex(out[0], out[1])
            if x.shape == self._in_flat and p.rank == 1:  # (batch, n) in, (batch, n_out) out: no reshape
                return y
        return y.reshape(*lead, *p.out_shape)

    def adjoint(self) -> "Plan":
        """The plan of the adjoint transform (cached), which autograd's backward pass runs.

        The adjoint of a DFT with scale s is the opposite-direction DFT with the same scale, so
        the adjoint plan flips ``inverse`` and mirrors ``norm`` ("backward" ↔ "forward"). For real
        transforms it swaps r2c and c2r; :meth:`backward` applies the Hermitian weights.
        """
        if self._adjoint is None:
            p = self.problem
            kind = {"c2c": "c2c", "r2c": "c2r", "c2r": "r2c"}[p.kind]
            norm = {"backward": "forward", "forward": "backward", "ortho": "ortho"}[p.norm]
            self._adjoint = plan_many(p.shape, p.batch, kind=kind, inverse=not p.inverse, dtype=p.torch_dtype,
                                      precision=p.precision, norm=norm, cores=p.cores,
                                      device="neuron" if p.device == "neuron" else self.device,
                                      **self._plan_options)
        return self._adjoint

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """The gradient with respect to the input, given the gradient ``g`` of the output.

        Runs the adjoint plan (:meth:`adjoint`): for c2c ``adjoint().execute(g)``; for r2c the
        c2r of ``g / c_k``; for c2r ``c_k`` times the r2c of ``g``, with the Hermitian weights c_k
        (1 for DC and Nyquist, 2 otherwise). This is what ``loss.backward()`` calls through
        :meth:`execute`; it is public for custom autograd code (trnplan.fft's compiled path).

        Parameters
        ----------
        g : torch.Tensor
            Gradient of the output: the shape and dtype :meth:`execute` returns.

        Returns
        -------
        torch.Tensor
            Gradient of the input, the shape and dtype :meth:`execute` takes.
        """
        p, adj = self.problem, self.adjoint()
        if p.kind == "c2c":
            return adj.execute(g)
        weights = self._weights.get(g.device)
        if weights is None:  # built once per device, not per backward call
            weights = torch.as_tensor(hermitian_weights(p.shape[-1]), dtype=p.real_dtype, device=g.device)
            self._weights[g.device] = weights
        if p.kind == "r2c":  # Re(Σ_k g_k ω^{-jk}) over the half spectrum = c2r of g with weights 1/c_k
            return adj.execute(g / weights)
        return adj.execute(g.real.contiguous() if g.is_complex() else g) * weights  # c2r: c_k · rfft(g)

    def _split_module(self, *inputs):
        """The compiled artifact, unless a gradient is needed (artifacts carry no autograd)."""
        if self._runner is None or (torch.is_grad_enabled() and any(t.requires_grad for t in inputs)):
            return self.module
        return self._runner

    def _accept(self, signature) -> None:
        if len(self._accepted) < 64:  # bounded: a plan sees few distinct layouts
            self._accepted.add(signature)

    def _wanted(self, two: str = "") -> str:
        p = self.problem
        trailing = ", ".join(map(str, p.in_shape))
        if p.real_input:
            return f"a real {_name(p.real_dtype)} tensor of shape (..., {trailing})"
        return (f"a {p.dtype} tensor of shape (..., {trailing}) or a (re, im) pair of {two}"
                f"{_name(p.real_dtype)} tensors")

    def _check_tensor(self, x: torch.Tensor):
        p = self.problem
        got = _name(x.dtype)
        if p.real_input:
            if x.is_complex():
                raise TypeError(f"this r2c plan takes real input ({_name(p.real_dtype)}), got a complex {got} tensor; "
                                f"use a c2c plan (kind='c2c') for complex data, or pass x.real")
            if x.dtype != p.real_dtype:
                raise TypeError(f"this r2c plan was made for {_name(p.real_dtype)} input but x is {got}; convert with "
                                f"x.to(torch.{_name(p.real_dtype)}) or plan with dtype=torch.{got}")
            return
        if not x.is_complex():
            raise TypeError(
                f"this {p.kind} plan takes complex input ({p.dtype}), got a real {got} tensor; pass "
                f"torch.complex(x, torch.zeros_like(x)), or the pair (x, torch.zeros_like(x))"
                + ("; for real input to a forward transform plan kind='r2c'" if p.kind == "c2c" else "")
            )
        if x.dtype != p.torch_dtype:
            replan = f" or plan with dtype=torch.{got}" if x.dtype in (torch.complex64, torch.complex128) else ""
            raise TypeError(f"this plan was made for {p.dtype} but x is {got}; convert with x.to(torch.{p.dtype}){replan}")

    def _check_pair(self, x):
        p = self.problem
        want = _name(p.real_dtype)
        if len(x) != 2 or not all(isinstance(t, torch.Tensor) for t in x):
            types = sorted({type(t).__name__ for t in x})
            raise TypeError(
                f"execute() takes {self._wanted('two ')}; got a {type(x).__name__} of {len(x)} item(s) of type(s) {', '.join(types)}"
            )
        re, im = x
        for name, t in (("re", re), ("im", im)):
            if t.is_complex() or t.dtype != p.real_dtype:
                raise TypeError(f"pair input {name} must be {want} (the real dtype of {p.dtype}); "
                                f"got {_name(t.dtype)}")
        if re.shape != im.shape:
            raise ValueError(f"pair input re and im must have the same shape; got {tuple(re.shape)} and {tuple(im.shape)}")
        self._check_layout(re, "re")
        self._check_layout(im, "im")
        return re, im

    def _check_layout(self, t: torch.Tensor, name: str):
        p = self.problem
        want = p.in_shape
        side = {"r2c": " (the real shape)", "c2r": f" (the half spectrum of {p.shape}: last axis {p.shape[-1]}//2+1)"}
        if t.ndim < p.rank or tuple(t.shape[t.ndim - p.rank:]) != want:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}, but this plan transforms trailing dimension(s) "
                f"{want}{side.get(p.kind, '')}: expected shape (..., {', '.join(map(str, want))}) with leading "
                f"dimensions multiplying to batch={p.batch}"
            )
        leading = math.prod(t.shape[: t.ndim - p.rank])
        if leading == 0:
            raise ValueError(f"{name} has shape {tuple(t.shape)}: it holds no transforms (a leading dimension is 0); "
                             f"this plan takes batch={p.batch}")
        if leading != p.batch:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}: its leading dimensions multiply to {leading}, but this plan "
                f"was made for batch={p.batch}; plan with batch={leading} (trnplan.plan_many({p.shape}, batch={leading}))"
            )
        if t.device != self.device:
            raise ValueError(f"{name} is on {t.device} but this plan runs on {self.device}; move it with "
                             f".to('{self.device}') or plan with device='{t.device}'")

    # ------------------------------------------------------------------ explaining
    def explain(self) -> str:
        """A multi-line report: the problem, the tree with its predicted costs, the candidates, provenance."""
        return render_explain(self)

    def __repr__(self) -> str:
        return f"<trnplan.Plan {self.problem.describe()}: {self.tree}>"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class _PlanFunction(torch.autograd.Function):
    """A plan as an autograd node: forward runs the plan, backward runs its adjoint plan.

    The backward itself goes through :meth:`Plan.execute`, so it is differentiable again
    (double backward) and uses the adjoint's cached plan and artifact.
    """

    @staticmethod
    def forward(ctx, plan, x):
        ctx.plan = plan
        return plan._run(x)

    @staticmethod
    def backward(ctx, g):
        return None, ctx.plan.backward(g)


# ---------------------------------------------------------------------- explain()
def _si(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def _time(us: float) -> str:
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


def _node_line(node: PlanNode) -> str:
    params = " ".join(a for a in node.atoms()[1:])
    return f"{node.solver} n={node.n}" + (f" [{params}]" if params else "") + f" ×{node.batch}"


def render_explain(plan: Plan) -> str:
    p, tree, pv = plan.problem, plan.tree, plan.provenance
    if pv.origin == "wisdom hit":
        origin = (f"wisdom hit in {pv.cache_path} (key {pv.wisdom_key}, effort {pv.effort}), loaded in "
                  f"{pv.planning_ms:.1f} ms")
    else:
        origin = f"planned now in {pv.planning_ms:.1f} ms ({pv.searches} sub-problem searches, effort {pv.effort})"
        origin += f"; stored as {pv.wisdom_key}" if pv.wisdom_key else " (no plan cache)"
    if plan.cache_hits:
        origin += f"; returned from the in-process plan cache {plan.cache_hits} time(s) since"
    forced = f", strategy forced: {plan.strategy}" if plan.strategy else ""
    if pv.artifact == "artifact hit":
        runs = (f"{pv.compile_mode} artifact {pv.artifact_key} ({pv.artifact_bytes / 1e6:.2f} MB) loaded in "
                f"{pv.load_ms:.1f} ms, no compile: {pv.compile_s:.1f} s of compile saved")
    elif pv.artifact == "compiled in process":
        runs = (f"{pv.compile_mode}: torch.compile'd in this process in {pv.compile_s:.1f} s (static batch "
                f"{p.batch}; kept in no plan cache, so every new process compiles it again)")
    elif pv.artifact == "compiled now":
        runs = (f"{pv.compile_mode} artifact compiled now in {pv.compile_s:.1f} s "
                f"({pv.artifact_bytes / 1e6:.2f} MB, batch {'dynamic' if pv.dynamic_batch else 'static'})"
                + (f", stored as {pv.artifact_key}" if pv.cache_path else ""))
    else:
        runs = f"eager torch on {plan.device}; compile {pv.compile_mode!r}: {pv.compile_reason}"
    if pv.artifact and pv.load_check_s:
        runs += f"; loaded first in a child process, which it did not crash ({pv.load_check_s:.1f} s)"
    lines = [
        f"trnplan plan — {p.describe()}",
        f"  digest     {p.digest()}",
        f"  origin     {origin}{forced}",
        *([f"  note       {pv.fingerprint_note}"] if pv.fingerprint_note else []),
        f"  runs       {runs}",
        "  backend    " + ", ".join(f"{k} {v}" for k, v in pv.fingerprint.items()),
        f"  tree       {tree}",
        f"  predicted  {_time(tree.time_us)}, {_si(tree.flops)} flop, {_si(tree.bytes)}B moved, "
        f"{tree.launches:.0f} ops; relative L2 error ≤ {tree.error:.1e} (bound {plan.tol:.0e})",
        *([f"  measured   {_time(tree.measured_us)} per call (median, effort {pv.effort})"]
          if tree.measured_us is not None else []),
        *([f"  accuracy   {describe_measured(tree.measured_error)}"] if tree.measured_error is not None else []),
        *([f"  probe      {pv.probe}; {pv.probe_origin}"] if getattr(pv, "probe", "") else []),
        f"  scale      {p.scale:.6g} (norm={p.norm!r})",
        *([f"  cores      {_cores_line(plan)}"] if p.cores > 1 and p.device != "neuron" else []),
        *([f"  bucket     {pv.bucket}"] if getattr(pv, "bucket", "") else []),
        f"  cost model {plan.profile_name!r} profile, {pv.calibration or 'not calibrated (effort measure calibrates it)'}",
        *([f"  libraries  {_libraries()}"] if p.device == "cpu" else []),
        "",
        f"plan tree (each line: the subtree's predicted totals on the {plan.profile_name!r} cost profile)",
    ]
    rows = [("  " * d + _node_line(node), node) for d, node in tree.walk()]
    width = max(len(r[0]) for r in rows) + 2
    for text, node in rows:
        lines.append(
            f"  {text:<{width}} {_si(node.flops):>7} flop  {_si(node.bytes):>7}B  "
            f"{_time(node.time_us):>10}  err ≤ {node.error:.1e}"
        )
    if pv.measurement is not None:
        lines += ["", *measure_lines(pv.measurement)]
    lines += ["", "candidates at the top level"]
    if not plan.candidates:
        lines.append("  (not recorded with this wisdom)")
        return "\n".join(lines)
    width = max(len(c.solver) for c in plan.candidates) + 2
    for c in plan.candidates:
        pred = f"{_time(c.node.time_us):>10}  err {c.node.error:.1e}" if c.node is not None else f"{'—':>10}  {'':11}"
        why = c.reason if c.verdict != CHOSEN or pv.measurement is not None else f"cheapest predicted: {plan.tree}"
        lines.append(f"  {c.solver:<{width}} {c.verdict:<24} {pred}  {why}")
    return "\n".join(lines)


def _cores_line(plan) -> str:
    """explain()'s account of cores=C: which nodes split their batch, and the predicted speedup."""
    from trnplan.planner.multicore import shard_sizes

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
    from trnplan.kernels import hostlib

    found = [f"torch.fft {torch.__version__}"]
    absent = []
    for name, version in hostlib.available().items():
        (found if version else absent).append(f"{name} {version}" if version else name)
    return "available: " + ", ".join(found) + (f"; not installed: {', '.join(absent)}" if absent else "")


# ---------------------------------------------------------------------- plan_many
_LRU: OrderedDict = OrderedDict()
_DEFAULT_CACHE = object()  # sentinel: the process-wide default plan cache
_LRU_LOCK = threading.Lock()


def clear_plan_cache() -> None:
    """Empty the process-wide in-process plan cache."""
    with _LRU_LOCK:
        _LRU.clear()


def plan_cache_info() -> dict:
    """Size and capacity of the in-process plan cache."""
    with _LRU_LOCK:
        return {"size": len(_LRU), "maxsize": config.plan_lru_size()}


def _check_supported(problem: Problem, effort: str) -> None:
    unsupported = get_backend(problem.device).precision_unsupported_reason(problem.precision)
    if unsupported is not None:
        raise PlanningError(unsupported)
    if problem.cores != 1 and problem.device == "cuda":
        from trnplan.backends.cuda import CORES_ON_CUDA

        raise PlanningError(CORES_ON_CUDA)
    if effort not in EFFORTS:
        raise ValueError(f"effort must be one of {', '.join(map(repr, EFFORTS))}; got {effort!r}")


def _resolve_device(problem: Problem, device) -> torch.device:
    backend = get_backend(problem.device)
    reason = backend.unavailable_reason()
    if reason is not None:
        raise BackendUnavailable(reason)
    if problem.device == "neuron":
        return torch.device("cpu")  # a traced Neuron model takes and returns host tensors
    dev = torch.device(device)
    if dev.type == "cpu":
        return torch.device("cpu")  # torch has one CPU device: "cpu:0" tensors report "cpu"
    if dev.type == "cuda":
        index = torch.cuda.current_device() if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        dev = torch.device("cuda", index)
    return dev


def plan_many(
    shape,
    batch: int = 1,
    *,
    kind: str = "c2c",
    inverse: bool | None = None,
    dtype=torch.complex64,
    precision: str | None = None,
    norm: str | None = "backward",
    device="cpu",
    cores: int = 1,
    strategy: str | None = None,
    effort: str = "estimate",
    tol: float | None = None,
    cache=_DEFAULT_CACHE,
    compile: str = "auto",
    verify: bool = False,
) -> Plan:
    """Plan ``batch`` transforms of ``shape`` and return a ready :class:`Plan`.

    Parameters
    ----------
    shape : int or sequence of int
        Transform shape over the input's trailing axes: ``4096`` or ``(4096,)`` for 1-D,
        ``(256, 256)`` for 2-D, ``(32, 64, 64)`` for 3-D. For r2c and c2r, the *real* shape.
    batch : int, default 1
        Number of transforms per :meth:`Plan.execute` call; the leading dimensions of the input
        must multiply to it.
    kind : {"c2c", "r2c", "c2r"}, default "c2c"
        Complex-to-complex; real-to-complex (forward, output ``shape[-1] // 2 + 1`` values on
        the last axis, as torch.fft.rfftn); complex-to-real (inverse, output ``shape``, as
        torch.fft.irfftn with ``s=shape``).
    inverse : bool, optional
        Forward (``exp(-2πi jk/n)``) or inverse transform; default: forward for c2c and r2c,
        inverse for c2r (the only direction each real kind has).
    dtype : torch.dtype, default torch.complex64
        ``torch.complex64`` or ``torch.complex128``; for r2c/c2r also ``torch.float32`` /
        ``torch.float64``, naming the same precision by the real side's dtype.
    precision : {"fp32", "fp64", "bf16", "bf16x3", "bf16x6", "tf32", "auto"} or None
        Arithmetic; ``None`` means native to ``dtype`` (fp32 for complex64, fp64 for complex128).
        The reduced modes take complex64 data, keep it and all elementwise work in fp32, and
        change only the matrix-engine GEMMs: "bf16" rounds their operands to bf16 (≤ 4e-3),
        "bf16x3" splits each into two bf16 slices and sums three products (≤ 1e-5), "bf16x6"
        three slices and six products (≤ 5e-7), "tf32" allows TF32 tensor cores (CUDA only).
        "auto" lets the planner choose the mode *and* the strategy: the cheapest combination
        predicted to meet ``tol``. See docs/precision.md.
    norm : {"backward", "ortho", "forward"}, default "backward"
        Scaling with torch.fft's meaning: "backward" scales the inverse by 1/n, "forward" the
        forward by 1/n, "ortho" both by 1/√n.
    device : str or torch.device, default "cpu"
        ``"cpu"`` or ``"cuda"`` (optionally ``"cuda:1"``); ``"neuron"`` (Trainium, needs
        torch-neuronx, else :class:`~trnplan.core.errors.BackendUnavailable`): the plan takes and returns
        host tensors, its batch is bucketed (docs/trainium.md).
    cores : int, default 1
        Cores to split the work over (CPU worker threads; NeuronCores on Trainium). With C > 1
        the ``multicore`` solver is a candidate at every node: it cuts the batch into
        ``min(C, batch)`` shards run concurrently by child plans (one per distinct shard size),
        and a single large transform is split through its four-step / nd passes, which are
        batches. The cost model (or ``effort="measure"``) decides whether splitting pays; it
        rarely does on a CPU where torch already uses every core. Not for ``device="cuda"``.
    strategy : str, optional
        Force the root solver (``"stockham"``) or a whole tree as an s-expression, e.g.
        ``"(four-step 4096=64x64 (dft-gemm) (stockham))"`` (see ``str(plan.tree)``).
    effort : {"estimate", "measure", "patient", "wisdom_only"}, default "estimate"
        How hard to plan, as FFTW's flags. "estimate" picks by the cost model alone.
        "measure" times the model's best K candidate trees on the device (K = 6, set
        ``TRNPLAN_MEASURE_TOP_K``) and keeps the fastest whose measured error meets the bound;
        "patient" times every candidate the planner enumerates. Both stop timing new candidates
        after the time limit (:func:`trnplan.set_timelimit`, ``TRNPLAN_TIMELIMIT``; default 5 s
        and 30 s), store every candidate's predicted and measured times in the wisdom entry (a
        later call replays the winner without timing), and recalibrate the cost model for this
        machine. Stored wisdom of a higher effort answers a lower one. "wisdom_only" never plans
        or compiles, and raises WisdomMiss when the cache has no answer
        (``TRNPLAN_WISDOM_ONLY=1`` sets it for the process). See docs/user-guide.md.
    tol : float, optional
        Relative L2 error bound (vs float64 numpy.fft on random input) every candidate must be
        predicted to meet. Default: the precision's bar — fp32 5e-7, fp64 1e-13, bf16 4e-3,
        bf16x3 1e-5, bf16x6 5e-7, tf32 2e-3; "auto" targets fp32's 5e-7 for complex64 (fp64's
        1e-13 for complex128). A tol the precision cannot reach raises PlanningError naming the
        smallest bound it reaches and a precision that meets the tol.
    cache : PlanCache or None, optional
        The on-disk plan cache (default: :func:`trnplan.cache.default_cache`, at
        ``$TRNPLAN_CACHE_DIR`` or ``~/.cache/trnplan``); ``None`` bypasses it.
    compile : {"auto", "eager", "aot", "inductor", "neuron"}, default "auto"
        The artifact to build and cache: none (eager), an AOTInductor package (aot), a traced
        NEFF (neuron, on Trainium); "auto" is eager on the CPU and on CUDA (an AOT build takes
        30–90 s; ask for it, or precompile). "inductor" compiles the plan with ``torch.compile``
        in this process at plan time (seconds; fused elementwise kernels) and stores nothing:
        the fused path where AOT packages cannot be loaded. See docs/cache.md.
    verify : bool, default False
        Run the plan once on seeded random input against float64 numpy.fft, keep the measured
        error (``plan.tree.measured_error``, stored in the wisdom entry, shown by explain()), and
        raise PlanningError if it is over the bound (see :func:`trnplan.plan.verify.verify_plan`).

    Returns
    -------
    Plan

    Raises
    ------
    ValueError, TypeError
        Invalid arguments (the message names the argument and what is accepted).
    trnplan.core.errors.PlanningError
        A forced strategy does not apply (the message lists the solvers that do); ``tol`` is out
        of reach for the precision; tf32 off CUDA; a verified plan measured over its bound.
    trnplan.core.errors.NotSupportedYet
        A valid request this version does not build yet.
    trnplan.core.errors.BackendUnavailable
        The device cannot run here (no GPU, no Neuron SDK).
    trnplan.core.errors.WisdomMiss
        ``wisdom_only`` and the cache has no plan (the message names the differing fingerprint).
    trnplan.cache.UntrustedCacheError
        An artifact would be loaded from a cache directory other users can write.

    Examples
    --------
    >>> import torch, trnplan
    >>> plan = trnplan.plan_many((4096,), batch=64)
    >>> x = torch.randn(64, 4096, dtype=torch.complex64)
    >>> y = plan.execute(x)
    >>> bool(torch.allclose(y, torch.fft.fft(x), atol=1e-3))
    True
    """
    return _plan_many(shape, batch, kind=kind, inverse=inverse, dtype=dtype, precision=precision, norm=norm,
                      device=device, cores=cores, strategy=strategy, effort=effort, tol=tol, cache=cache,
                      compile=compile, use_lru=True, verify=verify)


def _plan_many(shape, batch, *, kind, inverse, dtype, precision, norm, device, cores, strategy, effort, tol,
               cache, compile, use_lru: bool, verify: bool = False) -> Plan:
    """plan_many's work; ``use_lru=False`` (precompile) always goes to the on-disk cache."""
    problem = Problem.create(shape, batch, kind=kind, inverse=inverse, dtype=dtype, precision=precision,
                             norm=norm, device=device, cores=cores)
    _check_supported(problem, effort)
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0):
        raise ValueError(f"tol must be a positive float (a relative L2 error bound), got {tol!r}")
    dev = _resolve_device(problem, device)
    spec = parse_strategy(strategy, solver_names()) if strategy is not None else None
    cache = default_cache() if cache is _DEFAULT_CACHE else cache
    if cache is not None and not isinstance(cache, PlanCache):
        raise TypeError(f"cache must be a trnplan.cache.PlanCache or None, got {type(cache).__name__}")
    if compile not in ("auto", "eager", "aot", "inductor", "neuron"):
        raise ValueError(f"compile must be 'auto', 'eager', 'aot', 'inductor' or 'neuron'; got {compile!r}")
    wisdom_only = effort == "wisdom_only" or config.wisdom_only()
    if not use_lru:
        return _build_plan(problem, spec, dev, tol, cache, compile, wisdom_only, verify, effort)
    key = (problem.digest(), str(spec) if spec else None, str(dev), tol,
           str(cache.path) if cache is not None else None, compile, wisdom_only, bool(verify), effort)
    with _LRU_LOCK:
        plan = _LRU.get(key)
        if plan is not None:
            _LRU.move_to_end(key)
            plan.cache_hits += 1
            return plan
    plan = _build_plan(problem, spec, dev, tol, cache, compile, wisdom_only, verify, effort)
    with _LRU_LOCK:  # another thread may have built the same plan meanwhile: keep the first
        existing = _LRU.get(key)
        if existing is not None:
            existing.cache_hits += 1
            return existing
        _LRU[key] = plan
        while len(_LRU) > config.plan_lru_size():
            _LRU.popitem(last=False)
    return plan


def _build_plan(problem: Problem, spec: Spec | None, dev: torch.device, tol: float | None, cache,
                compile: str, wisdom_only: bool, verify: bool = False, effort: str = "estimate") -> Plan:
    planned = problem
    if problem.device == "neuron":  # a NEFF has a fixed batch: plan and compile the bucket (backends/neuron.py)
        from trnplan.backends import neuron

        planned = neuron.bucketed(problem)
    try:
        got = provide(planned, spec, dev, tol, cache, compile, wisdom_only, effort)
    except PlanningError as exc:  # re-raised here: the recursion's traceback says nothing the message doesn't
        raise PlanningError(str(exc)) from None
    runner = got.runner
    if problem.device == "neuron":
        got.provenance.bucket = neuron.bucket_note(problem, planned, on_device=runner is not None)
        if runner is not None:  # shards of the bucket, one per NeuronCore, padded and cropped
            runner = neuron.NeuronExecutor(runner, planned.batch, problem.cores, get_backend("neuron"))
    plan = Plan(problem, got.tree, got.candidates, got.module, dev, provenance=got.provenance, runner=runner,
                strategy=str(spec) if spec else None, tol=got.tol,
                profile_name=get_backend(problem.device).profile.name)
    plan._plan_options = {"tol": tol, "cache": cache, "compile": compile,
                          "effort": "estimate" if effort == "wisdom_only" else effort}
    if verify:
        from trnplan.plan.verify import verify_plan

        verify_plan(plan, cache)
    return plan
