"""The planner: FFTW's search over an ordered solver registry, with memoisation.

``Planner.search(problem)`` asks every registered solver for its best node, drops those that
do not apply or whose predicted error exceeds the accuracy bound, and keeps the cheapest by the
cost model. Composite solvers obtain their children *only* through ``Planner.plan``, so the
memo, the accuracy bound and the cost accounting apply at every level of the tree.

A strategy spec (:mod:`trnplan.planner.spec`) restricts the search: its root names the solver,
its children constrain the children; anything left free is searched as usual.
"""

from __future__ import annotations

import attrs
import torch

from trnplan.errors import PlanningError
from trnplan.planner.accuracy import DEFAULT_TOL
from trnplan.planner.node import PlanNode
from trnplan.planner.registry import SOLVERS
from trnplan.planner.solver import BuildContext
from trnplan.planner.spec import Spec

CHOSEN = "chosen"
MORE_EXPENSIVE = "more expensive"
NOT_APPLICABLE = "not applicable"
OVER_BOUND = "over the accuracy bound"


@attrs.frozen
class Candidate:
    """One solver's answer at one node of the search, kept for explain()."""

    solver: str
    verdict: str
    reason: str = ""
    node: PlanNode | None = None


class Planner:
    """Plans 1-D sub-problems on one backend.

    Parameters
    ----------
    backend : Backend
        Supplies the cost profile and whether a native FFT exists.
    solvers : tuple of Solver, optional
        The registry to search (default: :data:`trnplan.planner.registry.SOLVERS`).
    tol : float, optional
        Relative L2 error bound every plan must be predicted to meet; default per precision
        from :data:`trnplan.planner.accuracy.DEFAULT_TOL`.
    """

    def __init__(self, backend, *, solvers=SOLVERS, tol: float | None = None):
        self.backend = backend
        self.profile = backend.profile
        self.solvers = tuple(solvers)
        self.tol_override = tol
        self._memo: dict = {}
        self._listing = False  # set while applicable() runs, so failures do not recurse into it
        self.searches = 0

    def tol(self, problem) -> float:
        return self.tol_override if self.tol_override is not None else DEFAULT_TOL[problem.precision]

    def plan(self, problem, spec: Spec | None = None) -> PlanNode:
        """The cheapest node for ``problem`` that meets ``spec`` and the accuracy bound."""
        return self.search(problem, spec)[0]

    def search(self, problem, spec: Spec | None = None) -> tuple[PlanNode, tuple[Candidate, ...]]:
        """(best node, every solver's candidate with its verdict) for ``problem``."""
        key = (problem, spec)  # both frozen and hashable: cheaper than a digest per search
        if key in self._memo:
            return self._memo[key]
        self.searches += 1
        forced = spec.name if spec is not None else None
        tol = self.tol(problem)
        candidates = []
        for solver in self.solvers:
            if forced is not None and solver.name != forced:
                continue
            reason = solver.why_not(problem, self, forced is not None)
            if reason is not None:
                candidates.append(Candidate(solver.name, NOT_APPLICABLE, reason))
                continue
            why_spec = solver.why_not_spec(problem, spec) if spec is not None else None
            if why_spec is not None:
                candidates.append(Candidate(solver.name, NOT_APPLICABLE, why_spec))
                continue
            try:
                node = solver.plan(problem, self, spec)
            except PlanningError as exc:  # a sub-plan could not be made: this candidate fails, not the search
                candidates.append(Candidate(solver.name, NOT_APPLICABLE, f"its sub-plan failed ({exc})"))
                continue
            if node is None:
                candidates.append(Candidate(solver.name, NOT_APPLICABLE, f"no variant fits the strategy {spec}"))
            elif spec is not None and len(spec.children) > len(node.children):
                candidates.append(Candidate(
                    solver.name, NOT_APPLICABLE,
                    f"the strategy gives {len(spec.children)} child spec(s) but {solver.name} has "
                    f"{len(node.children)} child plan(s)"))
            elif node.error > tol:
                candidates.append(Candidate(
                    solver.name, OVER_BOUND,
                    f"predicted error {node.error:.1e} exceeds the bound {tol:.0e}", node))
            else:
                candidates.append(Candidate(solver.name, CHOSEN, "", node))
        viable = [c for c in candidates if c.verdict == CHOSEN]
        if not viable:
            raise PlanningError(self._failure(problem, spec, candidates))
        best = min(viable, key=lambda c: c.node.time_us)  # min() is stable: registry order breaks ties
        ranked = tuple(
            c if c is best or c.verdict != CHOSEN else attrs.evolve(
                c, verdict=MORE_EXPENSIVE,
                reason=f"{c.node.time_us / max(best.node.time_us, 1e-9):.2f}× the chosen plan's predicted time")
            for c in candidates
        )
        self._memo[key] = (best.node, ranked)
        return best.node, ranked

    def applicable(self, problem) -> list[str]:
        """Names of the solvers that can plan ``problem`` unforced within the bound."""
        out, self._listing = [], True
        try:
            for solver in self.solvers:
                try:
                    self.search(problem, Spec(name=solver.name))
                except PlanningError:
                    continue
                out.append(solver.name)
        finally:
            self._listing = False
        return out

    def _failure(self, problem, spec, candidates) -> str:
        detail = "; ".join(f"{c.solver}: {c.reason}" for c in candidates)
        if spec is not None and spec.name is not None:
            others = [] if self._listing else self.applicable(problem)
            return (
                f"strategy {str(spec)!r} does not apply to the sub-problem n={problem.n} "
                f"({'inverse' if problem.inverse else 'forward'}, batch {problem.batch}, {problem.precision}): "
                f"{detail}. Solvers that apply here: {', '.join(others) or 'none'}"
            )
        return f"no solver can plan n={problem.n} ({problem.precision}, {problem.device}): {detail}"

    # ------------------------------------------------------------------ lowering
    def lower(self, node: PlanNode, problem, device):
        """Build the torch module of a node tree (unscaled) for ``problem``'s dtype on ``device``."""
        by_name = {s.name: s for s in self.solvers}

        def build(n: PlanNode):
            return by_name[n.solver].build(n, ctx)

        ctx = BuildContext(dtype=problem.real_dtype, device=device, precision=problem.precision, build=build)
        return build(node)

    def lower_plan(self, node: PlanNode, problem, device) -> "PlanModule":
        """The whole transform as one module: the lowered tree, then ``problem``'s norm scale."""
        return PlanModule(self.lower(node, problem, device), problem.scale)


class PlanModule(torch.nn.Module):
    """The whole transform as one module on split tensors: the tree's root, then ``norm``'s scale."""

    def __init__(self, root: torch.nn.Module, scale: float):
        super().__init__()
        self.root, self.scale = root, scale

    def forward(self, re: torch.Tensor, im: torch.Tensor):
        yr, yi = self.root(re, im)
        if self.scale != 1.0:
            yr, yi = yr * self.scale, yi * self.scale
        return yr, yi
