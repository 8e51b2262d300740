"""Problem: *what* to compute, never how.

A :class:`Problem` is a frozen, validated value. It holds no tensors and no decisions; the
planner turns it into a :class:`~trnplan.core.node.PlanNode`. Its :meth:`Problem.digest`
is the stable key used by the in-process plan cache (and, later, the on-disk wisdom).

Value-level validity (a positive length, a known norm) is checked here. Whether this version
of trnplan *builds* a valid problem (r2c, rank ≥ 2, bf16 …) is the planner's question, so that
the seams for later features exist without pretending they work.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import os
from typing import Any

import attrs
import torch

from trnplan.core import state
from trnplan.core.errors import PlanningError

#: the real-to-real kinds (FFTW's REDFT00/10/01/11 and RODFT00/10/01/11): DCT and DST types I–IV,
#: with scipy.fft.dct/dst's definitions and norms (a real input, a real output of the same shape)
R2R_KINDS = ("dct1", "dct2", "dct3", "dct4", "dst1", "dst2", "dst3", "dst4")
KINDS = ("c2c", "r2c", "c2r", *R2R_KINDS)
NORMS = ("backward", "ortho", "forward")
#: device kinds trnplan plans for: the host, CUDA, Trainium ("neuron": TorchNeuron's native device,
#: or the legacy torch_neuronx.trace route), torch-xla's lazy "xla" device, and "meta" (shapes and
#: dtypes only); plus whatever name torch's PrivateUse1 backend has (:func:`device_kinds`)
DEVICE_KINDS = ("cpu", "cuda", "neuron", "xla", "meta")
EFFORTS = ("estimate", "measure", "patient", "wisdom_only")
#: precision mode -> (complex dtype it stores, real dtype it computes in)
#: (docs/precision.md). The bf16 modes and tf32 store complex64 and compute in float32: only the
#: operands of matrix-engine GEMMs are rounded or split; "auto" is not a mode of arithmetic but
#: asks the planner to choose one (any dtype: complex64 picks among the float32-storage modes,
#: complex128 plans fp64), so it is not listed here
PRECISIONS = {
    "fp32": ("complex64", "float32"),
    "fp64": ("complex128", "float64"),
    "bf16": ("complex64", "float32"),
    "bf16x3": ("complex64", "float32"),
    "bf16x6": ("complex64", "float32"),
    "tf32": ("complex64", "float32"),
}
#: the planner's choice of mode (with ``tol=``): valid with complex64 or complex128 data
AUTO = "auto"
_DTYPE_NAMES = {torch.complex64: "complex64", torch.complex128: "complex128"}
#: the complex dtype of a real one and the real dtype of a complex one (the front ends' dtype rules)
COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}
REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64}
_NATIVE_PRECISION = {"complex64": "fp32", "complex128": "fp64"}
#: an r2c/c2r plan may name its real dtype: it is stored as the complex partner
_REAL_PARTNER = {torch.float32: "complex64", torch.float64: "complex128",
                 "float32": "complex64", "float64": "complex128"}


def _integral(value) -> bool:
    """An integer torch.fft takes for a length: int, numpy's and torch's integer scalars (their
    ``__index__``), not bool, float or a tensor of several values."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _shape_tuple(shape) -> tuple:
    """``shape`` (an int or a sequence of ints) as a tuple of ints; TypeError for anything else."""
    if isinstance(shape, bool):
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}")
    # a tuple of plain ints (what most callers pass) is taken as it is, without the general checks'
    # calls (a wisdom hit's budget, tools/count_calls.py); the result is the same either way
    if type(shape) is tuple and set(map(type, shape)) == {int}:
        return shape
    if _integral(shape):
        return (operator.index(shape),)
    if isinstance(shape, (tuple, list, torch.Size)):
        return tuple(operator.index(n) if _integral(n) else n for n in shape)
    raise TypeError(f"shape must be an int or a sequence of ints, got {type(shape).__name__}: {shape!r}")


