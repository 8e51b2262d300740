"""The solver protocol: one file per solver, each with the same shape (FFTW's dft/*.c).

A solver answers four questions about a 1-D sub-problem:

``why_not(problem, planner, forced)``
    ``None`` if it applies, else a short reason ("n=97 is not a power of two"). A solver never
    raises to decline.
``plan(problem, planner, spec)``
    The best :class:`PlanNode` this solver can make (children come *only* from
    ``planner.plan(subproblem, spec)``), or ``None`` if no variant fits ``spec``.
``build(node, ctx)``
    Lower the node to a ``torch.nn.Module`` mapping ``(re, im)`` of shape ``(M, n)`` to the
    unscaled transform ``(re, im)`` of the same shape, for any ``M``.
``atoms``
    How the node prints is shared (:func:`trnplan.core.node.format_atoms`).
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Callable
from typing import ClassVar, Protocol

import attrs
import numpy as np
import torch

from trnplan.backends.base import Backend, PrecisionProbe
from trnplan.core import state
from trnplan.core.cost import CostProfile, Work, elementwise
from trnplan.core.errors import PlanningError
from trnplan.core.node import PlanNode
from trnplan.core.problem import Problem
from trnplan.core.spec import Spec


@attrs.frozen
class BuildContext:
    """What lowering needs besides the node: compute dtype, device, and the recursive builder."""

    dtype: torch.dtype
    device: torch.device
    precision: str
    build: Callable[[PlanNode], torch.nn.Module]

    def const(self, array: np.ndarray) -> torch.Tensor:
        """A float64 host constant cast once to the compute dtype on the host, then moved to the plan's device.

        Cast before the move: no float64 tensor ever reaches an accelerator (a NeuronCore has no FP64;
        TorchNeuron bounces 64-bit copies through the CPU, ../shared/neuron/runtimes.md §2).
        """
        return torch.as_tensor(np.ascontiguousarray(array), dtype=torch.float64).to(dtype=self.dtype).to(self.device)

    def split_const(self, array: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """(re, im) of a complex128 host constant, each cast once."""
        return self.const(array.real), self.const(array.imag)


class PlanningContext(Protocol):
    """What a solver may ask of the planner it plans in (:class:`trnplan.planner.Planner`).

    Solvers read nothing else of it: no private attributes, no ``getattr`` probing. A stand-in
    (tests, or the host-fallback pricing) implements what the solver it is given to uses.
    """

    backend: Backend  # the device kind: native FFT or not, precisions, shard executor, host link
    profile: CostProfile  # the prices nodes are costed with (maybe calibrated)
    exportable: bool  # an artifact is asked for: the plan must lower to torch ops only
    depth: int  # searches in progress: 1 at the top level, more inside a child's

    @property
    def probe(self) -> PrecisionProbe: ...  # the device's precision probe, read by the accuracy model

    def tol(self, problem: Problem) -> float: ...  # the error bound of (sub-)problem
    def at_root(self, problem: Problem) -> bool: ...  # runs on the user's tensor at the plan's root
    def solver(self, name: str) -> Solver | None: ...  # a registered solver, by name
    def on_host(self) -> PlanningContext: ...  # the host CPU's context (host-fallback pricing)

    def plan(self, problem: Problem, spec: Spec | None = None, tol: float | None = None) -> PlanNode:
        """A child's plan: the only way a composite gets one (memo, bound, cost accounting)."""

    def plan_share(self, problem: Problem, spec: Spec | None, tol: float) -> PlanNode | None:
        """A child re-planned to a share of its parent's bound, or None when that nests too deep."""


def root_output(problem: Problem) -> Work:
    """What ``Plan.execute`` does around a split-tensor module at the root: the input's real and
    imaginary parts are strided views (free); a complex result is packed by one
    ``torch.complex(re, im)`` (read two real arrays, write one complex)."""
    if problem.real_output:
        return Work()
    return Work(launches=1, bytes=4 * math.prod(problem.out_shape) * problem.batch * itemsize(problem))


