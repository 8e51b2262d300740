"""Plan: the executable (Problem + PlanNode tree + lowered module + artifact runner).

Built by :func:`trnplan.plan.api.plan_many` (and, to time candidates, by the build pipeline in
:mod:`trnplan.plan.provide`); runs with :meth:`Plan.execute`, explains itself with
:meth:`Plan.explain` (:mod:`trnplan.plan.explain`).
"""

from __future__ import annotations

import functools
import math
from typing import overload

import numpy as np
import torch

from trnplan.backends import get_backend
from trnplan.cache import default_cache
from trnplan.cache.store import PlanCache
from trnplan.core.errors import ComplexOnDevice, WisdomMiss
from trnplan.core.node import PlanNode
from trnplan.core.problem import Problem
from trnplan.kernels import hostlib
from trnplan.kernels.complex import pack, pack_arith, unpack_arith
from trnplan.plan.autograd import PlanFunction, SplitFunction
from trnplan.plan.explain import render_explain, render_short
from trnplan.plan.memo import PLANS
from trnplan.plan.request import make_request
from trnplan.plan.traffic import count_plan
from trnplan.plan.validation import check_layout, check_pair, check_tensor, dtype_name, wanted
from trnplan.planner.planner import DEFAULT_STRATEGIES, PlanModule
from trnplan.planner.r2r import adjoint_factors
from trnplan.planner.real import hermitian_weights


def _views(z: torch.Tensor):
    return z.real, z.imag


#: torch.fft's transforms by the dims they take when no ``dim`` is given (None: every dim, which a
#: call on a batched tensor must not be left to)
_TORCH_FFT = {**dict.fromkeys((torch.fft.fft, torch.fft.ifft, torch.fft.rfft, torch.fft.irfft), -1),
              **dict.fromkeys((torch.fft.fft2, torch.fft.ifft2, torch.fft.rfft2, torch.fft.irfft2), (-2, -1)),
              **dict.fromkeys((torch.fft.fftn, torch.fft.ifftn, torch.fft.rfftn, torch.fft.irfftn), None)}
#: the N-D functions' 2-D twins (the same transform when ``dim=(-2, -1)``: their default)
_TWO_D = {torch.fft.fftn: torch.fft.fft2, torch.fft.ifftn: torch.fft.ifft2, torch.fft.rfftn: torch.fft.rfft2,
          torch.fft.irfftn: torch.fft.irfft2}


def _any_leading(call) -> bool:
    """Whether a root library call takes its input with any leading dims, not only ``(batch, *in_shape)``.

    torch.fft's functions transform the dims named by a negative ``dim`` and loop over every
    leading dim, so the plan's native call on an unbatched ``(256,)`` or a ``(8, 64, 64)`` c2c over
    the last dim gives what it gives on the ``(1, 256)`` or ``(512, 64)`` reshape. Skipping those
    two reshapes (and :meth:`Plan.run`) is most of the drop-in's per-call cost on small shapes
    (+5.6 µs over torch.fft for an unbatched 256, busy machine). Other leaves (pyFFTW, mkl_fft,
    multicore shards) read ``x.shape[0]`` as the batch: False for them, but for a leaf that says it
    takes any (its ``any_leading`` attribute: pocketfft's DCT/DST over the trailing axes,
    :func:`trnplan.kernels.hostlib.r2r_call`; a (2, 4, 1024) DCT-II ran 11 µs over scipy.fft's
    call through :meth:`Plan.run`'s reshapes, measured here).
    """
    if getattr(call, "any_leading", False):
        return True
    fn, kw = (call.func, call.keywords) if isinstance(call, functools.partial) else (call, {})
    if isinstance(call, functools.partial) and call.args or fn not in _TORCH_FFT:
        return False
    dims = kw.get("dim", _TORCH_FFT[fn])
    if dims is None:
        return False
    dims = dims if isinstance(dims, tuple) else (dims,)
    return not dims or max(dims) < 0  # every dim negative (no generator: the call is on every plan's build)


