"""The accelerator backend: devices without a complex dtype and without a native FFT.

One backend serves every such device kind (DESIGN.md §1.5: one backend per *kind of device*):

``xla``
    torch-xla's lazy device (trn1/inf2 training and inference through torch-neuronx 2.9 on
    PyTorch/XLA; TPUs; XLA:CPU with ``PJRT_DEVICE=CPU``, which is how CI runs it).
``neuron``
    TorchNeuron, the native PrivateUse1 ``neuron`` device of torch-neuronx 2.13/2.14 (trn2/trn3),
    when :func:`trnplan.backends.neuron_runtime.detect` finds it. With the XLA-based
    torch-neuronx 2.9 instead, ``device="neuron"`` is the legacy ``torch_neuronx.trace`` route
    (:mod:`trnplan.backends.neuron`).
any other PrivateUse1 backend
    by the name torch has for it (``torch._C._get_privateuse1_backend_name()``).
``meta``
    shape and dtype inference only: the plan runs on meta tensors, which carry no values.

How a plan runs there (docs/trainium.md; ../shared/neuron/runtimes.md §6's rules):

1. **GEMM-only trees on split re/im float32, static shapes.** The backend has no native FFT and
   the host libraries decline, so the planner builds dft-gemm, Stockham, butterfly, four-step,
   Bluestein over those, real and N-D trees. Constants are made on the host in float64 with exact
   index reduction, cast there, then moved (``BuildContext.const``); indices are int32. Nothing
   runs on the host: a host FFT would be a transfer both ways and a sync of the lazy graph, so it
   is not offered — move the tensor yourself (``x.cpu()``) if you want that.
2. **fp64 is refused** on every device kind but ``meta`` (a NeuronCore has no FP64, TorchNeuron's
   eager ops pre-cast float64 to float32 silently, runtimes.md §2): the error names the fixes.
3. **Compiled whole, once.** By default a plan runs as one graph: ``torch.compile(fullgraph=True,
   dynamic=False)`` with the device's backend ("openxla" for ``xla``, "neuron" for TorchNeuron),
   compiled at plan time on a function with a code object of its own (Dynamo's recompile limit,
   8, applies per code object). ``compile="eager"`` runs it op by op instead. A PrivateUse1
   device with no known torch.compile backend, and ``meta``, run eagerly (explain() says so).
4. **Batch buckets.** A compiled plan is made for a bucketed batch
   (:func:`trnplan.backends.neuron.bucket_batch`: 2, 3, 4, 6, 8, 12, … — at most a third padding,
   two buckets per octave); inputs are zero-padded to it and outputs cropped, so a stream of
   batch sizes 1…1000 makes at most 19 plan graphs, each compiled once.
5. **The runtime's compile cache under trnplan's cache directory** (:func:`configure_compile_cache`):
   ``TORCH_NEURONX_NEFF_CACHE_DIR`` (TorchNeuron) and ``NEURON_COMPILE_CACHE_URL`` (the Neuron
   persistent cache of torch-xla) default to ``<TRNPLAN_CACHE_DIR>/neff`` and
   ``<TRNPLAN_CACHE_DIR>/neuron-compile-cache`` when the user has not set them. Both runtimes
   read them once, at their first compile: trnplan sets them when it is imported, and a value the
   user set is never changed.

Nothing here has run on Trainium. On XLA:CPU (.ci/xla_lane.sh) every tree is checked against
numpy, its HLO and StableHLO audited (:mod:`trnplan.xla_audit`), and compiles counted.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import math
import os
import threading

import torch

from trnplan.backends import artifacts, neuron_runtime, trainium
from trnplan.backends.base import Backend, PrecisionProbe
from trnplan.backends.neuron import bucket_batch as neuron_bucket_batch
from trnplan.core import config

#: The accelerator profile of the ``xla`` and ``meta`` kinds: a NeuronCore-v2 (trn1/inf2, the XLA
#: route's machines), priced as a plan runs there — compiled whole, one launch per graph
#: (:mod:`trnplan.backends.trainium` has the figures and their sources). TorchNeuron's ``neuron``
#: kind runs on trn2/trn3 and gets the NeuronCore-v3 profile; ``TRNPLAN_NEURON_TARGET`` names another.
ACCEL_PROFILE = trainium.TRN1_PROFILE

#: torch.compile backend per device kind (runtimes.md §2: TorchNeuron registers "neuron"; torch-xla
#: registers "openxla")
COMPILE_BACKENDS = {"xla": "openxla", "neuron": "neuron"}
#: the compile mode name: torch.compile whole with the device's backend
DYNAMO = "dynamo"


def privateuse1_name() -> str:
    """torch's name for its PrivateUse1 backend ("privateuseone" when none registered one)."""
    try:
        return torch._C._get_privateuse1_backend_name()
    except Exception:  # noqa: BLE001 - a torch without the accessor has no PrivateUse1 backend
        return "privateuseone"


