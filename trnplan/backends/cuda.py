"""The CUDA backend: the same torch programs on the GPU, cuFFT (torch.fft) as the native leaf.

The cost profile below is *not* calibrated: no GPU was available where this was written. It is
scaled from published H100 figures (../shared/FACTS.md: 67 TFLOP/s fp32 non-tensor, 3.35 TB/s)
and a typical ~8 µs eager launch; bench/calibrate.py --device cuda measures the real numbers
(the GPU issue replaces these).
"""

from __future__ import annotations

import torch

from trnplan.backends.base import Backend, PrecisionProbe
from trnplan.planner.cost import CostProfile

CUDA_PROFILE = CostProfile(
    name="cuda",
    launch_us=8.0,
    # bf16 and TF32 tensor-core rates (H100 SXM dense: 989 and 495 TFLOP/s published), derated
    # like fp32 to ~60-70%; bf16 modes are priced at this rate × their product count
    gemm_gflops={"float32": 40000.0, "float64": 30000.0, "bfloat16": 600000.0, "tf32": 300000.0},
    fft_gflops={"float32": 3000.0, "float64": 1500.0},
    fft_launch_us=10.0,
    bandwidth_gbs=2000.0,
    source="uncalibrated: scaled from published H100 figures",
)


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

    precisions = ("fp32", "fp64", "bf16", "bf16x3", "bf16x6", "tf32")

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

    def fingerprint(self) -> dict:
        fp = super().fingerprint()
        if torch.cuda.is_available():
            # the current device: plan on another GPU model with torch.cuda.set_device first
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            fp.update(gpu=props.name, capability=f"{props.major}.{props.minor}", cuda=torch.version.cuda)
        return fp
