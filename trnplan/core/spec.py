"""Strategy specs: force a solver, or a whole tree, from a string.

``strategy="stockham"`` forces the root solver and lets the planner choose everything below.
``strategy="(four-step 4096=64x64 (dft-gemm) (stockham))"`` forces a tree; it is the same
s-expression that ``str(plan.tree)`` prints, so any printed plan can be replayed exactly.

Grammar (atoms are separated by white space)::

    spec   := NAME | "(" NAME atom* ")"
    atom   := spec | "_"           child spec, "_" lets the planner choose that child
            | INT                  the node's length (must match the sub-problem)
            | INT "=" INT("x"INT)*  length and factors (radices, or n1 x n2 for four-step)
            | KEY "=" INT          a solver option, e.g. m=256 for Bluestein's padded length
            | KEY "=" WORD         a named choice, e.g. method=half for the real solver
            | "inv" | "fwd"        direction, decided by the parent; accepted and ignored
"""

from __future__ import annotations

import re

import attrs

from trnplan.core.errors import PlanningError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
#: a word option's value: a name (method=half), or a shape-like list of ints (modes=16x8, the truncated solver's)
_WORD = re.compile(r"[a-z][a-z0-9-]*|\d+(?:x\d+)+")


@attrs.frozen
class Spec:
    """Constraints on one node of a plan: solver name, length, factors, options, child specs.

    ``name`` is ``None`` for a free choice (``_``). ``children`` may be shorter than the
    solver's child count: missing entries are free.
    """

    name: str | None
    size: int | None = None
    factors: tuple | None = None
    options: tuple = ()
    children: tuple = ()

    def option(self, key: str):
        return dict(self.options).get(key)

    def child(self, i: int) -> Spec | None:
        if i < len(self.children):
            return self.children[i]
        return None

    def __str__(self) -> str:
        if self.name is None:
            return "_"
        atoms = [self.name]
        if self.size is not None:
            atoms.append(f"{self.size}=" + "x".join(map(str, self.factors)) if self.factors else str(self.size))
        atoms += [f"{k}={v}" for k, v in self.options]
        atoms += [str(c) if c is not None else "_" for c in self.children]
        return "(" + " ".join(atoms) + ")" if len(atoms) > 1 else atoms[0]


def parse_strategy(text: str, known_solvers) -> Spec:
    """Parse a strategy string into a :class:`Spec`; raise :class:`PlanningError` on bad syntax."""
    if not isinstance(text, str) or not text.strip():
        raise PlanningError(f"strategy must be a solver name or a plan s-expression, got {text!r}")
    tokens = _TOKEN.findall(text)
    pos, spec = _parse(tokens, 0, text, tuple(known_solvers))
    if pos != len(tokens):
        raise PlanningError(f"strategy {text!r}: unexpected {' '.join(tokens[pos:])!r} after the plan")
    if spec is None:
        raise PlanningError(f"strategy {text!r} names no solver; use one of {', '.join(known_solvers)}")
    return spec


def _parse(tokens, pos, text, known):
    """(position after, Spec or None for ``_``) of the plan that starts at ``tokens[pos]``."""
    if pos >= len(tokens):
        raise PlanningError(f"strategy {text!r}: unbalanced parentheses")
    tok = tokens[pos]
    if tok == ")":
        raise PlanningError(f"strategy {text!r}: unexpected ')'")
    if tok != "(":
        return pos + 1, _name_only(tok, text, known)
    pos += 1
    if pos >= len(tokens) or tokens[pos] in "()":
        raise PlanningError(f"strategy {text!r}: '(' must be followed by a solver name")
    name = _solver_name(tokens[pos], text, known)
    pos += 1
    atoms: dict = {"size": None, "factors": None, "options": []}
    children = []
    while True:
        if pos >= len(tokens):
            raise PlanningError(f"strategy {text!r}: unbalanced parentheses")
        tok = tokens[pos]
        if tok == ")":
            break
        if tok == "(" or tok == "_" or tok in known:
            pos, child = _parse(tokens, pos, text, known)
            children.append(child)
        else:
            _read_atom(tok, text, known, atoms)
            pos += 1
    return pos + 1, Spec(name=name, size=atoms["size"], factors=atoms["factors"], options=tuple(atoms["options"]),
                         children=tuple(children))


def _read_atom(tok: str, text: str, known, atoms: dict) -> None:
    """One atom of a node: a direction word (ignored), ``n`` or ``n=f1xf2...``, or ``key=value``."""
    if tok in ("inv", "fwd"):
        return
    key, eq, value = tok.partition("=")
    if key.isdigit():
        atoms["size"] = int(key)
        if eq:
            try:
                atoms["factors"] = tuple(int(f) for f in value.split("x"))
            except ValueError:
                raise PlanningError(f"strategy {text!r}: bad factor list {tok!r} (write e.g. 4096=64x64)") from None
    elif eq and key and value.isdigit():
        atoms["options"].append((key, int(value)))
    elif eq and key and _WORD.fullmatch(value):
        atoms["options"].append((key, value))
    else:
        raise PlanningError(
            f"strategy {text!r}: cannot read {tok!r}; expected a solver name "
            f"({', '.join(known)}), a length like 4096 or 4096=64x64, or an option like m=256"
        )


def _name_only(tok, text, known):
    if tok == "_":
        return None
    return Spec(name=_solver_name(tok, text, known))


def _solver_name(tok, text, known):
    if tok not in known:
        raise PlanningError(f"strategy {text!r}: unknown solver {tok!r}; known solvers: {', '.join(known)}")
    return tok
