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


class SplitFunction(torch.autograd.Function):
    """A plan's split interface (:meth:`Plan.execute_split`) as an autograd node: forward runs the
    plan on ``(re, im)`` (or one real tensor), backward the adjoint plan's split interface, so no
    complex tensor is made in either pass (what a NeuronCore needs) and double backward works."""

    @staticmethod
    def forward(ctx, plan, *inputs):
        ctx.plan = plan
        return plan._run_split(*inputs)

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.plan._backward_split(grads))


__all__ = ["PlanFunction", "SplitFunction"]
