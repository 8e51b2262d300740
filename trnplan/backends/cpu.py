"""The CPU backend: torch eager on the host, torch.fft (MKL / pocketfft) as the native leaf."""

from __future__ import annotations

import torch

from trnplan.backends.base import Backend
from trnplan.planner.cost import CostProfile

#: Measured with bench/calibrate.py on the 2-vCPU AVX-512/AMX Xeon this project develops on
#: (torch 2.13.0+cpu, 2 threads), rounded to what mid-sized FFT work sees: a tiny op costs
#: 1.9 µs; sgemm 43–129 GFLOP/s (49 on the skinny shapes the solvers use), dgemm 13–54 (22);
#: torch.fft sustains 16–22 nominal GFLOP/s in complex64 and 7–9 in complex128 and costs about
#: 10 µs per call at n = 256; an elementwise op on arrays past the caches moves 5–36 GB/s.
CPU_PROFILE = CostProfile(
    name="cpu",
    launch_us=2.5,
    gemm_gflops={"float32": 50.0, "float64": 22.0},
    fft_gflops={"float32": 17.0, "float64": 7.5},
    fft_launch_us=8.0,
    bandwidth_gbs=8.0,
    source="bench/calibrate.py on a 2-vCPU Xeon (AVX-512, AMX), torch 2.13.0+cpu, 2 threads",
)


class CPUBackend(Backend):
    kind = "cpu"
    profile = CPU_PROFILE

    def has_native_fft(self, precision: str) -> bool:
        return precision in ("fp32", "fp64")

    def fingerprint(self) -> dict:
        return {**super().fingerprint(), "threads": torch.get_num_threads(),
                "torch_isa": torch.backends.cpu.get_cpu_capability()}
