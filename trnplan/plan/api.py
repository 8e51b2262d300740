"""plan_many, the front door of the plan layer, and the process-wide in-process plan cache.

``plan_many`` validates the request, has the build pipeline (:func:`trnplan.plan.provide.provide`)
look the plan up or make it, and keeps the ready :class:`~trnplan.plan.plan.Plan` in a bounded
in-process LRU keyed by its :class:`~trnplan.plan.request.PlanRequest`, so asking twice returns the
same plan without re-planning (the LRU is filled outside its lock and re-checked after, as
pocketfft does).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from trnplan.cache import compiled, default_cache
from trnplan.core import config
from trnplan.core.errors import PlanningError, WisdomMiss
from trnplan.core.node import PlanNode
from trnplan.plan.memo import PLANS
from trnplan.plan.plan import Plan
from trnplan.plan.provide import Provided, commit, provide, reject
from trnplan.plan.request import PlanRequest, make_request
from trnplan.plan.verify import verified_tree
from trnplan.planner.planner import DEFAULT_STRATEGIES
from trnplan.planner.registry import SOLVERS

if TYPE_CHECKING:  # annotations only (from __future__ import annotations): no import at run time
    from trnplan.cache.store import PlanCache

#: the default of plan_many's ``cache``: the process-wide default plan cache (a sentinel, since
#: ``None`` means no cache)
DEFAULT_CACHE = object()


def clear_plan_cache() -> None:
    """Empty the process-wide in-process plan cache (:data:`trnplan.plan.memo.PLANS`)."""
    PLANS.clear()


def plan_cache_info() -> dict:
    """Size and capacity of the in-process plan cache."""
    return PLANS.info()


def cached_plan(kind: str, shape: tuple, batch: int, dtype, norm: str, inverse: bool, device,
                compile: str = "auto", modes=None, low=None) -> Plan:
    """plan_many for front ends that ask per call (trnplan.fft, trnplan.stft, trnplan.install's
    kernels): their raw arguments name the request of the plan the drop-in made for them
    (:attr:`PlanMemo.names <trnplan.plan.memo.PlanMemo.names>`), so a repeated call skips
    validating them. ``modes``, ``low``: a truncated transform's kept frequencies.

    A shape seen for the first time is planned cheaply (:func:`dropin_plan`)."""
    name = ("dropin", kind, shape, batch, dtype, norm, inverse, device, compile, modes, low)
    plan = PLANS.by_alias(name)
    if plan is None:
        plan = dropin_plan(shape, batch, kind=kind, inverse=inverse, dtype=dtype, norm=norm, device=device,
                           compile=compile, modes=modes, low=low)
        PLANS.add_alias(name, plan)
    return plan


def dropin_plan(shape, batch: int, **request) -> Plan:
    """The drop-in's plan of a shape it has not seen: what the plan cache holds for it (precompiled
    or measured wisdom), else the device's own FFT (torch.fft, cuFFT) planned without a search
    and stored nowhere; devices without one (Trainium, xla) plan as plan_many does.

    plan_many's full estimate searches every solver's trees (four-step splits, Bluestein lengths):
    100-400 ms per new length here (busy 2-core machine; 200 new lengths took 4.2 s against
    torch.fft's 2.8 ms, and left 215 records on disk), and keeps the device's own FFT unless
    another tree is predicted faster beyond the model's error. ``TRNPLAN_DROPIN_SEARCH=1`` (or
    planning with :func:`plan_many` yourself, or precompiling) asks for that search, stored.
    """
    if (config.dropin_search() or config.wisdom_only() or request.get("compile", "auto") not in ("auto", "eager")
            or request.get("modes") is not None):
        # asked for, production, an artifact, or a truncated transform: as plan_many
        return plan_many(shape, batch, **request)
    cache = default_cache()
    if cache is not None and cache.usable:
        try:
            return plan_many(shape, batch, **request, effort="wisdom_only", cache=cache)
        except WisdomMiss:
            pass
    for strategy in DEFAULT_STRATEGIES:  # torch.fft's own call for c2c, r2c/c2r, rank ≥ 2
        try:
            return plan_many(shape, batch, **request, strategy=strategy, cache=None)
        except PlanningError:
            continue
    return plan_many(shape, batch, **request)


def plan_many(
    shape: int | Sequence[int],
    batch: int = 1,
    *,
    kind: str = "c2c",
    inverse: bool | None = None,
    dtype: torch.dtype = torch.complex64,
    precision: str | None = None,
    norm: str | None = "backward",
    device: str | torch.device = "cpu",
    cores: int = 1,
    strategy: str | None = None,
    effort: str = "estimate",
    tol: float | None = None,
    cache: PlanCache | object | None = DEFAULT_CACHE,
    compile: str = "auto",
    verify: bool = False,
    modes: int | Sequence[int] | None = None,
    low: Sequence[int] | None = None,
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
        ``"cpu"`` or ``"cuda"`` (optionally ``"cuda:1"``); ``"xla"`` (torch-xla's device),
        ``"meta"`` (shapes and dtypes only) or a PrivateUse1 backend's name: the accelerator
        backend (GEMM trees on split float32, compiled whole per batch bucket, no fp64, no host
        leaf); ``"neuron"``: TorchNeuron's native device where torch-neuronx 2.13/2.14 registered
        it (the accelerator backend), else the ``torch_neuronx.trace`` route of torch-neuronx 2.9,
        whose plans take and return host tensors; neither installed:
        :class:`~trnplan.core.errors.BackendUnavailable` (docs/trainium.md).
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
        How hard to plan, as FFTW's flags. "estimate" picks by the cost model alone, keeping
        the device's own FFT (torch.fft's call) unless another tree is predicted faster by more
        than twice the model's error. "measure" times the estimate's pick, the device's own FFT
        and K more candidate trees (K = 6, ``TRNPLAN_MEASURE_TOP_K``) round-robin on the device,
        and replaces the device's own FFT only by a candidate within the bound that is faster
        beyond the noise; "patient" times every candidate the planner enumerates. Both stop
        timing new candidates after the time limit (:func:`trnplan.set_timelimit`,
        ``TRNPLAN_TIMELIMIT``; default 5 s and 30 s), store every candidate's predicted and
        measured times and noise in the wisdom entry (a later call replays the winner after a
        once-per-process spot check, ``TRNPLAN_RECHECK``), and recalibrate the cost model for
        this machine. Stored wisdom of a higher effort answers a lower one. "wisdom_only" never plans
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
    compile : {"auto", "eager", "aot", "inductor", "neuron", "dynamo"}, default "auto"
        The artifact to build and cache: none (eager), an AOTInductor package (aot), a traced
        NEFF (neuron, on Trainium); "auto" is eager on the CPU and on CUDA (an AOT build takes
        30–90 s; ask for it, or precompile). "inductor" compiles the plan with ``torch.compile``
        in this process at plan time (seconds; fused elementwise kernels) and stores nothing:
        the fused path where AOT packages cannot be loaded. See docs/cache.md. "dynamo", the
        default on ``xla`` and TorchNeuron: ``torch.compile(backend="openxla" | "neuron",
        fullgraph=True, dynamic=False)`` once per batch bucket in this process.
    modes : int or sequence of int, optional
        A truncated (pruned) real transform, kind r2c or c2r: the frequencies kept per axis —
        the lowest ``m`` bins of the last (real) axis and the lowest and highest ``m`` frequencies
        of every other axis (the Fourier neural operator's pattern; ``Problem.kept_shape``). r2c
        returns only those, c2r reads only those (the rest taken as zero). The truncated solver
        plans it: kept-column GEMMs per axis, or the whole transform then cut, the cost model
        choosing.
    low : sequence of int, optional
        With ``modes``: the non-last axes (indices into ``shape``, increasing) that keep only their
        lowest ``modes[axis]`` frequencies (0 … m−1, ``m`` rows) instead of the lowest and highest.
    verify : bool, default False
        Run the plan once on seeded random input against float64 numpy.fft, keep the measured
        error (``plan.tree.measured_error``, stored in the wisdom entry, shown by explain()), and
        raise PlanningError if it is over the bound (see :func:`trnplan.plan.verify.verified_tree`).

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
                      compile=compile, use_lru=True, verify=verify, modes=modes, low=low)


def plan_many_uncached(shape, batch: int = 1, **options) -> Plan:
    """:func:`plan_many` past the in-process plan cache: always asks the on-disk cache (or plans).

    For precompiling, where a plan in the in-process cache may predate the on-disk cache's
    contents (after a clear, or for another cache directory). Takes plan_many's arguments.
    """
    return _plan_many(shape, batch, **{**_PLAN_MANY_DEFAULTS, **options}, use_lru=False)


#: the exact types a raw argument may have for its tuple to name a request: ``1 == 1.0 == True``
#: (equal and hashed alike) must not let a refused ``batch=True`` or ``shape=(4.0,)`` answer
_NAMEABLE_SHAPE = frozenset({int})


def _plan_many(shape, batch, *, kind, inverse, dtype, precision, norm, device, cores, strategy, effort, tol,
               cache, compile, use_lru: bool, verify: bool = False, modes=None, low=None) -> Plan:
    """plan_many's work; ``use_lru=False`` (precompile) always goes to the on-disk cache.

    The request the arguments make is looked up by the arguments themselves first (their name,
    with their types, the ``TRNPLAN_*`` environment and the solver registry's generation), then
    the plan by the request: an in-process hit validates nothing again."""
    env = config.check_environment()  # every TRNPLAN_* setting, before any work: a bad one is said now
    cache = default_cache() if cache is DEFAULT_CACHE else cache
    args = {"kind": kind, "inverse": inverse, "dtype": dtype, "precision": precision, "norm": norm, "device": device,
            "cores": cores, "strategy": strategy, "effort": effort, "tol": tol, "cache": cache, "compile": compile,
            "verify": verify, "modes": modes, "low": low}
    if not use_lru:
        return _build_plan(make_request(shape, batch, **args))
    name = None
    if (type(shape) is int or (type(shape) is tuple and set(map(type, shape)) <= _NAMEABLE_SHAPE)) and modes is None:
        name = (shape, batch, type(batch), kind, inverse, type(inverse), dtype, precision, norm, device, cores,
                type(cores), strategy, effort, tol, type(tol), cache, compile, verify, type(verify), env,
                SOLVERS.generation)
    try:
        request = PLANS.names.get(name)
    except TypeError:  # an unhashable argument (a list): no name
        request, name = None, None
    if request is None:
        request = make_request(shape, batch, **args)
        if name is not None and str(request.device) == str(device):  # "cuda" follows the current device: unnamed
            PLANS.name(name, request)
    plan = PLANS.get(request)  # PLANS.plan(request), inline: an in-process hit is the hot path
    if plan is None:  # built outside the lock; another thread's plan for the same request wins
        plan = PLANS.add(request, _build_plan(request))
    return plan


_PLAN_MANY_DEFAULTS = {k: p.default for k, p in inspect.signature(plan_many).parameters.items()
                       if k not in ("shape", "batch")}


def _build_plan(request: PlanRequest) -> Plan:
    """The one straight line of a plan: the device's backend has the pipeline provide it (look up →
    trust → plan or measure → build; :meth:`Backend.build`), then verify (``verify=True``), store,
    and the Plan, made once."""
    try:
        got, runner, provenance = request.backend.build(request, provide, record_compiled=compiled.record)
        tree = got.tree
        if request.verify:  # before the record is stored: a plan over its bound is never stored
            tree = _verify(request, got, runner, provenance)
            commit(got, tree)
    except PlanningError as exc:  # re-raised here: the recursion's traceback says nothing the message doesn't
        raise exc.with_traceback(None) from None
    return _plan(request, got, tree, runner, provenance)


def _verify(request: PlanRequest, got: Provided, runner, provenance) -> PlanNode:
    """The tree with its measured error (:func:`trnplan.plan.verify.verified_tree`); a plan over its
    bound raises, and stored wisdom that made it is forgotten."""
    try:
        return verified_tree(_plan(request, got, got.tree, runner, provenance))
    except PlanningError:
        reject(got)
        raise


def _plan(request: PlanRequest, got: Provided, tree, runner, provenance) -> Plan:
    return Plan(request, tree, got.candidates, got.module, provenance=provenance, runner=runner, tol=got.tol,
                profile_name=request.backend.profile.name, pipeline=True)


#: the pipeline the in-process plan cache builds with on a miss (a plan's adjoint, an unpickled plan)
PLANS.build = _build_plan


__all__ = ["DEFAULT_CACHE", "cached_plan", "clear_plan_cache", "dropin_plan", "plan_cache_info", "plan_many", "plan_many_uncached"]
