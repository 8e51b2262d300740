"""GEMMs with a constant operand, in the plan's precision mode.

Every solver that multiplies by a constant matrix (a DFT matrix, a radix-r butterfly matrix,
a real DFT matrix) goes through :class:`Gemm`, so that precision modes apply in one place.
``side="right"`` computes ``x @ W`` for ``x`` of shape ``(M, K)`` (or a batch ``(B, M, K)``
against ``W`` of shape ``(B, K, N)``); ``side="left"`` computes ``W @ x`` for ``x`` of shape
``(K, L)`` (or a batch ``(B, K, L)`` against ``W`` of shape ``(N, K)``, read once for every
item, or ``(B, N, K)``). The constant is given in float64 and cast (or split) once, at build time.

Precision modes (docs/precision.md):

``fp32`` / ``fp64``
    One plain GEMM in the storage dtype.
``tf32`` (CUDA only)
    One fp32 GEMM with TF32 tensor cores allowed, scoped around the matmul.
``bf16``
    Both operands rounded to bf16 (8-bit significand, u = 2^-8), products accumulated in fp32.
``bf16x3``
    Each operand split ``a = a1 + a2`` into bf16-representable slices; the products
    ``a1·b1 + a1·b2 + a2·b1`` are accumulated in fp32 (``a2·b2``, of relative size 2^-16, is
    dropped).
``bf16x6``
    Three slices ``a = a1 + a2 + a3`` (Ozaki-style), the six products with slice indices
    ``i + j ≤ 4`` (1-based) accumulated in fp32.

The products of a split mode are fused into *one* GEMM by concatenating along the contraction
dimension, ``[x1 | x1 | x2] @ [w1; w2; w1]`` for bf16x3, so the fp32 accumulator sums them all
and there is one launch instead of three (or six) plus adds. The constant's slices are made once
at build time (from float64), the data's at run time (the residual ``r − bf16(r)`` is exact in
fp32, so slicing loses nothing beyond the last slice's rounding).

Where the arithmetic happens: on CUDA the slices are real bf16 tensors multiplied by
``torch.mm(a, b, out_dtype=torch.float32)`` (``aten::mm.dtype``, bf16 tensor cores with fp32
accumulation). On the CPU that op does not exist (torch 2.13: "Could not run 'aten::mm.dtype'
... from the 'CPU' backend") and a bf16 ``torch.mm`` is ~100× *slower* than fp32 here (see
docs/precision.md), so the slices are bf16-representable values held in fp32 tensors and
multiplied by the fp32 GEMM. A product of two bf16 values (8-bit significands) is exact in fp32
(24 bits) and the sums are fp32: numerically this is what a bf16 matrix engine with an fp32
accumulator computes. :func:`trnplan.backends.base.run_precision_probe` checks that this holds on
the device.

Elementwise work (twiddle and chirp products) is not matrix-engine work: it runs in fp32 in
every fp32-storage mode, as a Trainium Vector engine or a GPU's CUDA cores do.
"""

from __future__ import annotations

import contextlib
import functools
import threading

import numpy as np
import torch

from trnplan.core import state
from trnplan.core.cost import PRODUCTS, SLICES


def split_bf16(x: torch.Tensor, slices: int, *, as_bf16: bool = False) -> list[torch.Tensor]:
    """Split ``x`` into ``slices`` bf16-representable parts ``x ≈ s1 + s2 + …``.

    Each slice is the bf16 rounding of the residual left by the previous ones; the residual
    ``r − bf16(r)`` is exact in fp32 (and float64), so the sum of all slices equals ``x`` up to
    the rounding of the last slice (relative 2^-8, 2^-16 and 2^-24 for 1, 2, 3 slices).

    The slices are in ``x``'s dtype (the fp32 emulation of a bf16 matrix engine), or with
    ``as_bf16=True`` bfloat16 tensors for a device that multiplies them: then each slice is one
    cast and each residual one subtraction in which torch promotes the bf16 slice inside the
    kernel (bf16 mode: one pass over ``x`` instead of three; the values are the same).
    """
    out, r = [], x
    for s in range(slices):
        hi = r.to(torch.bfloat16)
        if not as_bf16:
            hi = hi.to(x.dtype)
        out.append(hi)
        if s < slices - 1:
            r = r - hi
    return out


