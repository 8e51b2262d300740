"""Verification: run a plan once on seeded random input against a float64 numpy reference.

``plan_many(..., verify=True)`` (and, later, efforts "measure" and "patient") call
:func:`verify_plan`: the measured relative L2 error is kept on the plan's tree
(``plan.tree.measured_error``), stored in its wisdom entry, shown by ``explain()`` as
"measured 1.3e-7 vs fp64 (seeded random input)", and a plan whose measured error exceeds its
bound raises instead of being returned. This is the certificate the accuracy model's prediction
is checked against on the device that runs the plan, where the model's constants (fitted on
one CPU) or the precision probe might be wrong.
"""

from __future__ import annotations

import math
import warnings

import attrs
import numpy as np
import torch

from trnplan.errors import PlanningError

#: the seed of the verification input: the same input on every run, so stored errors compare
SEED = 20240605


def _reference(problem, x: np.ndarray) -> np.ndarray:
    """numpy.fft in float64/complex128 over the problem's last ``rank`` axes, with its norm."""
    axes = tuple(range(-problem.rank, 0))
    if problem.kind == "r2c":
        return np.fft.rfftn(x, axes=axes, norm=problem.norm)
    if problem.kind == "c2r":
        return np.fft.irfftn(x, s=problem.shape, axes=axes, norm=problem.norm)
    fn = np.fft.ifftn if problem.inverse else np.fft.fftn
    return fn(x, axes=axes, norm=problem.norm)


def seeded_input(problem, seed: int = SEED) -> np.ndarray:
    """The verification input, float64/complex128: complex normal (c2c, c2r) or real normal (r2c).

    For c2r the input is the half spectrum of a real signal (numpy.fft.rfftn of real normal
    data), so that it is Hermitian-consistent and the transform is exactly invertible.
    """
    rng = np.random.default_rng(seed)
    shape = (problem.batch, *problem.shape)
    if problem.kind == "r2c":
        return rng.standard_normal(shape)
    if problem.kind == "c2r":
        return np.fft.rfftn(rng.standard_normal(shape), axes=tuple(range(-problem.rank, 0)))
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def measure_error(plan, seed: int = SEED) -> float:
    """Relative L2 error ‖y − ref‖/‖ref‖ of ``plan`` on seeded random input vs float64 numpy.fft.

    Parameters
    ----------
    plan : Plan
        Any plan (c2c, r2c, c2r, any rank); run once through :meth:`Plan.execute`.
    seed : int, optional
        Seed of the input (default :data:`SEED`).

    Returns
    -------
    float
        The measured relative L2 error.
    """
    p = plan.problem
    x = seeded_input(p, seed)
    dtype = p.real_dtype if p.real_input else p.torch_dtype
    with torch.no_grad():
        y = plan.execute(torch.from_numpy(x).to(dtype=dtype, device=plan.device))
    y = y.detach().cpu().numpy().astype(np.complex128 if y.is_complex() else np.float64)
    ref = _reference(p, x)
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(y - ref) / (denom if denom > 0 else 1.0))


def verify_plan(plan, cache=None) -> float:
    """Measure ``plan``'s error, keep it on ``plan.tree`` and in its wisdom entry, check the bound.

    Raises
    ------
    PlanningError
        The measured error is over the plan's bound (``plan.tol``); the wisdom entry is removed,
        so the plan is not replayed from the cache either.
    """
    err = measure_error(plan)
    key = plan.provenance.wisdom_key
    if not err <= plan.tol:  # also catches NaN
        if cache is not None and key:
            cache._delete(key)
        raise PlanningError(
            f"verification failed: {plan.tree} measured {err:.2e} vs fp64 (seeded random input), over the bound "
            f"{plan.tol:.1e} (predicted {plan.tree.error:.1e}) for {plan.problem.describe()}. The accuracy model "
            f"or the device's precision probe is wrong here: plan a more accurate precision (or 'auto' with a "
            f"smaller tol), and report it")
    if err > plan.tree.error:
        warnings.warn(f"{plan.tree}: measured {err:.2e} is above its predicted bound {plan.tree.error:.2e} "
                      f"(but within tol {plan.tol:.1e})", RuntimeWarning, stacklevel=4)
    plan.tree = attrs.evolve(plan.tree, measured_error=err)
    if cache is not None and key:
        record = cache.get_wisdom(key)
        if record is not None:
            record = {**record, "tree": {**record["tree"], "measured_error": err}}
            cache.update_wisdom(key, record)
    return err


def describe_measured(error: float | None) -> str | None:
    """The explain() line's text for a measured error, or None if none was measured."""
    if error is None or not math.isfinite(error):
        return None
    return f"measured {error:.1e} vs fp64 (seeded random input)"


__all__ = ["SEED", "describe_measured", "measure_error", "seeded_input", "verify_plan"]
