r"""The Generalized Gaussian (GG) distribution: sampling, density, CDF, moments.

Library parameterization (used everywhere in opacus-gg)::

    f(x) = exp(-|x|^β / (β s^β)) / Z(β, s),   Z(β, s) = 2 s β^{1/β} Γ(1 + 1/β),

with β ≥ 1 the shape and s > 0 the scale. In DP-SGD ``s = noise_multiplier × max_grad_norm``,
so β = 2 is exactly Opacus's N(0, s²) and β = 1 is the Laplace distribution with scale s.
In scipy's terms this is ``scipy.stats.gennorm(β, scale=s·β^{1/β})``.

The GG paper (Liu 2019; the GG mechanism paper, Definition 7) writes the density as
exp(-|x|^β / σ_p). The two conventions are related by

    σ_p = β s^β      and      s = (σ_p / β)^{1/β}

(see :func:`paper_sigma_to_scale` and :func:`scale_to_paper_sigma`).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple, Union

import numpy as np
import torch
from scipy import special

from . import _ziggurat
from .validation import validate_beta, validate_scale

ArrayLike = Union[float, np.ndarray, Sequence[float]]

__all__ = [
    "sample",
    "min_scale",
    "sample_deferred",
    "sample_gamma",
    "log_prob",
    "cdf",
    "sf",
    "variance",
    "gennorm_scale",
    "paper_sigma_to_scale",
    "scale_to_paper_sigma",
    "GeneralizedGaussian",
]


def gennorm_scale(beta: float, scale: float) -> float:
    """scipy ``gennorm`` scale of the library's GG(β, s): ``s · β^{1/β}``."""
    beta = validate_beta(beta)
    return validate_scale(scale) * beta ** (1.0 / beta)


def paper_sigma_to_scale(beta: float, sigma_paper: float) -> float:
    """Convert the paper's σ_p (density ∝ exp(-|x|^β/σ_p)) to the library scale s = (σ_p/β)^{1/β}."""
    beta = validate_beta(beta)
    sigma_paper = validate_scale(sigma_paper, "sigma_paper")
    return (sigma_paper / beta) ** (1.0 / beta)


def scale_to_paper_sigma(beta: float, scale: float) -> float:
    """Convert the library scale s to the paper's σ_p = β s^β."""
    beta = validate_beta(beta)
    return beta * validate_scale(scale) ** beta


# Exact sampling: the vectorised Ziggurat lives in the private module ``opacus_gg._ziggurat``.