def is_accelerator_kind(kind: str) -> bool:
    """Whether this backend serves device kind ``kind`` (``neuron`` only as TorchNeuron)."""
    if kind in ("xla", "meta"):
        return True
    name = privateuse1_name()
    if kind == "neuron":
        return torchneuron_present()
    return kind == name and name != "privateuseone"


def torchneuron_present() -> bool:
    """TorchNeuron is this process's ``neuron`` runtime (package version and registration, never an import).

    The registration is checked first (cheap, and TorchNeuron needs it): only then
    :func:`~trnplan.backends.neuron_runtime.detect` reads the package metadata."""
    if privateuse1_name() != "neuron":
        return False
    return neuron_runtime.detect().kind == "torchneuron"


# ---------------------------------------------------------------------- compile cache
#: the runtime cache variables trnplan points at its own cache directory, and the subdirectory
CACHE_VARIABLES = {"TORCH_NEURONX_NEFF_CACHE_DIR": "neff", "NEURON_COMPILE_CACHE_URL": "neuron-compile-cache"}
_CACHE_SET: dict[str, str] = {}  # the variables trnplan set in this process (explain() tells them apart)
_CACHE_LOCK = threading.Lock()


def configure_compile_cache(cache_dir) -> dict[str, str]:
    """Point the Neuron runtimes' compile caches at trnplan's cache directory, unless set already.

    ``TORCH_NEURONX_NEFF_CACHE_DIR`` (TorchNeuron's NEFF cache, default ``/tmp/neff_cache``) and
    ``NEURON_COMPILE_CACHE_URL`` (torch-neuronx on XLA, default ``/var/tmp/neuron-compile-cache``)
    become ``<cache_dir>/neff`` and ``<cache_dir>/neuron-compile-cache``, so that ``trnplan
    precompile`` at container build fills the directory production ships (runtimes.md §2, §3).
    Both are read at the runtime's first compile: this runs when trnplan is imported; call it
    yourself (or set the variables) before your first device op if you import trnplan later.
    A variable already set is left alone. Returns ``{variable: value}`` as they now are.
    """
    out = {}
    with _CACHE_LOCK:
        for var, sub in CACHE_VARIABLES.items():
            if not os.environ.get(var):
                os.environ[var] = _CACHE_SET[var] = os.path.join(str(cache_dir), sub)
            out[var] = os.environ[var]
    return out


def configure_compile_cache_if_neuron(cache_dir) -> None:
    """:func:`configure_compile_cache` where a Neuron runtime is installed (torch-neuronx, either
    kind) — ``import trnplan`` calls it with the default plan cache directory — else nothing: so that the variables are set before the
    first device op of a program that imports trnplan first; elsewhere the environment is untouched.

    ``cache_dir`` may be a callable returning the directory: it is called only where the runtime
    is installed (``import trnplan`` resolves no directory elsewhere)."""
    if _version("torch-neuronx") is not None:
        configure_compile_cache(cache_dir() if callable(cache_dir) else cache_dir)


def cache_note(kind: str) -> str:
    """explain()'s line: which compile cache the device's runtime uses, and who set it."""
    if kind == "meta":
        return "none (meta tensors compute nothing)"
    if kind == "xla":
        var = "NEURON_COMPILE_CACHE_URL"
        where = ("torch-xla's persistent cache needs xr.initialize_cache(); on XLA:CPU it does not work "
                 "(runtimes.md §4); on Neuron, torch-neuronx reads")
    elif kind == "neuron":
        var, where = "TORCH_NEURONX_NEFF_CACHE_DIR", "TorchNeuron's NEFF cache:"
    else:
        return f"the {kind} runtime's own (trnplan knows no cache setting for it)"
    value = os.environ.get(var, "")
    who = "set by trnplan" if _CACHE_SET.get(var) == value and value else ("set by you" if value else "unset")
    return f"{where} {var}={value or '(runtime default)'} ({who})"


# ---------------------------------------------------------------------- running
def bucket_batch(batch: int) -> int:
    """The compiled batch of a plan for ``batch`` transforms (the Neuron route's buckets)."""
    return neuron_bucket_batch(batch, 1)


class CompiledRunner:
    """A plan module compiled whole by ``torch.compile(backend=..., fullgraph=True, dynamic=False)``.

    Compiled at construction on ``example`` (the bucket's shape), so that the compile happens at
    plan time; each runner compiles a function with its own code object (Dynamo's recompile limit
    is per code object). Thread-safe.
    """

    def __init__(self, module: torch.nn.Module, example, backend: str):
        self.backend = backend
        self._module = module.eval()
        self._fn = torch.compile(artifacts._own_code(artifacts._run_module, next(artifacts.InductorRunner._count)),
                                 backend=backend, fullgraph=True, dynamic=False)
        self._lock = threading.Lock()
        with self._lock, torch.no_grad():
            self._fn(self._module, *example)

    def __call__(self, *inputs: torch.Tensor):
        with self._lock, torch.no_grad():
            return tuple(self._fn(self._module, *(t.contiguous() for t in inputs)))