def scale_pass(problem: Problem) -> Work:
    """The plan's norm scale as a pass of its own (:class:`~trnplan.planner.planner.PlanModule`
    multiplies each output tensor): one read and one write of the output, fused into one region."""
    tensors = 1 if problem.real_output else 2
    return elementwise(tensors, math.prod(problem.out_shape) * problem.batch, itemsize(problem), operands=2,
                       arrays=2 * tensors)


def library_io(problem: Problem, planner, launches: int = 2) -> Work:
    """The work around a library leaf's call, beyond the call itself (whose measured rate covers
    its own pass over the data): packing split ``(re, im)`` input into one complex tensor and
    viewing the result's parts; none at the root, where ``Plan.execute`` calls the library on
    the user's tensor (pass ``direct=True`` to :meth:`Solver.node` there)."""
    if planner.at_root(problem):
        return Work()
    packed = 0 if problem.real_input else 4 * math.prod(problem.in_shape) * problem.batch * itemsize(problem)
    return Work(launches=launches, bytes=packed)


class Solver:
    """Base class of all solvers; subclasses set ``name`` and implement the three methods."""

    name: ClassVar[str] = ""
    #: bump when the decisions or the lowering change, so that stored wisdom is invalidated
    version: ClassVar[int] = 1
    #: a leaf computes directly; a composite plans children through the planner
    composite: ClassVar[bool] = False
    #: options a strategy spec may set (``key=value`` atoms), and whether it reads ``n=f1xf2…``
    options: ClassVar[tuple[str, ...]] = ()
    #: the options whose values are words (``method=half``); every other option takes an int
    word_options: ClassVar[tuple[str, ...]] = ()
    takes_factors: ClassVar[bool] = False
    #: the transform kinds and ranks this solver plans; others are declined before why_not
    kinds: ClassVar[tuple[str, ...]] = ("c2c",)
    ranks: ClassVar[str] = "1"  # "1": one axis, "n": two or more (the nd solver), "any": both
    #: the concrete precision modes it plans (None: every mode); others are declined before
    #: why_not with ``precision_refusal`` (formatted with ``precision``)
    precisions: ClassVar[tuple[str, ...] | None] = None
    precision_refusal: ClassVar[str] = "{name} has no {precision} mode (it plans {modes})"
    #: runs on the host CPU whatever the plan's device: on a device with a host link
    #: (``Backend.host_link_gbs``, Trainium) such a root is the host fallback, compiled to nothing
    host_only: ClassVar[bool] = False
    #: plans truncated transforms (``Problem.modes``): every other solver declines them by declaration
    truncates: ClassVar[bool] = False
    #: plans convolutions with a filter bank (``Problem.conv``): every other solver declines them by declaration
    convolves: ClassVar[bool] = False

    def margin_sigma(self, trees, profile) -> float | None:
        """The estimate's margin-rule sigma for comparing ``trees`` (all rooted in this solver: its
        methods against each other) under ``profile``, where this solver measured one; None: the
        profile's own (Planner.margin_sigma)."""
        return None

    def why_not_kind(self, problem: Problem) -> str | None:
        """Why this solver does not plan ``problem``'s kind, rank or precision, from what it declares
        (checked before ``why_not``)."""
        if problem.precision == "auto":
            return "precision='auto' is resolved first, by the precision solver"
        if self.ranks == "1" and problem.rank != 1:
            return f"{self.name} plans 1-D transforms; shape {problem.shape} has rank {problem.rank} (the nd solver plans it)"
        if self.ranks == "n" and problem.rank < 2:
            return f"{self.name} plans transforms of rank ≥ 2; shape {problem.shape} has rank 1"
        if problem.conv and not self.convolves:
            return f"{self.name} plans transforms; a convolution is planned by the conv solver"
        if problem.modes and not self.truncates:
            return (f"{self.name} computes every frequency; a truncated transform (modes={problem.modes}) is planned "
                    f"by the truncated solver")
        if problem.kind not in self.kinds:
            who = " (the real solver plans it)" if problem.kind != "c2c" and problem.rank == 1 else ""
            return f"{self.name} plans {'/'.join(self.kinds)} transforms, not {problem.kind}{who}"
        if self.precisions is not None and problem.precision not in self.precisions:
            return self.precision_refusal.format(name=self.name, precision=problem.precision,
                                                 modes="/".join(self.precisions))
        return None

    def why_not(self, problem: Problem, planner, forced: bool) -> str | None:  # pragma: no cover
        raise NotImplementedError

    #: fold the norm scale (build_scaled) on every backend, op-by-op ones too (Backend.folds_scale
    #: decides for the others): where the pass it saves was measured to matter there
    folds_scale_always: ClassVar[bool] = False

    def scale_folds(self, node: PlanNode) -> bool:
        """Whether :meth:`build_scaled` folds a scale into ``node``'s module (read from the node
        alone: the planner prices the scale's own pass at a root where it does not)."""
        return False

    def build_scaled(self, node: PlanNode, ctx: BuildContext, scale: float) -> torch.nn.Module | None:
        """``node``'s module with the plan's norm ``scale`` folded into the constant matrix of its
        last GEMM (scaled in float64 before the cast), so no pass of its own multiplies the output;
        None where the last thing the module does is not such a GEMM (the scale then stays a pass
        of :class:`~trnplan.planner.planner.PlanModule`)."""
        return None

    def runs_on_user_tensor(self, node: PlanNode) -> bool:
        """Whether ``node``'s module, at a plan's root, is a library call ``Plan.execute`` makes on
        the user's tensor (no split into ``(re, im)``; see :func:`library_io`)."""
        return False

    def plan(self, problem: Problem, planner, spec) -> PlanNode | None:  # pragma: no cover
        raise NotImplementedError

    def build(self, node: PlanNode, ctx: BuildContext) -> torch.nn.Module:  # pragma: no cover
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def node(
        self,
        problem: Problem,
        planner,
        work: Work,
        error: float,
        params=(),
        children=(),
        direct: bool = False,
        folded=(),
    ) -> PlanNode:
        """Assemble a node: own work priced on the planner's profile plus the children's totals.

        At the root (``planner.at_root``) a node that works on split ``(re, im)`` tensors also
        pays for packing its result into the complex output (:func:`root_output`) and for
        launching its module as one graph (``graphs``: priced where the device runs a plan
        compiled whole, the accelerators' ``graph_us``; free elsewhere); ``direct`` marks a
        library call that ``Plan.execute`` makes on the user's tensor instead. Where the backend
        folds the norm scale into the root's constants (``Backend.folds_scale``) and this root
        cannot (:meth:`scale_folds`), the root pays the scale's own pass. ``folded`` is work
        this node changes in a leaf child's stage (:meth:`~trnplan.core.cost.CostProfile.priced`).
        """
        if not direct and planner.at_root(problem):
            work = work + root_output(problem) + Work(graphs=1)
            if problem.scale != 1.0 and planner.backend.folds_scale and not self.scale_folds(PlanNode(
                    solver=self.name, n=problem.n, batch=problem.batch, inverse=problem.inverse, params=params,
                    children=children)):
                work = work + scale_pass(problem)  # Planner.lower_plan keeps it a pass (folds nowhere)
        dtype = "float64" if problem.real_dtype == torch.float64 else "float32"
        return PlanNode(solver=self.name, n=problem.n, batch=problem.batch, inverse=problem.inverse, params=params,
                        children=children, error=error, **planner.profile.priced(work, dtype, children, folded))

    def why_not_spec(self, problem: Problem, spec) -> str | None:
        """Why ``spec``'s length, factors or options cannot describe this solver on ``problem``."""
        if spec.size is not None and spec.size != problem.n:
            return f"strategy node {spec} has length {spec.size} but the sub-problem has n={problem.n}"
        unknown = [k for k, _ in spec.options if k not in self.options]
        if unknown:
            takes = ", ".join(self.options) or "none"
            return f"{self.name} has no option {', '.join(map(repr, unknown))} (options it takes: {takes})"
        for key, value in spec.options:
            if key in self.word_options and not isinstance(value, str):
                return f"{self.name}'s option {key} takes a word (such as {key}=half), got {value!r}"
            if key not in self.word_options and not isinstance(value, int):
                return f"{self.name}'s option {key} takes an integer, got {value!r}"
        if spec.factors is not None:
            if not self.takes_factors:
                return f"{self.name} takes no factor list (got {'x'.join(map(str, spec.factors))})"
            return self.why_not_factors(problem, spec.factors)
        return None

    def why_not_factors(self, problem: Problem, factors: tuple) -> str | None:
        """Why a forced factor list does not fit ``problem`` (solvers with ``takes_factors``)."""
        product = math.prod(factors)
        if product != problem.n:
            return (f"factors {'x'.join(map(str, factors))} multiply to {product}, "
                    f"not to the sub-problem's n={problem.n}")
        return None


