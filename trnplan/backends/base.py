"""The backend protocol: what the planner and Plan need to know about a device kind.

A backend knows whether it can run here (:meth:`unavailable_reason`), whether it has a native
FFT (:meth:`has_native_fft`), its cost profile (:attr:`profile`), its fingerprint (what a plan
or an artifact depends on), which artifact kinds it builds (:meth:`resolve_compile`), and how
to build a lowered module into artifact bytes and load them back without recompiling
(:meth:`build_artifact`, :meth:`load_artifact`; see :mod:`trnplan.backends.artifacts`).
"""

from __future__ import annotations

import platform
import threading

import attrs
import torch

from trnplan.backends import artifacts
from trnplan.backends.pool import thread_pool
from trnplan.core import config, state
from trnplan.core.cost import CostProfile
from trnplan.core.errors import BackendUnavailable
from trnplan.kernels import gemm

#: how a failed probe's assumption starts (:attr:`PrecisionProbe.transient`)
PESSIMISTIC = "assumed (pessimistic; not stored)"


@attrs.frozen
class PrecisionProbe:
    """What a device's GEMM path really does with reduced-precision operands.

    Attributes
    ----------
    bf16_products_exact : bool
        A bf16×bf16 product reaches the fp32 accumulator exactly through the GEMM path the bf16
        modes use (false on an engine that rounds products, or its output, to bf16: then the
        split modes bf16x3/bf16x6 are no better than bf16).
    fp32_matmul : {"fp32", "tf32", "bf16"}
        What an fp32 matmul really computes in (an auto-cast to TF32 or bf16 shows here).
    source : str
        "probed" with where, or "assumed" with why (a device that cannot be probed here).
    """

    bf16_products_exact: bool = True
    fp32_matmul: str = "fp32"
    source: str = ""

    @property
    def transient(self) -> bool:
        """The assumption made after a failed probe (:meth:`Backend.pessimistic_probe`): never stored
        in the plan cache, so the next process probes again (an assumption by design, a build host's,
        is stored with the plans it made)."""
        return self.source.startswith(PESSIMISTIC)

    def describe(self) -> str:
        exact = "exact" if self.bf16_products_exact else "NOT exact (split modes predicted at bf16 accuracy)"
        fp32 = "fp32" if self.fp32_matmul == "fp32" else f"{self.fp32_matmul} (fp32 GEMMs predicted at that accuracy)"
        return f"bf16×bf16 products into the fp32 accumulator: {exact}; fp32 matmul computes in {fp32} ({self.source})"

    def to_dict(self) -> dict:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PrecisionProbe:
        if not isinstance(data, dict) or set(data) != {"bf16_products_exact", "fp32_matmul", "source"} or data[
                "fp32_matmul"] not in ("fp32", "tf32", "bf16") or not isinstance(data["bf16_products_exact"], bool) \
                or not isinstance(data["source"], str):
            raise ValueError(f"not a precision probe record: {str(data)[:200]}")
        return cls(**data)


class ProbeModule(torch.nn.Module):
    """The precision probe's three matmuls as one module (one graph where the device compiles)."""

    def forward(self, a1, b1, a2, b2, a3, b3):
        return gemm.matmul(a1, b1, "bf16x3"), gemm.matmul(a2, b2, "fp32"), gemm.matmul(a3, b3, "fp32")


def probe_inputs(bf16_dtype: torch.dtype = torch.float32) -> tuple:
    """The probe's six operands, made in float64 and cast on the host (nothing 64-bit reaches a device)."""
    def pair(a_val, b_val, dtype):
        a = torch.zeros(8, 64, dtype=torch.float64)
        b = torch.zeros(64, 8, dtype=torch.float64)
        a[:, : len(a_val)] = torch.tensor(a_val, dtype=torch.float64)
        b[: len(b_val), :] = torch.tensor(b_val, dtype=torch.float64)[:, None]
        return a.to(dtype), b.to(dtype)

    t = 1 + 2.0**-7
    return (*pair([t, 2.0**-10], [t, 2.0**-10], bf16_dtype), *pair([1 + 2.0**-20], [1 + 2.0**-20], torch.float32),
            *pair([1 + 2.0**-9], [1 + 2.0**-9], torch.float32))


