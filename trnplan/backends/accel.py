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
   read them once, at their first compile: trnplan sets them at the first Neuron plan of a process
   (to that plan's cache), and a value the user set is never changed. The files each of trnplan's
   graph compiles adds there are noted (:func:`tracked_compile`), so that ``cache export`` ships
   them with their plans (:mod:`trnplan.cache.compiled`).
6. **Measured planning** times each candidate compiled by the plan's own route
   (:meth:`AccelBackend.measure_runner`), through the split form on a NeuronCore.

Nothing here has run on Trainium. On XLA:CPU (.ci/xla_lane.sh) every tree is checked against
numpy, its HLO and StableHLO audited (:mod:`trnplan.tools.xla_audit`), and compiles counted.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.metadata
import importlib.util
import math
import os
import threading
import time

import attrs
import torch

from trnplan.backends import artifacts, neuron_runtime, trainium
from trnplan.backends.base import PESSIMISTIC, Backend, Boundary, PrecisionProbe, run_precision_probe
from trnplan.backends.neuron import bucket_batch as neuron_bucket_batch
from trnplan.backends.neuron import largest_tensor_reason
from trnplan.core import config, state
from trnplan.core.errors import CompileError, PlanningError, WisdomMiss
from trnplan.core.problem import COMPLEX_OF
from trnplan.kernels.complex import ComplexBoundary

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
#: the compile mode name: lazy XLA ops cut into one graph at a sync (torch-neuronx 2.9 on trn1/inf2)
LAZY = "lazy"
#: the modes that compile a plan whole per batch bucket
WHOLE = (DYNAMO, LAZY)


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


# ---------------------------------------------------------------------- the boundary
#: Neuron runtimes documented to hold complex64 tensors at a graph's inputs and outputs: none.
#: neuronx-cc rejects complex with NCC_EVRF004 before compiler 2.27.5334, and 2.27.5334 added
#: complex64 to "~30 HLO ops, no FFT" (SDK release-notes/components/compiler.rst, runtimes.md §2);
#: no Neuron document says which, nor that a complex64 tensor may be a graph's input or output, nor
#: that TorchNeuron's eager ops hold one. An entry here ((runtime kind, first neuronx-cc version),
#: with its source) would let complex cross the boundary on that runtime.
COMPLEX64_RUNTIMES: tuple = ()

#: why a complex tensor may not cross a plan's boundary on a NeuronCore (the refusal's reason)
NO_COMPLEX = ("a NeuronCore holds no complex data (neuronx-cc rejects complex64 with NCC_EVRF004 before compiler "
              "2.27.5334; no Neuron runtime is documented to hold complex64 at a graph's boundary: "
              "../shared/neuron/runtimes.md rule 1)")


def xla_on_neuron() -> bool:
    """Whether torch-xla's ``xla`` device is a NeuronCore here: ``PJRT_DEVICE=NEURON``, or the
    XLA-based torch-neuronx (2.9.0.2.*) installed with torch-xla (:func:`neuron_runtime.detect`, by
    package version, runtimes.md rule 9) and ``PJRT_DEVICE`` not naming another device (XLA:CPU on a
    trn1 is XLA:CPU)."""
    pjrt = config.pjrt_device()
    return pjrt == "NEURON" or (pjrt is None and neuron_runtime.detect().kind == "xla-trace")


# ---------------------------------------------------------------------- fallback
#: TorchNeuron's CPU-fallback settings trnplan sets where the user has not (runtimes.md §2 and rule 3:
#: unsupported ops fall back to the CPU by default, "convenient for bring-up but costs performance";
#: the first variable disables it, the second keeps falling back only for unimplemented ops, so that a
#: failing Neuron implementation raises) [TNX 51836695250 (env-var doc)]
NO_FALLBACK = {"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "1", "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "1"}


def refuse_fallback() -> dict[str, str]:
    """Set :data:`NO_FALLBACK` (setdefault: a user's value stays); ``{variable: value}`` as they now are."""
    return {var: os.environ.setdefault(var, value) for var, value in NO_FALLBACK.items()}


def fallback_note(kind: str) -> str:
    """explain()'s line: the ATen ops the device's runtime ran on the CPU in this process, and the setting."""
    if kind == "neuron":
        try:
            import torch_neuronx  # TorchNeuron's op tracking (runtimes.md §2); importable where it runs

            ops = list(torch_neuronx.get_fallback_ops())
        except Exception as exc:  # noqa: BLE001 - a runtime without op tracking: say so, do not guess
            return f"unknown (torch_neuronx.get_fallback_ops() failed: {type(exc).__name__}: {exc})"
        settings = ", ".join(f"{var}={os.environ.get(var, '(unset)')}" for var in NO_FALLBACK)
        return f"{', '.join(ops) or 'none'} (torch_neuronx.get_fallback_ops(), this process; {settings})"
    if kind == "xla":
        try:
            import torch_xla.debug.metrics as met

            ops = list(met.executed_fallback_ops())
        except Exception as exc:  # noqa: BLE001
            return f"unknown (executed_fallback_ops() failed: {type(exc).__name__})"
        return f"{', '.join(ops) or 'none'} (torch_xla executed_fallback_ops(), this process)"
    return ""


def compile_failure(kind: str, mode: str, what: str, exc: Exception) -> CompileError:
    """The :class:`CompileError` of a plan graph that did not compile, naming where the compiler's log is."""
    if kind == "neuron":
        logs = (f"neuronx-cc's logs are under TORCH_NEURONX_NEFF_CACHE_DIR="
                f"{os.environ.get('TORCH_NEURONX_NEFF_CACHE_DIR', '(unset: /tmp/neff_cache)')}")
    elif kind == "xla" and xla_on_neuron():
        logs = (f"neuronx-cc's logs are in the Neuron persistent cache, NEURON_COMPILE_CACHE_URL="
                f"{os.environ.get('NEURON_COMPILE_CACHE_URL', '(unset: /var/tmp/neuron-compile-cache)')} (a failed "
                f"compile is cached too: NEURON_CC_FLAGS=--retry_failed_compilation retries it; runtimes.md §3)")
    else:
        logs = "no compiler log is kept on this device (PT_XLA_DEBUG_LEVEL=2 prints each compile's cause)"
    return CompileError(f"{what} did not compile with compile={mode!r} on {kind!r} ({type(exc).__name__}: "
                        f"{str(exc)[:800]}); {logs}. compile='eager' runs it op by op instead")


# ---------------------------------------------------------------------- compile cache
#: the runtime cache variables trnplan points at its own cache directory, and the subdirectory
CACHE_VARIABLES = {"TORCH_NEURONX_NEFF_CACHE_DIR": "neff", "NEURON_COMPILE_CACHE_URL": "neuron-compile-cache"}
_CACHE_SET: dict[str, str] = {}  # the variables trnplan set in this process (explain() tells them apart)
_CACHE_LOCK = threading.Lock()


def configure_compile_cache(cache_dir) -> dict[str, str]:
    """Point the Neuron runtimes' compile caches at the plan cache's directory, unless set already.

    ``TORCH_NEURONX_NEFF_CACHE_DIR`` (TorchNeuron's NEFF cache, default ``/tmp/neff_cache``) and
    ``NEURON_COMPILE_CACHE_URL`` (torch-neuronx on XLA, default ``/var/tmp/neuron-compile-cache``)
    become ``<cache_dir>/neff`` and ``<cache_dir>/neuron-compile-cache``, so that ``trnplan
    precompile`` at container build fills the directory production ships (runtimes.md §2, §3).
    Called at the first Neuron plan of a process with that plan's cache (``cache=``,
    ``--cache-dir``, ``TRNPLAN_CACHE_DIR``), not at import: a program's other models compiled
    before it keep the runtime's default. A variable the user set is left alone.

    Raises
    ------
    trnplan.core.errors.PlanningError
        trnplan set the variables for another plan cache earlier in this process: the runtime reads
        them once, so this plan's NEFFs would land in the other cache (one plan cache per process
        on Neuron, or set the variables yourself).
    """
    out = {}
    with _CACHE_LOCK:
        for var, sub in CACHE_VARIABLES.items():
            want = os.path.join(str(cache_dir), sub)
            have = os.environ.get(var)
            if have and _CACHE_SET.get(var) == have and have != want:
                raise PlanningError(
                    f"{var}={have} was set by trnplan for the plan cache {os.path.dirname(have)} at this process's "
                    f"first Neuron plan, and the runtime reads it once: this plan's cache {cache_dir} would not get "
                    f"its compiled graphs. Use one plan cache per process on Neuron, or set {var} yourself")
            if not have:
                os.environ[var] = _CACHE_SET[var] = want
            out[var] = os.environ[var]
    return out


def compile_cache_target(var: str, cache_dir) -> tuple[str, str]:
    """(directory or URL, why) where a process planning with the plan cache at ``cache_dir`` has the
    runtime of cache variable ``var`` keep its compiled graphs: the user's own setting in this process
    (for ``NEURON_COMPILE_CACHE_URL`` a ``--cache_dir`` in ``NEURON_CC_FLAGS`` first), else
    ``<cache_dir>/<sub>`` (:data:`CACHE_VARIABLES`), where :func:`configure_compile_cache` points it."""
    flag = _flag_cache_dir() if var == "NEURON_COMPILE_CACHE_URL" else None
    if flag:
        return flag, "--cache_dir in NEURON_CC_FLAGS, set by you"
    have = os.environ.get(var)
    with _CACHE_LOCK:
        mine = _CACHE_SET.get(var) == have
    if have and not mine:
        return have, f"{var}, set by you"
    sub = CACHE_VARIABLES[var]
    return os.path.join(str(cache_dir), sub), f"<plan cache>/{sub}, where trnplan points {var} at the first Neuron plan"


def reset_compile_cache() -> None:
    """Unset the compile-cache variables trnplan set in this process (a value the user set stays):
    the state of a fresh process, for tests that stand in for one."""
    with _CACHE_LOCK:
        for var, value in list(_CACHE_SET.items()):
            if os.environ.get(var) == value:
                del os.environ[var]
        _CACHE_SET.clear()


state.register("backends.compile_cache_variables", reset_compile_cache)


#: the compile-cache variable of each Neuron device kind, and the runtime's default when it is unset
#: (runtimes.md §2 Caching: TorchNeuron, /tmp/neff_cache; §3 Persistent cache: torch-neuronx on XLA)
RUNTIME_CACHE = {"neuron": ("TORCH_NEURONX_NEFF_CACHE_DIR", "/tmp/neff_cache"),
                 "xla": ("NEURON_COMPILE_CACHE_URL", "/var/tmp/neuron-compile-cache")}


def compile_cache_dir(kind: str) -> tuple[str, str | None]:
    """(variable, local directory) where the ``kind`` runtime keeps compiled graphs in this process;
    the directory is None where it is remote (``s3://``), which trnplan neither reads nor fills.

    On torch-neuronx 2.9 a ``--cache_dir`` in ``NEURON_CC_FLAGS`` wins over ``NEURON_COMPILE_CACHE_URL``
    (runtimes.md §3, SDK neuron-caching.rst)."""
    var, default = RUNTIME_CACHE[kind]
    where = (_flag_cache_dir() if kind == "xla" else None) or os.environ.get(var) or default
    return var, (None if "://" in where else where)


def _flag_cache_dir() -> str | None:
    """A ``--cache_dir`` in ``NEURON_CC_FLAGS`` (torch-neuronx 2.9: it wins over NEURON_COMPILE_CACHE_URL)."""
    words = os.environ.get("NEURON_CC_FLAGS", "").replace("--cache_dir ", "--cache_dir=").split()
    return next((w.split("=", 1)[1] for w in words if w.startswith("--cache_dir=")), None)


def cache_files(root: str | None) -> dict[str, tuple[int, int]]:
    """``{relative path: (size, mtime_ns)}`` of the files under ``root`` (empty where it is absent).

    Lock files (``*.lock``) are left out: they are the runtime's, for this host's processes only (a
    copied one would hold up another host's compile); nothing else is assumed about the layout."""
    out: dict[str, tuple[int, int]] = {}
    if root is None or not os.path.isdir(root):
        return out
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".lock"):
                continue
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue  # removed meanwhile (a runtime's temporary file)
            if not os.path.islink(path):
                out[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return out


def count_neffs(kind: str) -> int:
    """NEFF files in the device runtime's compile cache directory (0 where it is remote or absent)."""
    return sum(1 for rel in cache_files(compile_cache_dir(kind)[1]) if rel.endswith(".neff"))


#: one tracked compile at a time in this process, so that the files that appear in the runtime's
#: cache during it are its own (a compile in another thread would otherwise be counted as this one's)
_TRACK_LOCK = threading.Lock()


@attrs.frozen
class CompiledFiles:
    """The files one graph's compile added to the runtime's compile cache (what export ships with
    the plan, and what tells a compile from a cache hit under ``wisdom_only``)."""

    var: str = ""  # the runtime's cache variable (RUNTIME_CACHE)
    root: str = ""  # the local cache directory they are in
    files: tuple = ()  # their paths relative to root

    @property
    def neffs(self) -> int:
        return sum(1 for rel in self.files if rel.endswith(".neff"))


def tracked_compile(kind: str, compile_fn):
    """``(compile_fn(), CompiledFiles)``: the compile, and the files that appeared or changed in the
    ``kind`` runtime's local compile cache while it ran (none for a graph the runtime found there)."""
    var, root = compile_cache_dir(kind)
    if root is None:
        return compile_fn(), CompiledFiles(var)
    with _TRACK_LOCK:
        before = cache_files(root)
        out = compile_fn()
        after = cache_files(root)
    new = tuple(sorted(rel for rel, stat in after.items() if before.get(rel) != stat))
    return out, CompiledFiles(var, root, new)


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
    """A module compiled whole by ``torch.compile(backend=..., fullgraph=True, dynamic=False)``.

    Compiled at construction on ``example`` (the bucket's shape), so that the compile happens at
    plan time; each runner compiles a function with its own code object (Dynamo's recompile limit
    is per code object). Thread-safe.
    """

    def __init__(self, module: torch.nn.Module, example, backend: str):
        self.backend = backend
        self._module = module.eval()
        self._fn = torch.compile(artifacts.module_runner(next(artifacts.InductorRunner._count)),
                                 backend=backend, fullgraph=True, dynamic=False)
        self._lock = threading.Lock()
        with self._lock, torch.no_grad():
            self._fn(self._module, *example)

    def __call__(self, *inputs: torch.Tensor):
        with self._lock, torch.no_grad():
            return tuple(self._fn(self._module, *(t.contiguous() for t in inputs)))


def _sync(tensors) -> None:
    """Materialise exactly these lazy XLA tensors (one graph), leaving the user's other pending work."""
    import torch_xla  # the lazy route runs only on an xla device, where torch-xla is installed

    torch_xla._XLAC._xla_sync_multi(list(tensors), devices=[], wait=True)


class LazyRunner:
    """A module run as lazy XLA ops, cut into one graph by syncing its inputs before and its outputs
    after (runtimes.md §3: on torch-neuronx 2.9 the graph compiles at a sync; no torch.compile).

    The same ops on the same shapes give the same graph hash, so torch-xla compiles it once per
    (plan, bucket) (``UncachedCompile``) and replays it after (``CachedCompile``); on a NeuronCore
    its NEFF lands in the Neuron persistent cache. Run once at construction on ``example``, so the
    compile happens at plan time. Thread-safe.
    """

    backend = "lazy"

    def __init__(self, module: torch.nn.Module, example):
        self._module = module.eval()
        self._lock = threading.Lock()
        self(*example)

    def __call__(self, *inputs: torch.Tensor):
        with self._lock, torch.no_grad():
            inputs = tuple(t.contiguous() for t in inputs)
            _sync(inputs)  # the user's pending work on the inputs is the user's graph, not the plan's
            # an output that is a view keeps its base alive, and the base's pending IR ran again as a
            # second graph at the user's next sync (the whole plan, its intermediates as outputs:
            # measured on XLA:CPU, torch-xla 2.9, two graphs per call): a view leaves as its own copy
            out = tuple(t.clone() if t._base is not None else t for t in self._module(*inputs))
            _sync(out)
        return out


class _Shaped(torch.nn.Module):
    """A flat ``(batch, points)`` plan module taking ``(batch, *in_shape)`` and returning
    ``(batch, *out_shape)``: the reshapes inside the compiled graph (on torch-xla a reshape of device
    data outside it is a graph of its own, per shape)."""

    def __init__(self, module: torch.nn.Module, out_shape: tuple):
        super().__init__()
        self.module, self.out_shape = module, tuple(out_shape)

    def forward(self, *inputs: torch.Tensor):
        out = self.module(*(t.reshape(t.shape[0], -1) for t in inputs))
        return tuple(t.reshape(t.shape[0], *self.out_shape) for t in out)


class BucketedRunner:
    """An accelerator plan's compiled graphs for one batch bucket, one per boundary form.

    ``"split"`` runs the plan module on ``(re, im)``; ``"complex"`` (only where complex may cross the
    boundary: XLA:CPU, TPU) has the split and the pack inside the same graph
    (:class:`~trnplan.kernels.complex.ComplexBoundary`). Each form's graph takes ``(bucket,
    *in_shape)`` and returns ``(bucket, *out_shape)`` (the flattening inside it) and is compiled
    once, on first use (the device's own form at plan time), by ``compile_graph(target, example)``.

    Inputs of exactly ``(bucket, *in_shape)`` run on the device as they are. Any other batch (below
    the bucket) or leading layout is reshaped, zero-padded and its result cropped **on the host**
    (``host_boundary``, on a NeuronCore; a transfer each way): on the device each new batch size or
    layout would be a graph of its own (a pad, a crop, a reshape), each a neuronx-cc run of seconds
    on Trainium (issue 27 item 3: 87–90 XLA compiles for batches 1–40 before). Where compiles are
    cheap (XLA:CPU, TPU) those ops run on the device around the graph. explain() says which happens.
    """

    def __init__(self, module: torch.nn.Module, bucket: int, shapes: tuple, dtype: torch.dtype, device,
                 compile_graph, *, real_input: bool = False, real_output: bool = False, host_boundary: bool = True):
        self.bucket, self.dtype, self.device, self.host_boundary = bucket, dtype, device, host_boundary
        self.in_shape, self.out_shape = (tuple(s) for s in shapes)
        self._module, self._compile_graph = module, compile_graph
        self._real = (real_input, real_output)
        self._graphs: dict = {}
        self._lock = threading.Lock()
        #: what each graph's compile added to the runtime's compile cache (:func:`tracked_compile`)
        self.compiled: list[CompiledFiles] = []
        self._recorded: set = set()

    def graph(self, form: str):
        """The compiled graph of boundary ``form`` ("split" or "complex"), compiled on first use."""
        with self._lock:
            graph = self._graphs.get(form)
            if graph is None:
                graph = self._graphs[form] = self._compile_graph(*self._target(form))
                self.compiled.append(getattr(graph, "compiled", CompiledFiles()))
        return graph

    def unrecorded(self, tag) -> list[CompiledFiles]:
        """:attr:`compiled`, the first time it is asked for with ``tag`` (a plan cache and wisdom key:
        recorded there once), else nothing."""
        with self._lock:
            if tag in self._recorded:
                return []
            self._recorded.add(tag)
            return list(self.compiled)

    def _target(self, form: str):
        real_input, real_output = self._real
        shape = (self.bucket, *self.in_shape)
        # zeros made on the host and moved: a torch.zeros on an xla device would add a graph
        if form == "split":
            count = 1 if real_input else 2
            return (_Shaped(self._module, self.out_shape),
                    tuple(torch.zeros(shape, dtype=self.dtype).to(self.device) for _ in range(count)))
        dtype = self.dtype if real_input else COMPLEX_OF[self.dtype]
        return (_Shaped(ComplexBoundary(self._module, real_input, real_output), self.out_shape),
                (torch.zeros(shape, dtype=dtype).to(self.device),))

    def run_shaped(self, form: str, inputs) -> tuple:
        """The transform of ``inputs`` (shape ``(*lead, *in_shape)``, ``prod(lead) ≤ bucket``) by the
        graph of ``form``: outputs of shape ``(*lead, *out_shape)`` on the inputs' device."""
        graph = self.graph(form)
        rank = len(self.in_shape)
        lead = tuple(inputs[0].shape[: inputs[0].ndim - rank])
        if lead == (self.bucket,):
            return graph(*inputs)
        m = math.prod(lead)
        if m > self.bucket:
            raise ValueError(f"a batch of {m} does not fit the compiled bucket of {self.bucket}")
        if not self.host_boundary:  # ops on the device around the graph (cheap compiles: XLA:CPU, TPU)
            padded = tuple(torch.nn.functional.pad(t.reshape(m, *self.in_shape), (0, 0) * rank + (0, self.bucket - m))
                           for t in inputs)
            return tuple(t[:m].reshape(*lead, *t.shape[1:]) for t in graph(*padded))
        device = inputs[0].device
        padded = tuple(_host_pad(t.cpu().reshape(m, *self.in_shape), self.bucket).to(device) for t in inputs)
        return tuple(t.cpu()[:m].reshape(*lead, *t.shape[1:]).to(device) for t in graph(*padded))


def _host_pad(h: torch.Tensor, rows: int) -> torch.Tensor:
    """Host tensor ``h`` zero-padded to ``rows`` rows."""
    return torch.cat([h, h.new_zeros((rows - h.shape[0], *h.shape[1:]))]) if rows > h.shape[0] else h


_RUNNERS: dict = {}  # (bucketed problem, tree, device, route) -> BucketedRunner, shared by a bucket's plans
_RUNNERS_LOCK = threading.Lock()
state.register("backends.runners", _RUNNERS.clear)
#: compiled runners kept per process (each holds a module and compiled graphs); the oldest goes first
RUNNERS_MAX = 256


def compiled_runner(planned, tree, module, device, backend: AccelBackend, mode: str):
    """(runner, fresh): the :class:`BucketedRunner` of ``tree`` for the bucketed problem ``planned``
    on ``device``, its device form compiled once per process and shared by every plan whose batch
    falls in the bucket."""
    key = (planned.digest(), tree.digest(), str(device), mode, backend.compile_backend())
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(key)
    if runner is not None:
        return runner, False
    runner = BucketedRunner(module, planned.batch, (planned.in_shape, planned.out_shape), planned.real_dtype, device,
                            functools.partial(backend.compile_graph, mode=mode),
                            real_input=planned.real_input, real_output=planned.real_output,
                            host_boundary=backend.neuron_backed())
    form = "complex" if backend.boundary(device).complex else "split"
    try:
        runner.graph(form)  # compiled at plan time
    except Exception as exc:
        raise compile_failure(backend.kind, mode, f"the {form} graph of {tree} (batch {planned.batch})", exc) from exc
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


#: the compile route of the accelerator plan being made in this context (:func:`plan_route`)
_ROUTE: contextvars.ContextVar = contextvars.ContextVar("trnplan_accel_route", default=None)


@contextlib.contextmanager
def plan_route(mode: str):
    """Within it, measured planning compiles its candidates by route ``mode`` (the plan's own)."""
    token = _ROUTE.set(mode)
    try:
        yield
    finally:
        _ROUTE.reset(token)


def bucket_note(problem, planned, mode: str, host: bool = True) -> str:
    """explain()'s line: the batch and the bucket the plan was compiled for (``host``: padded and
    cropped on the host, as on a NeuronCore)."""
    if mode not in WHOLE:
        return f"none: eager runs batch {problem.batch} as is (nothing compiled per shape)"
    if planned.batch == problem.batch:
        return f"batch {problem.batch} is a bucket: compiled for it, no padding"
    where = ("on the host (a transfer each way; on the device each batch size would be a graph of its own); plan "
             f"batch={planned.batch} to stay on the device" if host else "on the device, around the graph")
    return (f"batch {problem.batch} runs in the compiled bucket {planned.batch} (the next of 2, 3, 4, 6, 8, 12, …): "
            f"inputs zero-padded and outputs cropped {where}; every batch size in the bucket shares this one graph")


# ---------------------------------------------------------------------- the backend
class AccelBackend(Backend):
    """The backend of one accelerator device kind (``xla``, ``neuron`` as TorchNeuron, a
    PrivateUse1 name, ``meta``)."""

    profile = ACCEL_PROFILE
    accelerator = True
    traffic_is_price = True
    folds_scale = True
    artifact_modes = ()
    jit_modes = (DYNAMO, LAZY)

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

    def neuron_backed(self) -> bool:
        return self.kind == "neuron" or (self.kind == "xla" and xla_on_neuron())

    def boundary(self, device) -> Boundary:
        """Split ``(re, im)`` only on a NeuronCore (unless its runtime is in :data:`COMPLEX64_RUNTIMES`);
        elsewhere (XLA:CPU, TPU, meta, other PrivateUse1 devices) complex crosses, split and packed by
        arithmetic in the device's graph (torch-xla's dynamo bridge has no kernel for the view ops)."""
        if self.neuron_backed() and not COMPLEX64_RUNTIMES:
            return Boundary(complex=False, views=False, why=NO_COMPLEX)
        return Boundary(complex=True, views=False)

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

    def measure_unavailable_reason(self) -> str | None:
        """None: effort "measure" times each candidate on the device the way its plan runs there
        (:meth:`measure_runner`), through the split ``(re, im)`` form where complex may not cross the
        boundary (a NeuronCore): the inputs are split on the host, moved, and the outputs packed on
        the host for the error check, so no complex tensor reaches the device."""
        if self.kind == "meta":
            return "device 'meta' computes nothing: there is no time and no error to measure"
        return None

    def measure_runner(self, tree, module, problem, device):
        """A candidate compiled as its own graph by the plan's compile route (:func:`plan_route`;
        the device's own when none is in force) for ``problem``'s batch, as the plan will run it:
        the :class:`BucketedRunner` that :func:`compiled_runner` keeps, so the winner is not
        compiled again. Eager routes time the eager module on the device (``(None, None)``). On a
        NeuronCore each candidate is a neuronx-cc compile (5–90 s, runtimes.md §5), which counts
        against the time limit (``TRNPLAN_TIMELIMIT``)."""
        mode = _ROUTE.get() or self.auto_compile()[0]
        if mode not in WHOLE:
            return None, None
        runner, _fresh = compiled_runner(problem, tree, module, device, self, mode)
        return runner, None

    def shard_executor_reason(self) -> str | None:
        return (f"cores > 1 on {self.kind!r}: one process drives one device here; split across NeuronCores with "
                f"trnplan.distributed (one rank per core)")

    def _probe(self, device):
        """The probe run the way this device's plans run (compiled whole, as :meth:`auto_compile`
        picks), results read on the host; a failure is assumed pessimistically and not stored."""
        if self.kind == "meta":
            return PrecisionProbe(True, "fp32", "assumed: meta tensors carry no values to probe")
        mode, _ = self.auto_compile()
        run = None
        if mode in WHOLE:
            def run(module, inputs):
                return self.compile_graph(module, inputs, mode=mode)(*inputs)
        try:
            return run_precision_probe(torch.device(device), run, route=f"{mode} route")
        except Exception as exc:  # noqa: BLE001 - a probe that cannot run must not stop planning
            return self.pessimistic_probe(f"the probe failed on {device} ({type(exc).__name__}: {str(exc)[:200]})")

    def pessimistic_probe(self, why: str) -> PrecisionProbe:
        """On a NeuronCore fp32 matmuls stay fp32 under ``--auto-cast=none`` (the neuronx-cc default
        since SDK 2.27, runtimes.md §2), so only the split modes are assumed at bf16 accuracy there."""
        if self.neuron_backed():
            return PrecisionProbe(False, "fp32", f"{PESSIMISTIC}: {why}")
        return super().pessimistic_probe(why)

    def precision_probe(self, device=None):
        if device is None:
            device = torch.device(self.kind)
        return super().precision_probe(device)

    # ------------------------------------------------------------------ compiling
    def auto_compile(self):
        backend = self.compile_backend()
        if self.kind == "meta":
            return "eager", "meta tensors compute nothing: there is nothing to compile"
        if self.kind == "xla" and xla_on_neuron():
            # "Torch Dynamo (torch.compile) support in Neuron will be available in a future release"
            # (SDK introducing-pytorch-2-9.rst; runtimes.md §3): openxla only when asked for
            return LAZY, ("lazy XLA, one graph per plan and bucket cut at a sync of its inputs and outputs: "
                          "torch-neuronx 2.9 (trn1/inf2) has no torch.compile; compile='dynamo' asks for openxla")
        if backend is None:
            return "eager", f"no torch.compile backend is known for {self.kind!r}; each op runs as the device runs it"
        return DYNAMO, (f"compiled whole: torch.compile(backend={backend!r}, fullgraph=True, dynamic=False), one graph "
                        f"per plan and bucket")

    def resolve_compile(self, compile: str):
        if compile == DYNAMO and self.compile_backend() is None:
            raise ValueError(f"compile='dynamo' needs a torch.compile backend for {self.kind!r}; none is known "
                             f"(xla: 'openxla', TorchNeuron: 'neuron'); use compile='eager'")
        if compile == LAZY and self.kind != "xla":
            raise ValueError(f"compile='lazy' is torch-xla's lazy tensors (device='xla'), not {self.kind!r}; use "
                             f"compile='auto'")
        if compile == DYNAMO and self.kind == "xla" and xla_on_neuron():
            return DYNAMO, ("asked for: torch.compile(backend='openxla'), which torch-neuronx 2.9 does not support "
                            "(runtimes.md §3); the default here is compile='lazy'")
        return super().resolve_compile(compile)

    def jit_compile(self, module, example, mode):
        return self.compile_graph(module, example, mode=mode)

    def device_for(self, device) -> torch.device:
        return resolve_device(self.kind, device)

    def _prepare(self, cache_dir) -> None:
        """The process settings a plan of this device needs before it compiles anything."""
        if self.neuron_backed():  # the runtime's compile cache follows the plan cache
            configure_compile_cache(cache_dir)
        if self.kind == "neuron":
            refuse_fallback()  # no silent CPU fallback on TorchNeuron (runtimes.md rule 3)
        elif self.neuron_backed():  # torch-neuronx 2.9 reads NEURON_CC_FLAGS at each compile
            require_auto_cast_none()

    def build(self, request, provide, record_compiled=None):
        """Compiled (mode "dynamo" or "lazy"): planned and compiled for the batch's bucket, the compiled
        runner shared by every plan of that bucket in the process (so a new batch size inside a bucket
        compiles nothing), wrapped to pad and crop. The tree comes from ``provide`` in eager mode
        (wisdom, measurement and the module are the same; only the runner differs), so ``wisdom_only``
        plans from the cache and still compiles the graph in the process: on TorchNeuron a warm NEFF
        cache makes that a re-trace without neuronx-cc (runtimes.md §2 Caching)."""
        problem = request.problem
        mode, reason = self.resolve_compile(request.compile)
        self._prepare(request.cache_dir)
        whole = mode in WHOLE
        planned = attrs.evolve(problem, batch=bucket_batch(problem.batch)) if whole else problem
        with plan_route(mode):  # measured planning times each candidate by the plan's own route
            got = provide(request.for_problem(planned, compile="eager"))
        notes = {"runtime": self.runtime(), "compile_cache": cache_note(self.kind),
                 "bucket": bucket_note(problem, planned, mode, self.neuron_backed()), "compile_mode": mode,
                 "compile_reason": reason}
        if not whole:
            return got, None, attrs.evolve(got.provenance, **notes)
        too_big = largest_tensor_reason(planned, got.tree) if self.neuron_backed() else None
        if too_big is not None:  # before any compile (a neuronx-cc run of seconds to minutes)
            raise PlanningError(too_big)
        t0 = time.perf_counter()
        runner, fresh = compiled_runner(planned, got.tree, got.module, request.device, self, mode)
        if record_compiled is not None:  # the NEFFs its graphs added to the compile cache belong to this plan
            cache, key = request.cache, got.provenance.wisdom_key
            record_compiled(cache, key, runner.unrecorded((str(cache.path) if cache is not None else "", key)))
        if request.wisdom_only and fresh and any(c.neffs for c in runner.compiled):
            raise WisdomMiss(f"effort='wisdom_only' (or TRNPLAN_WISDOM_ONLY=1) never compiles, and the graph of "
                             f"{got.tree} for {planned.describe()} was not in the Neuron compile cache "
                             f"({cache_note(self.kind)}): neuronx-cc compiled it now. Precompile it into "
                             f"that cache (trnplan precompile with the same cache directory) and ship the directory, "
                             f"or import a `trnplan cache export` bundle, which carries the compiled graphs")
        notes.update(compile_s=time.perf_counter() - t0, artifact="compiled in process",
                     fallback=fallback_note(self.kind))
        if not fresh:
            notes["compile_reason"] += "; this bucket's graph was already compiled in this process: shared"
        return got, runner, attrs.evolve(got.provenance, **notes)

    def compile_graph(self, module, example, mode: str = DYNAMO):
        """``module`` compiled whole on ``example``'s shapes by route ``mode`` (a callable returning a
        tuple). On a NeuronCore its ``compiled`` attribute lists the files the compile added to the
        runtime's compile cache (:func:`tracked_compile`): export ships them with the plan."""
        def build():
            if mode == LAZY:
                return LazyRunner(module, example)
            return CompiledRunner(module, example, self.compile_backend())

        if not self.neuron_backed():
            return build()
        runner, compiled = tracked_compile(self.kind, build)
        runner.compiled = compiled
        return runner

    def fingerprint(self, device=None) -> dict:
        fp = {**super().fingerprint(device), "accelerator": self.kind,
              "compile_backend": self.compile_backend() or "eager"}
        if self.kind == "xla":
            fp["torch-xla"] = _version("torch-xla") or "absent"
            fp["pjrt_device"] = pjrt_device()
            if self.neuron_backed():  # what changes the NEFF: compiler and libraries, their flags
                fp.update(neuron_runtime.detect().compile_key())
                fp["neuron_cc_flags"] = " ".join(os.environ.get("NEURON_CC_FLAGS", "").split())
        elif self.kind == "neuron":
            fp.update(neuron_runtime.detect().compile_key())
        return fp


def pjrt_device() -> str:
    """The PJRT device torch-xla runs on (``torch_xla.runtime.device_type()``: the plugin it started
    with, also when ``PJRT_DEVICE`` was not exported), else ``PJRT_DEVICE``, else ""."""
    try:
        import torch_xla.runtime as xr  # only asked for xla plans, where torch-xla is installed

        return str(xr.device_type() or "")
    except Exception:  # noqa: BLE001 - no torch-xla, or a runtime that cannot start: say what is set
        return config.pjrt_device() or ""


#: the neuronx-cc flag fp32 plans need (runtimes.md rule 5; the default since SDK 2.27, but
#: torch-neuronx 2.9 releases before it auto-cast fp32 matmuls to bf16)
AUTO_CAST_NONE = "--auto-cast=none"


def require_auto_cast_none() -> str:
    """Append ``--auto-cast=none`` to ``NEURON_CC_FLAGS`` unless it is there; refuse another
    ``--auto-cast`` value the user set (never overridden silently). Returns the flags as they are."""
    flags = os.environ.get("NEURON_CC_FLAGS", "")
    words = flags.replace("--auto-cast ", "--auto-cast=").split()
    casts = [w.split("=", 1)[1] if "=" in w else "" for w in words if w.startswith("--auto-cast=")]
    if any(c != "none" for c in casts):
        raise PlanningError(f"NEURON_CC_FLAGS={flags!r} asks neuronx-cc to auto-cast ({', '.join(casts)}), which "
                            f"rounds fp32 matmuls to bf16 (an fp32 plan would be 10^4x less accurate than its bound): "
                            f"set {AUTO_CAST_NONE} there, or unset the --auto-cast flag (trnplan then appends "
                            f"{AUTO_CAST_NONE})")
    if not casts:
        os.environ["NEURON_CC_FLAGS"] = f"{flags} {AUTO_CAST_NONE}".strip()
    return os.environ["NEURON_CC_FLAGS"]


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
    "AUTO_CAST_NONE",
    "CACHE_VARIABLES",
    "COMPILE_BACKENDS",
    "COMPLEX64_RUNTIMES",
    "DYNAMO",
    "LAZY",
    "NO_COMPLEX",
    "NO_FALLBACK",
    "RUNTIME_CACHE",
    "WHOLE",
    "AccelBackend",
    "BucketedRunner",
    "CompiledFiles",
    "CompiledRunner",
    "LazyRunner",
    "backend_for",
    "bucket_batch",
    "bucket_note",
    "cache_files",
    "cache_note",
    "clear_runners",
    "compile_cache_dir",
    "compile_cache_target",
    "compile_failure",
    "compiled_runner",
    "configure_compile_cache",
    "configure_compile_cache_if_neuron",
    "count_neffs",
    "fallback_note",
    "is_accelerator_kind",
    "pjrt_device",
    "plan_route",
    "privateuse1_name",
    "refuse_fallback",
    "require_auto_cast_none",
    "reset_compile_cache",
    "resolve_device",
    "torchneuron_present",
    "tracked_compile",
    "xla_on_neuron",
]