def _lean(call, ndim: int):
    """A torch.fft call of :func:`_any_leading` without the keywords that repeat the function's
    defaults for an input of ``ndim`` dims: the same transform, less argument parsing.

    torch parses every keyword on every call: ``functools.partial(torch.fft.fftn, dim=(-2, -1),
    norm="backward")`` cost ~0.5 µs more per call than ``torch.fft.fft2`` here, and an N-D plan's
    ``dim=(-3, -2, -1)`` on a 3-D input ~0.9 µs more than ``torch.fft.fftn`` (busy 2-core machine).
    Dropped: ``norm="backward"``; irfft's ``n`` and irfftn's ``s`` where the last length is even
    (their default is ``2·(m − 1)`` for an input of last size ``m = n // 2 + 1``, which execute has
    checked, as it has every other size); a ``dim`` equal to the default (``-1``; every dim of this
    input for the N-D functions); and ``fftn(dim=(-2, -1))`` becomes ``fft2``.
    """
    if not isinstance(call, functools.partial):
        return call
    fn, kw = call.func, dict(call.keywords)
    if kw.get("norm") == "backward":
        del kw["norm"]
    if fn is torch.fft.irfft and kw.get("n", 1) % 2 == 0:
        del kw["n"]
    if fn is torch.fft.irfftn and "dim" in kw and kw.get("s", (1,))[-1] % 2 == 0:
        del kw["s"]
    dims = kw.get("dim")
    if fn in _TWO_D and dims == (-2, -1) and "s" not in kw:
        fn = _TWO_D[fn]
    if dims == _TORCH_FFT[fn] or (_TORCH_FFT[fn] is None and dims == tuple(range(-ndim, 0)) and "s" not in kw):
        del kw["dim"]
    return functools.partial(fn, **kw) if kw else fn


def adjoint_arguments(problem: Problem) -> dict:
    """plan_many's arguments (less device and how to plan) for the adjoint of ``problem``: the
    plan autograd's backward pass runs (:meth:`Plan.adjoint`), and what precompile's ``backward``
    key plans. The adjoint of a DFT with scale s is the opposite-direction DFT with the same
    scale: ``inverse`` flips, ``norm`` mirrors ("backward" ↔ "forward"), r2c and c2r swap. A
    DCT/DST's adjoint is the unscaled forward transform of its partner type, between diagonal
    weights (:func:`trnplan.planner.r2r.adjoint_factors`)."""
    p = problem
    if p.r2r:  # Tᵀ = A ⊙ U'(B ⊙ ·): U' the unscaled forward transform of the partner type (Plan.backward)
        kind, _, _ = adjoint_factors(p.kind, p.shape[-1], p.inverse, p.norm)
        return {"shape": p.shape, "batch": p.batch, "kind": kind, "inverse": False, "dtype": p.torch_dtype,
                "precision": p.precision, "norm": "backward", "cores": p.cores}
    args = {"shape": p.shape, "batch": p.batch, "kind": {"c2c": "c2c", "r2c": "c2r", "c2r": "r2c"}[p.kind],
            "inverse": not p.inverse, "dtype": p.torch_dtype, "precision": p.precision,
            "norm": {"backward": "forward", "forward": "backward", "ortho": "ortho"}[p.norm], "cores": p.cores}
    if p.modes:  # a truncated transform's adjoint keeps the same frequencies (zero-fill is the cut's adjoint)
        args["modes"] = p.modes
    if p.low:
        args["low"] = p.low
    return args


def _restore_plan(*args) -> Plan:
    """Unpickle a :class:`Plan` (its ``__reduce__``): rebuild it from its request and tree.

    ``args``: ``(request, tree, host_wisdom)``, ``request`` plan_many's arguments as a dict (the
    cache as ``"default"``, a path or None); a pickle made before plans stopped carrying
    plan_many has it in front, ``(plan_many, request, tree, host_wisdom)``, and loads the same.

    A plan with pyFFTW leaves carries the pickling process's FFTW wisdom (``host_wisdom``), given
    to FFTW here before anything is lowered: FFTW_ESTIMATE reads wisdom for sub-problems too, so
    without it a spawned worker's FFTW picked another algorithm and returned other last bits
    than the parent (found by the suite: measured planning earlier in the parent's run).

    First from the plan cache as it was made (``effort="wisdom_only"``: a lookup, and the stored
    artifact where there is one), so production under ``TRNPLAN_WISDOM_ONLY=1`` rebuilds without
    planning; where the cache has no answer, or answers with another tree (another machine's
    wisdom), the pickled tree is forced as the strategy, which replays it through its solvers
    without searching. Either way the plan is the one that was pickled.
    """
    request, tree, host_wisdom = args[-3:] if len(args) == 4 else (*args, None)[:3]
    hostlib.import_wisdom(host_wisdom)
    request = dict(request)
    where = request.pop("cache")
    cache = default_cache() if where == "default" else PlanCache(where) if where is not None else None
    if cache is not None:
        try:
            plan = PLANS.plan(make_request(**request, cache=cache, effort="wisdom_only"))
            if str(plan.tree) == tree:
                return plan
        except WisdomMiss:
            pass
    return PLANS.plan(make_request(**{**request, "strategy": tree, "effort": "estimate"}, cache=cache))