def read_probe(outputs, source: str) -> PrecisionProbe:
    """The :class:`PrecisionProbe` of the probe module's three outputs (host float64 tensors)."""
    split, fp32, tf32 = outputs
    t = 1 + 2.0**-7
    exact = bool((split == t * t + 2.0**-20).all())
    if bool((fp32 == 1 + 2.0**-19).all()):
        mode = "fp32"
    elif bool((tf32 == (1 + 2.0**-9) ** 2).all()):
        mode = "tf32"
    else:
        mode = "bf16"
    return PrecisionProbe(exact, mode, source)


def run_precision_probe(device: torch.device, run=None, route: str = "eager") -> PrecisionProbe:
    """Probe the GEMM path of :mod:`trnplan.kernels.gemm` on ``device`` (a few tiny matmuls).

    (a) ``[1 + 2^-7, 2^-10] · [1 + 2^-7, 2^-10]`` in the bf16 modes' operand format: the exact
    sum 1 + 2^-6 + 2^-14 + 2^-20 needs 21 bits, so it survives only if each product is exact and
    the accumulator is fp32 (a product rounded to bf16 loses the 2^-14).
    (b) ``(1 + 2^-20)²`` as an fp32 matmul is 1 + 2^-19 in fp32 but 1 under TF32 or bf16
    operands (10- and 7-bit fractions); ``(1 + 2^-9)²`` then tells TF32 (exact) from bf16 (1).

    The operands are cast on the host and moved; ``run(module, inputs)`` runs the module the way
    the device's plans run (its compiled route; default: eagerly); the results come back to the
    host before anything is compared or widened (no float64 on the device).
    """
    bf16_dtype = torch.bfloat16 if gemm.native_bf16_matmul(device.type) else torch.float32
    inputs = tuple(t.to(device) for t in probe_inputs(bf16_dtype))
    module = ProbeModule()
    with torch.no_grad():
        outputs = run(module, inputs) if run is not None else module(*inputs)
    how = "bf16 tensors, out_dtype=float32" if bf16_dtype == torch.bfloat16 else "bf16 values in an fp32 GEMM"
    return read_probe([o.cpu().double() for o in outputs], f"probed on {device} ({how}; {route})")


@attrs.frozen
class Boundary:
    """What may cross a plan's boundary on a device (DESIGN.md "Backends own their device").

    Attributes
    ----------
    complex : bool
        Complex tensors may be handed in or out (``Plan.execute``). False where the device holds
        no complex data: only the split ``(re, im)`` form (``Plan.execute_split``) is taken.
    views : bool
        Split and pack by views (``.real``/``.imag``, ``torch.complex``: the host and CUDA, free);
        else by arithmetic inside the device's graph (an accelerator with complex tensors but no
        lowering of the view ops, e.g. torch-xla's dynamo bridge).
    why : str
        Why complex may not cross (the refusal's reason, with its source); "" where it may.
    """

    complex: bool = True
    views: bool = True
    why: str = ""


_PROBES: dict = {}
_PROBE_LOCK = threading.Lock()


def clear_probe_cache() -> None:
    """Forget every in-process probe result (tests that simulate a device call this)."""
    with _PROBE_LOCK:
        _PROBES.clear()


state.register("backends.probes", clear_probe_cache)


