"""The CUDA backend: the same torch programs on the GPU, cuFFT (torch.fft) as the native leaf.

The cost profile below is *not* calibrated: no GPU was available where this was written. It is
scaled from published H100 figures (../shared/FACTS.md: 67 TFLOP/s fp32 non-tensor, 3.35 TB/s)
and a typical ~8 µs eager launch; bench/calibrate.py --device cuda measures the real numbers
(the GPU issue replaces these).
"""

from __future__ import annotations

import torch

from trnplan.backends.base import Backend
from trnplan.planner.cost import CostProfile

CUDA_PROFILE = CostProfile(
    name="cuda",
    launch_us=8.0,
    gemm_gflops={"float32": 40000.0, "float64": 30000.0},
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

    def auto_compile(self):
        # Inductor fuses the elementwise twiddle and transpose work into GEMM epilogues on CUDA
        # (../shared/FACTS.md); not measured on a GPU by trnplan yet
        return "aot", "on CUDA, Inductor fuses the twiddle and transpose work (not yet measured here)"

    def fingerprint(self) -> dict:
        fp = super().fingerprint()
        if torch.cuda.is_available():
            # the current device: plan on another GPU model with torch.cuda.set_device first
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            fp.update(gpu=props.name, capability=f"{props.major}.{props.minor}", cuda=torch.version.cuda)
        return fp
