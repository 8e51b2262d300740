"""plan_many, the front door of the plan layer, and the process-wide in-process plan cache.

``plan_many`` validates the request, has the build pipeline (:func:`trnplan.plan.provide.provide`)
look the plan up or make it, and keeps the ready :class:`~trnplan.plan.plan.Plan` in a bounded
in-process LRU keyed by the problem digest, so asking twice returns the same plan without
re-planning (the LRU is filled outside its lock and re-checked after, as pocketfft does).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import torch

from trnplan.backends import accel, get_backend, neuron
from trnplan.cache import compiled, default_cache
from trnplan.cache.store import default_cache_dir
from trnplan.core import config
from trnplan.core.errors import PlanningError, WisdomMiss
from trnplan.core.problem import Problem
from trnplan.core.spec import Spec, parse_strategy
from trnplan.plan.memo import PLANS
from trnplan.plan.plan import Plan
from trnplan.plan.provide import provide
from trnplan.plan.validation import check_cache_and_compile, check_supported, check_tol, resolve_device
from trnplan.plan.verify import verify_plan
from trnplan.planner.planner import DEFAULT_STRATEGIES
from trnplan.planner.registry import solver_names

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
                compile: str = "auto", modes=None) -> Plan:
    """plan_many for front ends that ask per call (trnplan.fft, trnplan.stft, trnplan.install's
    kernels): their raw arguments are an alias in the in-process plan cache, so a repeated call
    skips validating the request. ``modes``: a truncated transform's kept frequencies.

    A shape seen for the first time is planned cheaply (:func:`dropin_plan`)."""
    alias = (kind, shape, batch, dtype, norm, inverse, device, compile, modes)
    plan = PLANS.by_alias(alias)
    if plan is None:
        plan = dropin_plan(shape, batch, kind=kind, inverse=inverse, dtype=dtype, norm=norm, device=device,
                           compile=compile, modes=modes)
        PLANS.add_alias(alias, plan)
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
                      compile=compile, use_lru=True, verify=verify, modes=modes)


def plan_many_uncached(shape, batch: int = 1, **options) -> Plan:
    """:func:`plan_many` past the in-process plan cache: always asks the on-disk cache (or plans).

    For precompiling, where a plan in the in-process cache may predate the on-disk cache's
    contents (after a clear, or for another cache directory). Takes plan_many's arguments.
    """
    return _plan_many(shape, batch, **{**_PLAN_MANY_DEFAULTS, **options}, use_lru=False)


def _plan_many(shape, batch, *, kind, inverse, dtype, precision, norm, device, cores, strategy, effort, tol,
               cache, compile, use_lru: bool, verify: bool = False, modes=None) -> Plan:
    """plan_many's work; ``use_lru=False`` (precompile) always goes to the on-disk cache."""
    config.check_environment()  # every TRNPLAN_* setting, before any work: a bad one is said now
    problem = Problem.create(shape, batch, kind=kind, inverse=inverse, dtype=dtype, precision=precision,
                             norm=norm, device=device, cores=cores, modes=modes)
    check_supported(problem, effort)
    check_tol(tol)
    dev = resolve_device(problem, device)
    spec = parse_strategy(strategy, solver_names()) if strategy is not None else None
    cache = default_cache() if cache is DEFAULT_CACHE else cache
    check_cache_and_compile(cache, compile)
    wisdom_only = effort == "wisdom_only" or config.wisdom_only()
    if not use_lru:
        return _build_plan(problem, spec, dev, tol, cache, compile, wisdom_only, verify, effort)
    key = (problem.digest(), str(spec) if spec else None, str(dev), tol,
           str(cache.path) if cache is not None else None, compile, wisdom_only, bool(verify), effort)
    plan = PLANS.get(key)
    if plan is None:  # built outside the lock; another thread's plan for the same key wins
        plan = PLANS.add(key, _build_plan(problem, spec, dev, tol, cache, compile, wisdom_only, verify, effort))
    return plan


_PLAN_MANY_DEFAULTS = {k: p.default for k, p in inspect.signature(plan_many).parameters.items()
                       if k not in ("shape", "batch")}


def _build_plan(problem: Problem, spec: Spec | None, dev: torch.device, tol: float | None, cache,
                compile: str, wisdom_only: bool, verify: bool = False, effort: str = "estimate") -> Plan:
    backend = get_backend(problem.device)
    if getattr(backend, "accelerator", False):
        try:
            got, runner, provenance = _provide_on_accelerator(backend, problem, spec, dev, tol, cache, compile,
                                                              wisdom_only, effort)
        except PlanningError as exc:
            raise exc.with_traceback(None) from None
        return _finish_plan(problem, spec, dev, tol, cache, compile, verify, effort, got, runner, provenance)
    planned = problem
    if problem.device == "neuron":  # a NEFF has a fixed batch: plan and compile the bucket (backends/neuron.py)
        planned = neuron.bucketed(problem)
        neuron.check_plannable(planned)  # cores this process sees, the 2 GB tensor limit: before any compile
    try:
        got = provide(planned, spec, dev, tol, cache, compile, wisdom_only, effort)
    except PlanningError as exc:  # re-raised here: the recursion's traceback says nothing the message doesn't
        raise exc.with_traceback(None) from None
    runner, provenance = got.runner, got.provenance
    too_big = neuron.largest_tensor_reason(planned, got.tree) if problem.device == "neuron" else None
    if too_big is not None and runner is not None:  # the input passed; an intermediate does not (never loaded)
        raise PlanningError(too_big)
    if problem.device == "neuron":  # one NEFF copy per NeuronCore, or a build host's refusal; says where it runs
        runner, provenance = neuron.place(problem, planned, got, cache)
    return _finish_plan(problem, spec, dev, tol, cache, compile, verify, effort, got, runner, provenance)


