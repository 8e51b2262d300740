"""Planner, the solver registry, the solvers, measured planning and calibration."""

from trnplan.planner.planner import Candidate, Planner
from trnplan.planner.registry import SOLVERS, registry_digest, solver_names

__all__ = ["SOLVERS", "Candidate", "Planner", "registry_digest", "solver_names"]
