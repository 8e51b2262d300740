"""Exceptions raised by trnplan. Every message names what was expected, what came, and the fix."""


class TrnplanError(Exception):
    """Base class of trnplan's own exceptions."""


class PlanningError(TrnplanError, ValueError):
    """No plan can be made for this problem as asked (e.g. a forced strategy that does not apply).

    ``candidates`` holds the planner's verdict on every solver it asked at the failing node
    (``trnplan.planner.Candidate``: solver, verdict, reason, node), empty where none was asked.
    """

    def __init__(self, message: str = "", *, candidates=(), tol: float | None = None):
        super().__init__(message)
        self.candidates = tuple(candidates)
        self.tol = tol


class OverBoundError(PlanningError):
    """Solvers apply, but every plan they make is predicted over the accuracy bound ``tol``.

    Raised by the search when a candidate at the failing node (or one of its sub-plans) was
    judged over the bound, and by the precision solver when no mode meets ``tol``; the build
    pipeline answers it by naming the smallest bound reachable and a precision that meets it.
    """


class NotSupportedYet(TrnplanError, NotImplementedError):
    """A valid request for a feature that this version of trnplan does not build yet."""


class BackendUnavailable(TrnplanError, RuntimeError):
    """The requested device kind exists in trnplan's design but cannot run on this machine."""


class WisdomMiss(TrnplanError, LookupError):
    """``effort="wisdom_only"`` (or ``TRNPLAN_WISDOM_ONLY=1``) and the cache has no answer."""


class CompileError(TrnplanError, RuntimeError):
    """An artifact for the device asked for could not be built, and no host fallback was asked for
    (``device="neuron"``: the message names the compiler's working directory and its log)."""
