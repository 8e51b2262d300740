"""Exceptions raised by trnplan. Every message names what was expected, what came, and the fix."""


class TrnplanError(Exception):
    """Base class of trnplan's own exceptions."""


class PlanningError(TrnplanError, ValueError):
    """No plan can be made for this problem as asked (e.g. a forced strategy that does not apply).

    ``candidates`` holds the planner's verdict on every solver it asked at the failing node
    (``trnplan.planner.Candidate``: solver, verdict, reason, node), empty where none was asked.
    """

    def __init__(self, message="", *, candidates=(), tol: float | None = None):
        #: a call that makes the message, where making it costs searches (the solvers that apply to a
        #: forced strategy's node, trnplan.planner.Planner._failure): made at the first read, never
        #: where nobody reads it (the drop-in tries torch.fft's own strategies in turn, 14 s of 65 s
        #: of tests/test_fft_api.py + test_real_nd.py went to messages it threw away)
        self._make = message if callable(message) else None
        super().__init__(*(() if self._make is not None else (message,)))
        self.candidates = tuple(candidates)
        self.tol = tol

    def _made(self) -> None:
        if self._make is not None:
            make, self._make = self._make, None
            BaseException.args.__set__(self, (make(),))

    @property
    def args(self):  # BaseException.args, made first (repr, pickling and str read it)
        self._made()
        return BaseException.args.__get__(self)

    @args.setter
    def args(self, value) -> None:
        self._make = None
        BaseException.args.__set__(self, value)

    def __str__(self) -> str:
        self._made()
        return super().__str__()

    def __repr__(self) -> str:
        self._made()
        return super().__repr__()

    def __reduce__(self):  # the made message, not the call that makes it (it holds a planner)
        self._made()
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls, args, state):
    """An unpickled PlanningError (:meth:`PlanningError.__reduce__`)."""
    exc = cls.__new__(cls)
    BaseException.args.__set__(exc, args)
    exc.__dict__.update(state)
    return exc


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


class ComplexOnDevice(TrnplanError, TypeError, RuntimeError):
    """A complex tensor would cross a plan's boundary (``Plan.execute``, a torch.fft operator under
    :func:`trnplan.install`) on a device that holds no complex data (a NeuronCore: neuronx-cc rejects
    complex64 with NCC_EVRF004 before compiler 2.27.5334). The message names
    :meth:`~trnplan.plan.plan.Plan.execute_split`, which takes and returns split ``(re, im)`` float
    tensors (FFTW's ``fftw_execute_split_dft``). A ``TypeError`` (a wrong kind of tensor for the
    device) and a ``RuntimeError`` (what torch raises where an operator cannot run)."""


class CompileError(TrnplanError, RuntimeError):
    """An artifact for the device asked for could not be built, and no host fallback was asked for
    (``device="neuron"``: the message names the compiler's working directory and its log)."""


# ---------------------------------------------------------------------------- torch's error contract
# trnplan.fft, trnplan.stft and trnplan.istft are drop-ins for torch.fft, torch.stft and torch.istft,
# so a caller's ``except RuntimeError`` (what ATen's TORCH_CHECK raises, SpectralOps.cpp) must still
# catch trnplan's refusals of the same input. These classes keep trnplan's own, clearer messages and
# the Python class that says what went wrong (ValueError, TypeError), and add torch's class.
class InvalidArgument(TrnplanError, ValueError, RuntimeError):
    """A bad argument value where torch raises ``RuntimeError`` for the same call (e.g. stft's
    ``onesided=True`` with complex input, a window of the wrong shape, istft's NOLA check)."""


class InvalidArgumentType(TrnplanError, TypeError, RuntimeError):
    """An argument of the wrong kind where torch raises ``RuntimeError`` (e.g. istft of a real tensor,
    stft of an integer tensor)."""


class UnsupportedDtypeError(InvalidArgumentType):
    """An input dtype trnplan plans do not compute in (float16, bfloat16, complex32, ...).

    It is a ``TypeError`` (a wrong type of argument) and a ``RuntimeError`` (what torch.fft
    raises for the same inputs on the CPU: "Unsupported dtype Half"), so existing
    ``except RuntimeError`` code still works.
    """


class UnsupportedPadMode(TrnplanError, ValueError, NotImplementedError):
    """stft's ``pad_mode`` is not one torch.nn.functional.pad knows (torch raises ``NotImplementedError``,
    itself a ``RuntimeError``)."""
