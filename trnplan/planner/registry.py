"""The solver registry: every solver, in one ordered tuple (FFTW's dft/conf.c).

Order matters only for ties in predicted cost (the earlier solver wins) and for the order in
which explain() lists candidates. To add a solver, write one module with a :class:`Solver`
subclass (see docs/architecture.md) and list an instance here; bump its ``version`` whenever
its decisions or lowering change, so that stored wisdom keyed on :func:`registry_digest` is
invalidated rather than trusted.
"""

from __future__ import annotations

import hashlib

from trnplan.planner.bluestein import Bluestein
from trnplan.planner.butterfly import Butterfly
from trnplan.planner.dft_gemm import DFTGemmSolver
from trnplan.planner.four_step import FourStep
from trnplan.planner.native import Native
from trnplan.planner.nd import ND
from trnplan.planner.precision import Precision
from trnplan.planner.real import Real
from trnplan.planner.stockham import Stockham

SOLVERS = (
    Native(),
    DFTGemmSolver(),
    Stockham(),
    Butterfly(),
    FourStep(),
    Bluestein(),
    Real(),
    ND(),
    Precision(),  # precision="auto" only: one child per concrete mode
)

BY_NAME = {s.name: s for s in SOLVERS}


def solver_names() -> tuple[str, ...]:
    return tuple(BY_NAME)


def registry_digest(solvers=SOLVERS) -> str:
    """Hash of the solver names and versions, in order: part of every wisdom fingerprint."""
    text = ";".join(f"{s.name}:{s.version}" for s in solvers)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
