"""Exceptions raised by trnplan. Every message names what was expected, what came, and the fix."""


class TrnplanError(Exception):
    """Base class of trnplan's own exceptions."""


class PlanningError(TrnplanError, ValueError):
    """No plan can be made for this problem as asked (e.g. a forced strategy that does not apply)."""


class NotSupportedYet(TrnplanError, NotImplementedError):
    """A valid request for a feature that this version of trnplan does not build yet."""


class BackendUnavailable(TrnplanError, RuntimeError):
    """The requested device kind exists in trnplan's design but cannot run on this machine."""


class WisdomMiss(TrnplanError, LookupError):
    """``effort="wisdom_only"`` (or ``TRNPLAN_WISDOM_ONLY=1``) and the cache has no answer."""
