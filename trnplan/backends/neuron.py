"""The Neuron (Trainium) backend: NEFF artifacts through ``torch_neuronx.trace``, bucketed batches,
one loaded artifact per NeuronCore, and a priced host fallback.

NeuronCores have no complex dtype (NCC_EVRF004), no ``aten::fft_*``, no fp64, static shapes
only, and pay ~0.7 ms per dispatch (../shared/FACTS.md), so the profile has no native FFT and a
dispatch cost three orders above the CPU's: the planner prefers few, large GEMMs there.

How a ``device="neuron"`` plan runs (docs/trainium.md):

1. **Bucket.** A NEFF has fixed shapes, so the batch is bucketed (:func:`bucket_batch`): the
   per-core batch ``⌈batch / cores⌉`` rounds up to the next of 2, 3, 4, 6, 8, 12, 16, 24 … (the
   powers of two and 1.5× them: ≤ 33 % padding, two buckets per octave). The plan is made and
   compiled for the bucket; inputs are zero-padded to it and outputs cropped, so a workload
   with batch sizes 1…1000 compiles at most 19 NEFFs, and two batch sizes in one bucket share
   the wisdom and the artifact. explain() shows the bucket.
2. **Compile.** The lowered module (split re/im, float32, fixed shapes) goes to
   ``torch_neuronx.trace(module, example, compiler_args=["--auto-cast", "none", "--target", T])``:
   ``--auto-cast none`` explicitly, because up to SDK 2.26 the compiler default auto-cast fp32
   matmuls to bf16; ``--target`` from the instance (or ``TRNPLAN_NEURON_TARGET``).
   ``TRNPLAN_NEURON_CPU_BACKEND=1`` adds ``cpu_backend=True`` so that an image can be built on a
   host without a NeuronCore. ``torch.jit.save`` bytes go to the plan cache's artifact store (the
   Neuron compile cache does not keep traced models).
3. **Load and run.** ``torch.jit.load`` from those bytes, once per NeuronCore used
   (``torch_neuronx.experimental.neuron_cores_context``), and the batch sharded on dim 0 across
   them by :class:`NeuronExecutor`. Not ``torch_neuronx.DataParallel``: the seed project reverted
   it on SDK 2.29 (a layout assertion with several shapes in one process), and its dynamic
   batching splits a batch into shards of *any* size, which a fixed-shape NEFF must then pad
   anyway; sharding here keeps every call at the compiled bucket shape and needs only the
   documented load API.
4. **Host fallback.** The host FFT libraries (scipy, pyFFTW, mkl_fft) are candidates at the root,
   priced on the CPU profile plus the transfer both ways (:mod:`trnplan.planner.library`), so a
   small problem stays on the host, as the seed project's measurements say it should (fft N=1024:
   16 ms through NKI against 28 µs on the host).
5. **Precision probe.** Where a NeuronCore is there, the precision probe is traced and run on it
   once per fingerprint (:func:`neuron_precision_probe`): it detects whether bf16 products are
   rounded before fp32 accumulation (the seed project's finding), which decides whether the
   split modes can meet their bars. Elsewhere that finding is assumed.

*Nothing here has run on Trainium.* The integration is tested on the CPU with a stand-in for
``torch_neuronx`` (tests/test_neuron.py) and the graph handed to the compiler by the lowering
audit (:mod:`trnplan.audit`); real-hardware tests are marked ``neuron``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import math
import sys
import threading

import attrs
import torch

from trnplan.backends import artifacts
from trnplan.backends.base import Backend, PrecisionProbe
from trnplan.core import config
from trnplan.core.cost import CostProfile
from trnplan.kernels import gemm

NEURON_PROFILE = CostProfile(
    name="neuron",
    launch_us=670.0,
    # trn1: 190 bf16 vs 47.5 fp32 TFLOP/s per chip (../shared/FACTS.md): bf16 is 4× the fp32 rate
    gemm_gflops={"float32": 20000.0, "bfloat16": 80000.0},
    fft_gflops={},
    bandwidth_gbs=400.0,
    source="seed project trn1 figures (../shared/FACTS.md); not measured by trnplan",
)

#: host ↔ NeuronCore transfer rate the host fallback is priced with, GB/s. Assumed, not measured:
#: about half of PCIe Gen4 x16's 32 GB/s nominal. The issue prices the transfer on the host leaf;
#: with torch_neuronx.trace the data starts on the host, so it really falls on the device path
#: (docs/trainium.md discusses the bias).
HOST_LINK_GBS = 16.0

INSTALL_HINT = (
    "device='neuron' needs torch-neuronx and neuronx-cc (AWS's Neuron SDK for trn1/trn2), which are not "
    "installed here. Use device='cpu' to run the same plans on the host, or install them on a Trainium "
    "instance: the Neuron DLAMI has them (activate its PyTorch Neuron virtual environment), or pip install "
    "torch-neuronx neuronx-cc --extra-index-url https://pip.repos.neuron.amazonaws.com (PyPI has placeholders "
    "only). trnplan.Planner(trnplan.backends.get_backend('neuron')) shows the tree a NeuronCore would get, and "
    "trnplan.audit.audit(problem) checks its lowering (docs/trainium.md)"
)


# ---------------------------------------------------------------------- configuration
def sdk_present() -> bool:
    """Whether ``import torch_neuronx`` would find a module (an already-imported one counts)."""
    if "torch_neuronx" in sys.modules:
        return sys.modules["torch_neuronx"] is not None
    try:
        return importlib.util.find_spec("torch_neuronx") is not None
    except (ImportError, ValueError):
        return False


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
    try:
        with open("/sys/devices/virtual/dmi/id/product_name") as f:
            family = f.read().strip().split(".", 1)[0]
    except OSError:
        family = ""
    return family if family in ("trn1", "trn1n", "trn2", "inf2") else None


def cpu_backend() -> bool:
    """``TRNPLAN_NEURON_CPU_BACKEND=1``: compile with ``cpu_backend=True`` (no NeuronCore needed)."""
    return config.neuron_cpu_backend()


def compiler_args() -> list[str]:
    """The neuronx-cc arguments every trace gets (and the fingerprint records).

    ``--auto-cast none`` explicitly: SDK ≤ 2.26 defaulted to bf16 auto-cast of fp32 matmuls, and
    the sin/cos precision note (nxdi-troubleshooting.rst) gives the same fix; the bf16 modes cast
    their own operands. ``--target`` when it is known (:func:`target`); a ``cpu_backend`` build
    must name it, since there is no device to take it from.
    """
    tgt = target()
    if tgt is None and cpu_backend():
        raise ValueError("TRNPLAN_NEURON_CPU_BACKEND=1 compiles without a NeuronCore, so the target must be named: "
                         "set TRNPLAN_NEURON_TARGET=trn1 or trn2")
    return ["--auto-cast", "none"] + (["--target", tgt] if tgt else [])


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


# ---------------------------------------------------------------------- the backend
class NeuronBackend(Backend):
    kind = "neuron"
    profile = NEURON_PROFILE
    host_link_gbs = HOST_LINK_GBS
    #: fp64 is host-only (no FP64 on a NeuronCore), tf32 is CUDA's
    precisions = ("fp32", "bf16", "bf16x3", "bf16x6")

    def unavailable_reason(self) -> str | None:
        if not sdk_present():
            return INSTALL_HINT
        return None

    def precision_unsupported_reason(self, precision: str) -> str | None:
        if precision == "fp64":
            return ("precision='fp64' has no device path on Trainium (trn1/trn2 have no FP64); fp64 plans run on "
                    "the host: plan with device='cpu' (dtype=torch.complex128), or use precision='fp32' / 'bf16x6' "
                    "on the NeuronCore")
        return super().precision_unsupported_reason(precision)

    def has_native_fft(self, precision: str) -> bool:
        return False  # aten::fft_* is unsupported by neuronx-cc

    def _probe(self, device):
        # Without a NeuronCore to run on: assume what the seed project measured — its Ozaki (split
        # bf16) modes at 1.7e-3 on trn1 and trn2, no better than plain bf16 (products rounded before
        # PSUM accumulation) — and fp32 matmuls kept fp32 by --auto-cast none (../shared/FACTS.md).
        assumed = PrecisionProbe(False, "fp32", "assumed from the seed project's trn1/trn2 measurements; "
                                                "not probed on a NeuronCore")
        if not sdk_present() or cpu_backend() or not config.neuron_probe():
            return assumed
        try:
            return neuron_precision_probe()
        except Exception as exc:  # noqa: BLE001 - a probe that cannot run must not stop planning
            return attrs.evolve(assumed, source=f"{assumed.source} (the probe failed: {type(exc).__name__}: {exc})")

    # ------------------------------------------------------------------ artifacts
    artifact_modes = ("neuron",)
    jit_modes = ()  # torch.compile does not target a NeuronCore: a NEFF is traced (compile="neuron")

    def auto_compile(self):
        return "neuron", "a NEFF is the only way to run on a NeuronCore"

    def build_artifact(self, module, example, mode):
        data = artifacts.neuron_compile(module, example, compiler_args(), cpu_backend())
        return data, {"dynamic_batch": False}

    def load_artifact(self, data, mode, device):
        return NeuronArtifact(data)

    # shard_executor: the base class's worker pool, one thread per NeuronCore used; each drives its
    # own loaded artifact (the NEFF call blocks in the Neuron runtime, outside the GIL)

    def fingerprint(self, device=None) -> dict:
        fp = super().fingerprint(device)
        for dist in ("neuronx-cc", "torch-neuronx"):
            try:
                fp[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                fp[dist] = "absent"
        fp["neuron_target"] = target() or "neuronx-cc default"
        fp["neuron_compiler_args"] = " ".join(compiler_args()) + (" cpu_backend" if cpu_backend() else "")
        return fp


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
    import torch_neuronx  # deferred: an optional dependency, only on Trainium (the Neuron SDK)

    def pair(a_val, b_val):
        a = torch.zeros(8, 64, dtype=torch.float64)
        b = torch.zeros(64, 8, dtype=torch.float64)
        a[:, : len(a_val)] = torch.tensor(a_val, dtype=torch.float64)
        b[: len(b_val), :] = torch.tensor(b_val, dtype=torch.float64)[:, None]
        return a.float(), b.float()

    t = 1 + 2.0**-7
    inputs = (*pair([t, 2.0**-10], [t, 2.0**-10]), *pair([1 + 2.0**-20], [1 + 2.0**-20]),
              *pair([1 + 2.0**-9], [1 + 2.0**-9]))
    traced = torch_neuronx.trace(_ProbeModule().eval(), inputs, compiler_args=compiler_args())
    split, fp32, tf32 = (out.double() for out in traced(*inputs))
    exact = bool((split == t * t + 2.0**-20).all())
    if bool((fp32 == 1 + 2.0**-19).all()):
        mode = "fp32"
    elif bool((tf32 == (1 + 2.0**-9) ** 2).all()):
        mode = "tf32"
    else:
        mode = "bf16"
    return PrecisionProbe(exact, mode, f"probed on a NeuronCore (torch_neuronx.trace, {' '.join(compiler_args())}; "
                                       f"bf16 values in an fp32 GEMM)")


# ---------------------------------------------------------------------- running
def _load(data: bytes, core: int | None):
    """``torch.jit.load`` of a traced Neuron model, placed on NeuronCore ``core`` when given."""
    context = contextlib.nullcontext()
    if core is not None:
        import torch_neuronx  # deferred: only with the Neuron SDK (or the test stand-in)

        place = getattr(getattr(torch_neuronx, "experimental", None), "neuron_cores_context", None)
        if place is not None:  # beta API (api-torch-neuronx-core-placement.rst): load onto that core
            context = place(start_nc=core, nc_count=1)
    with context:
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


class NeuronExecutor:
    """Runs a bucketed artifact on a batch: shards on dim 0, one shard per core, each padded to the bucket.

    ``bucket`` is the compiled batch; the input's batch M is cut into ⌈M / bucket⌉ shards of the
    bucket (the last one zero-padded), shard i runs on core ``i mod cores``, and the outputs are
    cropped and concatenated. Thread-safe.
    """

    def __init__(self, artifact: NeuronArtifact, bucket: int, cores: int, backend: NeuronBackend):
        self.artifact, self.bucket, self.cores, self.backend = artifact, bucket, cores, backend
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


__all__ = [
    "NEURON_PROFILE",
    "NeuronBackend",
    "NeuronExecutor",
    "bucket_batch",
    "bucketed",
    "compiler_args",
    "target",
]
