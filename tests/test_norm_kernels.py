"""The rounding of the Σ|x|^p kernels the norms actually use, measured against float64 on each device and path,
within the certified slack κ = (1024 + 2p + 8)·u of :func:`opacus_gg.clipping.per_sample_norms` (docs/engine.md):
the CPU chunked forms, the fused ``vector_norm(ord=p)`` of the accelerator branch (run on CPU through
``_device.accelerator_path``), and on CUDA, whenever one is present, the CUDA kernels themselves (whose fused
norm rounds differently from CPU's)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from opacus_gg import _device, clipping

#: (device, accelerator branch): the CPU chunked forms, the fused branch forced on CPU, and CUDA's own
PATHS = [
    ("cpu", False),
    ("cpu", True),
    pytest.param("cuda", True, marks=pytest.mark.skipif(
        not torch.cuda.is_available(), reason="no CUDA device on this machine: the CUDA kernels are measured where one is")),
]


def _data(kind: str, dtype: torch.dtype, p: float, B: int = 2, n: int = 1024 * 12 + 37) -> torch.Tensor:
    g = torch.Generator().manual_seed(11)
    if kind == "equal":  # equal magnitudes: the largest relative summation error
        x = torch.full((B, n), 0.7) * torch.sign(torch.randn(B, n, generator=g))
    elif kind == "wide":  # log-uniform magnitudes over 2^-e .. 2^e, e = min(20, 100/p): Σ|x|^p stays finite
        e = min(20.0, 100.0 / p)
        x = torch.randn(B, n, generator=g).sign() * torch.exp2(torch.rand(B, n, generator=g) * 2 * e - e)
    else:  # ReLU-like: half exact zeros, the rest Gaussian
        x = torch.randn(B, n, generator=g) * (torch.rand(B, n, generator=g) > 0.5)
    return x.to(dtype)


def _exact(x: torch.Tensor, p: float) -> np.ndarray:
    """Σ|x|^p per row from the stored entries, in float64 (pairwise numpy sums: relative error ~1e-13)."""
    a = np.abs(x.double().cpu().numpy())
    return (a**p).sum(axis=1)


@pytest.mark.parametrize("device,accel", PATHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 3.0, 4.0, 8.0])
def test_norm_kernel_rounding_is_within_the_certified_slack(device, accel, dtype, p):
    """Ŝ = clipping._sum_pow on the device (the kernels a step runs there) against the float64 sum: the
    relative error of every row is ≤ κ of the compute dtype (float32 for 16-bit inputs), both ways (Ŝ(1 + κ)
    ≥ exact: the certified direction; Ŝ ≤ exact(1 + κ): the bound is not loose), and the certified norm of
    ``per_sample_norms`` is ≥ the exact norm. On CUDA the accelerator branch is the device's own."""
    cdt = clipping._compute_dtype(torch.empty(0, dtype=dtype))
    kappa = clipping._rel_error_bound(cdt, p)
    worst = 0.0
    for kind in ("equal", "wide", "relu"):
        x = _data(kind, dtype, p).to(device)
        with _device.accelerator_path(accel):
            got = clipping._sum_pow(x, p).cpu().numpy()
            bound = clipping.per_sample_norms([x], p).cpu().numpy()
        ref = _exact(x, p)
        n = x.shape[1]
        floor = 2.0 * n * torch.finfo(cdt).tiny
        assert np.all(got * (1 + kappa) + floor >= ref), (kind, (ref - got) / ref)
        assert np.all(got <= ref * (1 + kappa) + floor), (kind, (got - ref) / ref)
        assert np.all(bound >= ref ** (1 / p)), kind
        worst = max(worst, float(np.max(np.abs(got - ref) / ref)))
    assert worst <= kappa and math.isfinite(worst)
