"""Every error path of the public API: the exception type, and a message naming what was
expected and what came (trnplan.core.errors: "Every message names what was expected, what came, and
the fix")."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import trnplan
from trnplan import BackendUnavailable, NotSupportedYet, PlanningError, Problem, TrnplanError, plan_many
from trnplan.core.problem import device_kind

ALL_SOLVERS = ", ".join(trnplan.solver_names())


def esc(text: str) -> str:
    return re.escape(text)


# ---------------------------------------------------------------------------- exception classes
def test_exception_hierarchy():
    assert issubclass(PlanningError, TrnplanError) and issubclass(PlanningError, ValueError)
    assert issubclass(NotSupportedYet, TrnplanError) and issubclass(NotSupportedYet, NotImplementedError)
    assert issubclass(BackendUnavailable, TrnplanError) and issubclass(BackendUnavailable, RuntimeError)
    assert trnplan.NotSupportedYet is NotSupportedYet


# ---------------------------------------------------------------------------- shape
@pytest.mark.parametrize("shape,exc,match", [
    (0, ValueError, r"shape must hold positive ints .*got \(0,\)"),
    (-1, ValueError, r"shape must hold positive ints .*got \(-1,\)"),
    ((8, 0), ValueError, r"shape must hold positive ints .*got \(8, 0\)"),
    ((1.5,), ValueError, r"shape must hold positive ints .*got \(1\.5,\)"),
    ((True,), ValueError, r"shape must hold positive ints .*got \(True,\)"),
    ([], ValueError, r"shape must be a non-empty tuple of positive ints, got \(\)"),
    ((), ValueError, r"shape must be a non-empty tuple of positive ints, got \(\)"),
    ("abc", TypeError, r"shape must be an int or a sequence of ints, got str: 'abc'"),
    (True, TypeError, r"shape must be an int or a sequence of ints, got True"),
    (1.5, TypeError, r"shape must be an int or a sequence of ints, got float: 1\.5"),
    (None, TypeError, r"shape must be an int or a sequence of ints, got NoneType: None"),
], ids=["0", "-1", "(8,0)", "(1.5,)", "(True,)", "[]", "()", "abc", "True", "1.5", "None"])
def test_bad_shape(shape, exc, match):
    with pytest.raises(exc, match=match):
        plan_many(shape)


# ---------------------------------------------------------------------------- batch, cores
@pytest.mark.parametrize("batch", [0, -1, 1.5, True, "2", None])
def test_bad_batch(batch):
    with pytest.raises(ValueError, match=r"batch must be a positive int, got " + esc(repr(batch))):
        plan_many(8, batch)


@pytest.mark.parametrize("cores", [0, -2, 1.0, False])
def test_bad_cores(cores):
    with pytest.raises(ValueError, match=r"cores must be a positive int, got " + esc(repr(cores))):
        plan_many(8, cores=cores)


# ---------------------------------------------------------------------------- enumerations
@pytest.mark.parametrize("kwargs,match", [
    ({"kind": "r2r"}, r"kind must be one of 'c2c', 'r2c', 'c2r', 'dct1', 'dct2', .*'dst4'; got 'r2r'"),
    ({"kind": "C2C"}, r"kind must be one of 'c2c', 'r2c', 'c2r', 'dct1', .*; got 'C2C'"),
    ({"norm": "none"}, r"norm must be one of 'backward', 'ortho', 'forward'; got 'none'"),
    ({"precision": "fp16"},
     r"precision must be one of 'fp32', 'fp64', 'bf16', 'bf16x3', 'bf16x6', 'tf32', 'auto'; got 'fp16'"),
    ({"device": "tpu"},
     (r"device must be one of 'cpu', 'cuda', 'neuron', 'xla', 'meta' \(optionally with an index, e\.g\. 'cuda:1'; "
     r"a PrivateUse1 accelerator by the name its backend registers\); got 'tpu': trnplan has no backend for 'tpu'")),
    ({"device": "tpu:0"}, r"device must be one of 'cpu', 'cuda', 'neuron', 'xla', 'meta' .*got 'tpu:0'"),
    ({"effort": "quick"}, r"effort must be one of 'estimate', 'measure', 'patient', 'wisdom_only'; got 'quick'"),
    ({"dtype": "float32"}, r"dtype must be one of 'complex64', 'complex128'; got 'float32'"),
    ({"dtype": 3}, r"dtype must be one of 'complex64', 'complex128'; got 3"),
], ids=lambda v: str(v)[:30] if isinstance(v, dict) else None)
def test_unknown_choice(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plan_many(8, **kwargs)


def test_device_of_wrong_type():
    with pytest.raises(TypeError, match=r"device must be a str or torch\.device, got int: 0"):
        plan_many(8, device=0)
    with pytest.raises(TypeError, match=r"device must be a str or torch\.device, got NoneType"):
        device_kind(None)


def test_unknown_backend_kind():
    with pytest.raises(ValueError, match=r"unknown device kind 'tpu'; known: cpu, cuda, neuron, xla, meta"):
        trnplan.get_backend("tpu")


# ---------------------------------------------------------------------------- dtype / precision
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex32, torch.int64])
def test_non_complex_torch_dtype(dtype):
    with pytest.raises(TypeError, match=r"dtype must be torch\.complex64 or torch\.complex128 for a c2c plan, got "
                       + esc(str(dtype))):
        plan_many(8, dtype=dtype)


def test_complex128_with_precision_fp32():
    with pytest.raises(ValueError, match=r"precision 'fp32' computes on complex64 data, but dtype is complex128; "
                                         r"use dtype=torch\.complex64, or precision='fp64' for complex128"):
        plan_many(8, dtype=torch.complex128, precision="fp32")


def test_complex64_with_precision_fp64():
    with pytest.raises(ValueError, match=r"precision 'fp64' computes on complex128 data, but dtype is complex64; "
                                         r"use dtype=torch\.complex128, or precision='fp32' for complex64"):
        plan_many(8, dtype=torch.complex64, precision="fp64")


# ---------------------------------------------------------------------------- tol
@pytest.mark.parametrize("tol", [0, 0.0, -1e-3, float("nan"), True, "1e-3"])
def test_bad_tol(tol):
    with pytest.raises(ValueError, match=r"tol must be a positive float \(a relative L2 error bound\), got "
                       + esc(repr(tol))):
        plan_many(8, tol=tol)


def test_tol_no_plan_meets():
    """A bound no solver is predicted to meet: every candidate and its predicted error is listed."""
    with pytest.raises(PlanningError, match=r"no solver can plan n=2 \(fp32, cpu\): native: predicted error "
                                            r"[0-9.e+-]+ exceeds the bound 1e-30; .*stockham: predicted error") as info:
        plan_many(2, tol=1e-30)
    for name in trnplan.solver_names():
        assert f"{name}: " in str(info.value)


def test_tol_no_plan_meets_names_the_problem_asked_for():
    with pytest.raises(PlanningError, match=r"no solver can plan n=64\b"):
        plan_many(64, tol=1e-30)


# ---------------------------------------------------------------------------- Problem directly
def test_problem_constructor_validates():
    with pytest.raises(ValueError, match=r"shape must be a non-empty tuple of positive ints, got \[8\]"):
        Problem(shape=[8])
    with pytest.raises(ValueError, match=r"dtype must be one of 'complex64', 'complex128'; got 'complex32'"):
        Problem(shape=(8,), dtype="complex32")
    with pytest.raises(ValueError, match=r"precision 'fp64' computes on complex128 data, but dtype is complex64"):
        Problem(shape=(8,), precision="fp64")
    with pytest.raises(ValueError, match=r"batch must be a positive int, got 0"):
        Problem.create(8, 0)


def test_inverse_must_be_bool():
    # a message a person reads (attrs' own said "'inverse' must be <class 'bool'> (got 1 that is ...)")
    with pytest.raises(TypeError, match=r"inverse must be True or False, got int: 1"):
        plan_many(8, inverse=1)


def test_bad_plan_lru_size_environment(monkeypatch):
    for raw in ("abc", "0", "-3"):
        monkeypatch.setenv("TRNPLAN_PLAN_LRU_SIZE", raw)
        with pytest.raises(ValueError, match=r"environment variable TRNPLAN_PLAN_LRU_SIZE=" + esc(repr(raw))
                           + r" must be a positive integer"):
            trnplan.plan_cache_info()


# ---------------------------------------------------------------------------- NotSupportedYet
@pytest.mark.parametrize("kind,inverse,match", [
    ("r2c", True, r"kind='r2c' is a forward transform .*its inverse is kind='c2r'"),
    ("c2r", False, r"kind='c2r' is an inverse transform .*pass inverse=True"),
])
def test_real_kinds_have_one_direction(kind, inverse, match):
    # built by the real/N-D issue (tests/test_real_nd.py checks them); a contradictory direction is an error
    with pytest.raises(ValueError, match=match):
        plan_many(8, kind=kind, inverse=inverse)


@pytest.mark.parametrize("shape", [(8, 8), [4, 4, 4], (1, 8)])
def test_rank_above_one_plans(shape):
    # built by the real/N-D issue: the nd solver plans every rank ≥ 2
    # the host FFT libraries (scipy, pyfftw, mkl-fft) plan every rank too, and may be cheaper
    assert plan_many(shape).tree.solver in ("nd", "scipy", "pyfftw", "mkl-fft")
    assert plan_many(shape, strategy="nd").tree.solver == "nd"


@pytest.mark.parametrize("precision", ["bf16", "bf16x3", "bf16x6", "auto"])
def test_precision_modes_plan_on_the_cpu(precision):
    # built by the precision-modes issue (tests/test_precision.py checks their accuracy)
    assert plan_many(8, precision=precision).problem.precision == precision


def test_tf32_off_cuda_is_a_clear_error():
    with pytest.raises(PlanningError, match=r"precision='tf32' uses TF32 tensor cores, which only device='cuda' has"):
        plan_many(8, precision="tf32")


@pytest.mark.parametrize("cores", [2, 8])
def test_cores_on_cuda_are_refused_with_the_fix(cores):
    # cores > 1 is built for the CPU (tests/test_multicore.py); a GPU runs a plan as one device
    with pytest.raises(PlanningError, match=r"a GPU runs a plan as one device: use cores=1 on cuda"):
        plan_many(8, cores=cores, device="cuda")


@pytest.mark.parametrize("effort", ["measure", "patient"])
def test_measured_efforts_plan(effort):
    # built by the measured-planning issue (tests/test_measure.py has the behaviour)
    plan = plan_many(8, effort=effort, cache=None)
    assert plan.provenance.measurement.effort == effort


def test_not_supported_yet_is_a_not_implemented_error():
    # every plan_many feature it once guarded is built; trnplan.distributed still raises it
    with pytest.raises(NotImplementedError):
        raise NotSupportedYet("not built")


# ---------------------------------------------------------------------------- BackendUnavailable
def test_neuron_backend_unavailable():
    from trnplan.backends.neuron_runtime import detect

    runtime = detect()
    if runtime.kind is not None:  # a trn1/inf2 (XLA torch-neuronx) or trn2 (TorchNeuron): device="neuron" runs
        pytest.skip(f"a Neuron runtime is installed here ({runtime.reason})")
    match = (r"device='neuron' needs AWS's Neuron SDK for PyTorch, which is not usable here \(torch-neuronx is not "
             r"installed\)\. Use device='cpu'")
    with pytest.raises(BackendUnavailable, match=match):
        plan_many(8, device="neuron")
    with pytest.raises(BackendUnavailable, match=match):  # BackendUnavailable is a RuntimeError
        plan_many(8, device="neuron:0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda", 0)], ids=str)
def test_cuda_unavailable_without_gpu(device):
    with pytest.raises(BackendUnavailable, match=r"device='cuda' needs a CUDA GPU and a CUDA build of torch, and "
                                                 r"torch \S+ sees none here; use device='cpu'"):
        plan_many(8, device=device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_index_out_of_range():
    count = torch.cuda.device_count()
    with pytest.raises(ValueError, match=rf"device 'cuda:{count}': this machine has {count} CUDA device\(s\)"):
        plan_many(8, device=f"cuda:{count}")


# ---------------------------------------------------------------------------- forced strategies
def applying(message: str) -> list[str]:
    assert "Solvers that apply here: " in message, message
    return message.rsplit("Solvers that apply here: ", 1)[1].split(", ")


def test_forced_solver_in_a_child_that_does_not_apply():
    with pytest.raises(PlanningError, match=r"strategy 'stockham' does not apply to the sub-problem n=12 \(forward, "
                                            r"batch 8, fp32\): stockham: n=12 is not a power of two") as info:
        plan_many(96, strategy="(four-step 96=8x12 (stockham) (stockham))")
    assert "stockham" not in applying(str(info.value))


@pytest.mark.parametrize("n,strategy,match", [
    (256, "(stockham 512)",
     (r"strategy '\(stockham 512\)' does not apply to the sub-problem n=256 .*stockham: strategy node \(stockham 512\) "
     r"has length 512 but the sub-problem has n=256")),
    (256, "(stockham 64=8x4)",
     r"stockham: strategy node \(stockham 64=8x4\) has length 64 but the sub-problem has n=256"),
    (256, "(four-step 256=16x16 (stockham 8) _)",
     (r"strategy '\(stockham 8\)' does not apply to the sub-problem n=16 \(forward, batch 16, fp32\): stockham: "
     r"strategy node \(stockham 8\) has length 8 but the sub-problem has n=16")),
])
def test_strategy_length_mismatch(n, strategy, match):
    with pytest.raises(PlanningError, match=match) as info:
        plan_many(n, strategy=strategy)
    assert applying(str(info.value))


@pytest.mark.parametrize("n,strategy,reason", [
    (256, "(stockham 256=8x4)", "factors 8x4 multiply to 32, not to the sub-problem's n=256"),
    (256, "(stockham 256=16x16)", "stockham radices must be 8, 4 or 2; got 16x16"),
    (8, "(stockham 8=8x1)", "stockham radices must be 8, 4 or 2; got 8x1"),
    (256, "(four-step 256=4x8x8)", "four-step takes two factors n1xn2, both > 1; got 4x8x8"),
    (256, "(four-step 256=1x256)", "four-step takes two factors n1xn2, both > 1; got 1x256"),
    (256, "(four-step 256=16x32)", "factors 16x32 multiply to 512, not to the sub-problem's n=256"),
    (97, "(bluestein m=100)", "bluestein's padded length m=100 is under 2n-1=193"),
    (256, "(stockham 256 m=5)", "stockham has no option 'm' (options it takes: none)"),
    (64, "(dft-gemm 64=8x8)", "dft-gemm takes no factor list (got 8x8)"),
])
def test_strategy_factors_or_options_that_fit_no_variant(n, strategy, reason):
    """The message says what the spec asked for, why it cannot be, and which solvers do apply."""
    with pytest.raises(PlanningError, match=esc(f"strategy {strategy!r} does not apply to the sub-problem n={n}")
                       + r".*" + esc(reason)) as info:
        plan_many(n, strategy=strategy)
    assert strategy.split()[0].strip("(") in applying(str(info.value))  # the solver applies, not this variant


def test_strategy_factor_product_mismatch_is_explained():
    with pytest.raises(PlanningError, match=r"\b32\b|multipl|product"):
        plan_many(256, strategy="(stockham 256=8x4)")


MALFORMED = [
    ("fftw", r"strategy 'fftw': unknown solver 'fftw'; known solvers: " + esc(ALL_SOLVERS)),
    ("(stockham (fftw))", r"strategy '\(stockham \(fftw\)\)': unknown solver 'fftw'; known solvers: "),
    ("Stockham", r"unknown solver 'Stockham'"),
    ("(stockham 256", r"strategy '\(stockham 256': unbalanced parentheses"),
    ("(four-step (stockham) (stockham)", r"unbalanced parentheses"),
    ("(", r"strategy '\(': '\(' must be followed by a solver name"),
    ("((stockham))", r"'\(' must be followed by a solver name"),
    ("()", r"strategy '\(\)': '\(' must be followed by a solver name"),
    (")", r"strategy '\)': unexpected '\)'"),
    ("stockham)", r"strategy 'stockham\)': unexpected '\)' after the plan"),
    ("stockham butterfly", r"strategy 'stockham butterfly': unexpected 'butterfly' after the plan"),
    ("(stockham foo)", r"strategy '\(stockham foo\)': cannot read 'foo'; expected a solver name \("
                       + esc(ALL_SOLVERS) + r"\), a length like 4096 or 4096=64x64, or an option like m=256"),
    ("(stockham -256)", r"cannot read '-256'; expected a solver name"),
    ("(bluestein m=abc)", r"bluestein's option m takes an integer, got 'abc'"),
    ("(stockham 256=8xa)", r"strategy '\(stockham 256=8xa\)': bad factor list '256=8xa' \(write e\.g\. 4096=64x64\)"),
    ("(stockham 256=)", r"bad factor list '256='"),
    ("_", r"strategy '_' names no solver; use one of " + esc(ALL_SOLVERS)),
    ("", r"strategy must be a solver name or a plan s-expression, got ''"),
    ("   ", r"strategy must be a solver name or a plan s-expression, got '   '"),
    (3, r"strategy must be a solver name or a plan s-expression, got 3"),
]


@pytest.mark.parametrize("strategy,match", MALFORMED, ids=[repr(s) for s, _ in MALFORMED])
def test_malformed_strategy(strategy, match):
    with pytest.raises(PlanningError, match=match):
        plan_many(256, strategy=strategy)


def test_strategy_option_without_key_is_rejected():
    with pytest.raises(PlanningError, match=r"cannot read '=5'"):
        plan_many(256, strategy="(stockham =5)")


@pytest.mark.parametrize("strategy,solver,given,slots", [
    ("(native 256 (stockham))", "native", 1, 0),
    ("(stockham 256 _)", "stockham", 1, 0),
    ("(four-step 256=16x16 (stockham) (stockham) (butterfly))", "four-step", 3, 2),
    ("(bluestein 256 _ _ _)", "bluestein", 3, 2),
])
def test_strategy_with_more_children_than_the_solver_has(strategy, solver, given, slots):
    """A child spec the solver has no slot for is refused, not silently dropped."""
    with pytest.raises(PlanningError, match=esc(f"{solver}: the strategy gives {given} child spec(s) but {solver} has "
                                                f"{slots} child plan(s)")):
        plan_many(256, strategy=strategy)


@pytest.mark.parametrize("n,strategy,expect", [
    # m=200 (5-smooth) cannot take stockham children, m=256 can: the variant is skipped
    (97, "(bluestein (stockham) (stockham))", "(bluestein 97 m=256 (stockham 256=8x8x4) (stockham 256=8x8x4 inv))"),
    # the split 2x12 cannot take a stockham second child, 3x8 can
    (24, "(four-step _ (stockham))", "(four-step 24=3x8 "),
])
def test_composite_skips_variants_whose_children_cannot_be_planned(n, strategy, expect):
    assert str(plan_many(n, strategy=strategy).tree).startswith(expect)


def test_composite_with_no_variant_whose_children_can_be_planned():
    """When every variant fails, the child's reason comes back (here: no length m is a power of two
    with butterfly children of 5-smooth lengths — forced m=200)."""
    with pytest.raises(PlanningError, match=r"strategy 'butterfly' does not apply to the sub-problem n=200 \(forward, "
                                            r"batch 1, fp32\): butterfly: n=200 is not a power of two"):
        plan_many(97, strategy="(bluestein m=200 (butterfly) (butterfly))")


# ---------------------------------------------------------------------------- execute()
@pytest.fixture
def plan():
    return plan_many(8, batch=4)


@pytest.fixture
def plan128():
    return plan_many(8, batch=4, dtype=torch.complex128)


EXPECTS = r"execute\(\) takes a complex64 tensor of shape \(\.\.\., 8\) or a \(re, im\) pair of float32 tensors; got "


@pytest.mark.parametrize("x,got", [
    (np.zeros((4, 8), np.complex64), "ndarray"),
    (None, "NoneType"),
    (3.0, "float"),
    ("abc", "str"),
    ({"re": 1}, "dict"),
], ids=["numpy", "None", "float", "str", "dict"])
def test_execute_non_tensor(plan, x, got):
    with pytest.raises(TypeError, match=EXPECTS + got + "$"):
        plan.execute(x)


def test_execute_list_of_floats(plan):
    """A list is neither a tensor nor a pair of tensors: the message names both forms and what came."""
    with pytest.raises(TypeError, match=r"execute\(\) takes a complex64 tensor of shape \(\.\.\., 8\) or a \(re, im\) "
                                        r"pair of two float32 tensors; got a list of 32 item\(s\) of type\(s\) float$"):
        plan.execute([0.0] * 32)
    with pytest.raises(TypeError, match=r"got a list of 2 item\(s\) of type\(s\) float$"):
        plan([0.0, 1.0])


def test_execute_list_of_floats_names_the_complex_tensor_form(plan):
    with pytest.raises(TypeError, match=r"complex64 tensor of shape \(\.\.\., 8\)"):
        plan.execute([0.0] * 32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_execute_real_tensor_into_c2c(plan, dtype):
    x = torch.zeros(4, 8, dtype=dtype)
    with pytest.raises(TypeError, match=r"this c2c plan takes complex input \(complex64\), got a real "
                       + esc(str(dtype).removeprefix("torch.")) + r" tensor; pass torch\.complex\(x, torch\.zeros_like\(x\)\), "
                       r"or the pair \(x, torch\.zeros_like\(x\)\)"):
        plan.execute(x)


def test_execute_complex128_into_complex64_plan(plan):
    with pytest.raises(TypeError, match=r"this plan was made for complex64 but x is complex128; convert with "
                                        r"x\.to\(torch\.complex64\) or plan with dtype=torch\.complex128"):
        plan.execute(torch.zeros(4, 8, dtype=torch.complex128))


def test_execute_complex64_into_complex128_plan(plan128):
    with pytest.raises(TypeError, match=r"this plan was made for complex128 but x is complex64; convert with "
                                        r"x\.to\(torch\.complex128\) or plan with dtype=torch\.complex64"):
        plan128.execute(torch.zeros(4, 8, dtype=torch.complex64))


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_execute_complex32_message_suggests_a_valid_fix(plan):
    with pytest.raises(TypeError) as info:
        plan.execute(torch.zeros(4, 8, dtype=torch.complex32))
    assert "but x is complex32" in str(info.value)
    assert "dtype=torch.complex128" not in str(info.value)


@pytest.mark.parametrize("shape", [(4, 16), (4, 7), (32,), (4, 8, 1), ()], ids=str)
def test_execute_wrong_trailing_shape(plan, shape):
    with pytest.raises(ValueError, match=esc(f"x has shape {shape}, but this plan transforms trailing dimension(s) (8,): "
                                             "expected shape (..., 8) with leading dimensions multiplying to batch=4")):
        plan.execute(torch.zeros(shape, dtype=torch.complex64))


@pytest.mark.parametrize("shape,leading", [((3, 8), 3), ((2, 3, 8), 6), ((8,), 1), ((4, 1, 2, 8), 8)], ids=str)
def test_execute_wrong_batch(plan, shape, leading):
    with pytest.raises(ValueError, match=esc(f"x has shape {shape}: its leading dimensions multiply to {leading}, but "
                                             f"this plan was made for batch=4; plan with batch={leading} "
                                             f"(trnplan.plan_many((8,), batch={leading}))")):
        plan.execute(torch.zeros(shape, dtype=torch.complex64))


def test_execute_tensor_on_another_device(plan):
    x = torch.zeros(4, 8, dtype=torch.complex64, device="meta")
    with pytest.raises(ValueError, match=r"x is on meta but this plan runs on cpu; move it with \.to\('cpu'\)"):
        plan.execute(x)


# ------------------------------------------------------------------ (re, im) pairs
def test_pair_with_wrong_dtypes(plan, plan128):
    r32, r64 = torch.zeros(4, 8), torch.zeros(4, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"pair input re must be float32 \(the real dtype of complex64\); got float64"):
        plan.execute((r64, r64))
    with pytest.raises(TypeError, match=r"pair input im must be float32 \(the real dtype of complex64\); got float64"):
        plan.execute((r32, r64))
    with pytest.raises(TypeError, match=r"pair input re must be float32 \(the real dtype of complex64\); got complex64"):
        plan.execute((torch.zeros(4, 8, dtype=torch.complex64),) * 2)
    with pytest.raises(TypeError, match=r"pair input re must be float32 \(the real dtype of complex64\); got int32"):
        plan.execute((r32.int(), r32.int()))
    with pytest.raises(TypeError, match=r"pair input re must be float64 \(the real dtype of complex128\); got float32"):
        plan128.execute((r32, r32))


def test_pair_with_mismatched_shapes(plan):
    with pytest.raises(ValueError, match=r"pair input re and im must have the same shape; got \(4, 8\) and \(2, 16\)"):
        plan.execute((torch.zeros(4, 8), torch.zeros(2, 16)))
    with pytest.raises(ValueError, match=r"pair input re and im must have the same shape; got \(4, 8\) and \(2, 2, 8\)"):
        plan.execute((torch.zeros(4, 8), torch.zeros(2, 2, 8)))


def test_pair_with_wrong_shape_or_batch(plan):
    with pytest.raises(ValueError, match=r"re has shape \(4, 16\), but this plan transforms trailing dimension\(s\) \(8,\)"):
        plan.execute((torch.zeros(4, 16), torch.zeros(4, 16)))
    with pytest.raises(ValueError, match=r"re has shape \(2, 8\): its leading dimensions multiply to 2, but this plan was "
                                         r"made for batch=4"):
        plan.execute((torch.zeros(2, 8), torch.zeros(2, 8)))


@pytest.mark.parametrize("items,types", [(3, "Tensor"), (1, "Tensor"), (0, "")])
def test_pair_with_wrong_number_of_items(plan, items, types):
    x = tuple(torch.zeros(4, 8) for _ in range(items))
    with pytest.raises(TypeError, match=rf"or a \(re, im\) pair of two float32 tensors; got a tuple of {items} "
                                        rf"item\(s\) of type\(s\) {types}$"):
        plan.execute(x)


@pytest.mark.parametrize("pair,types", [
    (([0.0] * 8, [0.0] * 8), "list"),
    ((np.zeros((4, 8), np.float32),) * 2, "ndarray"),
    ((torch.zeros(4, 8), None), "NoneType, Tensor"),
], ids=["lists", "numpy", "tensor+None"])
def test_pair_of_non_tensors(plan, pair, types):
    with pytest.raises(TypeError, match=rf"or a \(re, im\) pair of two float32 tensors; got a tuple of 2 item\(s\) "
                                        rf"of type\(s\) {types}$"):
        plan.execute(pair)
