"""The CPU backend: torch eager on the host, torch.fft (MKL / pocketfft) as the native leaf."""

from __future__ import annotations

import torch

from trnplan.backends.base import Backend
from trnplan.planner.cost import CostProfile

#: Measured on the 2-vCPU AVX-512/AMX Xeon this project develops on (torch 2.13.0+cpu,
#: 2 threads) with bench/calibrate.py and bench/bench_solvers.py:
#: - launch: a lone tiny op costs 1.9 µs, but inside a plan module each modeled launch brings a
#:   view, select or transpose with it (≈2 ATen calls, counted with torch.profiler) and each
#:   ATen call costs 3–5 µs here (a bare view: 2.7 µs), so 8 µs per modeled launch;
#: - sgemm 43–129 GFLOP/s (49 on the skinny shapes the solvers use), dgemm 13–54 (22);
#: - torch.fft: 1×65536 in 267 µs and 128×1024 in 207 µs, i.e. 35–60 nominal GFLOP/s in
#:   complex64 (about 2.3× less in complex128), plus ~8 µs per call;
#: - elementwise ops on the L2-resident arrays FFTs use move 20–36 GB/s.
CPU_PROFILE = CostProfile(
    name="cpu",
    launch_us=8.0,
    gemm_gflops={"float32": 50.0, "float64": 22.0},
    fft_gflops={"float32": 40.0, "float64": 17.0},
    fft_launch_us=8.0,
    bandwidth_gbs=20.0,
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
