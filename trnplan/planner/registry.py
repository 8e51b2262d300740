"""The solver registry: every solver, in one ordered tuple (FFTW's dft/conf.c).

Order matters only for ties in predicted cost (the earlier solver wins) and for the order in
which explain() lists candidates. To add a solver, write one module with a :class:`Solver`
subclass (see docs/architecture.md) and list an instance here; bump its ``version`` whenever
its decisions or lowering change, so that stored wisdom keyed on :func:`registry_digest` is
invalidated rather than trusted.

A solver outside the package (a user's, or a test's) joins with :func:`register` and leaves
with :func:`unregister`; the registry digest, and so every wisdom fingerprint, changes with it.
"""

from __future__ import annotations

import hashlib

from trnplan.planner.bluestein import Bluestein
from trnplan.planner.butterfly import Butterfly
from trnplan.planner.dft_gemm import DFTGemmSolver
from trnplan.planner.four_step import FourStep
from trnplan.planner.library import HOST_LIBRARIES
from trnplan.planner.multicore import Multicore
from trnplan.planner.native import Native
from trnplan.planner.nd import ND
from trnplan.planner.precision import Precision
from trnplan.planner.real import Real
from trnplan.planner.stockham import Stockham

SOLVERS = (
    Native(),
    *HOST_LIBRARIES,  # scipy.fft, pyFFTW, mkl_fft: host-CPU library leaves, where installed
    DFTGemmSolver(),
    Stockham(),
    Butterfly(),
    FourStep(),
    Bluestein(),
    Real(),
    ND(),
    Multicore(),  # cores > 1 only: the batch split into shards run concurrently
    Precision(),  # precision="auto" only: one child per concrete mode
)

BY_NAME = {s.name: s for s in SOLVERS}


def solvers() -> tuple:
    """The registry as it is now (:data:`SOLVERS` plus whatever :func:`register` added)."""
    return SOLVERS


def register(solver) -> None:
    """Add ``solver`` (a :class:`~trnplan.planner.solver.Solver` instance) to the end of the registry.

    Raises
    ------
    ValueError
        A solver of that name is already registered.
    """
    global SOLVERS
    if not getattr(solver, "name", ""):
        raise ValueError(f"a solver needs a non-empty name; got {solver!r}")
    if solver.name in BY_NAME:
        raise ValueError(f"a solver named {solver.name!r} is already registered; unregister it first")
    SOLVERS = (*SOLVERS, solver)
    BY_NAME[solver.name] = solver


def unregister(name: str) -> None:
    """Remove the solver called ``name`` (KeyError if there is none)."""
    global SOLVERS
    if name not in BY_NAME:
        raise KeyError(f"no solver named {name!r} is registered (registered: {', '.join(BY_NAME)})")
    del BY_NAME[name]
    SOLVERS = tuple(s for s in SOLVERS if s.name != name)


def solver_names() -> tuple[str, ...]:
    return tuple(BY_NAME)


def registry_digest(solvers=None) -> str:
    """Hash of the solver names and versions, in order: part of every wisdom fingerprint."""
    solvers = SOLVERS if solvers is None else solvers
    text = ";".join(f"{s.name}:{s.version}" for s in solvers)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
