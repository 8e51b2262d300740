"""PlanRequest: one plan request as a value — the problem and how to plan it.

FFTW keys its planner on a problem and a flags word; trnplan keys on a :class:`PlanRequest`: the
validated :class:`~trnplan.core.problem.Problem`, the forced strategy, the resolved device, the
bound asked for, the plan cache, the compile mode, the effort and whether to verify. It is made
once per distinct request by :func:`make_request` (which validates every argument), is the key of
the in-process plan cache (:data:`trnplan.plan.memo.PLANS`), travels through the build pipeline
(:mod:`trnplan.plan.provide`) instead of a dozen loose parameters, and is what a
:class:`~trnplan.plan.plan.Plan` carries (``plan.request``).

What is derived from it — the problem's digest, the device's backend — is computed on first use
and kept on the value (``functools.cached_property``: attrs stores it in a slot), so one cold
``plan_many`` computes the digest once and resolves the backend once (tools/count_calls.py).
What may change while a request lives (the fingerprint: the solver registry, a probe) is not
kept here; the pipeline computes it once per build.
"""

from __future__ import annotations

import functools

import attrs
import torch

from trnplan.backends import get_backend
from trnplan.backends.base import Backend
from trnplan.cache import PlanCache
from trnplan.cache.store import default_cache_dir
from trnplan.core import config
from trnplan.core.errors import PlanningError
from trnplan.core.problem import EFFORTS, Problem
from trnplan.core.spec import Spec, parse_strategy
from trnplan.planner.registry import solver_names

#: the artifact kinds plan_many's ``compile`` takes
COMPILE_MODES = ("auto", "eager", "aot", "inductor", "neuron", "dynamo", "lazy")


def _cache_key(request) -> str | None:
    """A request's ``cache_key``: its plan cache's directory."""
    return str(request.cache.path) if request.cache is not None else None


@attrs.frozen(cache_hash=True)
class PlanRequest:
    """A validated plan request (build one with :func:`make_request`; derive with ``attrs.evolve``).

    Two requests are equal when they ask for the same plan: the plan cache object itself is
    compared by its directory (``cache_key``), so two ``PlanCache`` objects of one directory make
    one request.

    Attributes
    ----------
    problem : Problem
        What to compute.
    spec : Spec or None
        A forced strategy (``plan_many(strategy=...)``), parsed.
    device : torch.device
        Where the plan runs, resolved by its backend (``cuda`` → ``cuda:0``).
    tol : float or None
        The bound as asked (None: the precision's default; the pipeline resolves it).
    cache : PlanCache or None
        The on-disk plan cache (None: none).
    compile : str
        The compile mode as asked ("auto" is resolved by the backend).
    effort : str
        The effort as asked ("estimate", "measure", "patient", "wisdom_only").
    wisdom_only : bool
        Never plan or compile: ``effort="wisdom_only"`` or ``TRNPLAN_WISDOM_ONLY=1``.
    verify : bool
        Measure the plan's error before it is stored and returned.
    """

    problem: Problem
    spec: Spec | None = None
    device: torch.device = attrs.field(factory=lambda: torch.device("cpu"))
    tol: float | None = None
    cache: PlanCache | None = attrs.field(default=None, eq=False)
    compile: str = "auto"
    effort: str = "estimate"
    wisdom_only: bool = False
    verify: bool = False
    cache_key: str | None = attrs.field(default=attrs.Factory(_cache_key, takes_self=True))
    #: the device's backend (:func:`trnplan.backends.get_backend`), resolved once (and kept by
    #: ``attrs.evolve``: a derived request is for the same device kind)
    backend: Backend = attrs.field(default=attrs.Factory(lambda self: get_backend(self.problem.device),
                                                         takes_self=True), eq=False, repr=False)

    @functools.cached_property
    def digest(self) -> str:
        """The problem's digest (:meth:`Problem.digest`), computed once."""
        return self.problem.digest()

    @property
    def strategy(self) -> str | None:
        """The forced strategy as plan_many's text (``str(spec)``), or None."""
        return str(self.spec) if self.spec is not None else None

    @property
    def cache_dir(self):
        """Where the device runtime's compile cache goes: the plan cache's directory, else the default one."""
        return self.cache.path if self.cache is not None else default_cache_dir()

    def for_problem(self, problem: Problem, compile: str | None = None) -> PlanRequest:
        """This request for another problem (a backend's bucketed batch) and compile mode (itself if the same)."""
        compile = self.compile if compile is None else compile
        if problem == self.problem and compile == self.compile:
            return self
        return attrs.evolve(self, problem=problem, compile=compile)


def make_request(shape, batch, *, kind, inverse, dtype, precision, norm, device, cores, strategy, effort, tol,
                 cache, compile, verify: bool = False, modes=None, low=None) -> PlanRequest:
    """Validate plan_many's arguments into a :class:`PlanRequest` (``cache`` already resolved:
    a :class:`PlanCache` or None). Every refusal names the argument and the fix."""
    problem = Problem.create(shape, batch, kind=kind, inverse=inverse, dtype=dtype, precision=precision,
                             norm=norm, device=device, cores=cores, modes=modes, low=low)
    backend = get_backend(problem.device)
    _check_supported(problem, backend, effort)
    _check_tol(tol)
    dev = backend.resolve_device(device)
    spec = parse_strategy(strategy, solver_names()) if strategy is not None else None
    _check_cache_and_compile(cache, compile)
    return PlanRequest(problem, spec, dev, tol, cache, compile, effort,
                       effort == "wisdom_only" or config.wisdom_only(), bool(verify), backend=backend)


def _check_supported(problem: Problem, backend: Backend, effort: str) -> None:
    """The precision and the cores on this backend, the effort's name."""
    unsupported = backend.precision_unsupported_reason(problem.precision)
    if unsupported is not None:
        raise PlanningError(unsupported)
    if problem.cores != 1:
        reason = backend.shard_executor_reason()
        if reason is not None:
            raise PlanningError(reason)
    if effort not in EFFORTS:
        raise ValueError(f"effort must be one of {', '.join(map(repr, EFFORTS))}; got {effort!r}")


def _check_tol(tol) -> None:
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0):
        raise ValueError(f"tol must be a positive float (a relative L2 error bound), got {tol!r}")


def _check_cache_and_compile(cache, compile: str) -> None:
    if cache is not None and not isinstance(cache, PlanCache):
        raise TypeError(f"cache must be a trnplan.cache.PlanCache or None, got {type(cache).__name__}")
    if compile not in COMPILE_MODES:
        raise ValueError(f"compile must be 'auto', 'eager', 'aot', 'inductor', 'neuron', 'dynamo' or 'lazy'; got "
                         f"{compile!r}")


__all__ = ["COMPILE_MODES", "PlanRequest", "make_request"]
