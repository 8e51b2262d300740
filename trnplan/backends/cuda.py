"""The CUDA backend: the same torch programs on the GPU, cuFFT (torch.fft) as the native leaf.

The cost profile was measured with ``bench/calibrate.py --device cuda`` on an NVIDIA H200
(torch 2.11.0+cu130, driver 580.159.04) on 2026-11-26 (docs/gpu.md):

* launch: 20.4 µs per tiny op *with a synchronize after each*; eager chains overlap their
  dispatch with the GPU, so this overprices plans of many small ops (it favours the library);
* fp32 GEMM (TF32 off) 19.8–26.4 TFLOP/s, fp64 19.4–35.5 (skinny shapes: the lower figures);
* elementwise 2.4 TB/s (fp32 ``x * x``; 3.4 in fp64) against the H200's 4.8 TB/s HBM peak;
* cuFFT 1.6–3.1 nominal TFLOP/s in complex64 on the calibration's ~1M-point batches (launch
  bound), 5.9–11.3 on the benchmark's 2^24-point batches (bench/gpu_bench.py, n = 64 … 65536):
  the profile takes 8, since large batched transforms are what a GPU plan is for; complex128
  1.6–2.2 (calibration only); 17 µs per call.

The bf16 and TF32 tensor-core rates were *not* measured by the calibration: they are the
published H100 dense figures derated to ~60 %.
"""

from __future__ import annotations

import ctypes
import re

import torch

from trnplan.backends.base import Backend, PrecisionProbe
from trnplan.core.cost import CostProfile

CUDA_PROFILE = CostProfile(
    name="cuda",
    launch_us=20.0,
    # bf16 modes are priced at the bfloat16 rate × their product count (kernels/gemm.py)
    gemm_gflops={"float32": 20000.0, "float64": 19000.0, "bfloat16": 600000.0, "tf32": 300000.0},
    fft_gflops={"float32": 8000.0, "float64": 1900.0},
    fft_launch_us=17.0,
    bandwidth_gbs=2400.0,
    source="bench/calibrate.py --device cuda on an H200 (torch 2.11.0+cu130); bf16/tf32 GEMM rates published, derated",
    native_bf16=True,
)


CORES_ON_CUDA = ("cores=C splits a plan's batch over CPU worker threads or NeuronCores; a GPU runs a plan as "
                 "one device: use cores=1 on cuda (and trnplan.distributed for several GPUs)")


class CUDABackend(Backend):
    kind = "cuda"
    profile = CUDA_PROFILE

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            return ("device='cuda' needs a CUDA GPU and a CUDA build of torch, and "
                    f"torch {torch.__version__} sees none here; use device='cpu'")
        return None

    def has_native_fft(self, precision: str) -> bool:
        return precision in ("fp32", "fp64")

    def device_for(self, device) -> torch.device:
        """``cuda`` is the current device, as in torch; an index this machine lacks is refused."""
        dev = torch.device(device)
        index = torch.cuda.current_device() if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return torch.device("cuda", index)

    def shard_executor_reason(self) -> str | None:
        return CORES_ON_CUDA

    precisions = ("fp32", "fp64", "bf16", "bf16x3", "bf16x6", "tf32")
    # an H200 with torch 2.11.0+cu130 crashed (SIGSEGV) loading every AOT package (docs/gpu.md)
    load_check_artifacts = True

    def _probe(self, device):
        if not torch.cuda.is_available():  # planning for CUDA on a machine without one
            return PrecisionProbe(True, "fp32", "assumed, not probed: no CUDA device here (bf16 tensor cores "
                                                "accumulate exact products in fp32)")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        return super()._probe(device)

    def auto_compile(self):
        # Eager until measured: an AOTInductor build costs 30–90 s per plan (so compile="auto"
        # would make the first trnplan.fft call on a new shape take a minute), and on an H200
        # with torch 2.11 loading a freshly built artifact in the building process crashed once
        # (docs/gpu.md). compile="aot" and precompile build artifacts on request.
        return "eager", "on CUDA an AOT artifact's gain is not measured yet and costs 30–90 s to build"

    def fingerprint(self, device=None) -> dict:
        fp = super().fingerprint(device)
        if torch.cuda.is_available():
            # the plan's GPU ("cuda:1" on a machine with two GPU models is not cuda:0's plan);
            # "cuda" without an index is the current device, as in torch
            index = device.index if device is not None and device.index is not None else torch.cuda.current_device()
            props = torch.cuda.get_device_properties(index)
            fp.update(gpu=props.name, capability=f"{props.major}.{props.minor}", cuda=torch.version.cuda,
                      driver=cuda_driver_version())
        return fp


#: the kernel module's version line, "... Kernel Module  580.159.04 ..." (or "Open Kernel Module for x86_64  …")
_DRIVER_LINE = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")


def cuda_driver_version(proc_file: str = "/proc/driver/nvidia/version") -> str:
    """The NVIDIA driver's release ("580.159.04") from the kernel module's version file, else the
    driver API version libcuda reports ("driver API 13.0"), else "unknown"."""
    try:
        with open(proc_file) as f:
            match = _DRIVER_LINE.search(f.read())
        if match:
            return match.group(1)
    except OSError:
        pass
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return f"driver API {version.value // 1000}.{version.value % 1000 // 10}"
    except (OSError, AttributeError):
        pass
    return "unknown"