def _check_arguments(**args) -> None:
    """TypeErrors that name the argument, for the values whose own checks would say something
    else (a list where a word belongs fails as "unhashable type: 'list'"; ``inverse=1`` is
    probably not the direction meant)."""
    if not isinstance(args["inverse"], bool):
        raise TypeError(f"inverse must be True or False, got {type(args['inverse']).__name__}: {args['inverse']!r}")
    for name in ("kind", "precision", "norm"):
        value = args[name]
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str (one of its words), got {type(value).__name__}: {value!r}")
    if not isinstance(args["dtype"], (str, torch.dtype)):  # the validator's own message, for any type
        raise ValueError(f"dtype must be one of 'complex64', 'complex128'; got {args['dtype']!r}")  # noqa: TRY004


def _check_precision(_inst, _attr, value):
    if value not in PRECISIONS and value != AUTO:
        known = ", ".join(map(repr, (*PRECISIONS, AUTO)))
        raise ValueError(f"precision must be one of {known}; got {value!r}")


_IS_BOOL = attrs.validators.instance_of(bool)
_DTYPES = tuple(_NATIVE_PRECISION)  # a tuple: an unhashable dtype is refused as a ValueError too


def _check_fields(p, _attr=None, _value=None) -> None:
    """Problem's field checks, in field order, each with its own message: the checks above, written
    out (shape, batch, kind, inverse, dtype, precision, norm, device, cores). Problem's validator
    (of ``shape``: attrs runs it once every field is set)."""
    shape = p.shape
    if not isinstance(shape, tuple) or not shape:
        raise ValueError(f"shape must be a non-empty tuple of positive ints, got {shape!r}")
    for n in shape:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"shape must hold positive ints (the transform length per axis), got {shape!r}")
    if isinstance(p.batch, bool) or not isinstance(p.batch, int) or p.batch < 1:
        raise ValueError(f"batch must be a positive int, got {p.batch!r}")
    if p.kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {p.kind!r}")
    if not isinstance(p.inverse, bool):  # attrs' own check and message, as before
        _IS_BOOL(p, attrs.fields(Problem).inverse, p.inverse)
    if p.dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(map(repr, _DTYPES))}; got {p.dtype!r}")
    if p.precision not in PRECISIONS and p.precision != AUTO:
        _check_precision(p, None, p.precision)
    if p.norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(map(repr, NORMS))}; got {p.norm!r}")
    if not (type(p.device) is str and p.device in DEVICE_KINDS):  # a built-in kind is valid as it is
        device_kind(p.device)
    if isinstance(p.cores, bool) or not isinstance(p.cores, int) or p.cores < 1:
        raise ValueError(f"cores must be a positive int, got {p.cores!r}")


