"""The cost model: predicted time of a node from its work, on a backend's profile.

Every solver describes the work of its *own* node (children excluded) as a :class:`Work`:

* ``launches`` — torch ops dispatched. In eager torch each op costs a fixed latency whatever
  its size (a few µs on the CPU here; ~0.7 ms per dispatch on Trainium), which is what makes
  small transforms dispatch-bound (../shared/FACTS.md: torch.fft 5.6 µs at N=256, pyFFTW 0.6 µs).
* ``gemm_flops`` — real multiply-adds ×2 done in matmuls, priced at the profile's GEMM rate for
  the compute dtype (the matrix engine's rate).
* ``fft_calls`` and ``fft_flops`` — calls into the native library (each with its own fixed
  setup cost) and the nominal 5·n·log2(n) flops of a native library FFT, priced at the native
  library's sustained rate.
* ``bytes`` — memory traffic of elementwise ops, copies and matmul operands, priced at the
  profile's effective bandwidth.

The time is a plain sum, ``launches·launch + calls·fft_launch + gemm/rate + fft/rate +
bytes/bandwidth``: the
terms rarely overlap in eager execution, and a sum is easy to read off ``explain()``. A node's
prediction is its own time plus its children's (:func:`combine`). The constants of each
backend's profile live in ``trnplan/backends/`` with the measurement they came from.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Work:
    """The own work of one node (children excluded)."""

    launches: float = 0.0
    fft_calls: float = 0.0
    gemm_flops: float = 0.0
    fft_flops: float = 0.0
    elementwise_flops: float = 0.0
    bytes: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.launches + other.launches, self.fft_calls + other.fft_calls,
                    self.gemm_flops + other.gemm_flops, self.fft_flops + other.fft_flops,
                    self.elementwise_flops + other.elementwise_flops, self.bytes + other.bytes)

    def __mul__(self, k: float) -> Work:
        return Work(self.launches * k, self.fft_calls * k, self.gemm_flops * k, self.fft_flops * k,
                    self.elementwise_flops * k, self.bytes * k)

    __rmul__ = __mul__

    @property
    def flops(self) -> float:
        return self.gemm_flops + self.fft_flops + self.elementwise_flops


@attrs.frozen
class CostProfile:
    """Throughput and latency constants of one device kind (see the backend modules).

    Attributes
    ----------
    name : str
    launch_us : float
        Fixed cost of one dispatched op, µs.
    gemm_gflops : dict
        Sustained matmul rate by real compute dtype name (``"float32"``, ``"float64"``), GFLOP/s.
    fft_gflops : dict
        Sustained nominal (5·n·log2 n) rate of the native FFT library by dtype, GFLOP/s;
        empty where the backend has no native FFT (Neuron).
    fft_launch_us : float
        Fixed cost of one native FFT call (plan lookup, descriptor setup), µs.
    threads : int
        Cores the throughput constants were measured with (the CPU profile: torch's 2 intra-op
        threads); a shard of the multicore solver runs on one of them.
    bandwidth_gbs : float
        Effective bandwidth of elementwise ops and copies, GB/s.
    source : str
        Where the numbers came from.
    native_bf16 : bool
        The device multiplies real bfloat16 tensors into fp32 (CUDA's ``torch.mm(..., out_dtype=)``):
        the bf16 modes' data slices are half-width tensors (:func:`gemm_work`).
    """

    name: str
    launch_us: float
    gemm_gflops: dict
    fft_gflops: dict
    bandwidth_gbs: float
    fft_launch_us: float = 0.0
    source: str = ""
    threads: int = 1
    native_bf16: bool = False
    #: fitted costs of the host FFT leaves by solver name (:class:`LeafCost`, from
    #: ``bench/calibrate.py --fit``); a leaf not in it is priced from the constants above
    leaves: dict = attrs.Factory(dict)
    #: the model's own log-error, rms of log(predicted / measured): the estimate's margin rule
    #: (trnplan.planner.planner) keeps the device's own FFT unless another candidate is predicted
    #: faster by more than exp(2·sigma) (Planner.MARGIN_SIGMAS); ``sigma_fitted`` covers trees of fitted leaves only
    sigma: float = 0.0
    sigma_fitted: float | None = None
    sigma_source: str = ""

    def time_us(self, work: Work, dtype: str) -> float:
        t = work.launches * self.launch_us
        t += work.gemm_flops / (self.gemm_gflops[dtype] * 1e3)
        if work.fft_flops or work.fft_calls:
            t += work.fft_calls * self.fft_launch_us + work.fft_flops / (self.fft_gflops[dtype] * 1e3)
        t += work.bytes / (self.bandwidth_gbs * 1e3)
        return t

    def terms_time_us(self, terms) -> float:
        """The predicted time of a node's :attr:`~trnplan.core.node.PlanNode.terms`."""
        t = 0.0
        for name, value in (terms.items() if isinstance(terms, dict) else terms):
            if value:
                t += value * self.price(name)
        return t

    def price(self, term: str) -> float:
        """µs per unit of one work term (``launches``, ``fft_calls``, ``gemm:float32`` …)."""
        if term == "launches":
            return self.launch_us
        if term == "fft_calls":
            return self.fft_launch_us
        if term == "bytes":
            return 1.0 / (self.bandwidth_gbs * 1e3)
        kind, _, dtype = term.partition(":")
        rates = {"gemm": self.gemm_gflops, "fft": self.fft_gflops}.get(kind)
        if rates is None or dtype not in rates:
            raise KeyError(f"cost profile {self.name!r} has no price for the work term {term!r}")
        return 1.0 / (rates[dtype] * 1e3)


@attrs.frozen
class LeafCost:
    """The fitted cost of one FFT library leaf at one thread count (trnplan.planner.leafcost).

    ``t = call_us + F / (gflops[regime] · 10³ · gain(b))`` µs for a batch of ``b`` transforms of
    ``F`` nominal flops in all (5·n·log2 n each, halved for r2c/c2r, the large-prime part
    multiplied by the library's slowdown ``1 + (s − 1)·prime_scale``, r2c/c2r scaled by
    ``real_factor / 0.5``), with ``gain(b) = 1 + (batch_gain − 1)·(1 − 1/b)``: what a batch gains
    over one transform from threads and amortised setup; plus ``mem_us_per_mb`` per MB of data
    beyond the cache.

    Attributes
    ----------
    call_us : float
        Time of one call beyond its flops, glue included, µs.
    gflops : tuple of float
        Nominal complex64 rate of one transform per regime of the longest axis
        (trnplan.planner.leafcost.REGIMES), GFLOP/s.
    batch_gain : float
        Rate multiplier a large batch approaches.
    prime_scale : float
        Multiplier of the library's large-prime slowdown beyond 1.
    real_factor : float
        Flops of an r2c/c2r transform as a fraction of the c2c one's (nominally 0.5).
    mem_us_per_mb : float
        Time per MB of complex data beyond a core's cache (``leafcost.CACHE_BYTES``), µs.
    direct_scale : float
        Multiplier of the flops of a direct O(p²) pass per large prime factor p of a composite
        length (8·p² per p-point DFT): a library's generic-radix butterfly (torch.fft took
        8 × 16385 = 5·29·113 twice as long as 8 × 16411, a prime, here).
    """

    call_us: float
    gflops: tuple
    batch_gain: float = 1.0
    prime_scale: float = 1.0
    real_factor: float = 0.5
    mem_us_per_mb: float = 0.0
    direct_scale: float = 0.0


def work_terms(work: Work, dtype: str) -> dict:
    """A node's own work as cost-model terms (the non-zero ones), for :attr:`PlanNode.terms`."""
    terms = {"launches": work.launches, "fft_calls": work.fft_calls, f"gemm:{dtype}": work.gemm_flops,
             f"fft:{dtype}": work.fft_flops, "bytes": work.bytes}
    return {k: v for k, v in terms.items() if v}


def add_terms(*terms) -> dict:
    """The sum of several term mappings (a node's own plus its children's)."""
    out: dict = {}
    for t in terms:
        for k, v in (t.items() if isinstance(t, dict) else t):
            out[k] = out.get(k, 0.0) + v
    return out


def elementwise(ops: int, elements: float, itemsize: int, operands: int = 3) -> Work:
    """``ops`` elementwise ops over ``elements`` values, each reading and writing ``operands`` arrays."""
    return Work(
        launches=ops,
        elementwise_flops=ops * elements,
        bytes=ops * operands * elements * itemsize,
    )


def copy(elements: float, itemsize: int, launches: int = 1) -> Work:
    """A copy (transpose, cat, pad) of ``elements`` values: one read, one write."""
    return Work(launches=launches, bytes=2 * elements * itemsize)


#: a transposing copy is far slower than a contiguous one in torch on the CPU here: 9.5× for a
#: 256×256 float32 matrix, 22× for 1024×1024, 7.6× for 64 × (1024×16) (bench/calibrate.py,
#: "transpose_vs_copy"); rows of ≥ 16 contiguous elements move at about half the contiguous rate
TRANSPOSE_PENALTY = 10.0
SHORT_RUN = 16


def transpose(elements: float, itemsize: int, run: float = 1, launches: int = 1) -> Work:
    """A copy that permutes axes, reading contiguous runs of ``run`` elements."""
    penalty = TRANSPOSE_PENALTY if run < SHORT_RUN else 2.0
    return Work(launches=launches, bytes=2 * elements * itemsize * penalty)


def cmul_work(elements: float, itemsize: int) -> Work:
    """A split-complex elementwise product: 4 multiplies and 2 adds on ``elements`` complex values."""
    return elementwise(6, elements, itemsize)


def format_si(value: float) -> str:
    """``value`` with an SI prefix and three significant digits (explain())."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def format_time(us: float) -> str:
    """A time in µs as explain() prints it: µs below a millisecond, ms above."""
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


# ---------------------------------------------------------------- precision modes' GEMM price
# (the arithmetic itself is trnplan.kernels.gemm; these tables say what a mode costs)

#: the (data slice, constant slice) products each mode sums, 0-based slice indices; ordered
#: small terms first, so the fp32 accumulator adds the corrections before the leading product
PRODUCTS = {
    "fp32": ((0, 0),),
    "fp64": ((0, 0),),
    "tf32": ((0, 0),),
    "bf16": ((0, 0),),
    "bf16x3": ((1, 0), (0, 1), (0, 0)),
    "bf16x6": ((2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0)),
}
#: how many bf16 slices each operand is split into (0: not split, the storage dtype is used)
SLICES = {"fp32": 0, "fp64": 0, "tf32": 0, "bf16": 1, "bf16x3": 2, "bf16x6": 3}
BF16_MODES = ("bf16", "bf16x3", "bf16x6")
#: the modes that change GEMM arithmetic only: solvers without a GEMM (native, butterfly) decline
REDUCED_GEMM_MODES = ("bf16", "bf16x3", "bf16x6", "tf32")
GEMM_MODES = tuple(PRODUCTS)


def products(mode: str) -> int:
    """Number of GEMM products a mode costs (1 for the plain modes)."""
    return len(PRODUCTS[mode])


def gemm_work(precision: str, profile, flops: float, data_elements: float, itemsize: int):
    """The cost-model :class:`~trnplan.core.cost.Work` of one constant-operand GEMM in a mode.

    ``flops`` is the plain GEMM's count. A mode with P products multiplies it by P, priced at the
    profile's bf16 (or TF32) matrix rate where it has one (CUDA, Neuron) and at the fp32 rate
    where the mode is emulated with fp32 GEMMs (the CPU: ``gemm_flops`` is then counted at the
    fp32 rate). Splitting the data costs per slice a cast down, a cast back and (but the last) a
    subtraction over ``data_elements`` values, plus the concatenation of the P operand copies;
    on a profile with ``native_bf16`` (CUDA) no cast back, and the copies are half-width.
    """
    rate = "bfloat16" if precision in BF16_MODES else "tf32" if precision == "tf32" else None
    scale = profile.gemm_gflops["float32"] / profile.gemm_gflops[rate] if rate in profile.gemm_gflops else 1.0
    p = products(precision)
    slices = SLICES[precision]
    # where the device multiplies real bf16 tensors the slices are half-width and each costs one
    # cast (and a residual subtraction) instead of cast, cast back and subtract (split_bf16)
    native = slices and profile.native_bf16
    operand = itemsize // 2 if native else itemsize
    work = Work(gemm_flops=flops * p * scale, bytes=(p - 1) * data_elements * operand)
    if slices:
        work += elementwise((2 if native else 3) * slices - 1, data_elements, itemsize, operands=2)
        if p > 1:
            work += copy(p * data_elements, operand)
    return work
