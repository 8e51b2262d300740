"""The GEMM trees' data layout: interleaved planes read and packed without copies, and the four-step of
two dft-gemm leaves lowered as two GEMMs with the twiddle folded in (MonarchGemm). Every result is
checked against numpy.fft in complex128 at the mode's bar."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import random_complex, reference, rel_l2

import trnplan
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.kernels import gemm
from trnplan.kernels.complex import interleave_planes, interleaved, pack, planes
from trnplan.planner.four_step import FourStepFFT, MonarchGemm

DTYPE = {"fp64": torch.complex128}


def test_planes_of_a_complex_tensor_are_read_and_packed_in_place():
    z = torch.from_numpy(random_complex((3, 8))).to(torch.complex64)
    x = interleaved(z.real, z.imag)
    assert x.data_ptr() == z.data_ptr() and torch.equal(x, torch.view_as_real(z).reshape(3, 16))
    re, im = planes(x.clone())
    packed = pack(re, im)
    assert packed.data_ptr() == re.data_ptr() and torch.equal(packed, z)


def test_separate_planes_are_copied_with_the_same_values():
    z = torch.from_numpy(random_complex((3, 8))).to(torch.complex64)
    re, im = z.real.contiguous(), z.imag.contiguous()
    x = interleaved(re, im)
    assert x.data_ptr() not in (re.data_ptr(), im.data_ptr()) and torch.equal(x, torch.view_as_real(z).reshape(3, 16))
    packed = pack(re, im)
    assert packed.data_ptr() != re.data_ptr() and torch.equal(packed, z)
    # planes of one buffer but not in order (im before re) are not mistaken for a complex tensor
    swapped = pack(z.imag, z.real)
    assert torch.equal(swapped, torch.complex(z.imag, z.real))
    a, b = interleave_planes(re.t(), im.t())
    assert torch.equal(a, re.t()) and torch.equal(b, im.t()) and b.data_ptr() == a.data_ptr() + 4


@pytest.mark.parametrize("precision", ["fp32", "fp64", "bf16", "bf16x3"])
# batches where the folded matrices are no larger than the data (MonarchGemm's condition)
@pytest.mark.parametrize("n,split,batch,inverse", [(1024, "32x32", 192, False), (96, "8x12", 80, False),
                                                    (96, "12x8", 80, True)])
def test_four_step_of_gemm_leaves_is_two_gemms(precision, n, split, batch, inverse):
    plan = trnplan.plan_many(n, batch=batch, precision=precision, inverse=inverse, cache=None,
                             dtype=DTYPE.get(precision, torch.complex64),
                             strategy=f"(four-step {n}={split} (dft-gemm) (dft-gemm))")
    assert isinstance(plan.module.root, MonarchGemm)
    x = random_complex((batch, n), seed=n)
    y = plan(torch.from_numpy(x).to(DTYPE.get(precision, torch.complex64))).numpy()
    assert rel_l2(y, reference(x, inverse)) <= DEFAULT_TOL[precision]


def test_four_step_keeps_the_general_lowering_where_folding_does_not_fit():
    # bf16x6's six folded 64 × 128×128 fp32 matrices (25 MB) are over the cap; a Stockham child is no GEMM
    # leaf; at batch 2 the 64 folded matrices (4 MiB in fp32) would be 32× the data they transform
    for precision, strategy in (("bf16x6", "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"),
                                ("fp32", "(four-step 4096=64x64 (dft-gemm) (stockham))"),
                                ("fp32", "(four-step 4096=64x64 (dft-gemm) (dft-gemm))")):
        plan = trnplan.plan_many(4096, batch=2, precision=precision, strategy=strategy, cache=None)
        assert isinstance(plan.module.root, FourStepFFT)
        x = random_complex((2, 4096), seed=1)
        assert rel_l2(plan(torch.from_numpy(x).to(torch.complex64)).numpy(), reference(x, False)) \
            <= DEFAULT_TOL[precision]


def test_gemm_leaf_output_is_the_plans_result_without_a_pack():
    plan = trnplan.plan_many(64, batch=4, strategy="(dft-gemm)", cache=None)
    x = random_complex((4, 64), seed=2)
    y = plan(torch.from_numpy(x).to(torch.complex64))
    assert y._base is not None  # a view of the GEMM's interleaved output
    assert rel_l2(y.numpy(), np.fft.fft(x)) <= DEFAULT_TOL["fp32"]


def test_lazily_negated_planes_are_not_read_in_place():
    # z.conj().imag is a view whose memory holds +Im z (torch's lazy neg bit): it must be copied
    z = torch.from_numpy(random_complex((2, 8))).to(torch.complex64)
    zc = z.conj()
    x = interleaved(zc.real, zc.imag)
    assert torch.equal(x, torch.view_as_real(zc.resolve_conj()).reshape(2, 16))
    plan = trnplan.plan_many(8, batch=2, strategy="(dft-gemm)", cache=None)
    y = plan(zc).numpy()
    assert rel_l2(y, np.fft.fft(zc.resolve_conj().numpy())) <= DEFAULT_TOL["fp32"]


@pytest.mark.parametrize("magnitude", [1.0, 1e-38, 1e36])
@pytest.mark.parametrize("precision", ["bf16", "bf16x3"])
def test_eager_split_gemms_skip_the_row_scale_only_where_it_is_one(precision, magnitude, monkeypatch):
    """Eagerly a split GEMM scales its rows only when some row is extreme (row_scale returns None
    otherwise); the results are bit-identical to always scaling, and within the mode's bar."""
    z = torch.from_numpy(random_complex((3, 256), seed=3) * magnitude).to(torch.complex64)
    x = torch.view_as_real(z).reshape(3, 512)
    assert (gemm.row_scale(x, -1) is None) == (magnitude == 1.0)
    plan = trnplan.plan_many(256, batch=3, precision=precision, strategy="(dft-gemm)", cache=None)
    fast = plan(z)
    monkeypatch.setattr(gemm, "row_scale", gemm.power_of_two_scale)
    assert torch.equal(fast, plan(z))
    want = np.fft.fft(z.to(torch.complex128).numpy())
    assert rel_l2(fast.to(torch.complex128).numpy(), want) <= DEFAULT_TOL[precision]


