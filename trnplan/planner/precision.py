"""precision: plan ``precision="auto"`` by choosing the arithmetic mode and the strategy together.

A composite pseudo-solver with one child: the same problem planned in one concrete mode
(``(precision 1024 mode=bf16x3 (stockham 1024=8x8x4x4))``). It applies only to
``precision="auto"`` (every other solver declines "auto"), plans one child per candidate mode
through the planner — so each mode's cheapest tree within the bound is found by the ordinary
search, memo and accuracy model — and keeps the cheapest child whose predicted error meets the
bound. The printed tree names the mode, so wisdom replays exactly (``strategy=str(tree)``).

Candidate modes: for complex64 data the float32-storage modes the backend runs (bf16, bf16x3,
bf16x6, fp32, and tf32 on CUDA); for complex128 data only fp64 (the reduced modes would round
the complex128 data to float32).

This is the accuracy-targeted planning no FFT library offered the seed project's users: the
cheapest plan that the model (calibrated in bench/accuracy.py, read through the device's
precision probe) predicts to meet ``tol``.
"""

from __future__ import annotations

import attrs

from trnplan.core.errors import OverBoundError, PlanningError
from trnplan.core.node import PlanNode
from trnplan.planner.solver import Solver, note_variant

#: the modes auto tries, cheapest arithmetic first (registry order breaks cost ties the same way)
FLOAT32_MODES = ("bf16", "bf16x3", "bf16x6", "tf32", "fp32")


def candidate_modes(problem, backend) -> tuple[str, ...]:
    """The concrete modes ``precision="auto"`` chooses among for ``problem`` on ``backend``."""
    if problem.dtype == "complex128":
        return ("fp64",)
    return tuple(m for m in FLOAT32_MODES if backend.precision_unsupported_reason(m) is None)


class Precision(Solver):
    name = "precision"
    #: 2: the reduced modes' GEMMs scale each row by a power of two before splitting (kernels.gemm
    #: power_of_two_scale): artifacts compiled before it lose bf16x3/bf16x6 accuracy on tiny inputs
    version = 2
    composite = True
    options = ("mode",)
    word_options = ("mode",)
    kinds = ("c2c", "r2c", "c2r")

    def why_not_kind(self, problem):
        return None  # any kind and rank: the child is planned by whichever solver fits it

    def why_not(self, problem, planner, forced):
        if problem.precision != "auto":
            return f"the precision solver plans precision='auto' only (this problem is {problem.precision!r})"
        return None

    def why_not_spec(self, problem, spec):
        mode = spec.option("mode")
        if mode is not None and mode not in candidate_modes(problem, _Backendless()):
            return f"mode={mode!r} is not a precision mode for {problem.dtype} data (one of " \
                   f"{', '.join(candidate_modes(problem, _Backendless()))})"
        if spec.size is not None and spec.size != problem.n:
            return f"strategy node {spec} has length {spec.size} but the sub-problem has n={problem.n}"
        unknown = [k for k, _ in spec.options if k not in self.options]
        if unknown:
            return f"precision has no option {', '.join(map(repr, unknown))} (options it takes: mode)"
        return None

    def plan(self, problem, planner, spec):
        forced = spec.option("mode") if spec is not None else None
        if forced is not None:
            reason = planner.backend.precision_unsupported_reason(forced)
            if reason is not None:
                raise PlanningError(reason)
            modes = (forced,)
        else:
            modes = candidate_modes(problem, planner.backend)
        tol = planner.tol(problem)
        best, misses = None, []
        for mode in modes:
            try:
                # planned to auto's bound, not the mode's own (looser) bar
                child = planner.plan(attrs.evolve(problem, precision=mode), spec.child(0) if spec else None, tol=tol)
            except PlanningError as exc:
                misses.append(f"{mode}: {exc}")
                continue
            if child.error > tol:
                misses.append(f"{mode}: its cheapest plan {child} is predicted at {child.error:.1e}")
                continue
            node = PlanNode(solver=self.name, n=child.n, batch=child.batch, inverse=child.inverse,
                            params={"mode": mode}, children=(child,), flops=child.flops, bytes=child.bytes,
                            launches=child.launches, time_us=child.time_us, error=child.error, terms=child.terms)
            note_variant(node)
            if best is None or node.time_us < best.time_us:
                best = node
        if best is None:
            raise OverBoundError(f"no precision mode meets tol={tol:.1e}: " + "; ".join(misses), tol=tol)
        return best

    def build(self, node, ctx):
        # the child is lowered in its own mode: a new context whose builder carries that mode down
        sub = ctx.build.context(ctx.dtype, ctx.device, node.param("mode"))
        return sub.build(node.children[0])

    def build_scaled(self, node, ctx, scale):
        """The child's, in its own mode: the child was planned (and priced, its scale's pass
        included where it cannot fold it) at the root."""
        sub = ctx.build.context(ctx.dtype, ctx.device, node.param("mode"))
        return sub.build.build_scaled(node.children[0], scale)


class _Backendless:
    """Every mode is a candidate when only the spelling of a strategy is checked."""

    @staticmethod
    def precision_unsupported_reason(mode):
        return None
