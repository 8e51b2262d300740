"""PlanNode: the planner's decision as a frozen tree of pure data.

A node names its solver, the sub-problem it solves (length, batch, direction), the solver's
parameters, its children, and the cost model's predictions for the whole subtree. It holds no
tensors and no modules: lowering turns it into a torch module, and the wisdom store keeps it as
JSON. ``str(node)`` is a one-line s-expression in the FFTW tradition, e.g.
``(four-step 4096=64x64 (dft-gemm 64) (dft-gemm 64))``, which :mod:`trnplan.core.spec` parses
back, so a printed plan can be handed to ``strategy=`` to force exactly that tree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import attrs


def _freeze(value):
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _params(value) -> tuple:
    if value == () or value == {}:  # a leaf's params, a stand-in's terms: nothing to sort
        return ()
    items = value.items() if isinstance(value, dict) else value
    out = [(str(k), _freeze(v) if isinstance(v, list) else v) for k, v in items]
    out.sort()
    return tuple(out)


@attrs.frozen
class PlanNode:
    """One node of a plan tree.

    Attributes
    ----------
    solver : str
        Registered solver name (``"stockham"``, ``"four-step"`` …).
    n, batch : int
        The 1-D sub-problem this node computes: ``batch`` transforms of length ``n``.
    inverse : bool
        Direction of this sub-problem (Bluestein's inner inverse transform is ``True``).
    params : tuple of (str, value)
        Solver parameters (radices, split factors, padded length …), sorted, hashable.
    children : tuple of PlanNode
        Sub-plans, in the order the solver applies them.
    flops, bytes, launches, time_us : float
        Cost-model predictions for the whole subtree: arithmetic, memory traffic, dispatched
        ops, and time in microseconds on the planning backend's profile.
    error : float
        Accuracy-model prediction of the relative L2 error of the subtree on random input.
    measured_us, measured_error : float or None
        Filled in when a plan is timed (effort "measure"/"patient") or verified; ``None`` otherwise.
    terms : tuple of (str, float)
        The subtree's work by cost-model term (``launches``, ``fft_calls``, ``gemm:float32``,
        ``fft:float32``, ``bytes`` …): what :func:`trnplan.planner.learn.fit` regresses measured
        times on to recalibrate the profile. Not part of the decision (:meth:`digest`).
    """

    solver: str
    n: int
    batch: int
    inverse: bool = False
    params: tuple = attrs.field(default=(), converter=_params)
    children: tuple = attrs.field(default=(), converter=tuple)
    flops: float = 0.0
    bytes: float = 0.0
    launches: float = 0.0
    time_us: float = 0.0
    error: float = 0.0
    measured_us: float | None = None
    measured_error: float | None = None
    terms: tuple = attrs.field(default=(), converter=_params)

    def param(self, name: str, default: Any = None) -> Any:
        for key, value in self.params:
            if key == name:
                return value
        return default

    def walk(self) -> Iterator[tuple[int, PlanNode]]:
        """Depth-first (depth, node) pairs, root first."""
        stack = [(0, self)]
        while stack:
            depth, node = stack.pop()
            yield depth, node
            stack.extend((depth + 1, c) for c in reversed(node.children))

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "solver": self.solver,
            "n": self.n,
            "batch": self.batch,
            "inverse": self.inverse,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in self.params},
            "children": [c.to_dict() for c in self.children],
            "flops": self.flops,
            "bytes": self.bytes,
            "launches": self.launches,
            "time_us": self.time_us,
            "error": self.error,
            "measured_us": self.measured_us,
            "measured_error": self.measured_error,
            "terms": dict(self.terms),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanNode:
        fields = {a.name for a in attrs.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"unknown PlanNode field(s) {sorted(unknown)} in plan JSON")
        data = dict(data)
        data["children"] = tuple(cls.from_dict(c) for c in data.get("children", ()))
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PlanNode:
        return cls.from_dict(json.loads(text))

    def digest(self) -> str:
        """Hash of the *decision* (solver, sizes, params, children), not of the predictions."""
        blob = json.dumps(_decision(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ printing
    def atoms(self) -> list[str]:
        """The parameter atoms of the s-expression (see :func:`format_atoms`)."""
        return format_atoms(self)

    def __str__(self) -> str:
        parts = [self.solver, *self.atoms(), *(str(c) for c in self.children)]
        return "(" + " ".join(parts) + ")"


def _decision(node: PlanNode) -> dict[str, Any]:
    return {
        "solver": node.solver,
        "n": node.n,
        "batch": node.batch,
        "inverse": node.inverse,
        "params": [[k, list(v) if isinstance(v, tuple) else v] for k, v in node.params],
        "children": [_decision(c) for c in node.children],
    }


def format_atoms(node: PlanNode) -> list[str]:
    """``n`` or ``n=f1xf2x…`` (when the node has ``factors``), then ``key=value`` options, then ``inv``."""
    factors = node.param("factors")
    atoms = [f"{node.n}=" + "x".join(map(str, factors)) if factors else str(node.n)]
    atoms += [f"{k}={v}" for k, v in node.params if k != "factors"]
    if node.inverse:
        atoms.append("inv")
    return atoms
