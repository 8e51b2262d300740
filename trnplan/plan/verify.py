"""Verification: run a plan once on seeded random input against a float64 numpy reference.

``plan_many(..., verify=True)`` (and, later, efforts "measure" and "patient") call
:func:`verified_tree`, before the plan is stored: the measured relative L2 error is kept on the
plan's tree (``plan.tree.measured_error``), stored in its wisdom entry, shown by ``explain()`` as
"measured 1.3e-7 vs fp64 (seeded random input)", and a plan whose measured error exceeds its
bound raises instead of being returned. This is the certificate the accuracy model's prediction
is checked against on the device that runs the plan, where the model's constants (fitted on
one CPU) or the precision probe might be wrong.
"""

from __future__ import annotations

import math
import warnings

import attrs

from trnplan.core.accuracy import measure_error
from trnplan.core.errors import PlanningError
from trnplan.core.node import PlanNode


def verified_tree(plan) -> PlanNode:
    """``plan.tree`` with the error measured on ``plan`` (``measured_error``), if within its bound.

    The build pipeline calls this before the plan is stored or returned (verify before store): the
    Plan it returns, and the wisdom record it stores, carry the verified tree; nothing is rewritten.

    Raises
    ------
    PlanningError
        The measured error is over the plan's bound (``plan.tol``); the caller stores nothing and
        forgets the stored wisdom that made it, so the plan is not replayed from the cache either.
    """
    err = measure_error(plan)
    if not err <= plan.tol:  # also catches NaN
        raise PlanningError(
            f"verification failed: {plan.tree} measured {err:.2e} vs fp64 (seeded random input), over the bound "
            f"{plan.tol:.1e} (predicted {plan.tree.error:.1e}) for {plan.problem.describe()}. The accuracy model "
            f"or the device's precision probe is wrong here: plan a more accurate precision (or 'auto' with a "
            f"smaller tol), and report it")
    if err > plan.tree.error:
        warnings.warn(f"{plan.tree}: measured {err:.2e} is above its predicted bound {plan.tree.error:.2e} "
                      f"(but within tol {plan.tol:.1e})", RuntimeWarning, stacklevel=6)
    return attrs.evolve(plan.tree, measured_error=err)


def describe_measured(error: float | None) -> str | None:
    """The explain() line's text for a measured error, or None if none was measured."""
    if error is None or not math.isfinite(error):
        return None
    return f"measured {error:.1e} vs fp64 (seeded random input)"


__all__ = ["describe_measured", "verified_tree"]
