"""Why a tolerance cannot be met: the smallest bound a precision reaches, and a precision that would
meet it (the message of the OverBoundError a tol too tight raises)."""

from __future__ import annotations

import math

import attrs

from trnplan.core.spec import Spec
from trnplan.planner.planner import Planner


def unreachable(problem, spec, planner, backend, probe) -> str:
    """Why ``planner.tol`` cannot be met: the smallest bound this precision reaches, and a
    precision that would meet the tol (for the PlanningError a tol too tight raises)."""
    tol = planner.tol(problem)

    def reaches(p, bound):
        return Planner(backend, tol=bound, probe=probe).try_plan(p, spec)

    free = reaches(problem, math.inf)
    if free is None:
        return ""
    # bisect (in log scale) the smallest bound a search still meets: the cheapest tree under an
    # infinite bound is not always the most accurate one
    lo, hi = tol, free.error
    for _ in range(6):  # to within a factor (hi/lo)^(1/64): enough to name the reachable bound
        mid = math.sqrt(lo * hi)
        if reaches(problem, mid) is not None:
            hi = mid
        else:
            lo = mid
    msg = (f"tol={tol:.1e} is out of reach for precision={problem.precision!r} at n={problem.n}: the most "
           f"accurate plan its solvers find is predicted at {hi:.1e}")
    if problem.precision != "auto":
        auto = attrs.evolve(problem, precision="auto")
        pick = reaches(auto, tol) if spec is None else None
        if spec is not None:  # the same forced strategy, its mode chosen
            pick = Planner(backend, tol=tol, probe=probe).try_plan(auto, Spec(name="precision", children=(spec,)))
        if pick is not None:
            return msg + (f"; precision={pick.param('mode')!r} meets it (predicted {pick.error:.1e}), or let "
                          f"precision='auto' choose")
    if problem.dtype == "complex64":
        wide = attrs.evolve(problem, precision="fp64", dtype="complex128")
        pick = reaches(wide, tol)
        if pick is not None:
            return msg + f"; precision='fp64' with dtype=torch.complex128 meets it (predicted {pick.error:.1e})"
    return msg + "; no precision mode reaches it"


__all__ = ["unreachable"]
