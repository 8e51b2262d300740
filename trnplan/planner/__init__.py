"""Planner, PlanNode, the solver registry, and the cost and accuracy models."""

from trnplan.planner.node import PlanNode
from trnplan.planner.planner import Candidate, Planner
from trnplan.planner.registry import SOLVERS, registry_digest, solver_names
from trnplan.planner.spec import Spec, parse_strategy

__all__ = ["Candidate", "PlanNode", "Planner", "SOLVERS", "Spec", "parse_strategy", "registry_digest", "solver_names"]
