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
# Exact sampling: a vectorised Ziggurat (Marsaglia & Tsang 2000) for the half-density
# g(x) = exp(-x^β/β), x ≥ 0, with N = 256 equal-area layers (table built once per β in float64 and
# cached). Layer 0 is the base strip [0, r] × [0, g(r)] plus the tail x > r (pseudo-width
# X_0 = v/g(r)); layer i ≥ 1 is [0, X_i] × [G_i, G_i + v/X_i], X_N = 0 (r is bisected so that the
# top layer reaches G ≥ 1, so all N regions have area exactly v and cover g). One random word per
# draw (31 bits from int32 ``random_``, 63 from int64): 9 bits pick (layer, sign), the rest gives a
# uniform u = k·2^-M on an exact lattice (M = 22 in float32, 52 in float64); x = u·X_i is accepted
# at once when u < X_{i+1}/X_i (an exact integer-lattice test, ≈ 98-99 % of draws). The rest is handled exactly in float64 on that small
# subset: the wedge by the vertical test y < g(x) with a fresh float64 uniform y (failures are
# redrawn from scratch), the tail x > r by an Exp(rate r^{β-1}) proposal shifted to r, accepted
# with probability exp(-(x^β/β - r^β/β - r^{β-1}(x - r))) ≤ 1 (tangent bound, h(x) = x^β/β is
# convex for β ≥ 1). The bulk runs in cache-sized chunks with preallocated scratch buffers.
# ---------------------------------------------------------------------------------------------

_ZIG_LAYERS = 256
_ZIG_TENSORS: dict = {}
_ZIG_CHUNK = 1 << 17
_ZIG_CACHE: dict = {}


def _zig_table(beta: float):
    """float64 numpy arrays (r, v, X[0..N], G[1..N-1], Gtop[1..N-1]) for exp(-x^β/β)."""
    key = float(beta)
    if key in _ZIG_CACHE:
        return _ZIG_CACHE[key]
    n_layers = _ZIG_LAYERS
    f = lambda x: math.exp(-(x**beta) / beta)  # noqa: E731
    finv = lambda y: (-beta * math.log(y)) ** (1.0 / beta)  # noqa: E731
    c_tail = beta ** (1.0 / beta - 1.0) * math.gamma(1.0 / beta)

    def vol(r):
        return r * f(r) + c_tail * float(special.gammaincc(1.0 / beta, r**beta / beta))

    def top_excess(r):  # G_top of the last layer minus 1 (≥ 0: r not too large)
        v, x, g = vol(r), r, f(r)
        for _ in range(1, n_layers - 1):
            g = g + v / x
            if g >= 1.0:
                return 1.0
            x = finv(g)
        return g + v / x - 1.0

    lo, hi = 1e-3, (beta * 600.0) ** (1.0 / beta)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if top_excess(mid) >= 0.0:
            lo = mid
        else:
            hi = mid
    r = lo  # top_excess(r) ≥ 0: the top layer [0, X_{N-1}] × [G, G + v/X_{N-1}] covers g up to 1
    v = vol(r)
    xs, gs, gt = [v / f(r), r], [f(r)], []
    for i in range(1, n_layers):
        gt.append(gs[-1] + v / xs[i])
        if i < n_layers - 1:
            gs.append(gt[-1])
            xs.append(finv(gs[-1]))
    xs.append(0.0)
    tab = (r, v, np.array(xs), np.array([np.nan] + gs), np.array([np.nan] + gt))
    _ZIG_CACHE[key] = tab
    return tab


def _zig_bits(work_dtype):
    """(int dtype, right shift, bits of 1.0, uniform bits M, u-lattice factor) per work dtype.

    float32: a 31-bit word gives 9 index bits and M = 22 uniform bits placed as u = k·2^-23 ∈ [0, ½)
    (factor 2 folded into the widths); float64: a 63-bit word gives 9 index bits and M = 52 bits."""
    if work_dtype == torch.float32:
        return torch.int32, 9, 0x3F800000, 22, 2.0
    return torch.int64, 11, 0x3FF0000000000000, 52, 1.0


def _zig_tensors(beta: float, scale: float, device, work_dtype):
    """Per-(layer, sign) lookup tables of length 2N: signed scaled widths and accept thresholds."""
    key = (float(beta), float(scale), str(device), work_dtype)
    if key in _ZIG_TENSORS:
        return _ZIG_TENSORS[key]
    r, v, xs, gs, gt = _zig_table(beta)
    _, _, _, mant, fac = _zig_bits(work_dtype)
    ratio = xs[1:] / xs[:-1]  # fast accept u·fac < X_{i+1}/X_i  <=>  k < ceil(ratio·2^M)
    thr = np.ceil(ratio * 2.0**mant) * 2.0**-mant / fac
    width = np.repeat(xs[:-1], 2) * np.tile([scale * fac, -scale * fac], _ZIG_LAYERS)
    tabs = (
        torch.tensor(width, dtype=work_dtype, device=device),
        torch.tensor(np.repeat(thr, 2), dtype=work_dtype, device=device),
    )
    if len(_ZIG_TENSORS) > 64:
        _ZIG_TENSORS.clear()
    _ZIG_TENSORS[key] = tabs
    return tabs


