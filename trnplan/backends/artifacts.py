"""Compiled artifacts: turning a lowered plan module into bytes, and bytes back into a runner.

Two kinds, chosen by ``plan_many(..., compile=)`` through the backend:

``aot`` (cpu, cuda)
    ``torch.export`` with a dynamic batch dimension (static if it does not export), then
    AOTInductor (``torch._inductor.aoti_compile_and_package``) into an in-memory ``.pt2``
    package. Loading writes the bytes to a private temporary file and opens it with
    ``AOTIModelPackageLoader``, which does not recompile: 3–5 ms here against 10–40 s to build.
``inductor`` (cpu, cuda; not an artifact)
    ``torch.compile(module, fullgraph=True, dynamic=False)`` in the running process, compiled at
    plan time on the plan's own input shape: Inductor fuses the elementwise work (twiddles, bf16
    slicing, concatenation, transposes) into generated kernels around the library GEMMs. Nothing
    is stored in the plan cache (Inductor keeps its own on-disk kernel cache, which makes a later
    process's compile faster, not free); this is the fused path where AOTInductor packages
    cannot be loaded (CUDA on torch 2.11, docs/gpu.md).
``neuron`` (Trainium)
    ``torch_neuronx.trace(..., compiler_args=["--auto-cast", "none"])`` (fp32 matmuls stay fp32:
    the default was bf16 auto-cast up to SDK 2.26) saved with ``torch.jit.save``; loaded with
    ``torch.jit.load`` after ``import torch_neuronx`` and placed on a NeuronCore by
    :mod:`trnplan.backends.neuron`. The Neuron compile cache does not keep traced models, so these
    bytes are the only copy. Static shapes: the batch is fixed. *Not run on Trainium in this
    version*: the seam is exercised with a stand-in ``torch_neuronx`` (tests/test_neuron_standin.py).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import itertools
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import types

import torch

from trnplan.kernels.complex import interleave_planes, planes_of_one_buffer
from trnplan.kernels.gemm import fp32_matmul_scope

_TMP_DIR: str | None = None
_TMP_LOCK = threading.Lock()


def _private_tmp() -> str:
    """A per-process directory (mode 0700) for extracted packages, removed at exit."""
    global _TMP_DIR
    with _TMP_LOCK:
        if _TMP_DIR is None:
            _TMP_DIR = tempfile.mkdtemp(prefix="trnplan-aoti-")
            atexit.register(shutil.rmtree, _TMP_DIR, True)
        return _TMP_DIR


def example_inputs(batch: int, n: int, dtype: torch.dtype, device: torch.device, count: int = 2):
    """``count`` random (batch, n) tensors: (re, im) for complex input, one tensor for r2c."""
    # a batch of 1 would be specialised by torch.export (0/1 specialisation): trace with 2
    b = max(batch, 2)
    return tuple(torch.randn(b, n, dtype=dtype, device=device) for _ in range(count))


def problem_inputs(problem, device: torch.device):
    """Example inputs of a problem's lowered module: flat (batch, points) real tensors."""
    return example_inputs(problem.batch, math.prod(problem.in_shape), problem.real_dtype, device,
                          count=1 if problem.real_input else 2)


def aot_compile(module: torch.nn.Module, example) -> tuple[bytes, bool]:
    """AOTInductor package bytes of ``module`` and whether its batch dimension is dynamic."""
    module = module.eval()
    batch = torch.export.Dim("batch", min=1)
    try:
        # forward(*inputs): the varargs are one argument to export, so the spec is one tuple deep
        exported = torch.export.export(module, example, dynamic_shapes=(tuple({0: batch} for _ in example),))
        dynamic = True
    except Exception:  # noqa: BLE001 - any export failure: fall back to the static batch
        exported = torch.export.export(module, example)
        dynamic = False
    buffer = io.BytesIO()
    # full fp32 matmuls while Inductor compiles: GEMM templates take the TF32 setting at compile time
    with fp32_matmul_scope(example[0].device.type):
        torch._inductor.aoti_compile_and_package(exported, package_path=buffer)
    return buffer.getvalue(), dynamic


_TMPDIR_LOCK = threading.Lock()


@contextlib.contextmanager
def _extraction_dir():
    """A fresh private directory that AOTInductor's loader extracts a package into (it honours
    ``TMPDIR``), removed after the block.

    The loader extracts the package's shared library and weights (1.5 MB for the n = 64 CPU
    package) into a directory of its own under the temp dir and keeps it for the loader's life:
    each warm start of a process left one behind when the process did not tear the loader
    down (killed, ``os._exit``, a plan still held at exit) (issue 34). The library is mapped once
    loaded: the loader runs after the directory is gone (checked by tests/test_fail_fast.py).
    ``TMPDIR`` is process-wide: it is set under a lock and restored at once.
    """
    folder = tempfile.mkdtemp(prefix="load-", dir=_private_tmp())
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _tmpdir_set_to(folder: str):
    with _TMPDIR_LOCK:
        old = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = folder
        try:
            yield
        finally:
            if old is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = old