def sample(
    shape: Union[int, Sequence[int], torch.Size],
    beta: float,
    scale: float,
    *,
    generator: Optional[torch.Generator] = None,
    device: Optional[Union[str, torch.device]] = None,
    dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    r"""Draw i.i.d. GG(β, s) samples of the given shape, exactly (no Python loop over elements).

    X = s · sign · M with M ~ density ∝ exp(-m^β/β) on m ≥ 0 and an independent random sign.
    β = 2 is ``s · randn`` (Opacus's noise, bit for bit given the same generator state); every other
    β ≥ 1 (Laplace included) uses a vectorised 256-layer Ziggurat (one random word per draw, ≈ 98 %
    accepted on the fast path; wedge and tail handled exactly in float64 on the rejected subset).
    Work is in float32 (float64 when ``dtype`` is float64) on ``device`` (the generator's device
    when omitted); the result is cast to ``dtype``. The randomness is a function of ``generator``'s state
    (None: torch's default generator): on accelerators its own ``random_``; on CPU (β ≠ 2) a numpy PCG64
    stream seeded by four of its words. The Ziggurat is in ``opacus_gg._ziggurat``; see
    :func:`sample_gamma` for the slower Gamma-based reference sampler.
    """
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    shape, device, out_dtype, work_dtype = _sample_setup(shape, generator, device, dtype)
    if beta == 2.0:
        return (torch.randn(shape, generator=generator, device=device, dtype=work_dtype) * scale).to(out_dtype)
    out = _ziggurat.sample(shape.numel(), beta, scale, generator, device, work_dtype)
    return out.reshape(shape).to(out_dtype)


def sample_deferred(
    n: int,
    beta: float,
    scale: float,
    *,
    generator: Optional[torch.Generator] = None,
    device: Optional[Union[str, torch.device]] = None,
    dtype: Optional[torch.dtype] = None,
) -> Tuple[torch.Tensor, "_ziggurat.Finisher"]:
    r"""n flat GG(β, s) draws (β ≠ 2) on the accelerator path with no host synchronisation: (x, finisher).

    x (in the work dtype: float64 if ``dtype`` is float64, else float32) is exactly GG once
    ``finisher.pending`` (a 0-dim bool on the device) is False; if it is True (probability ≈ 10^-21 per
    call), ``finisher.finish()`` completes the unresolved draws in place. The optimizer reads this flag
    with its other checks of the step in one synchronisation; :func:`sample` reads it at once."""
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    if beta == 2.0:
        raise ValueError("sample_deferred is the Ziggurat's (beta != 2); at beta = 2 use sample (randn)")
    _, device, _, work_dtype = _sample_setup(n, generator, device, dtype)
    return _ziggurat.sample_deferred(int(n), beta, scale, generator, device, work_dtype)


def min_scale(beta: float, dtype: torch.dtype) -> float:
    r"""Smallest GG scale s that :func:`sample` represents for output ``dtype``: s is a normal number of ``dtype``
    (the written noise keeps its relative precision: fp16 6.1e-5, bf16/float32 1.2e-38), and every factor the
    sampler scales by is a normal number of its work dtype (β = 2: s itself; β ≠ 2: the Ziggurat's lattice
    widths, :func:`opacus_gg._ziggurat.min_scale`, ≈ 3.6e-31 in float32 at β = 1.5). Below it the noise is
    distorted, at s ≲ 1e-31 (float32, β ≠ 2) collapsed to ≈ 0."""
    beta = validate_beta(beta)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    sampler = float(torch.finfo(work).tiny) if beta == 2.0 else _ziggurat.min_scale(beta, work)
    return max(sampler, float(torch.finfo(dtype).tiny))


def _sample_setup(shape, generator, device, dtype):
    if isinstance(shape, int):
        shape = (shape,)
    shape = torch.Size(shape)
    if device is None:
        device = generator.device if generator is not None else torch.device("cpu")
    device = torch.device(device)
    out_dtype = dtype or torch.get_default_dtype()
    work_dtype = torch.float64 if out_dtype == torch.float64 else torch.float32
    return shape, device, out_dtype, work_dtype


def sample_gamma(
    shape: Union[int, Sequence[int], torch.Size],
    beta: float,
    scale: float,
    *,
    generator: Optional[torch.Generator] = None,
    device: Optional[Union[str, torch.device]] = None,
    dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    r"""Reference sampler: |X| = s (β G)^{1/β}, G ~ Gamma(1/β, 1), independent random sign (exact, slower)."""
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    shape, device, out_dtype, work_dtype = _sample_setup(shape, generator, device, dtype)
    conc = torch.full(shape, 1.0 / beta, device=device, dtype=work_dtype)
    mag = (torch._standard_gamma(conc, generator=generator) * beta).pow_(1.0 / beta)
    sign = torch.randint(0, 2, shape, generator=generator, device=device, dtype=torch.int8)
    mag.mul_(sign.to(work_dtype).mul_(2.0).sub_(1.0)).mul_(scale)
    return mag.to(out_dtype)


def log_prob(x: ArrayLike, beta: float, scale: float) -> np.ndarray:
    r"""log f(x) = -|x|^β / (β s^β) - log(2 s β^{1/β} Γ(1 + 1/β))."""
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    x = np.asarray(x, dtype=np.float64)
    log_z = math.log(2.0 * scale) + math.log(beta) / beta + special.gammaln(1.0 + 1.0 / beta)
    return -np.abs(x / scale) ** beta / beta - log_z


def sf(x: ArrayLike, beta: float, scale: float) -> np.ndarray:
    r"""Survival function P(X > x) = ½ Q(1/β, |x|^β/(β s^β)) for x ≥ 0 and 1 − that for x < 0.

    Q is the regularized upper incomplete gamma; for z = |x|^β/(β s^β) < 1.5 (Q ≳ 0.1) it is computed as
    1 − P(1/β, z), as accurate there and faster than scipy's Q near z = 1. Closed forms at β = 2
    (Φ(−x/s), ``ndtr``) and β = 1 (½ e^{−|x|/s}). Each tail is computed directly (relative accuracy in both).
    """
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    x = np.asarray(x, dtype=np.float64)
    if scale != 1.0:
        x = x / scale
    if beta == 2.0:  # standard normal
        return special.ndtr(-x)
    if beta == 1.0:  # Laplace(1)
        return np.where(x >= 0, 0.5 * np.exp(-np.abs(x)), 1.0 - 0.5 * np.exp(-np.abs(x)))
    z = np.abs(x) ** beta / beta
    small = z < 1.5
    q = np.empty_like(z)
    q[small] = 1.0 - special.gammainc(1.0 / beta, z[small])
    q[~small] = special.gammaincc(1.0 / beta, z[~small])
    half = 0.5 * q
    return np.where(x >= 0, half, 1.0 - half)


def cdf(x: ArrayLike, beta: float, scale: float) -> np.ndarray:
    r"""F(x) = P(X ≤ x) = sf(−x) (symmetry), accurate in both tails."""
    return sf(-np.asarray(x, dtype=np.float64), beta, scale)


def variance(beta: float, scale: float) -> float:
    r"""Var X = s² β^{2/β} Γ(3/β) / Γ(1/β)  (= s² at β = 2, 2s² at β = 1)."""
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    return scale**2 * beta ** (2.0 / beta) * math.exp(special.gammaln(3.0 / beta) - special.gammaln(1.0 / beta))


class GeneralizedGaussian:
    r"""GG(β, s) with density ∝ exp(-|x|^β / (β s^β)); a thin object wrapper of this module."""

    def __init__(self, beta: float, scale: float) -> None:
        self.beta = validate_beta(beta)
        self.scale = validate_scale(scale)

    @classmethod
    def from_paper(cls, beta: float, sigma_paper: float) -> "GeneralizedGaussian":
        """Build from the paper's (β, σ_p), density ∝ exp(-|x|^β/σ_p)."""
        return cls(beta, paper_sigma_to_scale(beta, sigma_paper))

    @property
    def paper_sigma(self) -> float:
        """The paper's σ_p = β s^β."""
        return scale_to_paper_sigma(self.beta, self.scale)

    def sample(self, shape, *, generator=None, device=None, dtype=None) -> torch.Tensor:
        """See :func:`sample`."""
        return sample(shape, self.beta, self.scale, generator=generator, device=device, dtype=dtype)

    def log_prob(self, x: ArrayLike) -> np.ndarray:
        """See :func:`log_prob`."""
        return log_prob(x, self.beta, self.scale)

    def cdf(self, x: ArrayLike) -> np.ndarray:
        """See :func:`cdf`."""
        return cdf(x, self.beta, self.scale)

    def sf(self, x: ArrayLike) -> np.ndarray:
        """See :func:`sf`."""
        return sf(x, self.beta, self.scale)

    @property
    def variance(self) -> float:
        """See :func:`variance`."""
        return variance(self.beta, self.scale)

    def __repr__(self) -> str:
        return f"GeneralizedGaussian(beta={self.beta}, scale={self.scale})"