class BucketedRunner:
    """Runs a runner compiled for ``bucket`` rows on any batch ≤ it: zero-pad, run, crop.

    The pad and the crop are ops of their own on the device: on torch-xla each new batch size
    costs one small XLA graph (the pad) besides the plan's graph, which is not recompiled.
    """

    def __init__(self, runner, bucket: int):
        self.runner, self.bucket = runner, bucket

    def __call__(self, *inputs: torch.Tensor):
        m = inputs[0].shape[0]
        if m == self.bucket:
            return self.runner(*inputs)
        if m > self.bucket:
            raise ValueError(f"a batch of {m} does not fit the compiled bucket of {self.bucket}")
        padded = [torch.nn.functional.pad(t, (0, 0, 0, self.bucket - m)) for t in inputs]
        return tuple(t[:m] for t in self.runner(*padded))


_RUNNERS: dict = {}  # (bucketed problem, tree, device, backend) -> CompiledRunner, shared by a bucket's plans
_RUNNERS_LOCK = threading.Lock()
#: compiled runners kept per process (each holds a module and a compiled graph); the oldest goes first
RUNNERS_MAX = 256


def compiled_runner(planned, tree, module, device, backend: AccelBackend):
    """(runner, fresh): the compiled runner of ``tree`` for the bucketed problem ``planned`` on
    ``device``, compiled once per process and shared by every plan whose batch falls in the bucket."""
    key = (planned.digest(), tree.digest(), str(device), backend.compile_backend())
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(key)
    if runner is not None:
        return runner, False
    n = math.prod(planned.in_shape)
    count = 1 if planned.real_input else 2
    # zeros made on the host and moved: a torch.randn on an xla device would add an RNG graph
    example = tuple(torch.zeros(planned.batch, n, dtype=planned.real_dtype).to(device) for _ in range(count))
    runner = CompiledRunner(module, example, backend.compile_backend())
    with _RUNNERS_LOCK:
        runner = _RUNNERS.setdefault(key, runner)
        while len(_RUNNERS) > RUNNERS_MAX:
            del _RUNNERS[next(iter(_RUNNERS))]
    return runner, True


def clear_runners() -> None:
    """Forget every compiled runner of this process (tests that count compiles call it)."""
    with _RUNNERS_LOCK:
        _RUNNERS.clear()


def resolve_device(kind: str, device) -> torch.device:
    """The torch.device a plan of ``kind`` runs on: ``device`` with its index filled in, as
    tensors on it report theirs (``xla`` → ``torch_xla.device()``, e.g. ``xla:0``)."""
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if kind == "meta" or dev.index is not None:
        return dev
    if kind == "xla":
        import torch_xla  # the user asked for xla, and unavailable_reason found it installed

        return torch_xla.device()
    module = getattr(torch, kind, None)  # a PrivateUse1 backend's module (torch.neuron under TorchNeuron)
    current = getattr(module, "current_device", None)
    return torch.device(kind, int(current()) if current is not None else 0)


def bucket_note(problem, planned, mode: str) -> str:
    """explain()'s line: the batch and the bucket the plan was compiled for."""
    if mode != DYNAMO:
        return f"none: eager runs batch {problem.batch} as is (nothing compiled per shape)"
    if planned.batch == problem.batch:
        return f"batch {problem.batch} is a bucket: compiled for it, no padding"
    return (f"batch {problem.batch} runs in the compiled bucket {planned.batch} (the next of 2, 3, 4, 6, 8, 12, …): "
            f"inputs zero-padded, outputs cropped; every batch size in the bucket shares this one graph")


