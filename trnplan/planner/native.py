"""native: the device's own FFT library (torch.fft: MKL/pocketfft on the CPU, cuFFT on CUDA).

A leaf that applies wherever the backend has a native FFT for the precision. On Neuron there
is none (``aten::fft_*`` is unsupported by neuronx-cc); there the host library is a fallback
candidate priced with transfer and dispatch (the Trainium backend issue).
"""

from __future__ import annotations

import math

import torch

from trnplan.planner.accuracy import UNIT_ROUNDOFF, log_growth
from trnplan.planner.cost import Work
from trnplan.planner.solver import Solver, itemsize, prime_factors

#: error constant c of c·u·√log2(n) per precision: measured ratios error/(u·√log2 n) reached
#: 0.69 (fp32) and 1.02 (fp64) on smooth sizes (bench/accuracy.py), rounded up.
ERROR_C = {"fp32": 1.0, "fp64": 1.4}
#: a prime factor p ≤ BLUESTEIN_PRIME runs as a direct O(p²) pass with error growing as √p:
#: fp64 n=31 measured 3.6u where the smooth model gives 3.1u; the factor (1 + √p/8) covers it
PRIME_PASS_SLOPE = 1 / 8
#: sizes with a prime factor above BLUESTEIN_PRIME run the library's chirp-z path, measured at
#: up to 1.35 (fp32) and 2.12 (fp64) × u·√log2 n: twice the smooth constant bounds them
LARGE_PRIME_GAIN = 2.0
#: native libraries fall back to a chirp-z (Bluestein) algorithm for large prime factors (97
#: already measures like one in bench/accuracy.py, 31 does not):
#: about three FFTs of length ≥ 2n, and the error of that longer chain
BLUESTEIN_PRIME = 50


class NativeFFT(torch.nn.Module):
    """``torch.fft.fft`` / unscaled ``ifft`` on split tensors."""

    def __init__(self, n: int, inverse: bool):
        super().__init__()
        self.n, self.inverse = n, inverse

    def forward_complex(self, z: torch.Tensor, norm: str | None = None) -> torch.Tensor:
        """The transform of a complex tensor; unscaled unless a torch.fft ``norm`` is given."""
        if self.inverse:
            return torch.fft.ifft(z, dim=-1, norm=norm or "forward")  # "forward": inverse unscaled
        return torch.fft.fft(z, dim=-1, norm=norm or "backward")

    def forward(self, re: torch.Tensor, im: torch.Tensor):
        y = self.forward_complex(torch.complex(re, im))
        return y.real, y.imag


class Native(Solver):
    name = "native"

    def why_not(self, problem, planner, forced):
        if not planner.backend.has_native_fft(problem.precision):
            return f"the {problem.device} backend has no native FFT for precision {problem.precision}"
        return None

    def plan(self, problem, planner, spec):
        n, b, size = problem.n, problem.batch, itemsize(problem)
        large_prime = max(prime_factors(n), default=1) > BLUESTEIN_PRIME
        effective = 2 ** math.ceil(math.log2(2 * n)) if large_prime else n
        passes = 3 if large_prime else 1
        work = Work(
            launches=2,  # pack to complex, unpack
            fft_calls=1,
            fft_flops=passes * 5.0 * effective * math.log2(max(effective, 2)) * b,
            bytes=(2 + 2 * passes) * 2 * n * b * size,
        )
        error = ERROR_C[problem.precision] * UNIT_ROUNDOFF[problem.precision] * log_growth(n)
        p = max(prime_factors(n), default=1)
        error *= LARGE_PRIME_GAIN if large_prime else 1.0 + (PRIME_PASS_SLOPE * math.sqrt(p) if p > 7 else 0.0)
        return self.node(problem, planner, work, error)

    def build(self, node, ctx):
        return NativeFFT(node.n, node.inverse)