class WholeShape:
    """Mixin of solvers whose node covers the whole transform shape (nd, the host libraries): a
    strategy's factor list must be that shape, and its ``kind=`` option the problem's kind."""

    def why_not_factors(self, problem: Problem, factors: tuple) -> str | None:
        if tuple(factors) != problem.shape:
            return (f"{self.name}'s factors are the transform shape: {'x'.join(map(str, problem.shape))}, "
                    f"not {'x'.join(map(str, factors))}")
        return None

    def why_not_spec(self, problem: Problem, spec) -> str | None:
        reason = super().why_not_spec(problem, spec)
        kind = spec.option("kind")
        if reason is None and kind is not None and kind != problem.kind:
            return f"the strategy's {self.name} node is {kind} but the problem is {problem.kind}"
        return reason


#: where the variants a solver tries are collected while :meth:`Planner.enumerate` runs (the
#: efforts "measure" and "patient" time them); ``None`` — nothing collected — everywhere else,
#: including the children's searches inside an enumeration
VARIANTS: contextvars.ContextVar = contextvars.ContextVar("trnplan_variants", default=None)


def note_variant(node) -> None:
    """Offer ``node`` (one complete variant of the sub-problem being enumerated) to the collector."""
    sink = VARIANTS.get()
    if sink is not None and node is not None:
        sink.append(node)