def _gg_tail(k: int, beta: float, r: float, generator, device) -> torch.Tensor:
    """k i.i.d. float64 draws of X | X > r, density ∝ exp(-x^β/β): shifted-exponential rejection."""
    lam = r ** (beta - 1.0)
    h_r = r**beta / beta
    out = torch.empty(0, device=device, dtype=torch.float64)
    while out.numel() < k:
        m = 2 * (k - out.numel()) + 16
        e = torch.rand(m, generator=generator, device=device, dtype=torch.float64).neg_().log1p_().neg_()
        x = e.div_(lam).add_(r)
        logp = -(x.pow(beta) / beta - h_r - lam * (x - r))
        u = torch.rand(m, generator=generator, device=device, dtype=torch.float64)
        out = torch.cat([out, x[u < logp.clamp_(max=0.0).exp_()]])
    return out[:k]


def _zig_fix_tables(beta: float, scale: float, device, work_dtype):
    """float64 tables indexed by the 9-bit (layer, sign) index: u-to-x width, layer bottom/top
    heights (NaN for the base layer, so its vertical test always fails), and the signed scale."""
    key = ("fix", float(beta), float(scale), str(device), work_dtype)
    if key in _ZIG_TENSORS:
        return _ZIG_TENSORS[key]
    r, v, xs, gs, gt = _zig_table(beta)
    fac = _zig_bits(work_dtype)[4]
    t = lambda a: torch.tensor(np.repeat(a, 2), dtype=torch.float64, device=device)  # noqa: E731
    tabs = (t(xs[:-1] * fac), t(gs), t(gt - gs), torch.tensor([scale, -scale] * _ZIG_LAYERS, dtype=torch.float64, device=device))
    _ZIG_TENSORS[key] = tabs
    return tabs


def _zig_fix(u, idx, beta, scale, generator, device, work_dtype) -> torch.Tensor:
    """Exact outcome (signed, scaled, float64) of the draws (u, idx) that missed the fast path."""
    r = _zig_table(beta)[0]
    width, g_lo, g_span, ssign = _zig_fix_tables(beta, scale, device, work_dtype)
    x = u.to(torch.float64).mul_(width.index_select(0, idx))
    y = torch.rand(x.numel(), generator=generator, device=device, dtype=torch.float64)
    y.mul_(g_span.index_select(0, idx)).add_(g_lo.index_select(0, idx))
    ok = y < x.pow(beta).mul_(-1.0 / beta).exp_()  # wedge: vertical test (always False in the base layer)
    res = x.mul_(ssign.index_select(0, idx))
    bad = (~ok).nonzero().flatten()
    if bad.numel():
        ib = idx[bad]
        base = (ib >> 1) == 0
        tail = bad[base]
        if tail.numel():  # base layer beyond r: the tail, signed
            res[tail] = _gg_tail(tail.numel(), beta, r, generator, device).mul_(ssign.index_select(0, ib[base]))
        redo = bad[~base]
        if redo.numel():  # wedge rejections: fresh draws from scratch
            res[redo] = _zig_sample(redo.numel(), beta, scale, generator, device, work_dtype).to(torch.float64)
    return res


def _zig_sample(n: int, beta: float, scale: float, generator, device, work_dtype) -> torch.Tensor:
    """n i.i.d. GG(β, scale) draws (flat, work_dtype) by the Ziggurat described above."""
    width, thr = _zig_tensors(beta, scale, device, work_dtype)
    int_dtype, shift, one_bits, _, _ = _zig_bits(work_dtype)
    out = torch.empty(n, device=device, dtype=work_dtype)
    if n == 0:
        return out
    bits = out.view(int_dtype)
    if bits.device.type == "cpu":
        bits.random_(generator=generator)  # 31 (63) random bits: 9 for (layer, sign), 22 (52) for u
    else:  # accelerators: ask for the non-negative range explicitly rather than rely on the default one
        bits.random_(0, 2**31 if int_dtype == torch.int32 else 2**63 - 1, generator=generator)
    c = min(n, _ZIG_CHUNK) if torch.device(device).type == "cpu" else n  # accelerators: one pass, no syncs
    idx_buf = torch.empty(c, device=device, dtype=int_dtype)
    w_buf = torch.empty(c, device=device, dtype=work_dtype)
    m_buf = torch.empty(c, device=device, dtype=torch.bool)
    rej_pos, rej_u, rej_idx = [], [], []
    for a in range(0, n, c):
        m = min(c, n - a)
        b, x = bits[a : a + m], out[a : a + m]
        idx, w, mask = idx_buf[:m], w_buf[:m], m_buf[:m]
        torch.bitwise_and(b, 2 * _ZIG_LAYERS - 1, out=idx)
        b.bitwise_right_shift_(shift).bitwise_or_(one_bits)
        x.sub_(1.0)  # u = k·2^-M in [0, 1), exact
        torch.index_select(thr, 0, idx, out=w)
        torch.ge(x, w, out=mask)
        rej = mask.nonzero().flatten()
        if rej.numel():
            rej_pos.append(rej + a)
            rej_u.append(x.index_select(0, rej))
            rej_idx.append(idx.index_select(0, rej))
        torch.index_select(width, 0, idx, out=w)
        x.mul_(w)
    if rej_pos:
        pos = torch.cat(rej_pos)
        out[pos] = _zig_fix(torch.cat(rej_u), torch.cat(rej_idx), beta, scale, generator, device, work_dtype).to(
            work_dtype
        )
    return out


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
    when omitted); the result is cast to ``dtype``. See :func:`sample_gamma` for the slower Gamma-based reference sampler.
    """
    beta = validate_beta(beta)
    scale = validate_scale(scale)
    shape, device, out_dtype, work_dtype = _sample_setup(shape, generator, device, dtype)
    if beta == 2.0:
        return (torch.randn(shape, generator=generator, device=device, dtype=work_dtype) * scale).to(out_dtype)
    out = _zig_sample(shape.numel(), beta, scale, generator, device, work_dtype)
    return out.reshape(shape).to(out_dtype)


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