def test_traced_split_gemms_always_scale():
    x = torch.randn(2, 8)
    traced = torch.jit.trace(lambda t: gemm.row_scale(t, -1)[0], (x,), check_trace=False)  # its check reruns eagerly
    # traced on ordinary data (no row extreme), the graph still scales the rows of extreme data
    assert torch.equal(traced(x * 1e-30), gemm.power_of_two_scale(x * 1e-30, -1)[0])
    assert not torch.equal(traced(x * 1e-30), torch.ones(2, 1))


def test_monarch_bf16_output_gives_the_emulations_values(monkeypatch):
    """Where the device multiplies bf16 tensors, MonarchGemm's first GEMM writes bf16 in bf16 mode
    (its output is only used rounded); the results equal the fp32 emulation's exactly."""
    plain = gemm.matmul

    def bf16_engine(a, b, mode, out_dtype=torch.float32):  # CUDA's bf16 GEMM, emulated: exact products, fp32 sums
        mm = torch.bmm if a.ndim == 3 else torch.mm
        return mm(a.float(), b.float()).to(out_dtype) if a.dtype == torch.bfloat16 else plain(a, b, mode)

    x = torch.from_numpy(random_complex((64, 1024), seed=5)).to(torch.complex64)
    strategy = "(four-step 1024=32x32 (dft-gemm) (dft-gemm))"
    emulated = trnplan.plan_many(1024, batch=64, precision="bf16", strategy=strategy, cache=None)(x)
    trnplan.clear_plan_cache()
    monkeypatch.setattr(gemm, "matmul", bf16_engine)
    monkeypatch.setattr(gemm, "native_bf16_matmul", lambda device_type: True)
    plan = trnplan.plan_many(1024, batch=64, precision="bf16", strategy=strategy, cache=None)
    assert isinstance(plan.module.root, MonarchGemm) and plan.module.root.first.out_dtype == torch.bfloat16
    assert torch.equal(plan(x), emulated)
