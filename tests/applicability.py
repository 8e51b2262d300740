"""The applicability table of the solver registry, shared by the tests that force solvers.

:func:`expected_refusal` answers, for a registered solver and a problem (:class:`Case`), ``None``
where the solver applies, else (a substring of) the reason it must refuse with. Which kinds,
ranks and precision modes a solver is offered is read from what it declares (``Solver.kinds``,
``ranks``, ``precisions``); the rest of each row — sizes, cores, precision="auto", whether a host
library is installed, the few accuracy-model refusals — is written here, from each solver's
documented rule, so that the tests check the engine against it rather than against itself.
"""

from __future__ import annotations

import math

import attrs
import torch

from trnplan.core.problem import Problem
from trnplan.kernels import hostlib
from trnplan.planner.dft_gemm import MAX_MATRIX_BYTES
from trnplan.planner.registry import solvers
from trnplan.planner.solver import Solver, is_power_of_two, prime_factors

#: the modes that keep complex64 data and round or split only the GEMM operands (docs/precision.md)
REDUCED = ("bf16", "bf16x3", "bf16x6")


@attrs.frozen
class Case:
    """One problem of the grid: a transform shape, kind, precision and core count."""

    shape: tuple
    kind: str = "c2c"
    precision: str = "fp32"
    cores: int = 1
    batch: int = 3

    @property
    def dtype(self) -> torch.dtype:
        return torch.complex128 if self.precision == "fp64" else torch.complex64

    @property
    def n(self) -> int:
        return self.shape[-1]

    def problem(self) -> Problem:
        return Problem.create(self.shape, self.batch, kind=self.kind, dtype=self.dtype, precision=self.precision,
                              cores=self.cores)

    def __str__(self) -> str:
        extra = f"-cores{self.cores}" if self.cores > 1 else ""
        return f"{self.kind}-{'x'.join(map(str, self.shape))}-{self.precision}{extra}"


#: where the accuracy model, not a solver's rule, refuses a forced solver on the grids of
#: tests/test_solvers.py and tests/test_precision.py: its best variant is predicted over the mode's
#: bar. (solver, n, precision) -> why. fp32 dft-gemm at n=2048 fits the 64 MiB matrix cap exactly
#: but is predicted at 5.1e-7; bf16 Bluestein at 4.7e-3 and more (docs/precision.md, "Not done")
OVER_BOUND = {
    ("dft-gemm", 2048, "fp32"): "predicted 5.1e-7 > 5e-7",
    ("stockham", 16384, "bf16"): "14 radix stages of bf16 rounding",
    ("dft-gemm", 1000, "bf16x6"): "one dense stage of 1000-term bf16x6 products",
    ("dft-gemm", 1024, "bf16x6"): "one dense stage of 1024-term bf16x6 products",
    **{("bluestein", n, "bf16"): "bf16 Bluestein: chirps and two inner transforms" for n in
       (16, 64, 97, 256, 1000, 1024, 4096, 4097, 16384)},
}


def _cap_n(precision: str) -> int:
    """The largest n whose 2n×2n dft-gemm matrix fits MAX_MATRIX_BYTES (fp32 storage: 2048,
    fp64: 1448)."""
    itemsize = 8 if precision == "fp64" else 4
    return math.isqrt(MAX_MATRIX_BYTES // (4 * itemsize))


#: the reason given where the accuracy model refuses (the refusal is an OverBoundError):
#: "<solver>: predicted error 5.1e-07 exceeds the bound 5e-07"
OVER = "predicted error"


#: each solver's own row: (problem) -> None where it applies, else the reason it gives (a substring).
#: Kind, rank, precision mode and precision="auto" are checked first, from the solvers'
#: declarations (below).
ROWS = {
    "native": lambda c: None,
    "dft-gemm": lambda c: "DFT matrix, over the 64 MiB cap" if c.n > _cap_n(c.precision) else None,
    "stockham": lambda c: None if is_power_of_two(c.n) else f"n={c.n} is not a power of two",
    "butterfly": lambda c: None if is_power_of_two(c.n) else f"n={c.n} is not a power of two",
    "four-step": lambda c: None if len(prime_factors(c.n)) >= 2 else f"n={c.n} is not composite (1 or prime)",
    "bluestein": lambda c: None,  # forced, it applies to every n (unforced, only to large prime factors)
    "real": lambda c: None,
    "r2r": lambda c: None,  # its kinds (dct1…dst4) are its own: every other kind is refused by declaration
    "truncated": lambda c: "plans truncated transforms only",  # the grid has no modes= (tests/test_truncated.py)
    "conv": lambda c: "plans convolutions with a filter bank only",  # the grid has no conv= (tests/test_conv_plan.py)
    "nd": lambda c: None,
    "multicore": lambda c: None if c.cores > 1 else "cores=1: nothing to split over",
    "precision": lambda c: None if c.precision == "auto" else "plans precision='auto' only",
}
#: the host-only solvers (declared ``host_only``: the FFT libraries scipy, pyFFTW, mkl_fft): whole-shape
#: CPU leaves of every kind and rank,
#: where installed
HOSTS = {s.name: s for s in solvers() if s.host_only}


def _host_row(lib):
    def row(c):
        if c.precision in REDUCED:
            return f"{lib.title} computes in fp32 or fp64 only"
        return None if hostlib.installed(lib.library) is not None else f"{lib.title} is not installed"
    return row


ROWS.update({name: _host_row(lib) for name, lib in HOSTS.items()})


def _declares_kinds(solver) -> bool:
    """Whether ``solver`` is offered problems by its declared kinds/ranks (the precision solver
    takes any kind and rank: its child is planned by whichever solver fits)."""
    return type(solver).why_not_kind is Solver.why_not_kind


def expected_refusal(solver, case: Case) -> str | None:
    """The applicability table: None where ``solver`` applies to ``case``, else (a substring of)
    the reason it refuses with."""
    if _declares_kinds(solver):
        rank = len(case.shape)
        if case.precision == "auto":
            return "precision='auto' is resolved first, by the precision solver"
        if solver.ranks == "1" and rank != 1:
            return f"{solver.name} plans 1-D transforms; shape {case.shape} has rank {rank}"
        if solver.ranks == "n" and rank < 2:
            return f"{solver.name} plans transforms of rank ≥ 2; shape {case.shape} has rank 1"
        if case.kind not in solver.kinds:
            return f"{solver.name} plans {'/'.join(solver.kinds)} transforms, not {case.kind}"
        if solver.precisions is not None and case.precision not in solver.precisions:
            return solver.precision_refusal.format(name=solver.name, precision=case.precision,
                                                   modes="/".join(solver.precisions))
    reason = ROWS[solver.name](case)
    if reason is None and (solver.name, case.n, case.precision) in OVER_BOUND:
        return OVER
    return reason


def applying(case: Case) -> list[str]:
    """The registered solvers the table says apply to ``case``, in registry order."""
    return [s.name for s in solvers() if expected_refusal(s, case) is None]