__all__ = ["Plan", "adjoint_arguments"]


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

    def __init__(self, request, tree: PlanNode, candidates, module: PlanModule, *, provenance, runner=None,
                 tol: float, profile_name: str, pipeline: bool = False):
        problem, device = request.problem, request.device
        #: the :class:`~trnplan.plan.request.PlanRequest` this plan was made for
        self.request = request
        self.problem, self._tree = problem, tree
        # a wisdom hit's are parsed from its record when first asked (explain(): 15 calls a hit
        # need not make, tools/count_calls.py)
        self._candidates = candidates if callable(candidates) else tuple(candidates)
        self.module, self.device = module, device
        # request.strategy, without the property's call
        self.provenance, self.strategy, self.tol = provenance, str(request.spec) if request.spec is not None else None, tol
        self.profile_name = profile_name
        # a compiled artifact runs the whole transform (norm included); the eager module stays
        # for the pair form's autograd, which an AOT/NEFF artifact does not carry
        self._runner = runner
        self.cache_hits = 0
        self._traffic = None  # trnplan.plan.traffic.Traffic, counted when explain() first asks
        self._in_flat = (problem.batch, math.prod(problem.in_shape))
        self._lib_in = (problem.batch, *problem.in_shape)
        # (shape, dtype, device) signatures already validated: repeated calls skip the checks
        self._accepted: set = set()
        #: of those, the ones a root library call takes as they are (``(batch, *in_shape)``, or any
        #: leading dims for torch.fft's own calls), mapped to that call: ``direct_calls[sig](x)`` is
        #: ``execute(x)`` for a tensor of signature ``sig`` that does not require grad. execute's fast
        #: path (no run(), no reshape: 0.2 µs of its ~0.6 µs at n=256), and trnplan.fft's for a seen call
        self.direct_calls: dict = {}
        # what may cross the boundary is the device's backend's to say: complex by views on the host;
        # on an accelerator split and packed by arithmetic (torch.complex has no lowering on torch-xla:
        # aten::complex.out in executed_fallback_ops(), and its dynamo bridge has no kernel for the
        # view ops); on a NeuronCore not at all (execute_split only)
        self._boundary = request.backend.boundary(device)
        # pack on the host: a view where the tree's output is one interleaved buffer (a GEMM leaf's),
        # else torch.complex
        self._pack = pack if self._boundary.views else pack_arith
        self._unpack = _views if self._boundary.views else unpack_arith
        self._native = None
        if runner is None and hasattr(module.root, "library_call"):
            self._native = module.root.library_call(problem.norm)
        # torch.fft's own call takes any leading dims: no reshape in or out, whatever the batch's shape
        self._native_any_lead = self._native is not None and _any_leading(self._native)
        self._adjoint: Plan | None = None
        self._weights: dict = {}  # device -> Hermitian weights of the real kinds' backward
        #: made by the plan layer's pipeline (plan_many), which can plan it again from its request:
        #: its adjoint, and on unpickling (a Plan made otherwise, e.g. to time a candidate, cannot)
        self._pipeline = pipeline

    @property
    def candidates(self) -> tuple:
        """Every solver the planner considered at the top level, with its verdict."""
        if callable(self._candidates):
            self._candidates = tuple(self._candidates())
        return self._candidates

    @property
    def tree(self) -> PlanNode:
        """How: the planner's decision (with its measured error once verified); fixed at construction."""
        return self._tree

    # ------------------------------------------------------------------ running
    @overload
    def execute(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor: ...

    @overload
    def execute(self, x: tuple[torch.Tensor, torch.Tensor] | list[torch.Tensor],
                out: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]: ...

    def execute(self, x, out=None):
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

        out : torch.Tensor or (torch.Tensor, torch.Tensor), optional
            Where to write the result, as FFTW's and pyFFTW's output arrays and torch.fft's ``out=``:
            a tensor (a pair for the pair form) of exactly the result's shape, dtype and device
            (:attr:`output_shape` for an input of :attr:`input_shape`); returned. It may be
            ``x`` itself where the shapes and dtypes allow (c2c): the transform is computed,
            then written over the input. Not with autograd (torch's rule for ``out=``).

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
        if out is not None:
            return self._execute_into(x, out)
        if isinstance(x, torch.Tensor):
            signature = (x.shape, x.dtype, x.device)
            direct = self.direct_calls.get(signature)
            if direct is not None and not x.requires_grad:
                return direct(x)
            p = self.problem
            if signature not in self._accepted:
                check_tensor(p, x)
                check_layout(p, self.device, x, "x")
                if not (self._boundary.complex or (p.real_input and p.real_output)):
                    self._boundary = get_backend(p.device).boundary(self.device)  # asked again: it may have changed
                    if not self._boundary.complex:
                        raise self._complex_refusal("execute() of a tensor")
                self._accept(signature)
            if x.requires_grad and torch.is_grad_enabled():
                return PlanFunction.apply(self, x)
            return self.run(x)
        p = self.problem
        if isinstance(x, (tuple, list)):
            if p.real_input:
                raise TypeError(f"this {p.kind} plan takes one real {dtype_name(p.real_dtype)} tensor, not a pair")
            return self.execute_split(x)  # the pair form of c2c and c2r is the split interface
        raise TypeError(
            f"execute() takes {wanted(p)}; got {type(x).__name__}"
        )

    __call__ = execute

    def _execute_into(self, x, out):
        """:meth:`execute` with ``out=``: the result written into ``out`` (checked first)."""
        pair_out = isinstance(x, (tuple, list)) and not self.problem.real_output  # c2c's pair form
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if not all(isinstance(t, torch.Tensor) for t in outs) or len(outs) != (2 if pair_out else 1):
            raise TypeError(f"out must be {'a (re, im) pair of tensors' if pair_out else 'one tensor'}, as "
                            f"execute() returns for this input; got {type(out).__name__}")
        if torch.is_grad_enabled() and any(t.requires_grad for t in outs):
            raise RuntimeError("execute(..., out=...) does not support automatic differentiation for outputs "
                               "with requires_grad=True (as torch.fft's out=); call execute(x) instead")
        y = self.execute(x)
        ys = y if isinstance(y, tuple) else (y,)
        for got, want in zip(outs, ys):
            if got.shape != want.shape or got.dtype != want.dtype or got.device != want.device:
                raise ValueError(f"out has shape {tuple(got.shape)}, {got.dtype} on {got.device}; this call's result "
                                 f"is {tuple(want.shape)}, {want.dtype} on {want.device}: pass a tensor like that")
        with torch.no_grad():
            for got, want in zip(outs, ys):
                got.copy_(want)
        return out

    def execute_split(self, x):
        """Run the transform on split ``(re, im)`` float tensors (FFTW's ``fftw_execute_split_dft``,
        ``_split_dft_r2c`` and ``_split_dft_c2r``): no complex tensor is made anywhere.

        The one interface on a device without complex data (a NeuronCore), and available on every
        device, for every kind and rank.

        Parameters
        ----------
        x : (torch.Tensor, torch.Tensor) or torch.Tensor
            c2c and c2r: a pair ``(re, im)`` of real tensors of the plan's real dtype (float32 for
            complex64), equal shapes, trailing shape the plan's input shape (c2r: the half spectrum
            ``(*shape[:-1], shape[-1] // 2 + 1)``); r2c: one real tensor of trailing shape ``shape``.
            Leading dimensions multiply to the plan's batch; on the plan's device.

        Returns
        -------
        (torch.Tensor, torch.Tensor) or torch.Tensor
            c2c and r2c: ``(re, im)`` of the output (r2c: the half spectrum); c2r: the real output.
            Leading dimensions as the input's.

        Raises
        ------
        TypeError
            A complex tensor, a pair where one tensor is wanted (r2c) or the reverse, a wrong dtype.
        ValueError
            The shape, batch or device does not match the plan.

        Notes
        -----
        Differentiable with respect to ``re`` and ``im``: the backward pass runs the adjoint plan's
        :meth:`execute_split` (on the device, in the split form too).
        """
        p = self.problem
        if p.real_input:
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"execute_split() of this r2c plan takes one real {dtype_name(p.real_dtype)} tensor; "
                                f"got a {type(x).__name__}")
            check_tensor(p, x)
            check_layout(p, self.device, x, "x")
            inputs = (x,)
        else:
            if not isinstance(x, (tuple, list)):
                raise TypeError(f"execute_split() of this {p.kind} plan takes a pair (re, im) of "
                                f"{dtype_name(p.real_dtype)} tensors; got a {type(x).__name__}"
                                + (" (for a complex tensor use execute())" if isinstance(x, torch.Tensor)
                                   and self._boundary.complex else ""))
            inputs = check_pair(p, x, self.device)
        if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
            out = SplitFunction.apply(self, *inputs)
        else:
            out = self._run_split(*inputs)
        return out if len(out) == 2 else out[0]

    def _run_split(self, *inputs: torch.Tensor) -> tuple:
        """The transform of validated split inputs (shape ``(*lead, *in_shape)``): a tuple of
        ``(re, im)`` or ``(real,)`` of shape ``(*lead, *out_shape)``."""
        p = self.problem
        with torch.no_grad():
            shaped = getattr(self._runner, "run_shaped", None)
            if shaped is not None:  # an accelerator's bucket graph: reshapes inside it or on the host
                return tuple(shaped("split", inputs))
            lead = inputs[0].shape[: inputs[0].ndim - p.rank]
            flat = tuple(t if t.shape == self._in_flat else t.reshape(self._in_flat) for t in inputs)
            out = (self._runner or self.module)(*flat)
            want = (*lead, *p.out_shape)
            return tuple(t if t.shape == want else t.reshape(want) for t in out)

    def _backward_split(self, grads: tuple) -> tuple:
        """The gradients of the split inputs, given those of the split outputs: the adjoint plan's
        :meth:`execute_split`, with the Hermitian weights for r2c/c2r (as :meth:`backward`)."""
        p, adj = self.problem, self.adjoint()
        if p.kind == "c2c":
            return adj.execute_split(grads)
        if p.r2r:  # real to real: the adjoint between its diagonal weights, as backward()
            a, b = self._r2r_weights(grads[0].device)
            return (adj.execute_split(grads[0] * b) * a,)
        w = self._hermitian_weights(grads[0].device)
        if p.kind == "r2c":
            return (adj.execute_split((grads[0] / w, grads[1] / w)),)
        return tuple(t * w for t in adj.execute_split(grads[0]))

    def _hermitian_weights(self, device) -> torch.Tensor:
        weights = self._weights.get(device)
        if weights is None:  # built once per device, not per backward call
            p = self.problem
            c = hermitian_weights(p.shape[-1])[: p.modes[-1] if p.modes else None]  # a truncated plan's kept bins
            weights = self._weights.setdefault(device, torch.as_tensor(c, dtype=p.real_dtype).to(device))
        return weights

    def _complex_refusal(self, what: str) -> ComplexOnDevice:
        p = self.problem
        inputs = (f"x (real {dtype_name(p.real_dtype)})" if p.real_input
                  else f"(re, im) ({dtype_name(p.real_dtype)} each)")
        outputs = "the real output" if p.real_output else "(re, im)"
        return ComplexOnDevice(
            f"{what} on {self.device}: this {p.kind} plan takes or returns complex tensors, and {self._boundary.why}. "
            f"Use plan.execute_split({inputs}), which returns {outputs}: split a complex tensor on the host "
            f"(z.real, z.imag) before moving it, pack on the host after (torch.complex(re.cpu(), im.cpu()))")

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """The transform of a tensor :meth:`execute` has validated, outside autograd (what the
        autograd Function and measured planning call; users call :meth:`execute`)."""
        p = self.problem
        if self._native is not None and (self._native_any_lead or x.shape == self._lib_in):
            return self._native(x)  # already (batch, *in_shape), or torch.fft's call: no reshape (µs each)
        lead = x.shape[: x.ndim - p.rank]
        if self._native is not None:
            y = self._native(x.reshape(self._lib_in))
        else:
            shaped = getattr(self._runner, "run_shaped", None)
            if shaped is not None:  # an accelerator's bucket graph with the complex boundary inside it
                return shaped("complex", (x,))[0]
            z = x if x.shape == self._in_flat else x.reshape(self._in_flat)
            out = self._split_module()(z) if p.real_input else self._split_module()(*self._unpack(z))
            y = out[0] if p.real_output else self._pack(out[0], out[1])
            if x.shape == self._in_flat and p.rank == 1:  # (batch, n) in, (batch, n_out) out: no reshape
                return y
        return y.reshape(*lead, *p.out_shape)

    def adjoint(self) -> Plan:
        """The plan of the adjoint transform (cached), which autograd's backward pass runs.

        The adjoint of a DFT with scale s is the opposite-direction DFT with the same scale, so
        the adjoint plan flips ``inverse`` and mirrors ``norm`` ("backward" ↔ "forward"). For real
        transforms it swaps r2c and c2r; :meth:`backward` applies the Hermitian weights.
        """
        if self._adjoint is None:
            p = self.problem
            if not self._pipeline:
                raise RuntimeError("this Plan was not made by trnplan.plan_many, which is what plans its adjoint")
            try:
                self._adjoint = PLANS.plan(self._adjoint_request())
            except WisdomMiss as exc:
                raise WisdomMiss(
                    f"the backward pass (autograd) of the plan for {p.describe()} runs its adjoint plan, which "
                    f"the plan cache does not hold: {exc}. Precompile the adjoint too: `backward = true` in the "
                    f"manifest entry, or `trnplan precompile --backward ...`, or trnplan.precompile([{{..., "
                    f"'backward': True}}])") from None
        return self._adjoint

    def _adjoint_request(self):
        """The request of the adjoint plan: the adjoint problem (:func:`adjoint_arguments`) on this
        plan's device, planned as this plan was (its cache, compile mode, bound and effort)."""
        req = self.request
        strategy = None
        forced_default = self.strategy in DEFAULT_STRATEGIES or f"({self.strategy})" in DEFAULT_STRATEGIES
        if forced_default and req.cache is None:
            # the drop-in's plan of a new shape (the device's own FFT, no search, stored nowhere):
            # its adjoint is the device's own FFT too, planned the same way
            strategy = self.strategy
        return make_request(**adjoint_arguments(self.problem), device=req.backend.device_argument(self.device),
                            strategy=strategy, effort="estimate" if req.effort == "wisdom_only" else req.effort,
                            tol=req.tol, cache=req.cache, compile=req.compile)

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
        if p.r2r:
            a, b = self._r2r_weights(g.device)
            return adj.execute(g * b) * a
        weights = self._hermitian_weights(g.device)
        if p.kind == "r2c":  # Re(Σ_k g_k ω^{-jk}) over the half spectrum = c2r of g with weights 1/c_k
            return adj.execute(g / weights)
        return adj.execute(g.real.contiguous() if g.is_complex() else g) * weights  # c2r: c_k · rfft(g)

    def _r2r_weights(self, device) -> tuple[torch.Tensor, torch.Tensor]:
        """(A, B) of the r2r adjoint over the whole shape: the outer products of each axis's factors."""
        weights = self._weights.get(device)
        if weights is None:  # built once per device, not per backward call
            p = self.problem
            a, b = np.ones(()), np.ones(())
            for n in p.shape:
                _, an, bn = adjoint_factors(p.kind, n, p.inverse, p.norm)
                a, b = np.multiply.outer(a, an), np.multiply.outer(b, bn)
            weights = tuple(torch.as_tensor(w, dtype=p.real_dtype).to(device) for w in (a, b))
            self._weights[device] = weights
        return weights

    def _split_module(self, *inputs):
        """The compiled artifact, unless a gradient is needed (artifacts carry no autograd)."""
        if self._runner is None or (torch.is_grad_enabled() and any(t.requires_grad for t in inputs)):
            return self.module
        return self._runner

    def _accept(self, signature) -> None:
        if len(self._accepted) < 64:  # bounded: a plan sees few distinct layouts
            self._accepted.add(signature)
            if self._native_any_lead:
                self.direct_calls[signature] = _lean(self._native, len(signature[0]))
            elif self._native is not None and signature[0] == self._lib_in:
                self.direct_calls[signature] = self._native

    # ------------------------------------------------------------------ shapes
    @property
    def input_shape(self) -> tuple:
        """The shape :meth:`execute` takes: ``(batch, *shape)`` (c2r: last axis ``shape[-1] // 2 + 1``).

        Any leading dimensions multiplying to :attr:`batch` are accepted too."""
        return (self.problem.batch, *self.problem.in_shape)

    @property
    def output_shape(self) -> tuple:
        """The shape :meth:`execute` returns for an input of :attr:`input_shape`."""
        return (self.problem.batch, *self.problem.out_shape)

    @property
    def batch(self) -> int:
        """Transforms per :meth:`execute` call."""
        return self.problem.batch

    # ------------------------------------------------------------------ pickling
    def __reduce__(self):
        """Pickle as the request and the tree (never the module, closures or compiled artifact).

        Unpickling (:func:`_restore_plan`) rebuilds the plan in the loading process: from the
        plan cache where it has the plan, else by replaying the pickled tree. So plans of every
        solver pickle, ``multiprocessing`` can pass them, and ``torch.save`` of a module holding
        one works (load it with ``torch.load(..., weights_only=False)``, as any pickled module).
        """
        if not self._pipeline:
            raise TypeError("this Plan was not made by trnplan.plan_many, which is what rebuilds it on unpickling")
        p, made = self.problem, self.request
        cache = made.cache
        where = "default" if cache is not None and cache is default_cache() else (
            str(cache.path) if cache is not None else None)
        request = {"shape": p.shape, "batch": p.batch, "kind": p.kind, "inverse": p.inverse, "dtype": p.dtype,
                   "precision": p.precision, "norm": p.norm, "cores": p.cores, "strategy": self.strategy,
                   "device": str(self.request.backend.device_argument(self.device)), "tol": made.tol,
                   "compile": made.compile, "cache": where}
        if p.modes:
            request["modes"] = p.modes
        if p.low:
            request["low"] = p.low
        tree = str(self.tree)
        host_wisdom = hostlib.export_wisdom() if "pyfftw" in tree else None
        return (_restore_plan, (request, tree, host_wisdom))

    def __copy__(self) -> Plan:
        """A new Plan object sharing this one's module, artifact and adjoint (not a rebuild)."""
        clone = object.__new__(Plan)
        clone.__dict__.update(self.__dict__)
        return clone

    def __deepcopy__(self, memo) -> Plan:
        """As :meth:`__copy__`: a plan is an immutable executable, so ``copy.deepcopy`` of a model
        holding one (an EMA copy, say) shares its module and constants rather than re-planning."""
        return self.__copy__()

    # ------------------------------------------------------------------ explaining
    def traffic(self):
        """What this plan's module moves, counted on its lowered graph (:func:`trnplan.plan.traffic.count_plan`;
        captured once, then kept)."""
        if self._traffic is None:
            self._traffic = count_plan(self)
        return self._traffic

    def explain(self, full: bool = False) -> str:
        """Why this plan, as text.

        Parameters
        ----------
        full : bool, default False
            False: at most 15 lines of at most 100 columns: the problem, the tree, the predicted
            (and measured) time, the error bound (and measured error), why this plan, where it
            came from and how it runs. True: the full report: every node's predicted cost, every
            candidate the planner considered with its verdict, the measured candidates, the
            backend fingerprint, the cost model and its calibration, the provenance.

        Returns
        -------
        str
        """
        return render_explain(self) if full else render_short(self)

    def __repr__(self) -> str:
        return f"<trnplan.Plan {self.problem.describe()}: {self.tree}>"
