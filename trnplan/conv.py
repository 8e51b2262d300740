"""trnplan.conv: batched long convolution with a filter bank through planned FFTs.

``plan_conv(filters, length)`` plans the convolution of signals ``x[b, c]`` with one filter per
channel ``h[c]`` (a depthwise long convolution: Hyena, S4-style long filters, FlashFFTConv's
workload) as ``y = F⁻¹(F(x) · F(h))`` over a transform length ``N``:

* ``mode="circular"``: ``N`` is the signal length (the filter zero-padded to it, or an error if it
  is longer); the output has the signal's length;
* ``mode="linear"``: ``N`` an even 2·3·5-smooth length ≥ ``L + K − 1``, a multiple of 16 where
  one is within 1.25× of the least (:func:`transform_length`; signal and filter zero-padded to it, so no wrap-around); the output
  is the full ``L + K − 1`` samples;
* ``mode="causal"``: the first ``L`` samples of the linear convolution,
  ``y[n] = Σ_{k ≤ n} h[k] x[n − k]``.

1-D (``filters`` of shape ``(C, K)``) or 2-D (``(C, K1, K2)``, over the last two dimensions).
Real signals and filters use r2c/c2r plans, complex ones c2c. The filter bank's spectrum is
computed once, when the plan is made, and kept; ``conv(x, filters=h)`` recomputes it from a new
(e.g. learned) bank instead, differentiably.

**The convolution is one planned job** (issue 30 item 2): ``plan_conv`` states it as a planner
problem (:attr:`trnplan.core.problem.Problem.conv`: mode, channels, the signal's and the filters'
shapes; the transform length; real or complex; the batch it is priced for) and the ``conv`` solver
(:mod:`trnplan.planner.conv`) prices four routes on the device's cost profile:

* ``method="library"``: the forward and inverse transforms as two child plans (on the CPU
  torch.fft's rfft/irfft), the product with the kept spectrum between them; any rank;
* ``method="gemm"``: the four-step / Monarch GEMM formulation of FlashFFTConv [1]_ (two GEMM
  passes with twiddles, the product in the permuted order, two GEMM passes back; the zero-padding
  and the crop pruned from the first and last GEMMs); rank 1;
* ``method="direct"``: one DFT GEMM each way, for short transforms (N ≤ 2048); rank 1;
* ``method="spatial"``: no transform — the signal zero-padded (circular: wrapped) and torch's
  depthwise ``conv1d`` with the flipped bank, what a user writes for a short filter; rank 1, real
  float32, K ≤ 256, the CPU only. Calls that need the bank's gradient take the library route
  (conv1d's float32 weight gradient sums B·L products: over the bar, measured).

The planner's pick (``ConvPlan.method``; ``ConvPlan.explain()`` shows every route's price or why it
does not apply) is kept in the plan cache, in this process and on disk (a ``conv:`` record per
problem, machine fingerprint and method), like every other plan. The bound is the mode's bar
(:data:`trnplan.core.accuracy.DEFAULT_TOL`) for the whole convolution; where no route meets it the
convolution is planned to √2 times it — each of its two transforms within the bar, what the two
separate plans were held to before (on meta, the causal 4096…8192 of FlashFFTConv's range; on the
CPU no bench row needs it). On the CPU the library route is the pick at every bench row (the
GEMM route ran 7–22× torch.fft there: O(N·√N) GEMM work against O(N log N), busy machine), the
spatial route for short filters on long signals (K ≤ 16 at L ≥ 4096: 0.25–0.7× the library route);
on an accelerator (meta prices Trainium's profile) the GEMM route is the pick for FlashFFTConv's
causal shapes (L = 2048…8192 at 8×64). The GEMM routes run on split ``(re, im)`` real tensors
(no complex dtype on a device) and are differentiated by autograd through their torch ops; the
library route's plans run their adjoint plans. Calls the plan's route does not take — complex
signals with a real bank, another precision than the bank's — run the library route's cached
plans, as before.

On ``xla`` a call on real signals with the kept bank and no gradient runs as **one compiled graph**
(:meth:`ConvPlan.fused`): the pad, both plans' device modules (or the GEMM route's module) on split
``(re, im)`` tensors, the product in real arithmetic and the crop, compiled together by
``torch.compile(backend="openxla", fullgraph=True, dynamic=False)`` once per input shape; the
planned route ran five graphs per call there (each plan's compiled graph, and three lazy graphs for
the pad, the product and the crop: measured on XLA:CPU, torch-xla 2.9). Calls that need a
gradient, pass a new bank or have complex signals take the planned route there.

**On a NeuronCore** (``neuron``, TorchNeuron; or ``xla`` on torch-neuronx 2.9, trn1/inf2), which holds
no complex data (runtimes.md rule 1), every route runs in split form: the bank's spectrum is one
graph made at plan time and kept as a real ``(2, …)`` stack of (re, im), and every call on real
float32 signals — with the kept bank or a new one, with or without a gradient — is one graph by the
device's own route (:attr:`ConvPlan.graph_mode`): ``torch.compile(backend="neuron", fullgraph=True,
dynamic=False)`` on TorchNeuron (with a gradient its AOTAutograd forward and backward graphs), one
lazy XLA graph cut at syncs on torch-neuronx 2.9 (it has no torch.compile: runtimes.md §3; no openxla
graph is made there). A complex bank or signal is refused there (:class:`~trnplan.ComplexOnDevice`):
a complex convolution has no split form here; convolve the parts as real convolutions. Without a
gradient the signals' lead dims run as the transform plans' batch buckets (the pad and crop on the
host: batches 1…8 are 5 graphs); a call with a gradient is a graph per input shape.

Not built here: implicit zero-padding in the library route (the signal is padded by one ``pad``
op; on the CPU torch.fft pads the same way inside ``rfft(x, n=N)``; the GEMM routes skip it), the
GEMM routes in 2-D, and the real-signal tricks of FlashFFTConv (a half-length complex transform of
a real signal): the GEMM route transforms real signals as complex ones with a zero imaginary part
(its first GEMM reads only the real rows, its last writes only the real part).

References
----------
.. [1] D. Y. Fu, H. Kumbong, E. Nguyen, C. Ré, "FlashFFTConv: Efficient Convolutions for Long
   Sequences with Tensor Cores", ICLR 2024, arXiv:2311.05908.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics

import torch

from trnplan.backends import get_backend
from trnplan.backends.accel import DYNAMO, LAZY, AccelBackend, bucket_batch
from trnplan.backends.artifacts import module_runner
from trnplan.cache import default_cache
from trnplan.cache.fingerprint import fingerprint, fingerprint_digest
from trnplan.core import state, timing
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.core.cost import format_time
from trnplan.core.errors import ComplexOnDevice, OverBoundError, PlanningError
from trnplan.core.node import PlanNode
from trnplan.core.problem import CONV_MODES as MODES
from trnplan.core.problem import Problem
from trnplan.core.spec import Spec
from trnplan.kernels.scratch import PerThread, plain_cpu_call
from trnplan.plan.api import cached_plan
from trnplan.planner import measure
from trnplan.planner.bluestein import next_smooth as smooth_length  # 2·3·5-smooth: every library's fast lengths
from trnplan.planner.conv import METHODS
from trnplan.planner.planner import Planner

__all__ = ["ConvPlan", "plan_conv", "transform_length", "transform_lengths"]

#: the linear/causal transform length (:func:`transform_length`): a multiple of this power of two,
#: within this factor of the least even smooth length, is preferred; effort="measure" times the
#: library route at each of those lengths and the least even one, at most :data:`MORE_LENGTHS` beyond the
#: default. Why: MKL's speed is not monotone in the length and the cost model does not know which
#: lengths are fast (measured: :func:`transform_length`)
POWER_OF_TWO, LENGTH_SPAN, MORE_LENGTHS = 16, 1.25, 3
#: effort="measure": the routes timed are those predicted within this factor of the estimate's pick
#: (the GEMM routes, 7–22× torch.fft on the CPU, are then not timed there)
MEASURE_WITHIN = 4.0
#: effort="measure": rounds at most and the seconds they may take (at least measure.MIN_ROUNDS rounds)
MEASURE_ROUNDS, MEASURE_BUDGET_S = 21, 1.5
EFFORTS = ("estimate", "measure")
#: the in-process plan cache of convolutions: (problem, method, effort, threads) -> (the planner's tree, its bound)
_TREES: dict = {}
state.register("conv.trees", _TREES.clear)
#: a fresh code object's tag for each gradient graph (:meth:`ConvPlan._graph`)
_GRAPHS = itertools.count()


class ConvPlan(torch.nn.Module):
    """A planned batched convolution with a filter bank (make one with :func:`plan_conv`).

    Call it on ``x`` of shape ``(..., C, *length)``; returns ``(..., C, *out_length)``.
    """

    def __init__(self, filters: torch.Tensor, length, mode: str, method: str | None = None, batch: int = 1,
                 effort: str = "estimate", n: tuple | None = None):
        super().__init__()
        self.rank = filters.ndim - 1
        self.length = tuple(length)
        self.kernel = tuple(filters.shape[1:])
        self.mode = mode
        self.channels = filters.shape[0]
        self.complex = filters.is_complex()
        if n is not None:  # a length effort="measure" times (:func:`measured_tree`)
            self.n = tuple(n)
        elif mode == "circular":
            self.n = self.length
        else:
            self.n = tuple(transform_length(m + k - 1) for m, k in zip(self.length, self.kernel))
        self.out_length = (self.length if mode != "linear"
                           else tuple(n + k - 1 for n, k in zip(self.length, self.kernel)))
        self._graph_route(filters)  # before any op on the bank (a complex one is refused on a NeuronCore)
        self.register_buffer("filters", filters.detach(), persistent=False)
        self.problem = conv_problem(filters, self.length, self.n, mode, batch)
        #: effort="measure": each timed candidate's median µs per call ("method length"), else empty
        self.timed: dict = {}
        if effort == "measure" and method is None:
            self.tree, self.bound, self.timed = measured_tree(filters, self.length, mode, batch, self.problem)
            self.n = tuple(int(v) for v in self.tree.param("factors"))  # the length timed fastest
            self.problem = conv_problem(filters, self.length, self.n, mode, batch)
        else:
            self.tree, self.bound = plan_tree(self.problem, method, filters.device)
        self.method = self.tree.param("method")
        self.route = None  # method=gemm/direct: the planner's module (split tensors); library: the two plans
        if self.method != "library":
            planner = Planner(get_backend(self.problem.device))
            with torch.inference_mode(False):  # its constants normal tensors: a gradient call saves them
                self.route = planner.lower(self.tree, self.problem, filters.device)
            for module in self.route.modules():  # constants, made again from the plan: not the model's state
                module._non_persistent_buffers_set.update(module._buffers)
        self._fused: dict = {}  # (what, input shapes, device, gradient) -> its one compiled graph (_graph)
        self._stacked = None  # (a complex spectrum, its real (2, …) stack) for the XLA:CPU library graph
        # kept tensors are made as normal tensors even under torch.inference_mode(): an inference tensor
        # cannot be saved for a later call's backward, nor written outside inference mode
        with torch.inference_mode(False), torch.no_grad():
            spectrum = self.filter_spectrum(filters.detach())
        self.register_buffer("spectrum", spectrum, persistent=False)
        self._full = None  # a real bank's full (c2c) spectrum, made when complex signals first come
        #: thread id -> (input signature, the zero-padded input buffer, its ready call or None, and the
        #: spectrum that call multiplies by) of the CPU's calls (:meth:`_padded`, :meth:`_keep_ready_call`)
        # per calling thread (trnplan.kernels.scratch's rules), under the input's signature:
        # (the padded buffer or None, the ready call or None, the spectrum it was made with)
        self._scratch = PerThread()

    def _graph_route(self, filters: torch.Tensor) -> None:
        """How calls run as one graph on the bank's device (:attr:`graph_mode`, :attr:`split`); a complex
        bank refused where the device holds no complex data."""
        backend = get_backend(filters.device.type)
        accel = backend if isinstance(backend, AccelBackend) else None
        #: how a call runs as one graph on this device: "dynamo" (torch.compile with the device's
        #: backend: openxla on XLA:CPU/TPU, neuron on TorchNeuron), "lazy" (one lazy XLA graph cut at
        #: syncs: torch-neuronx 2.9 on trn1/inf2, which has no torch.compile), or None (cpu, cuda, meta)
        self.graph_mode = (accel.auto_compile()[0] if accel is not None else None)
        self.graph_mode = self.graph_mode if self.graph_mode in (DYNAMO, LAZY) else None
        self._accel = accel
        #: a NeuronCore holds no complex data (runtimes.md rule 1): every call runs on split real tensors
        #: as one graph, the spectrum kept as a real (2, …) stack of (re, im)
        self.split = accel is not None and not accel.boundary(filters.device).complex
        if self.split and not filters.is_complex() and filters.dtype != torch.float32:
            raise PlanningError(f"plan_conv on {filters.device}: a {filters.dtype} filter bank; a NeuronCore has no "
                                f"FP64 (runtimes.md rule 1): make the bank float32 on the host before moving it "
                                f"(h.float().to(device)), or plan the convolution on the host (device='cpu')")
        if self.split and filters.is_complex():
            raise ComplexOnDevice(
                f"plan_conv on {filters.device}: a complex filter bank on a device that holds no complex data "
                f"({accel.boundary(filters.device).why}). A complex convolution has no split form here: convolve "
                f"the real and imaginary parts as real convolutions (plan_conv(h.real), plan_conv(h.imag)) and "
                f"combine them, or run it on the host (device='cpu')")

    def extra_repr(self) -> str:
        return (f"channels={self.channels}, length={self.length}, kernel={self.kernel}, mode={self.mode!r}, "
                f"transform length={self.n}, method={self.method!r}")

    def explain(self) -> str:
        """What the planner chose for this convolution and why: the problem, the chosen route's tree
        with its predicted time and error, and every route's price (or why it does not apply)."""
        lines = [f"problem: {self.problem.describe()}", f"chosen:  {self.tree}",
                 (f"         predicted {format_time(self.tree.time_us)}, error {self.tree.error:.1e} "
                  f"(bound {self.bound:.1e})"), f"runs:    {self._runs()}"]
        if self.timed:
            lines.append("measured: " + ", ".join(f"{k} {format_time(v)}" for k, v in self.timed.items()))
        lines.append("routes:")
        planner = Planner(get_backend(self.problem.device), tol=self.bound)
        for method in METHODS:
            try:
                node = planner.plan(self.problem, Spec(name="conv", options=(("method", method),)))
                lines.append(f"  {method:8s} {format_time(node.time_us):>10s}  error {node.error:.1e}  {node}")
            except PlanningError as exc:
                lines.append(f"  {method:8s} {'—':>10s}  {_reason(exc)}")
        return "\n".join(lines)

    def _runs(self) -> str:
        """How a call runs on the bank's device (explain's ``runs:`` line)."""
        device = self.filters.device
        how = ("lazy XLA, cut at syncs (torch-neuronx 2.9 has no torch.compile)" if self.graph_mode == LAZY
               else f"torch.compile(backend={self._accel.compile_backend()!r}, fullgraph=True, dynamic=False)"
               if self.graph_mode == DYNAMO else None)
        if self.split:
            return (f"every call one graph on {device} by {how}, on split (re, im) real tensors; without a gradient "
                    f"its lead dims in batch buckets (pad and crop on the host); complex signals refused")
        if how is not None:
            return (f"a call on real float32 signals with the kept bank and no gradient: one graph on {device} by "
                    f"{how}; other calls the planned route (the plans' own graphs and the product between them)")
        return f"the planned route on {device}: the plans (or the GEMM route's module) and the product, eager"

    def _dims(self):
        return tuple(range(-self.rank, 0))

    def _forward_transform(self, x: torch.Tensor) -> torch.Tensor:
        """The unscaled forward transform of ``x`` (already padded to ``n``) over its last ``rank`` dims."""
        lead = x.shape[: x.ndim - self.rank]
        kind = "c2c" if x.is_complex() else "r2c"
        cdtype = x.dtype if x.is_complex() else (torch.complex128 if x.dtype == torch.float64 else torch.complex64)
        plan = cached_plan(kind, self.n, max(1, math.prod(lead)), cdtype, "backward", False, x.device)
        return plan.execute(x)

    def filter_spectrum(self, filters: torch.Tensor) -> torch.Tensor:
        """The bank's transform at length ``n`` (scaled by 1/N: the inverse then runs unscaled)."""
        self._check_bank(filters)
        if self.split:  # one graph of its own: the pad, the 1/N and the forward transform, real (2, …) out
            return self._graph("spectrum", self._spectrum_graph(), (filters,))
        # 1/N applied to the filters, before the transform: on torch-xla 2.9 a complex64 tensor divided
        # by a Python scalar came back float32, its imaginary part dropped (measured here)
        if self.route is not None and self._on_route(filters):
            # in the route's own layout (the four-step order; method=spatial: conv1d's weight, the
            # filters themselves, unscaled), as a real (2, C, …) stack of (re, im)
            scale = 1 if self.method == "spatial" else math.prod(self.n)
            return torch.stack(self.route.transform(*_parts(filters / scale, self.kernel)))
        return self._library_spectrum(filters)

    def _check_bank(self, filters: torch.Tensor) -> None:
        if tuple(filters.shape[1:]) != self.kernel or filters.shape[0] != self.channels:
            raise ValueError(f"filters must have shape ({self.channels}, {', '.join(map(str, self.kernel))}) like the "
                             f"bank this plan was made for; got {tuple(filters.shape)}")

    def _library_spectrum(self, filters: torch.Tensor) -> torch.Tensor:
        """The bank's spectrum through the library route's forward plan (complex)."""
        self._check_bank(filters)
        h = self._pad(filters / math.prod(self.n), self.n)
        return self._forward_transform(h)

    def _on_route(self, x: torch.Tensor) -> bool:
        """Whether ``x`` runs on the planned GEMM route: its type (real or complex) and precision
        are the plan's (other calls take the library route: two cached transform plans)."""
        real = torch.float64 if self.problem.dtype == "complex128" else torch.float32
        return x.is_complex() == self.complex and (x.real.dtype if x.is_complex() else x.dtype) == real

    @staticmethod
    def _pad(x: torch.Tensor, n) -> torch.Tensor:
        pad = []
        for size, want in zip(reversed(x.shape[-len(n):]), reversed(n)):
            pad += [0, want - size]
        return torch.nn.functional.pad(x, pad) if any(pad) else x

    def fusable(self, x: torch.Tensor, filters: torch.Tensor | None = None) -> bool:
        """Whether a call on ``x`` runs as one graph (:meth:`fused`): on a NeuronCore (``neuron``, or
        ``xla`` on torch-neuronx 2.9) every call on real float32 signals; on other ``xla`` devices real
        signals and bank, the kept bank, and no gradient to record (the others take the planned route)."""
        if self.graph_mode is None or x.is_complex() or x.dtype != torch.float32:
            return False
        if self.split:
            return True
        grad = torch.is_grad_enabled() and (x.requires_grad or self.filters.requires_grad)
        return filters is None and not grad and not self.complex

    def fused(self, x: torch.Tensor, filters: torch.Tensor | None = None) -> torch.Tensor:
        """The whole convolution of ``x`` as one graph: pad, the r2c plan's device module (or the GEMM
        route's module), the product with the bank's spectrum in real arithmetic, the c2r plan's module,
        crop; made once per input shape and device (:meth:`_graph`). The same plans as the planned
        route (their trees, not their runners).

        On a NeuronCore, with no gradient to record, the signals' lead dims run as a batch bucket
        (:func:`~trnplan.backends.accel.bucket_batch`, as the transform plans' buckets): another
        lead shape is reshaped, zero-padded to the bucket and cropped back **on the host** (a transfer
        each way), so that batches 1…16 compile at most 7 graphs, not 16 (each a neuronx-cc run)."""
        spectrum = self._real_spectrum() if filters is None else self.filter_spectrum(filters)
        lead = tuple(x.shape[: x.ndim - self.rank - 1])
        m = math.prod(lead)
        grad = torch.is_grad_enabled() and (x.requires_grad or spectrum.requires_grad)
        if not self.split or grad or lead == (bucket_batch(m),):
            return self._graph("conv", self._composed(x), (x, spectrum))
        host = x.detach().cpu().reshape(m, *x.shape[x.ndim - self.rank - 1:])
        rows = bucket_batch(m) - m
        xs = torch.cat([host, host.new_zeros((rows, *host.shape[1:]))]).to(x.device)
        y = self._graph("conv", self._composed(xs), (xs, spectrum))
        return y.cpu()[:m].reshape(*lead, *y.shape[1:]).to(x.device)

    def _check_input(self, x: torch.Tensor) -> None:
        if x.ndim < self.rank + 1 or tuple(x.shape[-self.rank:]) != self.length or x.shape[-self.rank - 1] != self.channels:
            raise ValueError(f"x must have shape (..., {self.channels}, {', '.join(map(str, self.length))}) (channels, "
                             f"then the signal); got {tuple(x.shape)}")
        if self.split and x.is_complex():
            raise ComplexOnDevice(f"a convolution on {x.device} takes real float32 signals (a NeuronCore holds no "
                                  f"complex data); got {x.dtype}. Convolve the real and imaginary parts "
                                  f"separately (they are real convolutions with a real bank), or on the host")
        if self.split and x.dtype != torch.float32:
            raise TypeError(f"a convolution on {x.device} takes float32 signals (a NeuronCore has no FP64); got "
                            f"{x.dtype}: pass x.float(), or convolve on the host")

    def _graph(self, what: str, fn, inputs: tuple) -> torch.Tensor:
        """``fn(*inputs)`` (one tensor out) as one graph on the device, made once per ``what``, input
        shapes, device and gradient: with no gradient to record the device backend's compiled runner
        (``compile_graph``: torch.compile with openxla or neuron; on torch-neuronx 2.9 a lazy graph cut
        at syncs of its inputs and output); with one, ``torch.compile`` of ``fn`` that autograd goes
        through (AOTAutograd: a forward and a backward graph), or on the lazy route the lazy ops
        themselves (the forward and the backward each one graph at the user's sync)."""
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
        key = (what, tuple(tuple(t.shape) for t in inputs), str(inputs[0].device), grad)
        runner = self._fused.get(key)
        if runner is None:
            if not grad:
                compiled = self._accel.compile_graph(_Whole(fn), inputs, mode=self.graph_mode)
                runner = _First(compiled)
            elif self.graph_mode == DYNAMO:
                code = module_runner(next(_GRAPHS))  # Dynamo's recompile limit is per code object
                runner = functools.partial(torch.compile(code, backend=self._accel.compile_backend(), fullgraph=True,
                                                         dynamic=False), fn)
            else:
                runner = fn
            self._fused[key] = runner
        return runner(*inputs)

    def _real_spectrum(self) -> torch.Tensor:
        """The kept spectrum as a real ``(2, …)`` stack of (re, im): as kept on a split device or on
        the GEMM routes; the library route's complex spectrum elsewhere (XLA:CPU) split once."""
        spectrum = self.spectrum
        if not spectrum.is_complex():
            return spectrum
        if self._stacked is None or self._stacked[0] is not spectrum:
            self._stacked = (spectrum, torch.stack(_split(spectrum)))
        return self._stacked[1]

    def _spectrum_graph(self):
        """The function of the bank's spectrum on a split device: ``h ↦`` the real ``(2, …)`` stack of
        the forward transform of ``h / N`` (the route's module, or the library route's r2c plan's)."""
        scale, kernel, n, pad = 1 / math.prod(self.n), self.kernel, self.n, self._pad
        if self.route is not None:
            route = self.route
            return lambda h: torch.stack(route.transform(*_parts(h * scale, kernel)))
        fwd = _module("r2c", self.n, self.channels, False, self.filters.device)
        return lambda h: torch.stack(fwd(pad(h * scale, n).reshape(h.shape[0], -1)))

    def _composed(self, x: torch.Tensor):
        if self.route is not None:
            return self._composed_route(x)
        lead = tuple(x.shape[: x.ndim - self.rank - 1])
        batch = max(1, math.prod(lead)) * self.channels
        fwd, inv = _module("r2c", self.n, batch, False, x.device), _module("c2r", self.n, batch, True, x.device)
        # the spectrum's parts as the graph's input: real-typed (they broadcast over the lead dims)
        half = math.prod(self.n[:-1]) * (self.n[-1] // 2 + 1)
        n, out_length, pad, channels = self.n, self.out_length, self._pad, self.channels

        def conv(signal, spectrum):
            sr, si = spectrum[0].reshape(channels, half), spectrum[1].reshape(channels, half)
            re, im = fwd(pad(signal, n).reshape(batch, -1))
            re, im = re.reshape(-1, channels, half), im.reshape(-1, channels, half)
            (y,) = inv((re * sr - im * si).reshape(batch, half), (re * si + im * sr).reshape(batch, half))
            y = y.reshape(*lead, channels, *n)
            for d, keep in enumerate(out_length, start=y.ndim - len(n)):  # the crop: a slice (HLO Slice)
                y = y.narrow(d, 0, keep)
            return y

        return conv

    def _padded(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` zero-padded to the transform length: on the CPU, with no gradient to record, the
        calling thread's buffer of this input signature, its padding zeroed once and ``x`` copied
        into its head (the forward plan only reads it); else a new tensor (:meth:`_pad`).

        Why: on the CPU a call's cost at these sizes is as much the page faults of its fresh
        buffers as the transforms (L = K = 256 causal, 8×64 float32: ~480 faults, ~half of a ~1 ms
        call in one run here, 1 thread; torch.fft's rfft·rfft→irfft has the same). With the padded
        input kept and the product in place (:meth:`_in_place`) a call allocates two such buffers
        (the spectrum, the output), torch.fft's version four (its pad, two spectra, the output).
        """
        if tuple(x.shape[x.ndim - self.rank:]) == self.n:
            return x
        if not plain_cpu_call(x):
            return self._pad(x, self.n)
        key = (x.shape, x.dtype)
        kept = self._scratch.get(key)
        if kept is None or kept[0] is None:  # None: method=spatial's ready call (its own buffer)
            with torch.inference_mode(False):  # normal tensors (trnplan.kernels.scratch)
                kept = self._scratch.put(key, (x.new_zeros(*x.shape[: x.ndim - self.rank], *self.n), None, None))
        head = kept[0]
        for d, keep in zip(range(-self.rank, 0), self.length):
            head = head.narrow(d, 0, keep)
        head.copy_(x)
        return kept[0]

    @staticmethod
    def _in_place(x: torch.Tensor, xh: torch.Tensor, spectrum: torch.Tensor) -> bool:
        """Whether the product may overwrite the forward transform's output ``xh``: no gradient to
        record, a buffer of its own (not the signal's), and the product's shape and dtype.

        Why: one buffer of the batch's spectrum fewer per call (L = K = 256 causal, 8×64 float32: 1 MB
        of the 4 MB a call allocates). glibc's malloc maps buffers of that size afresh once they no longer
        fit the heap's top, so each costs its page faults: trnplan.conv ran 1.10× torch.fft's
        rfft·rfft→irfft there (docs/benchmarks.md, 05:30 UTC run), with one more live buffer than it.
        """
        if torch.is_grad_enabled() and (xh.requires_grad or spectrum.requires_grad):
            return False
        return (xh.data_ptr() != x.data_ptr() and xh.shape[xh.ndim - spectrum.ndim:] == spectrum.shape
                and xh.dtype == spectrum.dtype)

    def _route_takes(self, x: torch.Tensor, filters: torch.Tensor | None) -> bool:
        """Whether the planned GEMM or spatial route runs this call (else the library route's cached plans).

        method=spatial leaves the calls that need the bank's gradient to the library route: conv1d's
        weight gradient sums B·L products per tap in float32 (K = 1, 6×40 signals: 5.5e-7 relative
        L2 against float64, over the fp32 bar, measured here), where the transforms' adjoint is
        within it; the signal's gradient (K products per sample) and the forward stay on the route."""
        if not self._on_route(x) or (filters is not None and not self._on_route(filters)):
            return False
        return not (self.method == "spatial" and filters is not None and filters.requires_grad
                    and torch.is_grad_enabled())

    def _composed_route(self, x: torch.Tensor):
        route, length = self.route, self.length

        def conv(signal, spectrum):
            (y,) = route(signal.reshape(-1, math.prod(length)), spectrum[0], spectrum[1])
            return y.reshape(*signal.shape[:-1], -1)

        return conv

    def _run_route(self, x: torch.Tensor, filters: torch.Tensor | None) -> torch.Tensor:
        """The planned GEMM route (method=gemm/direct) on split tensors: the signal's parts and the
        spectrum's, in the route's own (four-step) order, to the output's parts."""
        sr, si = self.spectrum if filters is None else self.filter_spectrum(filters)
        lead = x.shape[: x.ndim - self.rank]
        ys = self.route(*_parts(x.reshape(-1, *self.length), self.length), sr, si)
        y = ys[0] if len(ys) == 1 else torch.complex(ys[0], ys[1])
        return y.reshape(*lead, *self.out_length)

    def __getstate__(self):
        # the per-thread buffers and ready calls are this process's and this object's (a pickled or
        # deep-copied plan makes its own on its first calls): closures do not pickle, and a copy's
        # calls must not run on the original's buffers
        state = super().__getstate__()  # its PerThread scratch pickles empty
        state["_fused"], state["_stacked"] = {}, None  # compiled graphs: made again on the first calls
        return state

    def _seen_call(self, x: torch.Tensor):
        """This thread's ready call for ``x``'s signature (:meth:`_keep_ready_call`), or None; none
        once the kept spectrum was replaced (``Module.to``, ``load_state_dict`` of another dtype)."""
        kept = self._scratch.get((x.shape, x.dtype)) if x.device.type == "cpu" else None
        if kept is None:
            return None
        return kept[1] if kept[2] is self._buffers["spectrum"] else None

    def _keep_ready_call(self, x: torch.Tensor, kept_bank_in_place: bool) -> None:
        """After a call on the library route with the kept bank, its padded buffer and the product in
        place (a real signal on the CPU, no gradient): the same steps as one closure for this
        thread's next call of that signature (:meth:`_seen_call`). It skips the shape, route and
        gradient checks that cannot change for the signature (~13 µs of Python, measured here on a
        tiny convolution: 25.4 µs a call against 12.6 µs for its five tensor ops), and looks the two
        transform plans up each call (cached_plan), so that it follows the plan cache."""
        kept = self._scratch.get((x.shape, x.dtype))
        if not kept_bank_in_place or kept is None or kept[0] is None or x.is_complex() or self.complex:
            return
        buf, head, spectrum = kept[0], kept[0], self.spectrum
        for d, keep in zip(range(-self.rank, 0), self.length):
            head = head.narrow(d, 0, keep)
        n, rank, out_length, batch = self.n, self.rank, self.out_length, max(1, math.prod(buf.shape[: buf.ndim - self.rank]))
        cdtype, device = spectrum.dtype, x.device

        def call(signal: torch.Tensor) -> torch.Tensor:
            head.copy_(signal)
            yh = cached_plan("r2c", n, batch, cdtype, "backward", False, device).execute(buf).mul_(spectrum)
            y = cached_plan("c2r", n, batch, cdtype, "forward", True, device).execute(yh)
            for d, keep in zip(range(-rank, 0), out_length):
                y = y.narrow(d, 0, keep)
            return y

        self._scratch.put((x.shape, x.dtype), (buf, call, spectrum))

    def _keep_spatial_call(self, x: torch.Tensor) -> None:
        """After a method=spatial call with the kept bank on the CPU and no gradient: this thread's
        next call of ``x``'s signature as one closure (:meth:`_seen_call`): the signal copied into
        the route's kept padded buffer, conv1d, the reshape. Why: the planned call's Python (the
        checks, the route module's call, the reshapes) cost ~55 µs over F.pad + conv1d's ~120 µs at
        1×64 signals of 1024, K = 8 (1.28–1.32× F.conv1d, paired; the closure: ~0.89×; measured here
        2026-11-27, one thread)."""
        if x.device.type != "cpu" or x.is_complex() or (torch.is_grad_enabled() and x.requires_grad):
            return
        call = self.route.ready_call(x.reshape(-1, self.channels, *self.length), self.spectrum[0],
                                     (*x.shape[:-1], self.out_length[0]))
        self._scratch.put((x.shape, x.dtype), (None, call, self.spectrum))

    def forward(self, x: torch.Tensor, filters: torch.Tensor | None = None) -> torch.Tensor:
        if filters is None and not x.requires_grad:  # a signature this thread ran before: its ready call
            call = self._seen_call(x)
            if call is not None:
                return call(x)
        self._check_input(x)
        if self.fusable(x, filters):
            return self.fused(x, filters)
        if self.complex and not x.is_complex():
            x = x.to(self.filters.dtype)  # real signals with a complex bank: a complex convolution
        if self.route is not None and self._route_takes(x, filters):
            y = self._run_route(x, filters)
            if self.method == "spatial" and filters is None:
                self._keep_spatial_call(x)
            return y
        if filters is not None:
            bank = filters.to(x.dtype) if x.is_complex() and not filters.is_complex() else filters
            spectrum = self._library_spectrum(bank)
        elif self.route is not None or (x.is_complex() and not self.complex):
            # the library route off the plan's: complex signals with a real bank (its full spectrum),
            # or a call the GEMM route does not take (another precision): the bank's spectrum, once
            if self._full is None or self._full.device != x.device or self._full.dtype != _complex_of(x.dtype):
                with torch.inference_mode(False):  # kept: a normal tensor (a later gradient call saves it)
                    self._full = self._library_spectrum(
                        self.filters.to(_complex_of(x.dtype) if x.is_complex() else x.dtype))
            spectrum = self._full
        else:
            spectrum = self.spectrum
        xh = self._forward_transform(self._padded(x))
        in_place = self._in_place(x, xh, spectrum)
        yh = _cmul(xh, spectrum, in_place)
        del xh  # the product's operand: freed before the inverse allocates its output
        self._keep_ready_call(x, in_place and filters is None and spectrum is self.spectrum)
        lead = yh.shape[: yh.ndim - self.rank]
        batch = max(1, math.prod(lead))
        if x.is_complex():
            plan = cached_plan("c2c", self.n, batch, yh.dtype, "forward", True, yh.device)
        else:
            plan = cached_plan("c2r", self.n, batch, yh.dtype, "forward", True, yh.device)
        y = plan.execute(yh)
        for d, keep in zip(range(-self.rank, 0), self.out_length):
            y = y.narrow(d, 0, keep)
        return y


class _First:
    """The one output of a compiled runner (which returns a tuple)."""

    def __init__(self, runner):
        self.runner = runner

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.runner(*inputs)[0]


class _Whole(torch.nn.Module):
    """A function as a module returning a 1-tuple: what the device backend's compiled runners run."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: torch.Tensor):
        return (self.fn(*inputs),)


def _module(kind: str, n: tuple, batch: int, inverse: bool, device) -> torch.nn.Module:
    """The split-form module of the library route's r2c or c2r plan, for a graph that composes it:
    planned with ``compile="eager"``, so that no graph of the plan's own is compiled (on a NeuronCore
    a neuronx-cc run each, never called: the convolution's graph runs the module)."""
    norm = "forward" if inverse else "backward"
    return cached_plan(kind, n, batch, torch.complex64, norm, inverse, device, compile="eager").module


def transform_length(n: int) -> int:
    """The linear and causal convolutions' transform length for ``n`` samples: the least even
    2·3·5-smooth length ≥ ``n`` that is a multiple of :data:`POWER_OF_TWO` if one is within
    :data:`LENGTH_SPAN` of the least even one, else the least even one (:func:`transform_lengths`).

    Why even: torch.fft's MKL ran the r2c of an odd smooth length 2.2× the next even one's (batch
    256, one thread, paired here: 16875 against 17280, 1125 against 1080; 1215 2.3×), and
    ``scipy.fft.next_fast_len`` — what a user pads to — gives those odd lengths (16386 → 16875).
    Why a multiple of 16: MKL's rfft + irfft of 64 and 256 rows ran slower at smooth lengths with few
    factors of 2 than at a longer length with more (one thread, paired, 2026-11-27): 270 (2·3³·5)
    1.7–2.4× 288 (2⁵·3²), 540 1.1–1.4× 576, 1080 1.06–1.18× 1152, 4374 (2·3⁷) 1.5–1.6× 4608 (2⁹·3²),
    2250 1.3–1.4× 2160; the lengths that already are multiples of 16 held (144, 2160, 4320, 8640,
    17280: each the fastest or within 0.9–1.1 of it among the even smooth lengths up to 1.25× it)."""
    return transform_lengths(n)[0]


def transform_lengths(n: int) -> list[int]:
    """The linear/causal transform lengths worth running for ``n`` samples, the default first
    (:func:`transform_length`): the least even 2·3·5-smooth length ≥ ``n`` and the even smooth
    lengths that are multiples of :data:`POWER_OF_TWO` up to :data:`LENGTH_SPAN` times it
    (effort="measure" times the library route at each)."""
    least = m = _even_smooth(n)
    fast = []
    while m <= LENGTH_SPAN * least:
        if m % POWER_OF_TWO == 0:
            fast.append(m)
        m = _even_smooth(m + 1)
    return fast[:1] + [least] * (not fast or fast[0] != least) + fast[1:]


def _even_smooth(n: int) -> int:
    """The least even 2·3·5-smooth length ≥ ``n``."""
    m = smooth_length(n)
    while m % 2:
        m = smooth_length(m + 1)
    return m

def _complex_of(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype.is_complex else (torch.complex128 if dtype == torch.float64 else torch.complex64)


def _parts(x: torch.Tensor, shape) -> tuple:
    """``x`` of shape ``(..., *shape)`` as the route's flat ``(M, points)`` split parts: one real
    tensor, or ``(re, im)`` of a complex one."""
    flat = x.reshape(-1, math.prod(shape))
    return (flat,) if not flat.is_complex() else (flat.real.contiguous(), flat.imag.contiguous())


def _reason(exc: Exception) -> str:
    """The conv solver's own words from a failed forced plan (the planner's message lists every solver)."""
    text = str(exc)
    start = text.find("conv:")
    return text[start + 5:].split("; ")[0].split(". Solvers that apply")[0].strip() if start >= 0 else text


def conv_problem(filters: torch.Tensor, length: tuple, n: tuple, mode: str, batch: int) -> Problem:
    """The planner's problem of a convolution with ``filters`` (:attr:`Problem.conv`): ``batch``
    signals of each channel (the lead dims' product the plan is priced for)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch (the signals per channel the plan is priced for) must be a positive int; got {batch!r}")
    dtype = _complex_of(filters.dtype)
    return Problem.create(n, batch * filters.shape[0], kind="c2c" if filters.is_complex() else "r2c", dtype=dtype,
                          device=filters.device, conv=(mode, filters.shape[0], tuple(length), tuple(filters.shape[1:])))


def plan_tree(problem: Problem, method: str | None, device) -> tuple[PlanNode, float]:
    """The planner's tree for a convolution (and the bound it met), from the plan cache: in this
    process (:data:`_TREES`), then on disk (a ``conv:`` record keyed by the problem, the machine's
    fingerprint and the method asked for), else planned and stored.

    The bound is the mode's bar for the whole convolution; where no route meets it (four GEMM
    stages or two accelerator transforms at long lengths) the convolution is planned to √2 times
    it: each of its two transforms within the bar, what the two separate plans met before."""
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))} or None (the planner's pick); "
                         f"got {method!r}")
    bar = DEFAULT_TOL[problem.precision]
    key = (problem, method, torch.get_num_threads())
    if key in _TREES:
        return _TREES[key]
    cache = default_cache()
    record_key = _record_key(problem, device, method or "auto")
    got = cache.get_record(record_key, _parse_record) if cache is not None and cache.usable else None
    if got is None:
        got = _search(problem, method, bar)
        if cache is not None and cache.usable:
            cache.set_record(record_key, {"tree": got[0].to_json(), "bound": got[1]})
    _TREES[key] = got
    return got


def _record_key(problem: Problem, device, what: str) -> str:
    """The plan cache's key of a convolution's record: the problem, the machine, what was asked (a
    method, "auto", or "measure") and torch's thread count (the routes' prices and times depend on
    it: the library's transforms run threaded, conv1d's rate was measured at one thread)."""
    fp = fingerprint_digest(fingerprint(problem.device, device))
    return f"conv:{problem.digest()}:{fp}:{what}:t{torch.get_num_threads()}"


def measured_tree(filters: torch.Tensor, length: tuple, mode: str, batch: int,
                  problem: Problem) -> tuple[PlanNode, float, dict]:
    """effort="measure": the tree whose route (and transform length) ran fastest here, its bound and
    every timed candidate's median µs, from the plan cache (in this process, then a ``conv:…:measure``
    record on disk), else timed (:func:`_measure`) and stored."""
    key = (problem, "measure", torch.get_num_threads())
    if key in _TREES:
        return _TREES[key]
    cache = default_cache()
    usable = cache is not None and cache.usable
    record_key = _record_key(problem, filters.device, "measure")
    got = cache.get_record(record_key, _parse_measured) if usable else None
    if got is None:
        got = _measure(filters, length, mode, batch, problem)
        if usable:
            cache.set_record(record_key, {"tree": got[0].to_json(), "bound": got[1], "timed": got[2]})
    _TREES[key] = got
    return got


def _parse_measured(record) -> tuple[PlanNode, float, dict]:
    """A measured ``conv:`` record as (tree, bound, timings); raises on anything else."""
    return (*_parse_record(record), {str(k): float(v) for k, v in record["timed"].items()})


def _candidates(problem: Problem, mode: str) -> list[tuple[str, tuple | None]]:
    """effort="measure"'s candidates beyond the estimate's pick: every route at the default transform
    length, and the library route at the other lengths of :func:`transform_lengths` (1-D linear and
    causal only: a circular convolution's length is the signal's)."""
    out = [(m, None) for m in METHODS]
    if mode != "circular" and problem.rank == 1:
        need = problem.conv[2][0] + problem.conv[3][0] - 1
        others = [n for n in transform_lengths(need) if n != problem.n]
        out += [("library", (n,)) for n in others[:MORE_LENGTHS]]
    return out


def _measure(filters: torch.Tensor, length: tuple, mode: str, batch: int,
             problem: Problem) -> tuple[PlanNode, float, dict]:
    """Time the estimate's pick and the candidates (:func:`_candidates`) predicted within
    :data:`MEASURE_WITHIN` of it, on random signals of the planned batch, in shuffled round-robin
    rounds (:func:`trnplan.planner.measure.timed_rounds`); a candidate replaces the estimate's pick
    only if its paired per-round ratio beats it beyond the noise (:func:`~trnplan.planner.measure.beats_default`),
    as measured planning of transforms decides."""
    device = filters.device
    refused = "cannot run" if device.type == "meta" else get_backend(problem.device).measure_unavailable_reason()
    if refused is not None:
        raise PlanningError(f"effort='measure' times the convolution's routes where it runs, and on {device} that "
                            f"{refused}: plan it with effort='estimate' here, or measure where it runs")
    default = ConvPlan(filters, length, mode, None, batch)
    plans = {f"{default.method} {default.n[0] if default.rank == 1 else default.n}": default}
    for method, n in _candidates(problem, mode):
        try:
            plan = ConvPlan(filters, length, mode, method, batch, n=n)
        except PlanningError:  # a route that does not apply (explain() says why)
            continue
        label = f"{method} {plan.n[0] if plan.rank == 1 else plan.n}"
        if label not in plans and plan.tree.time_us <= MEASURE_WITHIN * default.tree.time_us:
            plans[label] = plan
    real = filters.real.dtype if filters.is_complex() else filters.dtype
    x = torch.randn(batch, filters.shape[0], *length, dtype=real, device=device)
    x = torch.complex(x, torch.randn_like(x)) if filters.is_complex() else x
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else timing.no_sync
    with torch.no_grad():
        fns = [functools.partial(plan, x) for plan in plans.values()]
        runners = [(fn, timing.calls_per_sample(fn, sync, measure.MIN_SAMPLE_S)[0]) for fn in fns]
        samples = measure.timed_rounds(runners, sync, MEASURE_ROUNDS, MEASURE_BUDGET_S,
                                       keep=[i == 0 for i in range(len(fns))])
    best, best_ratio = 0, 1.0
    for i in range(1, len(samples)):
        ratio, noise = timing.paired(samples[i], samples[0])
        if measure.beats_default(ratio, noise) and ratio < best_ratio:
            best, best_ratio = i, ratio
    chosen = list(plans.values())[best]
    return chosen.tree, chosen.bound, {k: statistics.median(v) * 1e6 for k, v in zip(plans, samples)}


def _parse_record(record) -> tuple[PlanNode, float]:
    """A ``conv:`` record as (tree, bound); raises on anything else (the cache then forgets it)."""
    tree, bound = PlanNode.from_json(record["tree"]), float(record["bound"])
    if tree.solver != "conv" or not bound > 0:
        raise ValueError(f"not a convolution's tree and bound: {record!r:.200}")
    return tree, bound


def _search(problem: Problem, method: str | None, bar: float) -> tuple[PlanNode, float]:
    spec = Spec(name="conv", options=(("method", method),)) if method else None
    backend = get_backend(problem.device)
    try:
        return Planner(backend, tol=bar).plan(problem, spec), bar
    except OverBoundError:  # only the bound: a route that does not apply for another reason says so now
        return Planner(backend, tol=math.sqrt(2) * bar).plan(problem, spec), math.sqrt(2) * bar


def _split(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Re z, Im z)`` of a complex tensor, as new real tensors (on xla, by the device's own ops)."""
    return z.real.contiguous(), z.imag.contiguous()


def _cmul(a: torch.Tensor, b: torch.Tensor, in_place: bool = False) -> torch.Tensor:
    """``a · b`` of complex tensors. On cpu and cuda one complex product (into ``a`` where ``in_place``);
    elsewhere in real arithmetic:
    on torch-xla 2.9 (XLA:CPU) autograd through a complex64 product gave the signal's gradient
    1.32 off in relative L2 (measured here against the CPU's), and ``torch.complex`` has no XLA
    lowering, so the parts are packed by (exact) arithmetic."""
    if a.device.type in ("cpu", "cuda"):
        return a.mul_(b) if in_place else a * b
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    return (ar * br - ai * bi).to(a.dtype) + (ar * bi + ai * br).to(a.dtype) * 1j


def plan_conv(filters: torch.Tensor, length, mode: str = "linear", *, method: str | None = None,
              batch: int = 1, effort: str = "estimate") -> ConvPlan:
    """Plan the batched convolution of signals of ``length`` with a filter bank, one filter per channel.

    Parameters
    ----------
    filters : torch.Tensor
        ``(C, K)`` (1-D) or ``(C, K1, K2)`` (2-D), real or complex, on the device the
        convolution runs on; its spectrum is computed now and kept.
    length : int or sequence of int
        The signals' length (1-D) or shape (2-D).
    mode : {"linear", "causal", "circular"}, default "linear"
        Full linear convolution (``L + K − 1`` samples), its first ``L`` (causal), or circular
        at length ``L``.
    method : {"library", "gemm", "direct", "spatial"}, optional
        Force a route (:mod:`trnplan.planner.conv`): two planned transforms with the product between
        them, the four-step (Monarch) GEMMs of FlashFFTConv, one DFT GEMM each way (short lengths),
        or torch's depthwise conv1d on the padded signal (short filters, real float32, the CPU).
        Default: the planner's pick for the device, priced with its cost profile (``explain()``).
    batch : int, default 1
        The signals per channel a call is expected to carry (the product of ``x``'s lead dims): what
        the routes are priced for. Any batch runs.
    effort : {"estimate", "measure"}, default "estimate"
        "estimate": the route the cost model prices cheapest. "measure": the estimate's pick, the
        other routes predicted within 4× of it and the library route at the next even smooth
        transform lengths (up to 1.25× the least) are built and timed here on random signals of
        ``batch`` (shuffled round-robin rounds, ~1–2 s); one replaces the estimate's pick only if
        it ran faster beyond the noise. The pick is kept in the plan cache (per thread count, as
        every convolution's). Ignored when ``method`` is given.

    Returns
    -------
    ConvPlan
        A ``torch.nn.Module``: ``conv(x)`` with ``x`` of shape ``(..., C, *length)``;
        ``conv(x, filters=h)`` with a new bank of the same shape (differentiable in ``h``).

    Raises
    ------
    ValueError
        An unknown mode or method, a bank that is not 2-D or 3-D, or a circular filter longer than the signal.
    trnplan.PlanningError
        A forced method that does not apply (its reason: e.g. method=gemm or direct for a 2-D
        convolution, method=direct beyond its longest transform, or over the accuracy bound), or
        effort="measure" on a device where nothing runs (meta).

    Examples
    --------
    >>> import torch
    >>> from trnplan.conv import plan_conv
    >>> conv = plan_conv(torch.randn(16, 4096), 4096, mode="causal")
    >>> conv(torch.randn(8, 16, 4096)).shape
    torch.Size([8, 16, 4096])
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}; got {mode!r}")
    if effort not in EFFORTS:
        raise ValueError(f"effort must be one of {', '.join(map(repr, EFFORTS))} for plan_conv; got {effort!r}")
    if not isinstance(filters, torch.Tensor) or filters.ndim not in (2, 3):
        raise ValueError("filters must be a tensor of shape (C, K) (1-D) or (C, K1, K2) (2-D), one filter per channel")
    length = (length,) if isinstance(length, int) else tuple(length)
    if len(length) != filters.ndim - 1:
        raise ValueError(f"length {length} has {len(length)} dimension(s) but the filters are {filters.ndim - 1}-D")
    if mode == "circular" and any(k > n for k, n in zip(filters.shape[1:], length)):
        raise ValueError(f"a circular convolution needs filters no longer than the signal: filters "
                         f"{tuple(filters.shape[1:])}, signal {length}; use mode='linear' or 'causal'")
    return ConvPlan(filters, length, mode, method, batch, effort)
