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
from typing import Optional, Sequence, Union

import numpy as np
import torch
from scipy import special

ArrayLike = Union[float, np.ndarray, Sequence[float]]

__all__ = [
    "validate_beta",
    "validate_scale",
    "sample",
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


def validate_beta(beta: float, name: str = "beta") -> float:
    """Return ``beta`` as a float, raising ``ValueError`` unless 1 ≤ β < ∞."""
    try:
        b = float(beta)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number ≥ 1, got {beta!r}") from None
    if not math.isfinite(b) or b < 1.0:
        raise ValueError(f"{name} must be a finite number ≥ 1 (1 = Laplace, 2 = Gaussian), got {beta!r}")
    return b


def validate_scale(scale: float, name: str = "scale") -> float:
    """Return ``scale`` as a float, raising ``ValueError`` unless 0 < s < ∞."""
    try:
        s = float(scale)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive real number, got {scale!r}") from None
    if not math.isfinite(s) or s <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {scale!r}")
    return s


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


# ---------------------------------------------------------------------------------------------
# Exact sampling. Magnitudes of GG(β, 1) have density ∝ exp(-x^β/β) on x ≥ 0. For 1 < β < 2 we
# use rejection from Exp(1) (accept with prob exp(x - x^β/β - (1 - 1/β)) ≤ 1, acceptance
# β^{1/β-1}Γ(1/β)/e^{1-1/β} ≥ 0.79), for β > 2 from |N(0,1)| (accept with prob
# exp(x²/2 - x^β/β - (1/2 - 1/β)), acceptance ≥ 0.87 at β ≤ 3, 0.80 at β = 4). Both envelopes
# are tight at x = 1 (the optimum over the proposal scale). Exactness in float32 work precision:
# proposal tails (Exp beyond 10 ln 2, |N| beyond 4) are redrawn exactly in float64 (memoryless
# exponential; Marsaglia's tail method), and acceptance tests with u < 2^-6 are redone with a
# fresh float64 uniform, so small acceptance probabilities are exact and larger ones carry at most
# the 2^-24 lattice error of u (relative ≤ 2^-18); float64 work has 2^-53 lattices throughout.
# ---------------------------------------------------------------------------------------------

_EXP_TAIL_BITS = 10
_HALFNORMAL_TAIL = 4.0


def _exp1(m: int, generator, device, work_dtype) -> torch.Tensor:
    """m i.i.d. Exp(1) draws: -log(1-U) in work precision, tail E > 10·ln2 redrawn in float64."""
    u = torch.rand(m, generator=generator, device=device, dtype=work_dtype)
    e = torch.log1p(-u).neg_()
    if work_dtype != torch.float64:
        tail = (u >= 1.0 - 2.0**-_EXP_TAIL_BITS).nonzero().flatten()
        if tail.numel():
            fresh = -torch.log1p(-torch.rand(tail.numel(), generator=generator, device=device, dtype=torch.float64))
            e[tail] = (fresh + _EXP_TAIL_BITS * math.log(2.0)).to(work_dtype)
    return e


def _halfnormal(m: int, generator, device, work_dtype) -> torch.Tensor:
    """m i.i.d. |N(0,1)| draws; in float32 the tail |Z| > 4 is redrawn exactly in float64."""
    z = torch.randn(m, generator=generator, device=device, dtype=work_dtype).abs_()
    if work_dtype != torch.float64:
        tail = (z > _HALFNORMAL_TAIL).nonzero().flatten()
        k = tail.numel()
        if k:
            t = _HALFNORMAL_TAIL
            out = torch.empty(0, device=device, dtype=torch.float64)
            while out.numel() < k:  # Marsaglia (1964): x = sqrt(t² - 2 log U1), accept if U2·x < t
                u1 = torch.rand(2 * k, generator=generator, device=device, dtype=torch.float64)
                u2 = torch.rand(2 * k, generator=generator, device=device, dtype=torch.float64)
                x = torch.sqrt(t * t - 2.0 * torch.log1p(-u1))
                out = torch.cat([out, x[u2 * x < t]])
            z[tail] = out[:k].to(work_dtype)
    return z


_REFINE_BITS = 6


def _accept(x: torch.Tensor, beta: float, generator) -> torch.Tensor:
    r"""Boolean mask, True with probability p(x) = exp(x - x^β/β - (1 - 1/β)) (Exp proposal, β < 2)
    or exp(x²/2 - x^β/β - (1/2 - 1/β)) (half-normal proposal, β > 2).

    The test u < p with u on the 2^-24 float32 lattice is exact up to relative error 2^-24/p; for
    u < 2^-6 it is redone with a fresh float64 uniform on [0, 2^-6), so small p are exact too.
    """
    c = (1.0 - 1.0 / beta) if beta < 2.0 else (0.5 - 1.0 / beta)
    p = x.pow(beta)
    base = x if beta < 2.0 else x.square().mul_(0.5)
    torch.add(base, p, alpha=-1.0 / beta, out=p)
    p.sub_(c).clamp_(max=0.0).exp_()
    u = torch.rand(p.shape, generator=generator, device=p.device, dtype=p.dtype)
    acc = u < p
    if p.dtype != torch.float64:
        low = (u < 2.0**-_REFINE_BITS).nonzero().flatten()
        if low.numel():
            v = torch.rand(low.numel(), generator=generator, device=p.device, dtype=torch.float64)
            xl = x[low].double()
            bl = xl if beta < 2.0 else 0.5 * xl * xl
            acc[low] = v * 2.0**-_REFINE_BITS < torch.exp(bl - xl.pow(beta) / beta - c).clamp(max=1.0)
    return acc


def _gg_magnitudes(n: int, beta: float, generator, device, work_dtype) -> torch.Tensor:
    """n i.i.d. magnitudes |X|, X ~ GG(β, 1), 1 < β ≠ 2: every position runs its own rejection
    sampler (the first accepted proposal is kept), vectorised over the still-rejected positions."""
    draw = _exp1 if beta < 2.0 else _halfnormal
    x = draw(n, generator, device, work_dtype)
    todo = (~_accept(x, beta, generator)).nonzero().flatten()
    while todo.numel():
        y = draw(todo.numel(), generator, device, work_dtype)
        ok = _accept(y, beta, generator)
        x[todo[ok]] = y[ok]
        todo = todo[~ok]
    return x


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
    β = 2 is ``s · randn`` (Opacus's noise, bit for bit given the same generator state); β = 1 is
    M ~ Exp(1) (Laplace); otherwise M is drawn by vectorised rejection sampling from an Exp(1)
    (1 < β < 2) or |N(0, 1)| (β > 2) proposal, a few rounds at most (the expected number of
    proposals is n / acceptance, acceptance ≥ 0.79 for β ≤ 4). Work is in float32 (float64 when
    ``dtype`` is float64) on ``device`` (the generator's device when omitted); the result is cast to
    ``dtype``. See :func:`sample_gamma` for the slower Gamma-based reference sampler.
    """
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    shape, device, out_dtype, work_dtype = _sample_setup(shape, generator, device, dtype)
    if beta == 2.0:
        return (torch.randn(shape, generator=generator, device=device, dtype=work_dtype) * scale).to(out_dtype)
    n = shape.numel()
    if beta == 1.0:
        mag = _exp1(n, generator, device, work_dtype)
    else:
        mag = _gg_magnitudes(n, beta, generator, device, work_dtype)
    sign = torch.randint(0, 2, (n,), generator=generator, device=device, dtype=torch.int8)
    mag.mul_(sign.to(work_dtype).mul_(2.0).sub_(1.0)).mul_(scale)
    return mag.reshape(shape).to(out_dtype)


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


def _half_tail(x: np.ndarray, beta: float, scale: float) -> np.ndarray:
    """P(X > |x|) = ½ Q(1/β, |x|^β/(β s^β)) with Q the regularized upper incomplete gamma."""
    return 0.5 * special.gammaincc(1.0 / beta, np.abs(x / scale) ** beta / beta)


def cdf(x: ArrayLike, beta: float, scale: float) -> np.ndarray:
    r"""F(x) = ½ + sign(x)/2 · P(1/β, |x|^β/(β s^β)), computed from the tail for accuracy."""
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    x = np.asarray(x, dtype=np.float64)
    tail = _half_tail(x, beta, scale)
    return np.where(x < 0, tail, 1.0 - tail)


def sf(x: ArrayLike, beta: float, scale: float) -> np.ndarray:
    r"""Survival function 1 - F(x) = F(-x) (symmetry), accurate in the upper tail."""
    return cdf(-np.asarray(x, dtype=np.float64), beta, scale)


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