def best_variant(make, variants, tol: float | None = None):
    """The cheapest node ``make(v)`` over ``variants`` — among those predicted within ``tol``.

    A variant over the bound is kept only if no variant meets it (the planner then rejects the
    node with that variant's error, the closest it came): taking the cheapest regardless of
    error once made an r2c of n=398 at batch 800 unplannable, because its cheapest method was
    over the fp32 bound while the library method met it.

    A variant whose children a strategy spec cannot satisfy raises PlanningError; it is skipped,
    and if every variant fails the last error is re-raised, so the user sees why.
    """
    best, error = None, None

    def better(node, than):
        if than is None:
            return True
        if tol is not None and (node.error <= tol) != (than.error <= tol):
            return node.error <= tol
        if tol is not None and node.error > tol:  # both over: the more accurate
            return node.error < than.error
        return node.time_us < than.time_us

    for variant in variants:
        try:
            node = make(variant)
        except PlanningError as exc:
            error = exc
            continue
        note_variant(node)
        if node is not None and better(node, best):
            best = node
    if best is None and error is not None:
        raise error
    return best


def itemsize(problem: Problem) -> int:
    return 8 if problem.real_dtype == torch.float64 else 4


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


@functools.lru_cache(maxsize=4096)
def prime_factors(n: int) -> tuple[int, ...]:
    """Prime factors of n with multiplicity, ascending (trial division, memoised: the planner
    asks about the same few lengths many times)."""
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1 if p == 2 else 2
    if n > 1:
        out.append(n)
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    """All divisors of n, ascending."""
    divs = [1]
    for p in sorted(set(prime_factors(n))):
        k = prime_factors(n).count(p)
        divs = [d * p**e for d in divs for e in range(k + 1)]
    return tuple(sorted(divs))


state.register("planner.solver.prime_factors", prime_factors.cache_clear)
state.register("planner.solver.divisors", divisors.cache_clear)
