"""The CPU backend: torch eager on the host, torch.fft (MKL / pocketfft) as the native leaf."""

from __future__ import annotations

import functools

import torch

from trnplan.backends.base import Backend
from trnplan.core import state
from trnplan.core.cost import CostProfile
from trnplan.kernels import hostlib

#: Measured on the 2-vCPU AVX-512/AMX Xeon this project develops on (torch 2.13.0+cpu,
#: 2 threads) with bench/calibrate.py and bench/bench_solvers.py:
#: - launch: a lone tiny op costs 1.9 µs, but inside a plan module each modeled launch brings a
#:   view, select or transpose with it (≈2 ATen calls, counted with torch.profiler) and each
#:   ATen call costs 3–5 µs here (a bare view: 2.7 µs), so 8 µs per modeled launch;
#: - GEMM: the first measurement (sgemm 43–129 GFLOP/s, 49 on the skinny shapes, dgemm 13–54, 22)
#:   priced a GEMM ~3× above what it takes. Re-measured 2026-11-27 (issue 30; busy machine, torch
#:   1 thread) on the solvers' own shapes (bench/calibrate.py's SKINNY: rows × n @ n × 2m, the
#:   truncated solver's pruned passes and dft-gemm's products): round-robin medians sgemm 109–182
#:   GFLOP/s (median 165; one core's AVX-512 peak is ~190), dgemm 35–83 (median ~75, two shapes
#:   stalled); a later `OMP_NUM_THREADS=1 python bench/calibrate.py` on a busier box gave sgemm
#:   62–168 (median 134), dgemm 6–76. At 2 threads the fastest calls reached 206–353 GFLOP/s but
#:   medians stalled 10–40× whenever another process held a core. Taken: 150 and 60, about the
#:   one-thread medians (a GEMM tree is not priced below what it does on a loaded box). At 50 the
#:   truncated solver's pruned GEMMs were predicted 3.1× their measured time (808 µs vs 258 at
#:   512 × 1024 keeping 16 bins) and ranked behind the library where they ran 0.4–0.8× its time;
#: - torch.fft: 1×65536 in 267 µs and 128×1024 in 207 µs, i.e. 35–60 nominal GFLOP/s in
#:   complex64 (about 2.3× less in complex128), plus ~8 µs per call;
#: - elementwise ops on the L2-resident arrays FFTs use move 20–36 GB/s.
CPU_PROFILE = CostProfile(
    name="cpu",
    launch_us=8.0,
    gemm_gflops={"float32": 150.0, "float64": 60.0},
    fft_gflops={"float32": 40.0, "float64": 17.0},
    fft_launch_us=8.0,
    bandwidth_gbs=20.0,
    source="bench/calibrate.py on a 2-vCPU Xeon (AVX-512, AMX), torch 2.13.0+cpu, 2 threads",
    threads=2,
    # rms log-error of these constants on trnplan.tools.calibrate's held-out grid (the leaves: torch.fft,
    # pyFFTW, mkl_fft, scipy; `python bench/calibrate.py --fit` reports it as "uncalibrated"),
    # measured on this box while 4 engineers shared it: 0.82-0.94 at torch 1 thread, 1.36-1.74 at
    # 2 threads (OpenMP stalls); issue 19 measured 1.22 quiet. 1.2, a factor 3.3: the estimate's
    # margin rule keeps torch.fft unless another tree is predicted faster by more than that
    # (docs/architecture.md, "The cost model"). Trees with GEMM solvers are held to it as well.
    sigma=1.2,
    sigma_source="uncalibrated: the CPU profile's held-out rms log-error, measured once (trnplan.backends.cpu)",
)


class CPUBackend(Backend):
    kind = "cpu"
    profile = CPU_PROFILE
    host_libraries = True

    def has_native_fft(self, precision: str) -> bool:
        return precision in ("fp32", "fp64")

    def device_for(self, device) -> torch.device:
        return torch.device("cpu")  # torch has one CPU device: "cpu:0" tensors report "cpu"

    def auto_compile(self):
        # bench/cache.py: on this CPU an AOTInductor package ran no faster than eager torch for
        # the GEMM and native plans (../shared/FACTS.md saw the same), and costs 10–40 s to build
        return "eager", "on the CPU an AOTInductor artifact measured no faster than eager (docs/benchmarks.md)"

    def fingerprint(self, device=None) -> dict:
        # thread count is not a fact the plan depends on (only its speed): left out, so that
        # changing OMP_NUM_THREADS does not invalidate precompiled plans

        # the host FFT libraries are candidates: a plan made without pyFFTW is re-made once it is
        # installed (and one made with it is not replayed where it is gone)
        libs = ", ".join([f"{k} {v or 'absent'}" for k, v in hostlib.available().items()])
        return {**super().fingerprint(), "torch_isa": torch.backends.cpu.get_cpu_capability(),
                "cpu_flags": cpu_flags(), "fft_libraries": libs}


#: ISA extensions an AOTInductor artifact may be compiled for
_ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
              "asimd", "sve")


@functools.cache  # the CPU does not change while the process runs; every plan's fingerprint asks
def cpu_flags() -> str:
    """The ISA flags of /proc/cpuinfo that compiled code can depend on ("" where unreadable)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    present = set(line.split(":", 1)[1].split())
                    return " ".join(flag for flag in _ISA_FLAGS if flag in present)
    except OSError:
        pass
    return ""


state.register("backends.cpu.cpu_flags", cpu_flags.cache_clear)