class Backend:
    kind: str = ""
    profile: CostProfile
    #: the host-fallback fact: the host <-> device transfer rate (GB/s) a host-only plan (a host FFT
    #: library at the root) is priced with on this device; None where plans run where the data is
    #: (cpu, cuda). The decision itself is the planner's (:meth:`Planner.host_fallback_reason`).
    host_link_gbs: float | None = None
    #: build_artifact takes ``workdir=``: a directory under the plan cache where the compiler's logs
    #: are kept (Neuron's compiler_workdir)
    keeps_compiler_logs: bool = False
    #: plans run compiled whole, so the traffic counted on the lowered graph is their price
    #: (explain() shows it beside the model's figure); on the host and CUDA ops run one by one
    traffic_is_price: bool = False
    #: the plan's norm scale (1/n of an inverse) is folded into the last GEMM's constant matrix
    #: where the tree's root can (:meth:`Solver.build_scaled`): in the captured graph a separate
    #: scale is one more read and write of the output (trnplan.plan.traffic counts it); False
    #: where plans run op by op, whose results stay as they were
    folds_scale: bool = False
    #: the host FFT libraries (pyFFTW, mkl_fft, scipy) are leaves here (explain() lists them)
    host_libraries: bool = False
    #: the multicore solver's shards run in this process (explain() shows them); False where the
    #: backend maps the batch onto its cores itself (a bucket line says how)
    process_shards: bool = True

    def unavailable_reason(self) -> str | None:
        """``None`` if this backend can run on this machine, else why not and what to do."""
        return None

    # ------------------------------------------------------------------ resolving the device
    def resolve_device(self, device) -> torch.device:
        """The torch.device a plan asked for on ``device`` runs on (its index filled in, as tensors
        there report theirs); :class:`BackendUnavailable` where this backend cannot run here."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise BackendUnavailable(reason)
        return self.device_for(device)

    def device_for(self, device) -> torch.device:
        """:meth:`resolve_device`'s device, once the backend is known available: as given."""
        return torch.device(device)

    def device_argument(self, device: torch.device):
        """The ``device=`` that plans again for ``device`` (a resolved device; the adjoint, unpickling)."""
        return device

    # ------------------------------------------------------------------ building a plan
    def build(self, request, provide, record_compiled=None):
        """``(provided, runner, provenance)`` of a plan request (:class:`trnplan.plan.request.PlanRequest`).

        ``provide(request)`` is the plan layer's pipeline (look up → trust → plan or measure →
        artifact → store, :func:`trnplan.plan.provide.provide`); its result has ``tree``,
        ``runner`` and ``provenance``. ``record_compiled(cache, wisdom_key, files)`` keeps the files a
        graph compiled in this process added to the device runtime's compile cache with the plan
        (:func:`trnplan.cache.compiled.record`), so that cache export ships them. Here the plan runs as provided; a backend whose plans run in
        another form (a bucketed batch, a graph compiled in the process, one NEFF copy per core)
        overrides this, and the plan layer never asks which device it is.
        """
        got = provide(request)
        return got, got.runner, got.provenance

    # ------------------------------------------------------------------ the boundary
    def boundary(self, device) -> Boundary:
        """What may cross a plan's boundary on ``device`` (:class:`Boundary`): complex tensors by
        views on the host and CUDA (and the trace route, whose plans take host tensors)."""
        return Boundary()

    def neuron_backed(self) -> bool:
        """Whether this backend's device is a NeuronCore (no complex, no FP64, NEFF compiles)."""
        return False

    def has_native_fft(self, precision: str) -> bool:
        return False

    # ------------------------------------------------------------------ precision
    #: the precision modes this backend runs (tf32 needs TF32 tensor cores: CUDA only)
    precisions: tuple[str, ...] = ("fp32", "fp64", "bf16", "bf16x3", "bf16x6")

    def precision_unsupported_reason(self, precision: str) -> str | None:
        """``None`` if this backend runs ``precision`` ("auto" always), else why not and the fix."""
        if precision == "auto" or precision in self.precisions:
            return None
        if precision == "tf32":
            return (f"precision='tf32' uses TF32 tensor cores, which only device='cuda' has (this is {self.kind}); "
                    f"use precision='bf16x3' (about 1e-5, split bf16 GEMMs) or 'fp32' here, or "
                    f"precision='auto' with a tol")
        return f"precision={precision!r} is not available on {self.kind}; use one of {', '.join(self.precisions)}"

    def precision_probe(self, device: torch.device | None = None) -> PrecisionProbe:
        """The device's :class:`PrecisionProbe`, run once per process and device."""
        if device is None:  # the backend's default device; "neuron" is no torch device type
            device = self.kind if self.kind == "neuron" else torch.device(self.kind)
        key = (self.kind, str(device))
        with _PROBE_LOCK:
            probe = _PROBES.get(key)
        if probe is None:
            probe = self._probe(device)
            with _PROBE_LOCK:
                probe = _PROBES.setdefault(key, probe)
        return probe

    def remember_probe(self, device: torch.device, probe: PrecisionProbe) -> PrecisionProbe:
        """Adopt a probe result loaded from the plan cache (unless this process already has one)."""
        with _PROBE_LOCK:
            return _PROBES.setdefault((self.kind, str(device)), probe)

    def has_probe(self, device: torch.device) -> bool:
        with _PROBE_LOCK:
            return (self.kind, str(device)) in _PROBES

    def _probe(self, device: torch.device) -> PrecisionProbe:
        return run_precision_probe(device)

    def pessimistic_probe(self, why: str) -> PrecisionProbe:
        """What planning assumes when the probe fails: the worst a device may do (products rounded
        before accumulation, fp32 matmuls in bf16), so that no plan is predicted better than it is."""
        return PrecisionProbe(False, "bf16", f"{PESSIMISTIC}: {why}")

    def probe_can_wait(self, problem) -> bool:
        """Whether planning may assume the probe first and run it only when a device plan wins
        (the Neuron probe is a compile); the probe is cheap elsewhere."""
        return False

    def measure_unavailable_reason(self) -> str | None:
        """Why effort "measure" cannot time candidates where this backend's plans run, or None."""
        return None

    def measure_runner(self, tree, module, problem, device):
        """(runner, built) to time a candidate with: ``(None, None)`` runs the eager module, which
        is what runs on this backend's device; an artifact backend whose device the eager module
        does not reach builds and loads the candidate (``built``: (bytes, facts, seconds))."""
        return None, None

    def build_failure_fallback(self) -> bool:
        """Whether a plan whose artifact fails to build runs eagerly instead (with a warning). True
        where eager runs on the same device; Neuron raises unless the user opted into the host."""
        return True

    # ------------------------------------------------------------------ cores
    def shard_executor_reason(self) -> str | None:
        """``None`` if this backend runs the multicore solver's shards concurrently, else why not."""
        return None

    def shard_executor(self, shards: int):
        """Where the multicore solver's shards run: an object with ``submit(fn, *args)`` → future.

        The CPU (and the default) is a process-wide pool of worker threads; torch ops and the host
        FFT libraries release the GIL while they compute. The Trainium backend is the seam for one
        loaded artifact per NeuronCore (the Neuron backend issue).
        """
        return thread_pool(shards)

    # ------------------------------------------------------------------ artifacts
    #: the artifact kinds this backend can build, besides "eager" (none)
    artifact_modes: tuple[str, ...] = ("aot",)
    #: compile modes that compile in the running process and keep nothing in the plan cache
    jit_modes: tuple[str, ...] = ("inductor",)
    #: load each new AOT artifact in a child process first (artifacts.load_check), where a
    #: crash at load has been seen; TRNPLAN_AOT_LOAD_CHECK=1/0 overrides it
    load_check_artifacts: bool = False

    def resolve_compile(self, compile: str) -> tuple[str, str]:
        """(mode, why) for ``plan_many(compile=...)``: "auto" picks per backend."""
        if compile == "auto":
            return self.auto_compile()
        if compile != "eager" and compile not in self.artifact_modes + self.jit_modes:
            known = ", ".join(("auto", "eager", *self.artifact_modes, *self.jit_modes))
            raise ValueError(f"compile={compile!r} is not available on {self.kind}; use one of {known}")
        return compile, "asked for"

    def jit_compile(self, module, example, mode: str):
        """A runner of ``module`` compiled in this process (``compile="inductor"``)."""

        return artifacts.InductorRunner(module, example, config.inductor_mode())

    def auto_compile(self) -> tuple[str, str]:
        return "eager", "no artifact kind pays on this backend"

    def build_artifact(self, module, example, mode: str) -> tuple[bytes, dict]:
        """Compile a lowered module to artifact bytes; returns (bytes, facts about it)."""
        data, dynamic = artifacts.aot_compile(module, example)
        return data, {"dynamic_batch": dynamic}

    def load_artifact(self, data: bytes, mode: str, device: torch.device):
        """A callable (re, im) -> (re, im) running the artifact, without recompiling."""
        return artifacts.AOTRunner(data, device)

    def fingerprint(self, device: torch.device | None = None) -> dict:
        """Facts a plan or an artifact for ``device`` depends on; the plan cache keys wisdom and
        artifacts on them."""
        return {"machine": platform.machine()}