def _provide_on_accelerator(backend, problem, spec, dev, tol, cache, compile, wisdom_only, effort):
    """(Provided, runner, Provenance) of an accelerator plan (:mod:`trnplan.backends.accel`).

    Compiled (mode "dynamo"): planned and compiled for the batch's bucket, the compiled runner shared
    by every plan of that bucket in the process (so a new batch size inside a bucket compiles
    nothing), wrapped to pad and crop. The tree comes from :func:`provide` in eager mode (wisdom,
    measurement and the module are the same; only the runner differs), so ``wisdom_only`` plans
    from the cache and still compiles the graph in the process: on TorchNeuron a warm NEFF cache
    makes that a re-trace without neuronx-cc (runtimes.md §2 Caching).
    """
    mode, reason = backend.resolve_compile(compile)
    if backend.neuron_backed():  # the runtime's compile cache follows the plan cache (item 4)
        accel.configure_compile_cache(cache.path if cache is not None else default_cache_dir())
    if problem.device == "neuron":
        accel.refuse_fallback()  # no silent CPU fallback on TorchNeuron (runtimes.md rule 3)
    elif backend.neuron_backed():  # torch-neuronx 2.9 reads NEURON_CC_FLAGS at each compile
        accel.require_auto_cast_none()
    whole = mode in accel.WHOLE
    planned = attrs.evolve(problem, batch=accel.bucket_batch(problem.batch)) if whole else problem
    with accel.plan_route(mode):  # measured planning times each candidate by the plan's own route
        got = provide(planned, spec, dev, tol, cache, "eager", wisdom_only, effort)
    notes = {"runtime": backend.runtime(), "compile_cache": accel.cache_note(problem.device),
             "bucket": accel.bucket_note(problem, planned, mode, backend.neuron_backed()), "compile_mode": mode, "compile_reason": reason}
    if not whole:
        return got, None, attrs.evolve(got.provenance, **notes)
    too_big = neuron.largest_tensor_reason(planned, got.tree) if backend.neuron_backed() else None
    if too_big is not None:  # before any compile (a neuronx-cc run of seconds to minutes)
        raise PlanningError(too_big)
    t0 = time.perf_counter()
    runner, fresh = accel.compiled_runner(planned, got.tree, got.module, dev, backend, mode)
    # the NEFFs its graphs added to the runtime's compile cache belong to this plan: export ships them
    key = got.provenance.wisdom_key
    compiled.record(cache, key, runner.unrecorded((str(cache.path) if cache is not None else "", key)))
    if wisdom_only and fresh and any(c.neffs for c in runner.compiled):
        raise WisdomMiss(f"effort='wisdom_only' (or TRNPLAN_WISDOM_ONLY=1) never compiles, and the graph of "
                         f"{got.tree} for {planned.describe()} was not in the Neuron compile cache "
                         f"({accel.cache_note(problem.device)}): neuronx-cc compiled it now. Precompile it into "
                         f"that cache (trnplan precompile with the same cache directory) and ship the directory, or "
                         f"import a `trnplan cache export` bundle, which carries the compiled graphs")
    notes.update(compile_s=time.perf_counter() - t0, artifact="compiled in process",
                 fallback=accel.fallback_note(problem.device))
    if not fresh:
        notes["compile_reason"] += "; this bucket's graph was already compiled in this process: shared"
    return got, runner, attrs.evolve(got.provenance, **notes)


def _finish_plan(problem, spec, dev, tol, cache, compile, verify, effort, got, runner, provenance) -> Plan:
    plan = Plan(problem, got.tree, got.candidates, got.module, dev, provenance=provenance, runner=runner,
                strategy=str(spec) if spec else None, tol=got.tol,
                profile_name=get_backend(problem.device).profile.name,
                replan=functools.partial(plan_many, tol=tol, cache=cache, compile=compile,
                                         effort="estimate" if effort == "wisdom_only" else effort))
    if verify:
        verify_plan(plan, cache)
    return plan


__all__ = ["DEFAULT_CACHE", "cached_plan", "clear_plan_cache", "dropin_plan", "plan_cache_info", "plan_many", "plan_many_uncached"]
