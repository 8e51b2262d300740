"""A plan as an autograd node (torch.autograd.Function): backward runs the adjoint plan."""

from __future__ import annotations

import torch


class PlanFunction(torch.autograd.Function):
    """A plan as an autograd node: forward runs the plan, backward runs its adjoint plan.

    The backward itself goes through :meth:`Plan.execute`, so it is differentiable again
    (double backward) and uses the adjoint's cached plan and artifact.
    """

    @staticmethod
    def forward(ctx, plan, x):
        ctx.plan = plan
        return plan.run(x)

    @staticmethod
    def backward(ctx, g):
        return None, ctx.plan.backward(g)


__all__ = ["PlanFunction"]