@contextlib.contextmanager
def _package_file(data: bytes):
    """The path of ``data`` written to a private temporary ``.pt2`` file, removed after the block."""
    fd, path = tempfile.mkstemp(suffix=".pt2", dir=_private_tmp())
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    try:
        yield path
    finally:
        os.remove(path)


#: The child process of :func:`load_check`: torch only (it does not import trnplan, so it runs
#: wherever the parent's torch does). argv: package path, device, then "batch,points,dtype" per input.
_LOAD_CHECK_CHILD = r"""
import sys, torch
path, device = sys.argv[1], torch.device(sys.argv[2])
index = device.index if device.type == "cuda" and device.index is not None else -1
inputs = []
for spec in sys.argv[3:]:
    batch, points, dtype = spec.split(",")
    inputs.append(torch.randn(int(batch), int(points), dtype=getattr(torch, dtype), device=device))
print("trnplan load check: loading the package", flush=True)
loader = torch._C._aoti.AOTIModelPackageLoader(path, "model", False, 1, index)
print("trnplan load check: running it", flush=True)
out = loader.run(inputs)
if device.type == "cuda":
    torch.cuda.synchronize(device)
print("trnplan load check: ok,", len(out), "outputs", flush=True)
"""
_LOAD_CHECK_STAGE = "trnplan load check: "
_LOAD_CHECK_OK = _LOAD_CHECK_STAGE + "ok"


def load_check_command(path: str, device: torch.device, example) -> list[str]:
    """The command line of :func:`load_check`'s child process."""
    specs = [f"{t.shape[0]},{t.shape[1]},{str(t.dtype).removeprefix('torch.')}" for t in example]
    return [sys.executable, "-c", _LOAD_CHECK_CHILD, path, str(device), *specs]


def load_check(data: bytes, device: torch.device, example, timeout: float = 300.0) -> str | None:
    """Load an AOTInductor package and run it once on ``example``'s shapes in a child process.

    Returns ``None`` if that worked, else why not, in words ("killed by SIGSEGV (…)").

    Loading an AOTInductor package in this process cannot be undone if it crashes: on an H200
    with torch 2.11.0+cu130 every CUDA package, even a two-op module, killed the loading process
    with SIGSEGV (docs/gpu.md). A child process takes the crash instead, and the caller runs the
    plan eagerly. It costs an interpreter start, a torch import and one run (2.1–2.5 s for an
    n = 64 CPU package on the 2-core CI machine), paid once per artifact: the plan cache remembers
    a package that loaded.
    """
    try:
        # the child's loader extracts into a folder removed here, also when the child crashed
        with _package_file(data) as path, _extraction_dir() as folder:
            proc = subprocess.run(load_check_command(path, device, example), capture_output=True, text=True,
                                  timeout=timeout, check=False, env={**os.environ, "TMPDIR": folder})
    except subprocess.TimeoutExpired:
        return f"the child process loading it did not finish in {timeout:.0f} s"
    if proc.returncode == 0 and _LOAD_CHECK_OK in proc.stdout:
        return None
    if proc.returncode < 0:
        try:
            what = f"killed by {signal.Signals(-proc.returncode).name}"
        except ValueError:
            what = f"killed by signal {-proc.returncode}"
    else:
        what = f"exited with status {proc.returncode}"
    stages = [line[len(_LOAD_CHECK_STAGE):] for line in proc.stdout.splitlines() if line.startswith(_LOAD_CHECK_STAGE)]
    if stages:
        what += f" while {stages[-1]}"
    lines = proc.stderr.strip().splitlines()
    return f"the child process loading it was {what}" + (f" ({lines[-1][:300]})" if lines else "")


class AOTRunner:
    """Runs a loaded AOTInductor package on the plan module's inputs, returning its outputs as a tuple; thread-safe."""

    def __init__(self, data: bytes, device: torch.device):
        device_index = device.index if device.type == "cuda" and device.index is not None else -1
        # removed once loaded: the loader has extracted what it needs (runs fine after removal)
        with _package_file(data) as path, _extraction_dir() as folder, _tmpdir_set_to(folder):
            self._loader = torch._C._aoti.AOTIModelPackageLoader(path, "model", False, 1, device_index)
        self._lock = threading.Lock()
        self._device_type = device.type
        # the CUDA runner launches on the *current* device's current stream: make that the plan's
        # GPU, so that a cuda:1 plan runs on cuda:1's stream whatever device is current
        self._device_guard = (lambda: torch.cuda.device(device)) if device.type == "cuda" else contextlib.nullcontext

    def __call__(self, *inputs: torch.Tensor):
        # fp32 GEMMs in the package run at full fp32 whatever the process-wide TF32 setting (the
        # plans that want TF32 run eagerly); see kernels.gemm._Fp32MatmulPrecision
        with self._lock, self._device_guard(), fp32_matmul_scope(self._device_type):
            out = self._loader.run([t.contiguous() for t in inputs])
        return tuple(out)


