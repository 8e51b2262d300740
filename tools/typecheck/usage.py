"""Public-API usage, type-checked by `make lint` (mypy --strict --follow-imports=silent).

A call here to a public function that is unannotated fails ("call to untyped function"), and
one whose annotations disagree with its documented use fails with a type error. Not run, only
checked: it names every transform of trnplan.fft and the main entry points.
"""

from __future__ import annotations

import torch

import trnplan
from trnplan import fft as tfft


def use_plans(x: torch.Tensor) -> tuple[torch.Tensor, str]:
    plan: trnplan.Plan = trnplan.plan_many((16,), batch=4, kind="r2c", dtype=torch.complex64, device="cpu")
    plan2 = trnplan.plan_many(64, precision="fp32", norm="ortho", device=torch.device("cpu"), cache=None)
    y: torch.Tensor = plan.execute(x) + plan2.execute(x).abs().sum()
    return y, plan.explain()


def use_fft(x: torch.Tensor, out: torch.Tensor) -> list[torch.Tensor]:
    one_d = [f(x, n=16, dim=-1, norm="ortho") for f in (tfft.fft, tfft.ifft, tfft.rfft, tfft.irfft,
                                                       tfft.hfft, tfft.ihfft)]
    two_d = [f(x, s=(4, 16), dim=(0, 1), norm=None) for f in (tfft.fft2, tfft.ifft2, tfft.rfft2, tfft.irfft2,
                                                              tfft.hfft2, tfft.ihfft2)]
    n_d = [f(x, s=None, dim=1, out=out) for f in (tfft.fftn, tfft.ifftn, tfft.rfftn, tfft.irfftn,
                                                 tfft.hfftn, tfft.ihfftn)]
    helpers = [tfft.fftfreq(16, 0.5), tfft.rfftfreq(16, dtype=torch.float64), tfft.fftshift(x, dim=(0, 1)),
               tfft.ifftshift(x)]
    return one_d + two_d + n_d + helpers


def use_stft(x: torch.Tensor) -> torch.Tensor:
    window = torch.hann_window(8)
    spec: torch.Tensor = trnplan.stft(x, 8, hop_length=2, window=window, return_complex=True)
    return trnplan.istft(spec, 8, hop_length=2, window=window, length=x.shape[-1])


def use_pair_out_and_wisdom(re: torch.Tensor, im: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    plan = trnplan.plan_many(64, batch=2)
    pair: tuple[torch.Tensor, ...] = plan.execute((re, im))
    into: torch.Tensor = plan.execute(x, out=torch.empty_like(x))
    shapes: tuple[int, ...] = plan.input_shape + plan.output_shape + (plan.batch,)
    trnplan.set_plan_cache_size(64)
    trnplan.export_wisdom("w.zip")
    trnplan.import_wisdom("w.zip", plans_only=True)
    short: str = plan.explain(full=True)
    return (*pair, into, torch.tensor(shapes), torch.tensor(len(short)))
