"""The solver registry: every solver, in one ordered Registry (FFTW's dft/conf.c).

Order matters only for ties in predicted cost (the earlier solver wins) and for the order in
which explain() lists candidates. To add a solver, write one module with a :class:`Solver`
subclass (see docs/architecture.md) and list an instance here; bump its ``version`` whenever
its decisions or lowering change, so that stored wisdom keyed on :func:`registry_digest` is
invalidated rather than trusted.

A solver outside the package (a user's, or a test's) joins with :func:`register` and leaves
with :func:`unregister`; the registry digest, and so every wisdom fingerprint, changes with it.
:data:`SOLVERS` is a :class:`Registry` object changed in place, so ``trnplan.SOLVERS`` and every
other reference to it stay current.
"""

from __future__ import annotations

import hashlib
import threading

from trnplan.core import state
from trnplan.core.cost import COST_MODEL_VERSION
from trnplan.planner.bluestein import Bluestein
from trnplan.planner.butterfly import Butterfly
from trnplan.planner.conv import Conv
from trnplan.planner.dft_gemm import DFTGemmSolver
from trnplan.planner.four_step import FourStep
from trnplan.planner.library import HOST_LIBRARIES
from trnplan.planner.multicore import Multicore
from trnplan.planner.native import Native
from trnplan.planner.nd import ND
from trnplan.planner.precision import Precision
from trnplan.planner.r2r import R2R
from trnplan.planner.real import Real
from trnplan.planner.stockham import Stockham
from trnplan.planner.truncated import Truncated


class Registry:
    """The ordered solver registry: iterate it for the solvers in order, index it by name.

    One object for the life of the process, changed in place by :meth:`register` and
    :meth:`unregister`, so every reference to it (``trnplan.SOLVERS``, a planner made later)
    sees the solvers as they are now, never a stale copy.
    """

    def __init__(self, solvers):
        self._solvers: tuple = ()
        self._lock = threading.Lock()
        #: bumped by every register/unregister: what was derived from the registry (its digest, a
        #: request named in the plan cache) is re-derived when it changes
        self.generation = 0
        self._derived: tuple = (None, None, None)  # (solvers, cost model version, (names, digest))
        for solver in solvers:
            self.register(solver)

    def __iter__(self):
        return iter(self._solvers)

    def __len__(self) -> int:
        return len(self._solvers)

    def __contains__(self, name) -> bool:
        return any(s.name == name for s in self._solvers)

    def __getitem__(self, name: str):
        """The solver called ``name`` (KeyError naming the registered ones if there is none)."""
        for solver in self._solvers:
            if solver.name == name:
                return solver
        raise KeyError(f"no solver named {name!r} is registered (registered: {', '.join(self.names())})")

    def __repr__(self) -> str:
        return f"Registry({', '.join(self.names())})"

    def get(self, name: str, default=None):
        return next((s for s in self._solvers if s.name == name), default)

    def names(self) -> tuple[str, ...]:
        return self._facts()[0]

    def _facts(self) -> tuple:
        """(names, digest) of the solvers as they are now, derived once per change."""
        solvers, version, facts = self._derived
        if solvers is not self._solvers or version != COST_MODEL_VERSION:
            solvers = self._solvers
            facts = (tuple(s.name for s in solvers), _digest(solvers))
            self._derived = (solvers, COST_MODEL_VERSION, facts)
        return facts

    def snapshot(self) -> tuple:
        """The solvers as they are now, as a tuple (what a :class:`Planner` searches)."""
        return self._solvers

    def register(self, solver) -> None:
        """Add ``solver`` (a :class:`~trnplan.planner.solver.Solver` instance) at the end.

        Raises
        ------
        ValueError
            The solver has no name, or a solver of that name is already registered.
        """
        if not getattr(solver, "name", ""):
            raise ValueError(f"a solver needs a non-empty name; got {solver!r}")
        with self._lock:
            if solver.name in self:
                raise ValueError(f"a solver named {solver.name!r} is already registered; unregister it first")
            self._solvers = (*self._solvers, solver)
            self.generation += 1

    def unregister(self, name: str) -> None:
        """Remove the solver called ``name`` (KeyError if there is none)."""
        with self._lock:
            self[name]  # KeyError naming the registered ones
            self._solvers = tuple(s for s in self._solvers if s.name != name)
            self.generation += 1

    def digest(self) -> str:
        """Hash of the solver names and versions, in order: part of every wisdom fingerprint."""
        return self._facts()[1]


def _digest(solvers) -> str:
    # the cost model's version too: a tree picked under other prices is planned again
    text = ";".join([f"cost-model:{COST_MODEL_VERSION}", *(f"{s.name}:{s.version}" for s in solvers)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: the registry, in order: one line per solver (FFTW's dft/conf.c)
SOLVERS = Registry((
    Native(),
    *HOST_LIBRARIES,  # scipy.fft, pyFFTW, mkl_fft: host-CPU library leaves, where installed
    DFTGemmSolver(),
    Stockham(),
    Butterfly(),
    FourStep(),
    Bluestein(),
    Real(),
    R2R(),  # DCT/DST types I–IV, any rank: pocketfft, one GEMM, or through a child DFT
    Truncated(),  # modes=...: kept-column GEMMs per axis, or the whole transform then cut
    Conv(),  # conv=...: a filter-bank convolution as two child plans, four-step (Monarch) GEMMs, or DFT GEMMs
    ND(),
    Multicore(),  # cores > 1 only: the batch split into shards run concurrently
    Precision(),  # precision="auto" only: one child per concrete mode
))


def solvers() -> tuple:
    """The registry as it is now, as a tuple."""
    return SOLVERS.snapshot()


def register(solver) -> None:
    """Add ``solver`` to the end of the registry (:meth:`Registry.register`)."""
    SOLVERS.register(solver)


def unregister(name: str) -> None:
    """Remove the solver called ``name`` (:meth:`Registry.unregister`)."""
    SOLVERS.unregister(name)


def solver_names() -> tuple[str, ...]:
    return SOLVERS.names()


def registry_digest(solvers=None) -> str:
    """Hash of the solver names and versions, in order: part of every wisdom fingerprint."""
    return SOLVERS.digest() if solvers is None else _digest(solvers)


#: the built-in solvers: a reset drops the ones register() added and puts back the ones unregister() removed
_BUILTIN = SOLVERS.snapshot()


def _reset() -> None:
    with SOLVERS._lock:
        SOLVERS._solvers = _BUILTIN
        SOLVERS._derived = (None, None, None)
        SOLVERS.generation += 1  # a request named under another registry is made again


state.register("planner.solvers", _reset)


__all__ = ["SOLVERS", "Registry", "register", "registry_digest", "solver_names", "solvers", "unregister"]