@attrs.frozen
class Problem:
    """A transform to compute: shape, batch, kind, direction, dtype, precision, norm, device.

    Build one with :meth:`Problem.create`, which normalises user-facing arguments (an int
    shape, a torch dtype, ``"cuda:1"``); the constructor itself only validates.

    Attributes
    ----------
    shape : tuple of int
        Transform lengths, one per transformed axis (for r2c/c2r the *real* lengths: the
        complex side's last axis holds ``shape[-1] // 2 + 1`` values).
    batch : int
        Number of independent transforms.
    kind : {"c2c", "r2c", "c2r", "dct1", …, "dct4", "dst1", …, "dst4"}
        Complex to complex; real to half-spectrum (forward only); half-spectrum to real
        (inverse only). The last axis is the real one, as in torch.fft.rfftn. The r2r kinds are
        scipy.fft's DCT/DST types I–IV over every axis, real to real; ``inverse=True`` is
        scipy.fft.idct/idst of that type.
    inverse : bool
        ``False`` for the forward transform (``exp(-2πi jk/n)``), ``True`` for the inverse.
    dtype : {"complex64", "complex128"}
        The complex dtype of the data at the API boundary.
    precision : str
        Arithmetic mode: ``"fp32"`` (complex64), ``"fp64"`` (complex128), ``"bf16"``,
        ``"bf16x3"``, ``"bf16x6"``, ``"tf32"`` (complex64 data, matrix-engine operands rounded or
        split, see docs/precision.md), or ``"auto"`` (the planner picks the mode with the strategy).
    norm : {"backward", "ortho", "forward"}
        Scaling, with torch.fft's meaning.
    device : {"cpu", "cuda", "neuron"}
        Device *kind*; the device index lives on the :class:`~trnplan.plan.plan.Plan`.
    cores : int
        Cores to split the work over (the multicore solver; every sub-problem inherits it).
    """

    # the fields' checks run as one validator, in field order, once every field is set (attrs runs
    # validators then): one call per Problem made (per request, per sub-problem of a search), not nine
    shape: tuple = attrs.field(validator=_check_fields)
    batch: int = 1
    kind: str = "c2c"
    inverse: bool = attrs.field(default=False, validator=_IS_BOOL)  # kept: attrs' message names the field
    dtype: str = "complex64"
    precision: str = "fp32"
    norm: str = "backward"
    device: str = "cpu"
    cores: int = 1
    #: a truncated (pruned) real transform: the frequencies kept per axis, () for all of them
    modes: tuple = attrs.field(default=(), converter=tuple)
    #: of a truncated transform's non-last axes, those that keep only the lowest ``modes[axis]``
    #: frequencies (0 … m−1) instead of the FNO's lowest and highest ``m``; sorted axis indices
    low: tuple = attrs.field(default=(), converter=tuple)
    #: a convolution with a filter bank (issue 30; :mod:`trnplan.planner.conv`): ``(mode, channels,
    #: length, kernel)``, the signal's and the filters' shapes as tuples; ``shape`` is then the
    #: transform length, ``batch`` the signals (lead × channels), ``kind`` r2c (real) or c2c
    #: (complex), forward; () for every transform
    conv: tuple = attrs.field(default=(), converter=tuple)

    # Derived facts, computed once at construction (:meth:`_derive`) rather than as properties: the
    # planner reads them tens of thousands of times per search (tools/count_calls.py). Not part of
    # the value (eq, hash, repr, to_dict and the digest see only the fields above).
    #: total points of one transform (the product of ``shape``)
    n: int = attrs.field(init=False, eq=False, repr=False)
    #: number of transformed axes
    rank: int = attrs.field(init=False, eq=False, repr=False)
    #: the real dtype each of re/im is stored in
    real_dtype: torch.dtype = attrs.field(init=False, eq=False, repr=False)
    #: r2c and the r2r kinds take real input; c2r and the r2r kinds give real output
    real_input: bool = attrs.field(init=False, eq=False, repr=False)
    real_output: bool = attrs.field(init=False, eq=False, repr=False)
    #: trailing shape of one input: ``shape``, except c2r takes ``(..., shape[-1]//2 + 1)`` (truncated: kept_shape)
    in_shape: tuple = attrs.field(init=False, eq=False, repr=False)
    #: trailing shape of one output: ``shape``, except r2c gives ``(..., shape[-1]//2 + 1)`` (truncated: kept_shape)
    out_shape: tuple = attrs.field(init=False, eq=False, repr=False)

    def _derive(self) -> None:
        put = object.__setattr__  # frozen: set once, here
        put(self, "n", math.prod(self.shape))
        put(self, "rank", len(self.shape))
        put(self, "real_dtype", torch.float64 if self.dtype == "complex128" else torch.float32)
        put(self, "real_input", self.kind == "r2c" or self.kind in R2R_KINDS)
        put(self, "real_output", self.kind == "c2r" or self.kind in R2R_KINDS)
        half = (*self.shape[:-1], self.shape[-1] // 2 + 1)  # self.half, without the property's call
        try:
            kept = self.kept_shape if self.modes else half
        except TypeError:  # modes that are not ints: __attrs_post_init__ says so (_check_modes)
            kept = half
        put(self, "in_shape", self.shape if self.kind != "c2r" else kept)
        put(self, "out_shape", self.shape if self.kind != "r2c" else kept)
        if self.conv and len(self.conv) == 4:  # signals in, signals out (their types: __attrs_post_init__)
            put(self, "in_shape", tuple(self.conv[2]))
            put(self, "out_shape", conv_out_length(*self.conv))
            put(self, "real_output", self.real_input)

    def __attrs_post_init__(self):
        self._derive()
        if self.kind == "r2c" and self.inverse:
            raise ValueError("kind='r2c' is a forward transform (real input → n//2+1 complex outputs); "
                             "its inverse is kind='c2r' (inverse=True)")
        if self.kind == "c2r" and not self.inverse:
            raise ValueError("kind='c2r' is an inverse transform (n//2+1 complex inputs → n real outputs); "
                             "pass inverse=True, or use kind='r2c' for the forward real transform")
        if self.conv:
            _check_conv(self)
        if self.modes:
            self._check_modes()
        elif self.low:
            raise ValueError(f"low= names axes of a truncated transform; pass modes= too (got low={self.low!r})")
        if self.kind == "dct1" and min(self.shape) < 2:
            raise ValueError(f"kind='dct1' (DCT-I) is not defined for a length below 2, got shape {self.shape}; "
                             f"its logical length is 2(n−1) (scipy.fft.dct type=1 refuses it too)")
        if self.precision in PRECISIONS and PRECISIONS[self.precision][0] != self.dtype:
            want = PRECISIONS[self.precision][0]
            raise ValueError(
                f"precision {self.precision!r} computes on {want} data, but dtype is {self.dtype}; "
                f"use dtype=torch.{want}, or precision={_NATIVE_PRECISION[self.dtype]!r} "
                f"for {self.dtype}"
            )

    def _check_modes(self) -> None:
        if self.kind not in ("r2c", "c2r"):
            raise ValueError(f"modes= (a truncated transform) is for kind='r2c' and its inverse kind='c2r', "
                             f"not {self.kind!r}")
        if len(self.modes) != self.rank or any(isinstance(m, bool) or not isinstance(m, int) or m < 1
                                              for m in self.modes):
            raise ValueError(f"modes must hold one positive int per transformed axis ({self.rank} for shape "
                             f"{self.shape}), got {self.modes!r}")
        if self.modes[-1] > self.shape[-1] // 2 + 1:
            raise ValueError(f"modes[-1]={self.modes[-1]} keeps more than the {self.shape[-1] // 2 + 1} bins of the "
                             f"last (real) axis of length {self.shape[-1]}")
        if (any(isinstance(a, bool) or not isinstance(a, int) for a in self.low) or list(self.low) != sorted(set(self.low))
                or any(not 0 <= a < self.rank - 1 for a in self.low)):
            raise ValueError(f"low must list distinct non-last axes (0 … {self.rank - 2}) in increasing order, got "
                             f"{self.low!r}: the last axis always keeps its lowest modes[-1] bins")
        for axis, (m, n) in enumerate(zip(self.modes[:-1], self.shape[:-1])):
            if axis in self.low and m > n:
                raise ValueError(f"modes[{axis}]={m} keeps the lowest {m} frequencies of an axis of length {n}; "
                                 f"use modes[{axis}] ≤ {n}")
            if 2 * m > n and axis not in self.low:
                raise ValueError(f"modes[{axis}]={m} keeps the lowest and highest {m} frequencies (the FNO pattern) "
                                 f"of an axis of length {n}: 2·{m} > {n}; use modes[{axis}] ≤ {n // 2}")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def create(
        cls,
        shape,
        batch: int = 1,
        *,
        kind: str = "c2c",
        inverse: bool | None = None,
        dtype=torch.complex64,
        precision: str | None = None,
        norm: str | None = "backward",
        device="cpu",
        cores: int = 1,
        modes=None,
        low=None,
        conv=None,
    ) -> Problem:
        """Normalise user-facing arguments and build a validated Problem.

        ``shape`` may be an int (1-D) or a sequence of ints; ``dtype`` a torch dtype or its
        name (for r2c/c2r the real dtype float32/float64 names its complex partner);
        ``inverse=None`` means the kind's own direction (forward for c2c and r2c, inverse for
        c2r); ``precision=None`` means the native precision of ``dtype``; ``norm=None`` means
        ``"backward"`` as in torch.fft; ``device`` a string or ``torch.device``.
        """
        if inverse is None:
            inverse = kind == "c2r"
        _check_arguments(kind=kind, inverse=inverse, dtype=dtype, precision=precision, norm=norm)
        shape = _shape_tuple(shape)
        # plain ints (what most callers pass) are taken as they are, without _integral's call
        if type(batch) is not int:
            batch = operator.index(batch) if _integral(batch) else batch
        if type(cores) is not int:
            cores = operator.index(cores) if _integral(cores) else cores
        if kind in ("r2c", "c2r", *R2R_KINDS) and dtype in _REAL_PARTNER:
            dtype = _REAL_PARTNER[dtype]
        if isinstance(dtype, torch.dtype):
            if dtype not in _DTYPE_NAMES:
                raise TypeError(
                    f"dtype must be torch.complex64 or torch.complex128 for a c2c plan, got {dtype}"
                )
            dtype = _DTYPE_NAMES[dtype]
        elif isinstance(dtype, str):
            dtype = dtype.removeprefix("torch.")
        if precision is None:
            precision = _NATIVE_PRECISION.get(dtype, "fp32")
        return cls(
            shape=shape,
            batch=batch,
            kind=kind,
            inverse=inverse,
            dtype=dtype,
            precision=precision,
            norm="backward" if norm is None else norm,
            device=device_kind(device),
            cores=cores,
            modes=() if modes is None else ((modes,) if isinstance(modes, int) else tuple(modes)),
            low=() if low is None else tuple(low),
            conv=() if conv is None else tuple(conv),
        )

    # ------------------------------------------------------------------ derived facts
    @property
    def half(self) -> int:
        """Length of the complex side's last axis for r2c/c2r: ``shape[-1] // 2 + 1``."""
        return self.shape[-1] // 2 + 1

    @property
    def kept_shape(self) -> tuple:
        """The spectrum a truncated transform keeps: ``2·m`` rows (the lowest and highest ``m``
        frequencies, the Fourier neural operator's pattern) on every axis but the last (``m`` rows,
        the lowest, on the axes in :attr:`low`), the lowest ``m`` bins on the last (real) axis."""
        return tuple(m if axis in self.low or axis == self.rank - 1 else 2 * m for axis, m in enumerate(self.modes))

    def kept_rows(self, axis: int) -> tuple:
        """The frequencies a truncated transform keeps along ``axis``, in the order it returns them:
        0 … m−1, then n−m … n−1 on an FNO axis (low, then high)."""
        m, n = self.modes[axis], self.shape[axis]
        if axis in self.low or axis == self.rank - 1:
            return tuple(range(m))
        return (*range(m), *range(n - m, n))

    @property
    def r2r(self) -> bool:
        """A real-to-real kind (DCT/DST): real input and output of ``shape``, its norm applied by its solver."""
        return self.kind in R2R_KINDS

    @property
    def sign(self) -> int:
        """Exponent sign: -1 forward, +1 inverse."""
        return 1 if self.inverse else -1

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch.complex128 if self.dtype == "complex128" else torch.complex64

    @property
    def scale(self) -> float:
        """The factor the unscaled sum is multiplied by, as torch.fft defines ``norm``.

        1 for the real-to-real kinds: scipy's DCT/DST norms are not one factor ("ortho" also
        weights the first or last samples), so the r2r solver applies the whole norm itself.
        """
        if self.kind in R2R_KINDS:
            return 1.0
        if self.norm == "ortho":
            return 1.0 / math.sqrt(self.n)
        scaled_side = "forward" if self.norm == "forward" else "backward"
        is_scaled = (scaled_side == "forward") != self.inverse
        return 1.0 / self.n if is_scaled else 1.0

    def unscaled(self, n: int, batch: int, inverse: bool, kind: str = "c2c") -> Problem:
        """A 1-D sub-problem of this one (same dtype, precision, device) with scale 1.

        Composite solvers plan their children through this: the root applies ``norm`` once,
        so every inner transform is the plain sum. torch.fft's norms give scale 1 as
        ``"backward"`` for the forward and ``"forward"`` for the inverse transform.
        """
        # the constructor, not attrs.evolve (which reads every field's definition first): the same
        # value, 3 µs less, and searches make tens of thousands of sub-problems
        return self.__class__(shape=(n,), batch=batch, kind=kind, inverse=inverse, dtype=self.dtype,
                              precision=self.precision, norm="forward" if inverse else "backward", device=self.device,
                              cores=self.cores)

    def data_bytes(self) -> int:
        """Bytes of the whole batch's input and output, the least any plan of it holds at once."""
        item = self.real_dtype.itemsize
        points_in = math.prod(self.in_shape) * (1 if self.real_input else 2)
        points_out = math.prod(self.out_shape) * (1 if self.real_output else 2)
        return self.batch * (points_in + points_out) * item

    def to_dict(self) -> dict[str, Any]:
        out = {"shape": list(self.shape), "batch": self.batch, "kind": self.kind, "inverse": self.inverse,
               "dtype": self.dtype, "precision": self.precision, "norm": self.norm, "device": self.device,
               "cores": self.cores, "modes": list(self.modes), "low": list(self.low)}  # the fields, in order
        if not self.modes:  # every untruncated problem keeps the digest it had before modes existed
            del out["modes"]
        if not self.low:  # and every FNO-pattern one the digest it had before low existed
            del out["low"]
        if self.conv:  # every transform keeps the digest it had before conv existed
            mode, channels, length, kernel = self.conv
            out["conv"] = [mode, channels, list(length), list(kernel)]
        return out

    def digest(self) -> str:
        """A stable 16-hex-digit hash of every field (same in every process and version of Python)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """One line a person reads: ``c2c forward (4096,) × batch 64, complex64 fp32, norm backward, cpu``."""
        direction = "inverse" if self.inverse else "forward"
        cores = f", {self.cores} cores" if self.cores != 1 else ""
        cores += f", modes {self.modes} kept" if self.modes else ""
        cores += f" (axes {self.low}: the lowest only)" if self.low else ""
        if self.conv:
            mode, channels, length, kernel = self.conv
            return (f"conv {mode} {'real' if self.real_input else 'complex'} signals {length} × batch {self.batch} "
                    f"({channels} channels) with filters {kernel}, transform length {self.shape}, {self.dtype} "
                    f"{self.precision}, {self.device}{cores}")
        return (
            f"{self.kind} {direction} {self.shape} × batch {self.batch}, {self.dtype} "
            f"{self.precision}, norm {self.norm}, {self.device}{cores}"
        )


#: a convolution problem's modes (:attr:`Problem.conv`)
CONV_MODES = ("circular", "linear", "causal")


def conv_out_length(mode: str, channels: int, length, kernel) -> tuple:
    """The output's shape of a convolution: the signal's, but the full ``L + K − 1`` for ``linear``."""
    return tuple(length) if mode != "linear" else tuple(n + k - 1 for n, k in zip(length, kernel))


def _check_conv(p: Problem) -> None:
    """A convolution problem's own checks (:attr:`Problem.conv`): its parts, its kind, and a transform
    long enough for the mode (no wrap-around into what it returns)."""
    if len(p.conv) != 4 or p.conv[0] not in CONV_MODES:
        raise ValueError(f"conv must be (mode, channels, length, kernel) with mode one of "
                         f"{', '.join(map(repr, CONV_MODES))}; got {p.conv!r}")
    mode, channels, length, kernel = p.conv
    if p.kind not in ("r2c", "c2c") or p.inverse or p.modes:
        raise ValueError(f"a convolution is planned as kind='r2c' (real) or 'c2c' (complex), forward, untruncated; "
                         f"got kind={p.kind!r}, inverse={p.inverse}")
    if (not isinstance(channels, int) or channels < 1 or p.batch % channels
            or len(length) != p.rank or len(kernel) != p.rank):
        raise ValueError(f"a convolution's batch ({p.batch}) must be a multiple of its channels ({channels}), and "
                         f"its length {length} and kernel {kernel} have one entry per axis of shape {p.shape}")
    need = [n if mode == "circular" else n + k - 1 for n, k in zip(length, kernel)]
    if any(s < w for s, w in zip(p.shape, need)) or (mode == "circular" and tuple(p.shape) != tuple(length)):
        raise ValueError(f"a {mode} convolution of {length} with {kernel} needs a transform of shape "
                         f"{'=' if mode == 'circular' else '≥'} {tuple(need)}; got {p.shape}")


def host_memory_bytes() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits(problem: Problem, memory: int | None = None) -> None:
    """Refuse, before any search, a problem whose input and output alone exceed ``memory`` bytes
    (default: this machine's memory, :func:`host_memory_bytes`).

    Every plan's constants are computed on the host (in float64), its input is made or staged
    there, and a plan's working set is at least its input and output; a problem over this bound
    cannot run here. Without the check the search went on for minutes over hopeless sizes
    (``plan_many(99999999999)``, ``65537**2``, a forced ``(bluestein 8 m=99999999999)``: issue 34).

    Raises
    ------
    PlanningError
        Naming the problem, the bytes it needs and the memory there is.
    """
    memory = host_memory_bytes() if memory is None else memory
    need = problem.data_bytes()
    if memory is not None and need > memory:
        raise PlanningError(
            f"{problem.describe()} needs {need / 2**30:.1f} GiB for its input and output alone, more than this "
            f"machine's {memory / 2**30:.1f} GiB of memory: split the batch or the transform (or plan it where it "
            f"fits)")


def privateuse1_name() -> str | None:
    """The name torch's PrivateUse1 backend registered (``"neuron"`` under TorchNeuron), else None."""
    try:
        name = torch._C._get_privateuse1_backend_name()
    except Exception:  # noqa: BLE001 - a torch without the accessor has no PrivateUse1 backend
        return None
    return None if name == "privateuseone" else name


#: device kinds added in this process by :func:`trnplan.backends.register_backend` (a new device's backend)
_REGISTERED_KINDS: tuple[str, ...] = ()


def register_device_kind(kind: str, present: bool = True) -> None:
    """Accept (``present``) or stop accepting a device kind beyond :data:`DEVICE_KINDS`: the seam
    :func:`trnplan.backends.register_backend` uses, since this layer cannot import the backends."""
    global _REGISTERED_KINDS
    others = tuple(k for k in _REGISTERED_KINDS if k != kind)
    _REGISTERED_KINDS = (*others, kind) if present else others


def _reset_device_kinds() -> None:
    global _REGISTERED_KINDS
    _REGISTERED_KINDS = ()


state.register("core.problem.device_kinds", _reset_device_kinds)


def device_kinds() -> tuple[str, ...]:
    """Every device kind trnplan plans for in this process: :data:`DEVICE_KINDS`, the registered
    backends' kinds and the PrivateUse1 name."""
    extra = privateuse1_name()
    kinds = DEVICE_KINDS + _REGISTERED_KINDS  # register_backend refuses a kind DEVICE_KINDS has
    return kinds + ((extra,) if extra and extra not in kinds else ())


def device_kind(device) -> str:
    """``"cuda:1"`` / ``torch.device("cuda", 1)`` → ``"cuda"``; validates the kind."""
    if type(device) is str and device in DEVICE_KINDS:  # a built-in kind as Problem holds it: valid as it is
        return device
    if isinstance(device, torch.device):
        kind = device.type
    elif isinstance(device, str):
        kind, colon, index = device.partition(":")
        if colon and not (index.isascii() and index.isdigit() and (index == "0" or not index.startswith("0"))):
            raise ValueError(f"device {device!r}: the index after ':' must be a device number, as in 'cuda:1' "
                             f"(torch.device refuses {device!r} too)")
    else:
        raise TypeError(f"device must be a str or torch.device, got {type(device).__name__}: {device!r}")
    if kind not in device_kinds():
        raise ValueError(
            f"device must be one of {', '.join(map(repr, device_kinds()))} (optionally with an index, e.g. 'cuda:1'; "
            f"a PrivateUse1 accelerator by the name its backend registers); got {device!r}: trnplan has no backend "
            f"for {kind!r} tensors — move them to one of those devices (x.to('cpu')) to transform them")
    return kind
