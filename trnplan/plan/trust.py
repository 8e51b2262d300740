"""Whether stored wisdom is trusted: its tree replayed through its solvers for this problem (FFTW's
"bogus wisdom is forgotten and re-planned, never trusted"), the records this process already
trusted, and the stored candidates (explain()'s list) as the planner's values."""

from __future__ import annotations

from trnplan.core import state
from trnplan.core.node import PlanNode
from trnplan.core.spec import parse_strategy
from trnplan.planner.planner import Candidate
from trnplan.planner.registry import solver_names


def candidates_to_json(candidates) -> list:
    return [{"solver": c.solver, "verdict": c.verdict, "reason": c.reason,
             "time_us": c.node.time_us if c.node else None, "error": c.node.error if c.node else None}
            for c in candidates]


def candidates_from_json(items) -> tuple:
    out = []
    for item in items or ():
        node = None
        if item.get("time_us") is not None:  # a stand-in node carrying the predicted numbers
            node = PlanNode(item["solver"], 0, 0, time_us=item["time_us"], error=item["error"])
        out.append(Candidate(item["solver"], item["verdict"], item.get("reason", ""), node))
    return tuple(out)


#: the wisdom this process stored or replayed, by (cache directory, wisdom key, the planner's probe
#: and calibration): (the record's problem and tree as stored, the tree). A record read back
#: unchanged is what this process made or already checked, so it is not replayed again (a wisdom
#: hit after the in-process LRU dropped its plan: 70 of its ~290 calls); a record changed on disk
#: since compares unequal and is replayed. At most TRUSTED_MAX entries, the oldest dropped first.
_TRUSTED: dict = {}
TRUSTED_MAX = 1024
state.register("plan.trusted", _TRUSTED.clear)


def _trust_key(req) -> tuple:
    return str(req.cache.path), req.probe, req.calibration


def remember_trusted(req, key: str, record: dict, tree: PlanNode) -> None:
    """``record`` (stored under ``key``) holds ``tree``, trusted for ``req``'s planner."""
    if req.cache is None:
        return
    if len(_TRUSTED) >= TRUSTED_MAX:
        del _TRUSTED[next(iter(_TRUSTED))]
    _TRUSTED[(*_trust_key(req), key)] = (record["problem"], record["tree"], tree)


def trusted_tree(record: dict, req, key: str) -> tuple[PlanNode, bool]:
    """(the record's tree, whether it was replayed now), if it is exactly what its solvers make of
    *this* problem.

    The tree is replayed through the planner as a forced strategy (its own s-expression), which
    re-applies every solver's applicability and parameter checks, then compared decision for
    decision (solvers, sizes, batches, directions, parameters). A record for another problem, a
    flipped direction or impossible factors is refused rather than run. A record this process
    stored or replayed before, unchanged, gives the tree it had then (``_TRUSTED``; not replayed).
    """
    known = _TRUSTED.get((*_trust_key(req), key)) if req.cache is not None else None
    if known is not None and known[0] == record["problem"] and known[1] == record["tree"]:
        return known[2], False
    problem = req.problem
    if record["problem"] != problem.to_dict():
        raise ValueError(f"it was stored for another problem ({record['problem']})")
    tree = PlanNode.from_dict(record["tree"])
    replayed = req.planner.plan(problem, parse_strategy(str(tree), solver_names()))
    if replayed.digest() != tree.digest():
        raise ValueError(f"its tree {tree} is not what its solvers make of this problem ({replayed})")
    return tree, True


def forget(req, key: str) -> None:
    """Forget the wisdom under ``key``: on disk, and as trusted in this process."""
    req.cache.forget(key)
    _TRUSTED.pop((*_trust_key(req), key), None)


__all__ = ["TRUSTED_MAX", "candidates_from_json", "candidates_to_json", "forget", "remember_trusted", "trusted_tree"]