class InductorRunner:
    """A plan module compiled by ``torch.compile`` in this process, warmed on ``example`` (so the
    compile happens at plan time, not at the first execute); thread-safe.

    Inputs are given the layout it was compiled for: any other stride would be a new guard and a
    recompile of seconds in the middle of a run. A complex pair ``(re, im)`` is compiled as the two
    planes of one interleaved buffer, which is what a plan passes (``z.real``, ``z.imag`` of the
    user's complex tensor), so that the graph reads the data where it lies; making the planes
    contiguous first cost two copies of the whole input before the graph ran. A pair that is not
    such planes is interleaved by one copy; other inputs are made contiguous.

    Inductor is told to round at every dtype cast as eager torch does (``emulate_precision_casts``).
    By default it keeps a fused kernel's values in fp32 across ``.to(bfloat16)``, which would make
    the bf16 modes' residual ``r − bf16(r)`` zero: bf16x3 would silently compute at bf16
    accuracy (and the CPU's fp32 emulation of bf16 at fp32 accuracy). Measured on the CPU before
    the fix: bf16x3 four-step 1.9e-6 compiled against 4.7e-6 eager, i.e. not the arithmetic asked for.
    """

    _count = itertools.count()

    def __init__(self, module: torch.nn.Module, example, mode: str | None = None):
        # torch.compile takes a mode or options, not both: the mode's options, plus the cast rule
        # (list_mode_options(None) lists every mode's options: only a named mode's are wanted)
        options = {**(torch._inductor.list_mode_options(mode) if mode else {}), "emulate_precision_casts": True}
        self._module = module.eval()
        self._planes = len(example) == 2 and example[0].shape == example[1].shape and example[0].ndim == 2 \
            and example[0].dtype == example[1].dtype and example[0].dtype in (torch.float32, torch.float64)
        example = self._layout(example)
        self._fn = torch.compile(module_runner(next(self._count)), fullgraph=True, dynamic=False,
                                 options=options)
        self._lock = threading.Lock()
        self._device_type = example[0].device.type
        # CUDA graphs (modes reduce-overhead and max-autotune) replay into the same output memory:
        # each call's outputs are copied out, or a caller's earlier result would be overwritten
        self._cudagraphs = bool(options.get("triton.cudagraphs")) and self._device_type == "cuda"
        # compiled (at this first call) and run at full fp32 for fp32 GEMMs, as eager ones
        with self._lock, torch.no_grad(), fp32_matmul_scope(self._device_type):
            self._fn(self._module, *example)

    def __call__(self, *inputs: torch.Tensor):
        with self._lock, torch.no_grad(), fp32_matmul_scope(self._device_type):
            if self._cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()
            out = self._fn(self._module, *self._layout(inputs))
            if self._cudagraphs:  # copied out of the graph's memory: a pair of planes as one interleaved buffer
                # (one pass, and the plan packs it without another; cloning each plane and packing took five)
                out = interleave_planes(*out) if len(out) == 2 and planes_of_one_buffer(*out) else [
                    t.clone() for t in out]
        return tuple(out)

    def _layout(self, inputs):
        if self._planes:
            return tuple(inputs) if planes_of_one_buffer(*inputs) else interleave_planes(*inputs)
        return tuple(t.contiguous() for t in inputs)


def _run_module(module, *inputs):
    return module(*inputs)


def module_runner(tag: int):
    """``lambda module, *inputs: module(*inputs)`` with a code object of its own, named ``_run_module_{tag}``.

    Dynamo keeps compiled graphs per code object and gives each at most
    ``torch._dynamo.config.recompile_limit`` (8) of them: compiling every plan's
    ``PlanModule.forward`` directly made the ninth plan of a process fail to compile (measured).
    A fresh code object per compiled graph (each plan, each convolution's graph) gives each its
    own cache entry and its own guards; ``torch.compile`` the result.
    """
    code = _run_module.__code__.replace(co_name=f"_run_module_{tag}")
    return types.FunctionType(code, _run_module.__globals__, code.co_name)


def neuron_compile(module: torch.nn.Module, example, compiler_args=("--auto-cast", "none"),
                   cpu_backend: bool = False, workdir: str | None = None) -> bytes:
    """``torch_neuronx.trace`` of ``module`` on ``example``, as ``torch.jit.save`` bytes.

    ``cpu_backend=True`` traces without a NeuronCore (a build host; the target must be in
    ``compiler_args``) and is only passed when asked, since SDKs before its introduction reject the
    keyword. ``workdir`` is neuronx-cc's ``compiler_workdir``: its log stays there.
    """
    import torch_neuronx  # deferred: an optional dependency, only on Trainium (the Neuron SDK)

    extra = {"cpu_backend": True} if cpu_backend else {}
    if workdir is not None:
        extra["compiler_workdir"] = workdir
    traced = torch_neuronx.trace(module.eval(), example, compiler_args=list(compiler_args), **extra)
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer)
    return buffer.getvalue()
