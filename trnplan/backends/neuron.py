"""The Neuron (Trainium) backend: NEFF artifacts through ``torch_neuronx.trace``, bucketed batches,
one loaded artifact per NeuronCore, and a priced host fallback.

NeuronCores have no complex dtype (NCC_EVRF004), no ``aten::fft_*``, no fp64, static shapes
only, and pay ~0.7 ms per dispatch (../shared/FACTS.md), so the profile has no native FFT and a
dispatch cost three orders above the CPU's: the planner prefers few, large GEMMs there.

This is the legacy ``torch_neuronx.trace`` route: the XLA-based torch-neuronx 2.9 (the only
PyTorch route to trn1/inf2, also on trn2). Which runtime a process has is decided by package
version and device registration (:mod:`trnplan.backends.neuron_runtime`), never by whether
``import torch_neuronx`` succeeds; TorchNeuron (torch-neuronx 2.13+/2.14, the native ``neuron``
device) has no ``trace`` and is another backend's.

How a ``device="neuron"`` plan runs here (docs/trainium.md, "The trn1/inf2 trace route"):

1. **Bucket.** A NEFF has fixed shapes, so the batch is bucketed (:func:`bucket_batch`): the
   per-core batch ``⌈batch / cores⌉`` rounds up to the next of 2, 3, 4, 6, 8, 12, 16, 24 … (the
   powers of two and 1.5× them: ≤ 33 % padding, two buckets per octave). The plan is made and
   compiled for the bucket; inputs are zero-padded to it and outputs cropped, so a workload
   with batch sizes 1…1000 compiles at most 19 NEFFs, and two batch sizes in one bucket share
   the wisdom and the artifact. ``cores`` is checked against the NeuronCores this process sees
   and the per-call tensor against the 2 GB limit before anything is compiled.
2. **Compile.** The lowered module (split re/im, float32, fixed shapes) goes to
   ``torch_neuronx.trace(module, example, compiler_args=["--auto-cast", "none", "--target", T],
   compiler_workdir=<plan cache>/compile/<key>)``: ``--auto-cast none`` explicitly, because up to
   SDK 2.26 the compiler default auto-cast fp32 matmuls to bf16; ``--target`` from the instance
   (or ``TRNPLAN_NEURON_TARGET``); neuronx-cc's log stays in the work directory. A build host
   (no ``/dev/neuron*``, or ``TRNPLAN_NEURON_CPU_BACKEND=1``) traces with ``cpu_backend=True``
   and must name the target. ``torch.jit.save`` bytes go to the plan cache's artifact store (the
   Neuron compile cache does not keep traced models). A failed compile raises
   :class:`~trnplan.core.errors.CompileError` naming the log, unless the user opted into the host
   (``TRNPLAN_NEURON_HOST_FALLBACK=1``).
3. **Load and run.** ``import torch_neuronx`` (it registers the ``neuron::`` ops the model calls),
   then ``torch.jit.load`` from those bytes, once per NeuronCore used, each inside the supported
   ``torch_neuronx.neuron_cores_context(start_nc=i, nc_count=1)`` under a process-wide lock (the
   context sets a process-wide default and is not thread-safe), and the batch sharded on dim 0
   across them by :class:`NeuronExecutor`. On a build host nothing is loaded: the plan is stored,
   and its ``execute`` raises (:class:`BuildOnly`). Not ``torch_neuronx.DataParallel``: the seed
   project reverted it on SDK 2.29 (a layout assertion with several shapes in one process), and
   its dynamic batching splits a batch into shards of *any* size, which a fixed-shape NEFF must
   then pad anyway; sharding here keeps every call at the compiled bucket shape.
4. **Host fallback.** The host FFT libraries (scipy, pyFFTW, mkl_fft) are candidates at the root,
   priced on the CPU profile plus the transfer both ways (:mod:`trnplan.planner.library`), so a
   small problem stays on the host, as the seed project's measurements say it should (fft N=1024:
   16 ms through NKI against 28 µs on the host). ``explain()`` always says where the plan runs.
5. **Precision probe.** Where a NeuronCore is there, the precision probe is traced and run on it
   once per fingerprint (:func:`neuron_precision_probe`): it detects whether bf16 products are
   rounded before fp32 accumulation (the seed project's finding), which decides whether the
   split modes can meet their bars. For fp32 and bf16 plans it runs only if a NeuronCore plan
   wins (a host fallback compiles nothing). Elsewhere that finding is assumed.
6. **Measure.** ``effort="measure"`` traces each timed candidate and times its NEFF on the
   NeuronCores (after :data:`STARTUP_WARMUP_S` of warm-up); on a build host it is refused.

*Nothing here has run on Trainium.* The integration is tested on the CPU with a stand-in for
``torch_neuronx`` (tests/test_neuron_standin.py, tests/test_neuron.py) and the graph handed to the
compiler by the lowering audit (:mod:`trnplan.tools.audit`); real-hardware tests are marked ``neuron``.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import shutil
import tempfile
import threading
import time

import attrs
import torch

from trnplan.backends import artifacts, neuron_runtime, trainium
from trnplan.backends.base import PESSIMISTIC, Backend, PrecisionProbe, read_probe
from trnplan.core import config, state
from trnplan.core.errors import BackendUnavailable, CompileError, PlanningError
from trnplan.kernels import gemm

#: The trace route runs on trn1/inf2 (NeuronCore-v2): one NEFF per plan and bucket, priced as it
#: runs there (:mod:`trnplan.backends.trainium`: figures and sources)
NEURON_PROFILE = trainium.TRN1_PROFILE

#: host ↔ NeuronCore transfer rate the host fallback is priced with, GB/s. Assumed, not measured:
#: about half of PCIe Gen4 x16's 32 GB/s nominal. The issue prices the transfer on the host leaf;
#: with torch_neuronx.trace the data starts on the host, so it really falls on the device path
#: (docs/trainium.md discusses the bias).
HOST_LINK_GBS = 16.0

# ---------------------------------------------------------------------- hardware facts and limits
# From the spectral DNS sample on inf2/trn1 (NeuronCore-v2; neuronx-cc 2.27, SDK 2.32), runtimes.md §5.
#: one HBM tensor must stay ≤ 2 GB (2^29 fp32 values): DMA offsets are 32-bit
#: [DNS docs/neuron-rules.md rule 10]. Checked on every device plan (:func:`tensor_limit_reason`).
MAX_TENSOR_BYTES = 2**31
#: the Tensor Engine contracts over 128 partitions; a moving (free) dimension is at most 512 wide
#: [DNS docs/method.md]. neuronx-cc tiles a traced XLA graph itself, so these bound hand-written
#: (NKI) kernels, not trnplan's traced plans: a GEMM whose contraction is not a multiple of 128
#: leaves partitions idle, which the cost profile does not model yet.
PARTITIONS, MAX_FREE = 128, 512
#: a 1-D fp32 DFT done as matmul matched NumPy to 1.6e-7 with --auto-cast=none on trn1
#: [DNS docs/neuron-rules.md rule 8]: fp32 GEMMs really are fp32 with these compiler args, which is
#: what the assumed precision probe says (fp32_matmul="fp32").
FP32_DFT_ERROR = 1.6e-7
#: after the runtime starts (nrt_init resets the cores) a NeuronCore runs ~2.2× slower for a few
#: seconds: a 16.6 ms NEFF peaked at 37 ms [DNS docs/neuron-rules.md rule 6, docs/results.md].
#: Timing on a NeuronCore (effort "measure", bench/trainium_first_run.py) runs the plan for this
#: long first.
STARTUP_WARMUP_S = 3.0
#: one NEFF compile takes 5–45 s (about 3 min for the DNS 512³ stage) [DNS docs/results.md]; the
#: seed project saw 30–90 s.
COMPILE_S = (5.0, 90.0)

INSTALL_HINT = (
    "device='neuron' needs AWS's Neuron SDK for PyTorch, which is not usable here ({why}). Use device='cpu' to "
    "run the same plans on the host, or " + neuron_runtime.INSTALL_BOTH + ". trnplan.Planner(trnplan.backends."
    "get_backend('neuron')) shows the tree a NeuronCore would get, and trnplan.tools.audit.audit(problem) checks "
    "its lowering (docs/trainium.md)"
)


# ---------------------------------------------------------------------- configuration
def runtime() -> neuron_runtime.NeuronRuntime:
    """The Trainium runtime of this process (:func:`trnplan.backends.neuron_runtime.detect`)."""
    return neuron_runtime.detect()


def target() -> str | None:
    """The neuronx-cc ``--target``: ``$TRNPLAN_NEURON_TARGET``, else the EC2 instance family, else
    ``None`` (not passed: neuronx-cc uses its own default).

    The instance type comes from the DMI product name (``trn1.32xlarge`` → trn1, ``trn2.48xlarge``
    → trn2, ``trn1n.32xlarge`` → trn1n, ``inf2.xlarge`` → inf2); a build host that is not a Neuron
    instance (a container build for trn2) sets ``TRNPLAN_NEURON_TARGET``.
    """
    env = config.neuron_target()
    if env:
        return env
    family = neuron_runtime.instance_family()
    # a trn1n has the trn1's chip (NeuronCore-v2); neuronx-cc's --target=trn1n (compiler 2.5.0.28)
    # differs in collectives over its network, which a plan does not use: a trn1n host compiles for
    # trn1, so that build and run hosts of either family share plans and NEFFs
    family = {"trn1n": "trn1"}.get(family, family)
    return family if family in ("trn1", "trn2", "inf2") else None


def cpu_backend() -> bool:
    """``TRNPLAN_NEURON_CPU_BACKEND=1``: trace with ``cpu_backend=True`` and do not load here."""
    return config.neuron_cpu_backend()


def host_fallback_allowed() -> bool:
    """``TRNPLAN_NEURON_HOST_FALLBACK=1``: a NEFF that fails to build runs on the host instead of raising."""
    return config.neuron_host_fallback()


def build_only_reason() -> str | None:
    """Why this process builds NEFFs but cannot run them (a build host), or ``None``.

    A build host has no Neuron device (``/dev/neuron*``), or asks for ``cpu_backend`` builds. There
    plans are traced with ``cpu_backend=True`` and stored; nothing is loaded onto a NeuronCore
    (loading needs the runtime, which cannot start there: "Runtime could not be initialized").
    """
    if cpu_backend():
        return "TRNPLAN_NEURON_CPU_BACKEND=1: NEFFs are built with cpu_backend=True and not loaded here"
    if runtime().chips == 0:
        return "this host has no Neuron device (no /dev/neuron*): a build host, NEFFs are built, not run"
    return None


def compiler_args() -> list[str]:
    """The neuronx-cc arguments every trace gets (and the fingerprint records).

    ``--auto-cast none`` explicitly: SDK ≤ 2.26 defaulted to bf16 auto-cast of fp32 matmuls, and
    the sin/cos precision note (nxdi-troubleshooting.rst) gives the same fix; the bf16 modes cast
    their own operands. ``--target`` when it is known (:func:`target`).
    """
    tgt = target()
    return ["--auto-cast", "none"] + (["--target", tgt] if tgt else [])


def build_compiler_args() -> tuple[list[str], bool]:
    """(compiler args, cpu_backend) of a trace in this process: a build host traces with
    ``cpu_backend=True`` and must name the target, since there is no device to take it from."""
    use_cpu = build_only_reason() is not None
    if use_cpu and target() is None:
        raise ValueError(f"{build_only_reason()}; without a NeuronCore the compile target must be named: set "
                         f"TRNPLAN_NEURON_TARGET=trn1, inf2 or trn2 (the instance family the NEFF will run on)")
    return compiler_args(), use_cpu


def cores_unavailable_reason(cores: int) -> str | None:
    """Why this process cannot put a copy of the plan on each of ``cores`` NeuronCores, or None."""
    rt = runtime()
    visible = rt.visible_cores()
    if visible is None or cores <= visible:
        return None  # unknown (an instance family trnplan does not know): the placement itself will tell
    if rt.visible_cores_env:
        how = f"NEURON_RT_VISIBLE_CORES={rt.visible_cores_env}"
    elif rt.num_cores_env:
        how = f"NEURON_RT_NUM_CORES={rt.num_cores_env}"
    else:
        how = f"{rt.chips} Neuron device(s) × {rt.total_cores() // max(rt.chips, 1)} cores ({rt.family})"
    return (f"cores={cores}, but this process sees {visible} NeuronCore(s) ({how}). Set NEURON_RT_VISIBLE_CORES="
            f"0-{cores - 1} (or NEURON_RT_NUM_CORES={cores}) before the process starts, or plan with cores≤{visible}; "
            f"a core another process holds is not available to this one")


def tensor_limit_reason(problem) -> str | None:
    """Why a device plan of ``problem`` (its bucketed per-core batch) breaks the 2 GB tensor limit."""
    per_call = problem.batch * math.prod(problem.in_shape) * torch.finfo(problem.real_dtype).bits // 8
    if per_call <= MAX_TENSOR_BYTES:
        return None
    return (f"{problem.describe()}: one call's input tensor is {per_call / 2**30:.1f} GiB, over the 2 GiB a NeuronCore "
            f"tensor may have (DMA offsets are 32-bit); use more cores or smaller batches per plan")


#: how many split operands a precision mode's GEMM stacks into one tensor (bf16x3: two bf16 slices of
#: each operand, bf16x6: three), on top of the [re | im] concatenation of a fused complex GEMM
_SLICES = {"bf16x3": 2, "bf16x6": 3}


def largest_tensor_reason(problem, tree) -> str | None:
    """Why a device plan of ``problem`` with ``tree`` breaks the 2 GB tensor limit at its largest
    intermediate, not only its input (issue 27 item 9): each node's ``batch × n`` points, split re/im
    concatenated into one operand (``[re | im]``, 2×), times the split modes' stacked slices; Bluestein
    and four-step nodes carry their padded / full sizes in the tree."""
    itemsize = torch.finfo(problem.real_dtype).bits // 8
    worst, where = 0, None
    for _, node in tree.walk():
        size = node.batch * node.n * 2 * itemsize * _SLICES.get(node.param("mode") or problem.precision, 1)
        if size > worst:
            worst, where = size, node
    if worst <= MAX_TENSOR_BYTES:
        return None
    return (f"{problem.describe()}: the plan's largest intermediate ({where.solver} over n={where.n}, "
            f"[re | im] operands) is about {worst / 2**30:.1f} GiB, over the 2 GiB a NeuronCore tensor may have "
            f"(DMA offsets are 32-bit, runtimes.md §5); use smaller batches per plan or more cores")


# ---------------------------------------------------------------------- buckets
def bucket_batch(batch: int, cores: int = 1) -> int:
    """The compiled per-core batch for ``batch`` transforms over ``cores`` NeuronCores.

    ``q = ⌈batch / cores⌉`` rounded up to the next of {2, 3, 4, 6, 8, 12, 16, 24, …} (2^k and
    3·2^(k−1)): at most a third of the work is padding, and there are two buckets per octave.
    The smallest bucket is 2 because the example inputs are traced with a batch of at least 2
    (:func:`trnplan.backends.artifacts.example_inputs`).
    """
    q = max(2, -(-batch // max(cores, 1)))
    p = 1 << (q - 1).bit_length()  # next power of two ≥ q
    return 3 * p // 4 if 3 * p // 4 >= q and p >= 4 else p


def bucketed(problem):
    """The problem a neuron plan is made and compiled for: the per-core bucket as its batch."""
    return attrs.evolve(problem, batch=bucket_batch(problem.batch, problem.cores))


def bucket_note(problem, planned, on_device: bool = True) -> str:
    """explain()'s line: how the batch maps onto buckets and cores."""
    cores = problem.cores
    if not on_device:
        return (f"none used: the host runs batch {problem.batch} as is (the plan was made and priced for "
                f"{cores} × {planned.batch}, the bucketed batch a NEFF would have run)")
    per = -(-problem.batch // cores)
    shards = math.ceil(problem.batch / planned.batch)
    return (f"batch {problem.batch} over {cores} NeuronCore(s): {shards} call(s) of the compiled batch "
            f"{planned.batch} (⌈{problem.batch}/{cores}⌉ = {per} rounded up to the next of 2, 3, 4, 6, 8, 12, …); "
            f"inputs zero-padded, outputs cropped")


# ---------------------------------------------------------------------- plan time
def check_plannable(planned) -> None:
    """Refuse, before any compile, a bucketed problem this process cannot run on NeuronCores:
    more cores than it sees (:func:`cores_unavailable_reason`), or a tensor over 2 GB."""
    if build_only_reason() is None:
        reason = cores_unavailable_reason(planned.cores)
        if reason is not None:
            raise BackendUnavailable(reason)
    reason = tensor_limit_reason(planned)
    if reason is not None:
        raise PlanningError(reason)


def place(problem, planned, got, cache):
    """(runner, provenance) of a neuron plan: the provenance completed with where it runs
    (``runs_on``) and its bucket.

    A NEFF loaded once per NeuronCore (:class:`NeuronExecutor`); on a build host, a runner that
    refuses (:class:`BuildOnly`): nothing runs on the host unless a host library won on cost, or
    the user asked for it (``compile="eager"``, ``TRNPLAN_NEURON_HOST_FALLBACK=1``).
    """
    pv, artifact = got.provenance, got.runner
    bucket = bucket_note(problem, planned, on_device=artifact is not None)
    build_only = build_only_reason() if artifact is not None else None
    if artifact is not None and build_only is not None:
        runs_on = (f"nowhere on this host: {build_only}; the NEFF for --target {target()} is in the plan cache, "
                   f"execute() raises here")
        runner = BuildOnly(build_only, str(cache.path) if cache is not None else None)
    elif artifact is not None:
        cores = "NeuronCore 0" if problem.cores == 1 else f"NeuronCores 0–{problem.cores - 1}"
        runs_on = f"{cores} of those this process sees (one NEFF copy per core; torch_neuronx.trace, " \
                  f"{' '.join(compiler_args())})"
        runner = NeuronExecutor(artifact, planned.batch, problem.cores, NeuronBackend())
    else:
        why = pv.compile_reason
        if why == "asked for":
            why = "compile='eager' was asked for: the lowered module runs eagerly on the host"
        runs_on = f"the host CPU, not a NeuronCore: {why}"
        if pv.artifact_error and host_fallback_allowed():
            runs_on += f" ({pv.artifact_error}; TRNPLAN_NEURON_HOST_FALLBACK=1 asked for the host in that case)"
        runner = None
    return runner, attrs.evolve(pv, bucket=bucket, runs_on=runs_on)


# ---------------------------------------------------------------------- the backend
class NeuronBackend(Backend):
    kind = "neuron"
    profile = NEURON_PROFILE
    host_link_gbs = HOST_LINK_GBS
    keeps_compiler_logs = True
    traffic_is_price = True
    folds_scale = True
    process_shards = False  # one NEFF copy per NeuronCore: the bucket line says how the batch maps onto them
    #: fp64 is host-only (no FP64 on a NeuronCore), tf32 is CUDA's
    precisions = ("fp32", "bf16", "bf16x3", "bf16x6")

    def neuron_backed(self) -> bool:
        return True  # its NEFFs run on NeuronCores; its plans take and return host tensors (complex allowed)

    def resolve_device(self, device) -> torch.device:
        """The host (a traced Neuron model takes and returns host tensors); where neither Neuron
        runtime is installed, the refusal says what was found and how to install each."""
        reason = self.unavailable_reason()
        if reason is not None:
            if neuron_runtime.INSTALL_BOTH not in reason:
                reason = f"{reason}. Found: {neuron_runtime.detect().reason}. To {neuron_runtime.INSTALL_BOTH}"
            raise BackendUnavailable(reason)
        return self.device_for(device)

    def device_for(self, device) -> torch.device:
        return torch.device("cpu")  # a traced Neuron model takes and returns host tensors

    def device_argument(self, device: torch.device):
        return "neuron"  # the plan's device is the host, where its tensors live; the NEFFs run on NeuronCores

    def build(self, request, provide, record_compiled=None):
        """A NEFF has a fixed batch: the plan is made and compiled for the batch's bucket
        (:func:`bucketed`), refused before any compile where this process cannot run it
        (:func:`check_plannable`) or an intermediate tensor is over 2 GB, then placed: one NEFF copy
        per NeuronCore, or a build host's refusal (:func:`place`, which says where it runs)."""
        problem = request.problem
        planned = bucketed(problem)
        check_plannable(planned)
        got = provide(request.for_problem(planned))
        too_big = largest_tensor_reason(planned, got.tree)
        if too_big is not None and got.runner is not None:  # the input passed; an intermediate does not
            raise PlanningError(too_big)
        runner, provenance = place(problem, planned, got, request.cache)
        return got, runner, provenance

    def unavailable_reason(self) -> str | None:
        """``None`` when the XLA-based torch-neuronx with ``trace`` is installed (by its version,
        then its API), else why not and how to install it."""
        rt = runtime()
        if rt.kind == "torchneuron":
            return (f"this environment has TorchNeuron (torch-neuronx {rt.torch_neuronx}, the native 'neuron' device), "
                    f"which has no torch_neuronx.trace: the trace route needs the XLA-based torch-neuronx 2.9 "
                    f"({neuron_runtime.INSTALL_XLA_TRACE}); TorchNeuron runs plans through torch.compile "
                    f"(docs/trainium.md)")
        if rt.kind != "xla-trace":
            return INSTALL_HINT.format(why=rt.reason)
        try:  # the version says it is the XLA library; now its API
            import torch_neuronx  # deferred: the version said it is installed; its API is checked here
        except Exception as exc:  # noqa: BLE001 - any failure to import is the reason
            return (f"torch-neuronx {rt.torch_neuronx} is installed but 'import torch_neuronx' fails "
                    f"({type(exc).__name__}: {exc}); reinstall it ({neuron_runtime.INSTALL_XLA_TRACE})")
        if not callable(getattr(torch_neuronx, "trace", None)):
            return (f"torch-neuronx {rt.torch_neuronx} has no torch_neuronx.trace; "
                    f"install {neuron_runtime.INSTALL_XLA_TRACE}")
        return None

    def precision_unsupported_reason(self, precision: str) -> str | None:
        if precision == "fp64":
            return ("precision='fp64' has no device path on Trainium (trn1/trn2 have no FP64); fp64 plans run on "
                    "the host: plan with device='cpu' (dtype=torch.complex128), or use precision='fp32' / 'bf16x6' "
                    "on the NeuronCore")
        return super().precision_unsupported_reason(precision)

    def has_native_fft(self, precision: str) -> bool:
        return False  # aten::fft_* is unsupported by neuronx-cc

    def assumed_probe(self, why: str = "") -> PrecisionProbe:
        """What the planner assumes without a probe on a NeuronCore: the seed project's finding
        (its Ozaki split-bf16 modes at 1.7e-3 on trn1 and trn2, no better than plain bf16: products
        rounded before PSUM accumulation, ../shared/FACTS.md) and fp32 matmuls kept fp32 by
        ``--auto-cast none`` (the DNS sample's fp32 DFT at 1.6e-7, :data:`FP32_DFT_ERROR`)."""
        return PrecisionProbe(False, "fp32", "assumed from the seed project's trn1/trn2 measurements; not probed on "
                                             "a NeuronCore" + (f": {why}" if why else ""))

    def probe_can_wait(self, problem) -> bool:
        """Whether planning may first assume the probe and run it only if a NeuronCore plan wins.

        For precision fp32 and bf16 the assumed probe is the best case for the device plans (fp32
        matmuls at fp32; the split modes it is pessimistic about are not used), so when the host
        fallback wins under it, it would win under any probe result, and nothing is compiled.
        """
        return problem.precision in ("fp32", "bf16")

    def _probe(self, device):
        why = None
        if not config.neuron_probe():
            why = "TRNPLAN_NEURON_PROBE=0"
        elif runtime().kind != "xla-trace":
            why = "no XLA torch-neuronx here"
        elif build_only_reason() is not None:
            why = build_only_reason()
        if why is not None:
            return self.assumed_probe(why)
        try:
            return neuron_precision_probe()
        except Exception as exc:  # noqa: BLE001 - a probe that cannot run must not stop planning
            # pessimistic and not stored: split modes at bf16 accuracy; fp32 stays fp32 under the
            # --auto-cast none this route always passes (compiler_args)
            return PrecisionProbe(False, "fp32", f"{PESSIMISTIC}: the probe failed: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ artifacts
    artifact_modes = ("neuron",)
    jit_modes = ()  # torch.compile does not target a NeuronCore: a NEFF is traced (compile="neuron")

    def auto_compile(self):
        return "neuron", "a NEFF is the only way to run on a NeuronCore"

    def build_failure_fallback(self) -> bool:
        """A failed NEFF build raises (:class:`~trnplan.core.errors.CompileError`) unless the user opted
        into the host fallback (``TRNPLAN_NEURON_HOST_FALLBACK=1``): eager on the host is not
        where ``device="neuron"`` asked the plan to run."""
        return host_fallback_allowed()

    def build_artifact(self, module, example, mode, workdir=None):
        """Trace ``module`` into a NEFF (TorchScript bytes); ``workdir`` keeps neuronx-cc's files.

        Raises
        ------
        CompileError
            The trace or the compile failed; the message names the compiler's working directory,
            where its log is.
        """
        args, use_cpu = build_compiler_args()
        keep = workdir is not None
        try:
            if keep:
                os.makedirs(workdir, exist_ok=True)
        except OSError:  # a read-only plan cache: the logs go to a temporary directory, named on failure
            keep = False
        if not keep:
            workdir = tempfile.mkdtemp(prefix="trnplan-neuronx-cc-")
        try:
            data = artifacts.neuron_compile(module, example, args, use_cpu, workdir)
        except Exception as exc:
            logs = _compiler_logs(workdir)
            raise CompileError(
                f"torch_neuronx.trace failed for the NeuronCore ({type(exc).__name__}: {str(exc)[:500]}); the "
                f"compiler's working directory is kept at {workdir}"
                + (f" (log: {', '.join(logs)})" if logs else "")
                + ". Send that log with a bug report; TRNPLAN_NEURON_HOST_FALLBACK=1 runs such a plan on the host "
                  "instead, and explain() says so") from exc
        _prune_workdir(workdir, keep)
        return data, {"dynamic_batch": False}

    def load_artifact(self, data, mode, device):
        return NeuronArtifact(data)

    # ------------------------------------------------------------------ measured planning
    def measure_unavailable_reason(self) -> str | None:
        """Effort "measure" times each candidate's NEFF on the NeuronCores, never the eager module
        on the host (which says nothing about the device); a build host has none to time on."""
        reason = self.unavailable_reason() or build_only_reason()
        return None if reason is None else f"device='neuron' has no NeuronCore to time on here ({reason})"

    def measure_runner(self, tree, module, problem, device):
        """A candidate traced, loaded on its cores and warmed up: what effort "measure" times.
        Each costs a NEFF compile (:data:`COMPILE_S`), which counts against the time limit. (A host
        fallback candidate is timed eagerly on the host, where its plan runs: the caller's choice.)"""
        t0 = time.perf_counter()
        data, facts = self.build_artifact(module, artifacts.problem_inputs(problem, device), "neuron")
        seconds = time.perf_counter() - t0
        runner = NeuronExecutor(NeuronArtifact(data), problem.batch, problem.cores, self)
        _warm_up(runner, problem, device)
        return runner, (data, facts, seconds)

    # shard_executor: the base class's worker pool, one thread per NeuronCore used; each drives its
    # own loaded artifact (the NEFF call blocks in the Neuron runtime, outside the GIL)

    def fingerprint(self, device=None) -> dict:
        """torch-neuronx, torch-xla, libneuronxla, neuronx-cc and runtime versions, the logical-core
        setting, the target and the compiler args. Not ``cpu_backend``: it says where the graph is
        traced, not what NEFF the target gets, so what a build host precompiles for trn2 is found on
        the trn2 (docs/trainium.md)."""
        fp = super().fingerprint(device)
        fp.update(runtime().compile_key())  # not the runtime library's dpkg version (explain() shows it)
        fp["neuron_target"] = target() or "neuronx-cc default"
        fp["neuron_compiler_args"] = " ".join(compiler_args())
        return fp


def _compiler_logs(workdir: str) -> list[str]:
    found = []
    for root, _dirs, files in os.walk(workdir):
        found += [os.path.join(root, f) for f in files if "log" in f.lower()]
    return sorted(found)[:5]


def _prune_workdir(workdir: str, keep: bool) -> None:
    """After a successful compile: keep only the logs (the NEFF is in the artifact bytes)."""
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
        return
    for root, _dirs, files in os.walk(workdir):
        for f in files:
            if "log" not in f.lower():
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(root, f))


_WARMED = threading.Event()
state.register("backends.neuron.warmed", _WARMED.clear)


def _warm_up(runner, problem, device) -> None:
    """Run ``runner`` for :data:`STARTUP_WARMUP_S` the first time this process times a NEFF: the
    cores run ~2.2× slower for a few seconds after the runtime starts (runtimes.md §5)."""
    if _WARMED.is_set():
        return
    example = tuple(t[: problem.batch] for t in artifacts.problem_inputs(problem, device))
    end = time.perf_counter() + STARTUP_WARMUP_S
    while True:
        runner(*example)
        if time.perf_counter() >= end:
            break
    _WARMED.set()


# ---------------------------------------------------------------------- the precision probe
class _ProbeModule(torch.nn.Module):
    """The three matmuls of :func:`trnplan.backends.base.run_precision_probe`, as one traced graph."""

    def forward(self, a1, b1, a2, b2, a3, b3):
        return gemm.matmul(a1, b1, "bf16x3"), gemm.matmul(a2, b2, "fp32"), gemm.matmul(a3, b3, "fp32")


def neuron_precision_probe() -> PrecisionProbe:
    """The precision probe, compiled with this backend's compiler args and run on a NeuronCore.

    The same operands and checks as :func:`~trnplan.backends.base.run_precision_probe`: (a) the
    bf16 modes' operand format (bf16 values in an fp32 GEMM: ``native_bf16_matmul`` is CUDA-only)
    must reach the accumulator exactly; (b) an fp32 matmul must not be auto-cast. One small
    compile per fingerprint: the result is kept in the plan cache (``probe:<fingerprint>:cpu``).
    """
    import torch_neuronx  # deferred: only with the Neuron SDK

    def pair(a_val, b_val):
        a = torch.zeros(8, 64, dtype=torch.float64)
        b = torch.zeros(64, 8, dtype=torch.float64)
        a[:, : len(a_val)] = torch.tensor(a_val, dtype=torch.float64)
        b[: len(b_val), :] = torch.tensor(b_val, dtype=torch.float64)[:, None]
        return a.float(), b.float()

    t = 1 + 2.0**-7  # read_probe's test values
    inputs = (*pair([t, 2.0**-10], [t, 2.0**-10]), *pair([1 + 2.0**-20], [1 + 2.0**-20]),
              *pair([1 + 2.0**-9], [1 + 2.0**-9]))
    traced = torch_neuronx.trace(_ProbeModule().eval(), inputs, compiler_args=compiler_args())
    return read_probe([out.double() for out in traced(*inputs)],
                      f"probed on a NeuronCore (torch_neuronx.trace, {' '.join(compiler_args())}; "
                      f"bf16 values in an fp32 GEMM)")


# ---------------------------------------------------------------------- running
#: torch_neuronx.neuron_cores_context sets the runtime's process-wide default placement and "is *not*
#: threadsafe" (its docstring, torch-neuronx 2.9 placement.py): every load of a traced model, placed
#: or not, holds this lock, so two plans loading from two threads cannot place each other's copies
_LOAD_LOCK = threading.Lock()


def _load(data: bytes, core: int | None):
    """``torch.jit.load`` of a traced Neuron model, placed on NeuronCore ``core`` when given.

    ``import torch_neuronx`` first, always: it registers the ``neuron::`` TorchScript ops a traced
    model calls, without which a process that did not trace (a warm cache, ``TRNPLAN_WISDOM_ONLY=1``)
    fails with "Unknown builtin op: neuron::forward_…". Placement uses the supported
    ``torch_neuronx.neuron_cores_context(start_nc, nc_count)`` (api-torch-neuronx-core-placement;
    the ``experimental.`` one ended support after SDK 2.24); ``start_nc`` counts from the first
    core this process sees (NEURON_RT_VISIBLE_CORES).
    """
    import torch_neuronx  # deferred: only with the Neuron SDK (or the test stand-in)

    context = contextlib.nullcontext()
    if core is not None:
        place = getattr(torch_neuronx, "neuron_cores_context", None)
        if place is None:
            raise BackendUnavailable(
                f"torch-neuronx {runtime().torch_neuronx} has no torch_neuronx.neuron_cores_context, so a plan "
                f"cannot put one copy on each NeuronCore: use cores=1, or torch-neuronx 2.9 "
                f"({neuron_runtime.INSTALL_XLA_TRACE})")
        context = place(start_nc=core, nc_count=1)
    with _LOAD_LOCK, context:
        return torch.jit.load(io.BytesIO(data))


class NeuronArtifact:
    """A traced Neuron model's bytes, loaded once per NeuronCore it runs on (core ``None``: the
    runtime's default placement). :class:`NeuronExecutor` loads the copies it uses at plan time;
    called directly, it loads one with the default placement on the first call.
    """

    def __init__(self, data: bytes):
        self.data = data
        self._replicas: dict = {}
        self._lock = threading.Lock()

    def replica(self, core: int | None):
        with self._lock:
            module = self._replicas.get(core)
            if module is None:
                module = self._replicas[core] = _load(self.data, core)
            return module

    def __call__(self, *inputs: torch.Tensor):
        return tuple(self.replica(None)(*(t.contiguous() for t in inputs)))


class BuildOnly:
    """The runner of a plan built on a host that cannot run it (:func:`build_only_reason`):
    calling it raises; the NEFF is in the plan cache for the instance it was built for."""

    def __init__(self, reason: str, cache_path: str | None):
        self.reason, self.cache_path = reason, cache_path

    def __call__(self, *inputs: torch.Tensor):
        where = f"the plan cache at {self.cache_path}" if self.cache_path else "no plan cache (cache=None)"
        raise BackendUnavailable(
            f"this plan was built but cannot run here: {self.reason}. Its NEFF (for --target {target()}) is in "
            f"{where}; run it on a Neuron instance with that cache (TRNPLAN_CACHE_DIR, TRNPLAN_WISDOM_ONLY=1), "
            f"or use device='cpu' on this host")


class NeuronExecutor:
    """Runs a bucketed artifact on a batch: shards on dim 0, one shard per core, each padded to the bucket.

    ``bucket`` is the compiled batch; the input's batch M is cut into ⌈M / bucket⌉ shards of the
    bucket (the last one zero-padded), shard i runs on core ``i mod cores``, and the outputs are
    cropped and concatenated. Thread-safe.
    """

    def __init__(self, artifact: NeuronArtifact, bucket: int, cores: int, backend: NeuronBackend):
        self.artifact, self.bucket, self.cores, self.backend = artifact, bucket, cores, backend
        reason = cores_unavailable_reason(cores)
        if reason is not None:
            raise BackendUnavailable(reason)
        # every copy loaded at plan time (a bad artifact fails there, not at the first call); with
        # several cores each is placed explicitly, so no extra copy lands on the default core
        for core in range(cores) if cores > 1 else (None,):
            artifact.replica(core)

    def _run(self, core: int | None, chunks):
        """One core's share: its shards in turn, each padded to the bucket and cropped after."""
        module = self.artifact.replica(core)
        outs = []
        for piece in chunks:
            m = piece[0].shape[0]
            if m < self.bucket:
                piece = [torch.nn.functional.pad(t, (0, 0, 0, self.bucket - m)) for t in piece]
            out = module(*(t.contiguous() for t in piece))
            outs.append(tuple(t[:m] for t in out))
        return outs

    def __call__(self, *inputs: torch.Tensor):
        pieces = list(zip(*(torch.split(t, self.bucket) for t in inputs)))
        if self.cores == 1 or len(pieces) == 1:
            outs = self._run(None if self.cores == 1 else 0, pieces)
        else:
            used = min(self.cores, len(pieces))
            share = [pieces[c::used] for c in range(used)]
            pool = self.backend.shard_executor(used)
            futures = [pool.submit(self._run, c, share[c]) for c in range(1, used)]
            per_core = [self._run(0, share[0])] + [f.result() for f in futures]
            outs = [None] * len(pieces)
            for c, results in enumerate(per_core):
                outs[c::used] = results
        return tuple(torch.cat(parts) for parts in zip(*outs))


__all__ = ["MAX_TENSOR_BYTES", "NEURON_PROFILE", "BuildOnly", "NeuronBackend", "NeuronExecutor", "bucket_batch",
           "bucketed", "build_only_reason", "compiler_args", "cores_unavailable_reason", "runtime", "target"]