# ---------------------------------------------------------------------- the backend
class AccelBackend(Backend):
    """The backend of one accelerator device kind (``xla``, ``neuron`` as TorchNeuron, a
    PrivateUse1 name, ``meta``)."""

    profile = ACCEL_PROFILE
    accelerator = True
    artifact_modes = ()
    jit_modes = (DYNAMO,)

    def __init__(self, kind: str):
        self.kind = kind
        self.profile = trainium.profile_for(config.neuron_target(), "trn2" if kind == "neuron" else "trn1")
        #: fp64 only on meta (no values: nothing to be wrong)
        self.precisions = ("fp32", "fp64", "bf16", "bf16x3", "bf16x6") if kind == "meta" else (
            "fp32", "bf16", "bf16x3", "bf16x6")

    def runtime(self) -> str:
        """One line: which runtime drives this device kind, with versions."""
        if self.kind == "xla":
            return f"torch-xla {_version('torch-xla') or '(not installed)'} (lazy tensors), torch {torch.__version__}"
        if self.kind == "neuron":
            return f"TorchNeuron: {neuron_runtime.detect().describe()}"
        if self.kind == "meta":
            return "meta tensors (shapes and dtypes only)"
        return f"PrivateUse1 backend {self.kind!r}, torch {torch.__version__}"

    def compile_backend(self) -> str | None:
        return COMPILE_BACKENDS.get(self.kind)

    def unavailable_reason(self) -> str | None:
        if self.kind == "xla" and importlib.util.find_spec("torch_xla") is None:
            return ("device='xla' needs torch-xla (pip install torch==2.9.0 torch-xla==2.9.0, or the Neuron DLAMI's "
                    "PyTorch 2.9 environment on trn1/inf2); use device='cpu' to run the same plans on the host")
        return None

    def precision_unsupported_reason(self, precision: str) -> str | None:
        if precision == "fp64" and self.kind != "meta":
            return (f"precision='fp64' (complex128 / float64 data) has no device path on {self.kind!r}: a NeuronCore "
                    f"has no FP64, and TorchNeuron would silently pre-cast it to float32. Either convert the data on "
                    f"the device to complex64 / float32 (x.to(torch.complex64)) and plan precision='fp32' or 'bf16x6', "
                    f"or move it to the host (x.cpu()) and plan device='cpu' for fp64")
        return super().precision_unsupported_reason(precision)

    def has_native_fft(self, precision: str) -> bool:
        return False  # no aten::fft_* on a NeuronCore, and torch-xla runs it on the host (aten::_fft_c2c)

    def shard_executor_reason(self) -> str | None:
        return (f"cores > 1 on {self.kind!r}: one process drives one device here; split across NeuronCores with "
                f"trnplan.distributed (one rank per core)")

    def _probe(self, device):
        if self.kind == "meta":
            return PrecisionProbe(True, "fp32", "assumed: meta tensors carry no values to probe")
        try:
            return super()._probe(torch.device(device))
        except Exception as exc:  # noqa: BLE001 - a probe that cannot run must not stop planning
            return PrecisionProbe(True, "fp32", f"assumed: the probe failed on {device} ({type(exc).__name__}: "
                                                f"{str(exc)[:200]})")

    def precision_probe(self, device=None):
        if device is None:
            device = torch.device(self.kind)
        return super().precision_probe(device)

    # ------------------------------------------------------------------ compiling
    def auto_compile(self):
        backend = self.compile_backend()
        if self.kind == "meta":
            return "eager", "meta tensors compute nothing: there is nothing to compile"
        if backend is None:
            return "eager", f"no torch.compile backend is known for {self.kind!r}; each op runs as the device runs it"
        return DYNAMO, (f"compiled whole: torch.compile(backend={backend!r}, fullgraph=True, dynamic=False), one graph "
                        f"per plan and bucket")

    def resolve_compile(self, compile: str):
        if compile == DYNAMO and self.compile_backend() is None:
            raise ValueError(f"compile='dynamo' needs a torch.compile backend for {self.kind!r}; none is known "
                             f"(xla: 'openxla', TorchNeuron: 'neuron'); use compile='eager'")
        return super().resolve_compile(compile)

    def jit_compile(self, module, example, mode):
        return CompiledRunner(module, example, self.compile_backend())

    def fingerprint(self, device=None) -> dict:
        fp = {**super().fingerprint(device), "accelerator": self.kind,
              "compile_backend": self.compile_backend() or "eager"}
        if self.kind == "xla":
            fp["torch-xla"] = _version("torch-xla") or "absent"
            fp["pjrt_device"] = os.environ.get("PJRT_DEVICE", "")
        elif self.kind == "neuron":
            fp.update(neuron_runtime.detect().versions())
        return fp


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache  # one backend object per kind: probes and caches are kept on it
def backend_for(kind: str) -> AccelBackend:
    """The (one per process) backend of an accelerator device kind."""
    return AccelBackend(kind)


__all__ = [
    "ACCEL_PROFILE",
    "CACHE_VARIABLES",
    "COMPILE_BACKENDS",
    "DYNAMO",
    "AccelBackend",
    "BucketedRunner",
    "CompiledRunner",
    "backend_for",
    "bucket_batch",
    "bucket_note",
    "cache_note",
    "clear_runners",
    "compiled_runner",
    "configure_compile_cache",
    "configure_compile_cache_if_neuron",
    "is_accelerator_kind",
    "privateuse1_name",
    "resolve_device",
    "torchneuron_present",
]