#: rows whose max |x| is below TINY are scaled up by 1/TINY, rows above 1/TINY down by TINY:
#: 2^-64 keeps every significant bf16x6 slice product (~2^-16 of the row's max) ≥ 2^-80, far
#: from fp32's subnormals (2^-126), and a scaled row's max below 1 (or 2^64): no overflow either
TINY = 2.0**-64


def power_of_two_scale(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Powers of two ``(s, 1/s)`` that move each slice of ``x`` along ``dim`` away from fp32's
    range ends before a split mode slices it.

    Split modes lose their accuracy on tiny data: the residual slices of values near fp32's
    smallest normal (1.2e-38) are subnormal in bf16 and their products underflow in fp32 (n=256:
    bf16x3 measured 2.6e-3 at input scale 1e-38, 2.6e-5 at 1e-36, against its 1e-5 bound), and a
    value near fp32's max rounds to inf in bf16. Multiplying a row (the values one GEMM output row
    depends on) by a power of two is exact, so a row whose max |x| is under :data:`TINY` (over
    ``1/TINY``) is scaled by 2^64 (2^-64) and its output scaled back; other rows by 1.

    Only ops every route lowers and neuronx-cc lists (Abs, Reduce Max, Broadcast, Compare, Convert, Add, Mul): no
    exponent bit tricks (``Tensor.view(dtype)`` breaks ``torch.jit.trace``, the trace route's
    recorder) and no log/exp (inexact on a device), and no host sync.
    """
    m = x.abs().amax(dim=dim, keepdim=True)
    # compared with tensors of x's dtype and selected as 0/1 masks: a python float compared or
    # selected with torch.where is an f64 operand on XLA (no FP64 on a NeuronCore); a python
    # float multiplied with an f32 tensor stays f32
    tiny = (m < torch.full_like(m, TINY)).to(m.dtype)
    huge = (m > torch.full_like(m, 1.0 / TINY)).to(m.dtype)
    keep = 1.0 - tiny - huge
    return keep + tiny * (1.0 / TINY) + huge * TINY, keep + tiny * TINY + huge * (1.0 / TINY)


def row_scale(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """:func:`power_of_two_scale`, or None where no row needs scaling and the call is eager on
    the CPU or CUDA (plain tensors, no trace): the GEMM then skips ``x · s`` and ``y · (1/s)``,
    which are exact multiplications by 1 there, so the values are the same.

    Why: on an H100 the two multiplications and ``abs`` before ``amax`` were three to four more
    passes per split GEMM, 0.43 ms of the 0.64 ms bf16 ``(dft-gemm 256)`` over 2^24 points
    (docs/gpu.md). Eagerly the check is one ``max |x|`` reduction (``vector_norm`` of order inf:
    exact) and one host read of a flag; traced and compiled graphs (torch.compile, export,
    jit.trace, XLA, Neuron) cannot branch on data and keep :func:`power_of_two_scale` always.
    """
    eager = type(x) is torch.Tensor and x.device.type in ("cpu", "cuda") and not torch.compiler.is_compiling() \
        and not torch.jit.is_tracing()
    if eager:
        m = torch.linalg.vector_norm(x, float("inf"), dim=dim, keepdim=True)
        if not bool(((m < TINY) | (m > 1.0 / TINY)).any()):
            return None
    return power_of_two_scale(x, dim)


@functools.lru_cache(maxsize=8)
def native_bf16_matmul(device_type: str) -> bool:
    """Whether torch multiplies bf16 tensors into an fp32 result on this device type
    (``torch.mm(a, b, out_dtype=torch.float32)``); checked once by trying it."""
    if device_type != "cuda" or not torch.cuda.is_available():
        return False
    try:
        a = torch.ones(2, 2, dtype=torch.bfloat16, device="cuda")
        return torch.mm(a, a, out_dtype=torch.float32).dtype == torch.float32
    except (RuntimeError, TypeError):
        return False


class _Fp32MatmulPrecision:
    """The process-wide precision of fp32 matmuls on one torch backend ("cuda": cuBLAS, where
    "tf32" means TF32 tensor cores; "mkldnn": oneDNN on the CPU, where "bf16" and "tf32" mean
    reduced-precision fp32 GEMMs on CPUs that have them), held at what a plan needs while its
    GEMMs run.

    The flag belongs to the whole process, and users set it: ``torch.set_float32_matmul_precision
    ("high")``, which PyTorch recommends for training, enables TF32 for every fp32 matmul. An fp32
    plan that left it alone would compute its GEMMs at TF32's ~1e-3 and break its 5e-7 bound, with
    no error. So each fp32 GEMM runs under :meth:`hold` ("ieee"), and tf32 mode's under
    ``hold("tf32")``. Threads that want the same value share it; a thread that wants another
    waits until they are done. The first holder sets the flag only if it differs, and the last
    restores the user's value exactly.

    torch ≥ 2.9 has the per-backend ``fp32_precision`` API (``torch._C._get_fp32_precision_getter``),
    whose getter gives the effective value whichever API set it. Older torch has only cuBLAS's
    legacy ``allow_tf32`` flag and no oneDNN flag. Reading the legacy flag raises a RuntimeError
    once the new API has set TF32, so the new API is used where it exists.
    """

    def __init__(self, backend: str):
        self.backend = backend
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # waited on (holding _lock) by a thread that wants another value
        self._waiting = 0
        self._holders = 0
        self._value: str | None = None  # the value held, while _holders > 0
        self._saved: str | None = None  # the user's value to restore, if the first holder changed it
        self._threads: dict[int, int] = {}  # holds per thread: another value nested in one would deadlock
        # this torch's accessors, looked up once (the getter runs for the first holder of every GEMM)
        self._getter = getattr(torch._C, "_get_fp32_precision_getter", None)
        self._setter = getattr(torch._C, "_set_fp32_precision_setter", None)

    def get(self) -> str | None:
        if self._getter is not None:
            return self._getter(self.backend, "matmul")
        if self.backend == "cuda":
            return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"
        return None  # no such flag in this torch: nothing to hold

    def _set(self, value: str) -> None:
        if self._setter is not None:
            self._setter(self.backend, "matmul", value)
        else:
            torch.backends.cuda.matmul.allow_tf32 = value == "tf32"

    @staticmethod
    def _satisfies(current: str | None, want: str) -> bool:
        # "none": nothing set anywhere, torch's default, which is full fp32 for matmuls
        return current is None or current == want or (want == "ieee" and current == "none")

    def hold(self, want: str) -> _Hold:
        """A context manager holding the flag at ``want`` ("ieee" or "tf32")."""
        return _Hold(self, want)

    def _acquire(self, want: str) -> None:
        thread = threading.get_ident()
        with self._lock:  # the plain lock: the uncontended path costs ~0.3 µs, the Condition's twice that
            if self._threads.get(thread) and self._value != want:
                raise RuntimeError(f"fp32 matmul precision {want!r} asked for inside a block that holds "
                                   f"{self._value!r} on {self.backend} in the same thread")
            while self._holders and self._value != want:
                self._waiting += 1
                self._cond.wait()
                self._waiting -= 1
            if not self._holders:
                current = self.get()
                self._saved = None
                if not self._satisfies(current, want):
                    self._set(want)
                    self._saved = current
                self._value = want
            self._holders += 1
            self._threads[thread] = self._threads.get(thread, 0) + 1

    def _release(self) -> None:
        thread = threading.get_ident()
        with self._lock:
            self._holders -= 1
            if self._threads[thread] == 1:
                del self._threads[thread]
            else:
                self._threads[thread] -= 1
            if not self._holders:
                if self._saved is not None:
                    self._set(self._saved)
                    self._saved = None
                self._value = None
                if self._waiting:
                    self._cond.notify_all()


class _Hold:
    """``with`` block of :meth:`_Fp32MatmulPrecision.hold` (a class, not a generator: ~1 µs cheaper per GEMM)."""

    __slots__ = ("_owner", "_want")

    def __init__(self, owner: _Fp32MatmulPrecision, want: str):
        self._owner, self._want = owner, want

    def __enter__(self):
        self._owner._acquire(self._want)
        return self

    def __exit__(self, *exc) -> None:
        self._owner._release()


FP32_MATMUL_PRECISION = {"cuda": _Fp32MatmulPrecision("cuda"), "cpu": _Fp32MatmulPrecision("mkldnn")}


def fp32_matmul_scope(device_type: str, want: str = "ieee"):
    """A context in which fp32 matmuls on ``device_type`` run at ``want`` ("ieee": full fp32;
    "tf32": TF32 tensor cores, CUDA only), whatever the process-wide setting; restored after.

    Compiled runners (AOT, Inductor) run under it as eager GEMMs do. Inside a trace
    (torch.compile, torch.export) it does nothing: the runner around the compiled code holds it.
    """
    holder = FP32_MATMUL_PRECISION.get(device_type)
    if holder is None or torch.compiler.is_compiling():
        return contextlib.nullcontext()
    return holder.hold(want)


def tf32_scope():
    """Allow TF32 tensor cores for fp32 matmuls on CUDA inside the block, restoring the setting after."""
    return fp32_matmul_scope("cuda", "tf32")


def matmul(a: torch.Tensor, b: torch.Tensor, mode: str, out_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The one matmul every :class:`Gemm` (and the precision probe) goes through.

    bf16 tensors are multiplied into fp32 (``out_dtype``), or into bf16 where the caller asks
    for it (the fp32 accumulator rounded once, by the GEMM's epilogue); fp32 tensors by the plain
    GEMM, with TF32 allowed in ``tf32`` mode. Tests replace this function to simulate a matrix
    engine that rounds its products or auto-casts fp32 operands (tests/test_precision.py).
    """
    mm = torch.bmm if a.ndim == 3 else torch.mm
    if a.dtype == torch.bfloat16:
        return mm(a, b) if out_dtype == torch.bfloat16 else mm(a, b, out_dtype=torch.float32)
    if a.dtype == torch.float32:
        # full fp32 unless tf32 mode, whatever the process-wide setting (_Fp32MatmulPrecision)
        want = "tf32" if mode == "tf32" and a.device.type == "cuda" else "ieee"
        with fp32_matmul_scope(a.device.type, want):
            return mm(a, b)
    return mm(a, b)


def matmul_add(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``c + a @ b`` as one op (``addmm``; ``baddbmm`` for batches) in full fp32 (or the storage
    dtype): the product is summed apart and added to ``c`` once, as a partial sum of a chunked
    contraction is (trnplan.planner.nd)."""
    with fp32_matmul_scope(a.device.type, "ieee"):
        return torch.baddbmm(c, a, b) if a.ndim == 3 else torch.addmm(c, a, b)


class Gemm(torch.nn.Module):
    """``x @ W`` (``side="right"``) or ``W @ x`` (``side="left"``) with a constant ``W``.

    Parameters
    ----------
    w : numpy.ndarray
        The real constant matrix, float64: ``(K, N)`` for ``side="right"`` (or a batch
        ``(B, K, N)``, multiplied by ``torch.bmm``), ``(N, K)`` for ``side="left"``.
    ctx : BuildContext
        Gives the compute dtype, device and precision mode.
    side : {"right", "left"}
        Which side the constant multiplies from.
    rounded_output : bool
        The output is only ever used rounded to bf16 (it is the operand of another bf16-mode GEMM).
        Where the device multiplies bf16 tensors, the GEMM then writes bf16 (the fp32 accumulator
        rounded once, by round-to-nearest-even as the next GEMM's cast would): half the bytes out,
        and no cast pass before the next GEMM. Only in bf16 mode; the values are the same.

    Notes
    -----
    In a split mode the constant is stored as its slices concatenated along the contraction
    dimension in the order of :data:`PRODUCTS`, and :meth:`forward` concatenates the matching
    data slices, so that one GEMM with a ``P·K`` contraction sums all ``P`` products in fp32.
    """

    def __init__(self, w: np.ndarray, ctx, side: str = "right", *, rounded_output: bool = False):
        super().__init__()
        if side not in ("right", "left"):
            raise ValueError(f"side must be 'right' or 'left', got {side!r}")
        mode = ctx.precision
        if mode not in PRODUCTS:
            raise ValueError(f"Gemm has no precision mode {mode!r}; known: {', '.join(PRODUCTS)}")
        self.side, self.mode = side, mode
        self.slices = SLICES[mode]
        self.pairs = PRODUCTS[mode]
        # real bf16 tensors where the device multiplies them into fp32; else emulate in fp32
        self.native_bf16 = self.slices > 0 and native_bf16_matmul(torch.device(ctx.device).type)
        self.out_dtype = torch.bfloat16 if rounded_output and self.native_bf16 and mode == "bf16" else torch.float32
        w = np.asarray(w, dtype=np.float64)
        if self.slices == 0:
            self.register_buffer("w", ctx.const(w))
            return
        w64 = torch.as_tensor(np.ascontiguousarray(w), dtype=torch.float64)
        parts = split_bf16(w64, self.slices)  # split from float64: the constant's slices are exact
        contraction = -2 if side == "right" else -1
        stacked = torch.cat([parts[j] for _, j in self.pairs], dim=contraction)
        dtype = torch.bfloat16 if self.native_bf16 else ctx.dtype
        self.register_buffer("w", stacked.to(dtype=dtype).to(ctx.device))  # cast on the host: no f64 on a device

    def _constant(self, x: torch.Tensor) -> torch.Tensor:
        """The constant as the GEMM takes it: for ``side="left"`` and a batch ``x`` of shape
        ``(B, K, L)``, expanded to ``(B, N, K)`` (a view: one matrix for every batch item, read
        once; trnplan.planner.nd applies a DFT along a middle axis this way)."""
        if self.side == "left" and x.ndim == 3 and self.w.ndim == 2:
            return self.w.expand(x.shape[0], *self.w.shape)
        return self.w

    def accumulate(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``y + self(x)``: one op where the mode is one plain GEMM (:func:`matmul_add`: the
        product is not written and read back), else the GEMM and an add."""
        if self.slices or self.mode == "tf32":
            return y + self(x)
        return matmul_add(y, x, self.w) if self.side == "right" else matmul_add(y, self._constant(x), x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.slices:
            return matmul(x, self.w, self.mode) if self.side == "right" else matmul(self._constant(x), x, self.mode)
        # each output row (side="right"; column for "left") depends on one row (column) of x:
        # scale it by a power of two to ~1 first, so that no slice underflows (exact both ways)
        contraction = -1 if self.side == "right" else -2
        scaled = row_scale(x, contraction)  # None: no row needs it (eager)
        # real bf16 slices where the device multiplies them (half the bytes, no cast back)
        parts = split_bf16(x if scaled is None else x * scaled[0], self.slices, as_bf16=self.native_bf16)
        x = torch.cat([parts[i] for i, _ in self.pairs], dim=contraction) if len(self.pairs) > 1 else parts[0]
        a, b = (x, self.w) if self.side == "right" else (self._constant(x), x)
        if self.out_dtype != torch.float32:  # the extra argument only where it is used: tests replace matmul
            y = matmul(a, b, self.mode, out_dtype=self.out_dtype)
            # scaled back in bf16: a power of two times a bf16 value is one (the same values as rounding after)
            return y if scaled is None else y * scaled[1].to(self.out_dtype)
        y = matmul(a, b, self.mode)
        return y if scaled is None else y * scaled[1]


state.register("kernels.gemm.native_bf16_matmul", native_bf16_matmul.cache_clear)


__all__ = [
    "Gemm",
    "fp32_matmul_scope",
    "matmul",
    "matmul_add",
    "native_bf16_matmul",
    "power_of_two_scale",
    "row_scale",
    "split_bf16",
    "tf32_scope",
]
