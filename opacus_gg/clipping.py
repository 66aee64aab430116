r"""ℓp per-sample norms and clip factors for β-DP-SGD.

For per-sample gradients g_i = (g_{i,1}, …, g_{i,L}) split over L parameter tensors, the flat
ℓp norm over the whole model is

    ‖g_i‖_p = (Σ_l ‖g_{i,l}‖_p^p)^{1/p}     (p = ∞: max_l ‖g_{i,l}‖_∞),

and each g_i is scaled by min(1, C / (‖g_i‖_p + 1e-6)) (Opacus's clip factor), so that
‖clipped g_i‖_p ≤ C. The norms are certified upper bounds computed in one pass over the per-sample
gradients (see :func:`per_sample_norms`); only if Σ|g|^p overflows is the sum redone after dividing
by the per-sample max M_i = ‖g_i‖_∞ (‖g_i‖_p = M_i · (Σ |g/M_i|^p)^{1/p}), so an inf norm never
silently zeroes a gradient. A NaN/inf per-sample gradient raises ``FloatingPointError``.

On accelerators the optimizer uses :func:`clip_factors_deferred`: the same one-pass bound, no host
synchronisation, and a 0-dim device flag for the rare samples that need the rescaled path (overflow,
NaN/inf, or a tiny sum whose factor is < 1), read once per step with the sampler's flag.
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple, Union

import numpy as np
import torch

from . import rank1
from ._device import float64_device, one_thread, run_split, to_device, uses_accelerator_path

__all__ = [
    "per_sample_norms",
    "per_layer_norms",
    "clip_factors",
    "clip_factors_deferred",
    "total_sensitivity",
    "stored_clip_bound",
    "clipped_sum",
    "check_finite",
    "any_nonfinite",
]


def _flat(g: torch.Tensor) -> torch.Tensor:
    """[B, entries] view of a per-sample tensor (an empty batch included: reshape(0, -1) is ambiguous)."""
    return g.reshape(len(g), math.prod(g.shape[1:]))


def _coarsest(dtypes: Sequence[torch.dtype]) -> torch.dtype:
    """The dtype of largest unit roundoff (then of largest smallest-normal) among ``dtypes``: the rounding
    constants of sums and divisions done in several dtypes must be those of the coarsest one."""
    return max(dtypes, key=lambda d: (torch.finfo(d).eps, torch.finfo(d).tiny))


def any_nonfinite(norms: torch.Tensor) -> torch.Tensor:
    """0-dim bool on the norms' device: some norm is NaN or inf (no host synchronisation)."""
    return ~torch.isfinite(norms).all()


def check_finite(norms: torch.Tensor, what: str = "per-sample gradient") -> None:
    """Raise ``FloatingPointError`` if any norm is NaN or inf (a NaN/inf per-sample gradient)."""
    if norms.numel() and bool(any_nonfinite(norms)):
        bad = (~torch.isfinite(norms)).nonzero().flatten().tolist()[:10]
        raise FloatingPointError(
            f"{what} is NaN or inf for sample(s) {bad} of the batch; refusing to clip, noise or "
            f"step on it (nothing was applied to the parameters)"
        )


def per_layer_norms(grads: Sequence[torch.Tensor], p: float) -> List[torch.Tensor]:
    r"""ℓp norm of each per-sample gradient of each tensor: [‖g_{i,l}‖_p]_i for every l (rounded up as in
    :func:`per_sample_norms`), with one host synchronisation for all tensors on the fast path."""
    if len(grads) == 0:
        raise ValueError("grads must contain at least one tensor")
    if math.isinf(p) or len(grads[0]) == 0:
        return [per_sample_norms([g], p) for g in grads]
    passes = [_one_pass([g], p) for g in grads]
    ok = torch.stack([(fin & tight).all().to(grads[0].device) for _, fin, tight in passes]).tolist()
    return [bound if good else _rescaled([g], p) for (bound, _, _), g, good in zip(passes, grads, ok)]


def _float_dtype(g: torch.Tensor) -> torch.dtype:
    return g.dtype if g.is_floating_point() else torch.float32


def _compute_dtype(g: torch.Tensor) -> torch.dtype:
    """The dtype Σ|x|^p is formed and block-summed in: float32 for 16-bit gradients (a 1024-term block sum in
    bfloat16 could be off by γ_1023 ≈ 4, i.e. a bound 5× too large), else the gradients' dtype."""
    dt = _float_dtype(g)
    return torch.float32 if dt in (torch.float16, torch.bfloat16) else dt


def _max_abs(g: torch.Tensor) -> torch.Tensor:
    """Per-sample ‖g_i‖_∞ via two allocation-free reductions (NaN propagates)."""
    f = _flat(g)
    return torch.maximum(f.amax(dim=-1), f.amin(dim=-1).neg())


_BLOCK = 1024

#: elements per chunk of the CPU |x|^p pass: the chunk's scratch buffers stay in the (L2/L3) cache
_CHUNK_ELEMS = 1 << 20

_F64_MAX = torch.finfo(torch.float64).max


def _pow_block_sums_(c: torch.Tensor, p: float, buf: torch.Tensor, tmp: torch.Tensor, out: torch.Tensor) -> None:
    r"""out[i, j] = Σ_k |c_ijk|^p over the last dim (blocks of ``_BLOCK``), through cache-sized scratch.

    Cheap forms with at most 5 roundings per term (a = |x|): a (p = 1), x·x (2), (x·x)² summed by a fused
    ℓ2 norm (4), a·x² (3); torch.pow otherwise. The half powers go through numpy: s = √a (IEEE sqrt,
    correctly rounded, no slow path on zeros; torch's CPU sqrt is up to 10× slower on the zeros that fill
    ReLU gradients), then each block's Σ a·s (p = 1.5) or Σ a·(s·a) (2.5) as one ``numpy.vecdot``: a dot
    product of k terms in any order is within γ_k·Σ|terms| (Higham, Thm 3.1), so with the ≤ 2 roundings of
    s and s·a the block sum has relative error ≤ (k + 2)u + O(k²u²), inside κ of :func:`per_sample_norms`
    (numpy's sqrt is checked to be correctly rounded in tests/test_clipping.py). The chunk is float32 or
    float64 (16-bit gradients are copied to the float32 scratch first), so numpy can read it."""
    if c.dtype != buf.dtype:  # 16-bit gradients: formed in float32 (exact copy); every form below is in-place safe
        c = buf.copy_(c)
    if p in (1.5, 2.5):
        a, s = buf.numpy(), tmp.numpy()
        np.abs(c.numpy(), out=a)
        np.sqrt(a, out=s)
        # a sum past the chunk dtype's range is +inf: the caller sees it and takes the rescaled path (no warning)
        with np.errstate(over="ignore"):
            if p == 2.5:
                np.multiply(s, a, out=s)
            np.vecdot(a, s, out=out.numpy())
        return
    if p == 2.0:
        torch.linalg.vector_norm(c, 2, dim=-1, out=out)
        out.mul_(out)
        return
    if p == 4.0:
        torch.mul(c, c, out=buf)
        torch.linalg.vector_norm(buf, 2, dim=-1, out=out)
        out.mul_(out)
        return
    a = torch.abs(c, out=buf)
    if p == 3.0:
        torch.mul(c, c, out=tmp)
        a.mul_(tmp)
    elif p != 1.0:
        a.pow_(p)
    torch.sum(a, dim=-1, out=out)


#: p whose |x|^p pass is memory-bound on CPU (≤ 2 cheap passes): the chunk loop is not split over threads
_MEMORY_BOUND = (1.0, 2.0, 4.0)


def _sum_pow(f: torch.Tensor, p: float) -> torch.Tensor:
    r"""Ŝ_i ≈ Σ_j |f_ij|^p per row (float64 [B]) from partial sums over blocks of ``_BLOCK`` entries in
    f's dtype (float32 if f is 16-bit): each block sum has relative error ≤ γ_{k−1} + O(p)·u plus an
    absolute error ≤ 2·tiny per entry for under/flush-to-zero (whatever order torch sums in); see
    :func:`per_sample_norms`.

    CPU: |x|^p is formed chunk by chunk in reusable cache-sized buffers (no full-size temporary) on one
    intra-op thread (``_device.one_thread``); for the compute-bound forms (p ∉ {1, 2, 4}) the chunks are
    split over ``torch.get_num_threads()`` such loops (``_device.run_split``); the sums do not depend on it.
    Accelerators (or inside :func:`opacus_gg._device.accelerator_path`): one fused pass,
    ‖block‖_p^p = vector_norm(ord=p)^p.
    """
    B, n = f.shape
    m = n // _BLOCK
    cdt = _compute_dtype(f)
    wide = float64_device(f.device)  # the host, for a device without float64
    total = torch.zeros(B, dtype=torch.float64, device=wide)
    if m:
        if f.stride(1) == 1:
            blocks = torch.as_strided(f, (B, m, _BLOCK), (f.stride(0), _BLOCK, 1), f.storage_offset())
        else:
            blocks = f[:, : m * _BLOCK].reshape(B, m, _BLOCK)
        if uses_accelerator_path(f.device):
            part = torch.linalg.vector_norm(blocks, p, dim=-1, dtype=cdt).to(wide).double()
            total += part.sum(-1) if p == 1.0 else part.pow_(p).sum(-1)
        else:
            partial = torch.empty((B, m), dtype=cdt, device=f.device)
            rows = max(1, _CHUNK_ELEMS // (m * _BLOCK))
            starts = range(0, B, rows)

            def chunks(lo: int, hi: int) -> None:  # chunks lo..hi-1, with this worker's own scratch
                cap = min(rows, B - starts[lo])
                buf = torch.empty((cap, m, _BLOCK), dtype=cdt, device=f.device)
                tmp = torch.empty_like(buf) if p in (1.5, 2.5, 3.0) else buf
                for i in starts[lo:hi]:
                    k = min(rows, B - i)
                    _pow_block_sums_(blocks[i : i + k], p, buf[:k], tmp[:k], partial[i : i + k])

            # split only the compute-bound forms; p = 1, 2, 4 are memory-bound (measured: no gain, a loss in a step)
            workers = torch.get_num_threads() if p not in _MEMORY_BOUND else 1
            with one_thread():
                run_split(chunks, len(starts), workers)
            total += partial.to(wide).double().sum(-1)
    if n > m * _BLOCK:
        rest = torch.linalg.vector_norm(f[:, m * _BLOCK :], ord=p, dim=-1, dtype=cdt).to(wide).double()
        total += rest if p == 1.0 else rest.pow_(p)
    return total


def _rel_error_bound(dtype: torch.dtype, p: float) -> float:
    """κ with computed Σ|x|^p ≥ (exact − 2n·tiny)/(1 + κ): γ_{k−1} (block sums) plus pow/root roundings."""
    u = torch.finfo(dtype).eps / 2
    return (_BLOCK + 2 * p + 8) * u


def per_sample_norms(grads: Sequence[torch.Tensor], p: float) -> torch.Tensor:
    r"""Flat ℓp norm per sample over all tensors: (Σ_l ‖g_{i,l}‖_p^p)^{1/p}, shape [B], rounded up.

    Each tensor has the batch on dim 0. p = ∞: max_l ‖g_{i,l}‖_∞ (exact). Otherwise the result is a
    certified upper bound, from ONE pass over the per-sample gradients:

        ‖g_i‖_p ≤ ((Ŝ_i + 2 n·tiny)·(1 + κ))^{1/p},   κ = (1024 + 2p + 8)·u,

    where Ŝ_i is Σ|g|^p accumulated in float64 from blocks of 1024 entries summed in the grads' dtype
    (float32 for 16-bit grads; unit roundoff u, smallest normal ``tiny``, n entries per sample). Each term
    |x|^p is formed with ≤ 5 roundings (:func:`_pow_block_sums_`; relative error ≤ 5u + O(u²) when normal;
    an under-/flushed-to-zero result is off by < 2·tiny, the absolute term), and any summation order of k
    terms has relative error ≤ γ_{k−1} ≤ 1024u. κ ≈ 6e-5 in float32: torch's float32 ``vector_norm`` alone
    is off by ~3e-4 relative on 10^6 entries, which could let a clipped gradient exceed C. If some Ŝ_i
    overflows (or a gradient is NaN/inf), or is below 10^6 · 2n·tiny (so that the underflow term would
    loosen the bound), M_i = ‖g_i‖_∞ is computed and the sum is redone on g/M_i (|entries| ≤ 1, no
    overflow) and multiplied back:
    ‖g_i‖_p ≤ M_i·((Ŝ'_i + 2n·tiny)(1 + κ))^{1/p}·(1 + 4ε) (ε covers rounding M_i to the grads' dtype).
    Norms are float64 on the first tensor's device, or on the host for a device without float64
    (:func:`opacus_gg._device.float64_device`: the float32 block sums move there; MPS). (Opacus's own ℓ2 formula, used by the
    optimizer at β = p = 2 for bit-equality with Opacus, is not rounded up.)
    """
    if len(grads) == 0:
        raise ValueError("grads must contain at least one tensor")
    if len(grads[0]) == 0:
        return torch.zeros((0,), device=float64_device(grads[0].device), dtype=torch.float64)
    if not math.isinf(p):
        bound, finite, tight = _one_pass(grads, p)
        if bool((finite & tight).all()):  # the one host synchronisation
            return bound
    return _rescaled(grads, p)


def _one_pass(grads: Sequence[torch.Tensor], p: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""The one-pass bound ((Ŝ_i + 2n·tiny)(1 + κ))^{1/p} of :func:`per_sample_norms` (float64, on the first
    tensor's :func:`~opacus_gg._device.float64_device`; p < ∞) with, per sample, ``finite`` (Ŝ_i ≤ float64 max: False on overflow or NaN) and
    ``tight`` (Ŝ_i ≥ 10^6 · 2n·tiny: the underflow term is negligible). No host synchronisation.

    A Linear weight's per-sample gradients with known factors (:func:`opacus_gg.rank1.factors`) enter as
    E_i = :func:`opacus_gg.rank1.rank1_bound` of the one-pass bounds on ‖δ_i‖_p and ‖a_i‖_p, computed in
    float64 (an upper bound on ‖ĝ_i‖_p^p from out + in entries instead of out·in), added after the (1 + κ)
    inflation of the entries read in full; a sample whose factor sums overflow is reported not finite, so
    the caller's rescaled path (which reads every entry) takes it."""
    device = float64_device(grads[0].device)  # where the float64 sums live (the host for MPS)
    dtype = _coarsest([_compute_dtype(g) for g in grads])  # κ and tiny of the coarsest sums (mixed dtypes)
    n = 0  # entries read in full
    total = torch.zeros(len(grads[0]), dtype=torch.float64, device=device)
    extra = torch.zeros_like(total)  # certified bounds of the factored tensors' Σ|g|^p
    ok = torch.ones(len(grads[0]), dtype=torch.bool, device=device)  # their factors' sums are finite
    for g in grads:
        fac = rank1.factors(g)
        if fac is None:
            n += _flat(g).shape[1]
            total += _sum_pow(_flat(g), p).to(device)
            continue
        # float64 (κ ≈ 1e-13), on the host for a device without float64 (a float32 copy moved first: exact)
        (bd, fd, _), (ba, fa, _) = (_one_pass([f.to(device).double()], p) for f in fac)
        b = len(bd)  # rows ≥ b of g are Opacus's zero padding
        extra[:b] += rank1.rank1_bound(bd, ba, g.dtype, _flat(g).shape[1], p).to(device)
        # the bound assumes no stored product overflowed: |δ_j a_k| ≤ N_δ·N_a < the dtype's largest float (with a
        # margin for the float64 product) rules it out; else the sample goes to the full read, which sees an inf
        no_overflow = bd * ba.to(bd.device) < torch.finfo(g.dtype).max * (1.0 - 1e-12)
        ok[:b] &= (fd & fa & no_overflow).to(device)
    both = total + extra
    floor = 2.0 * n * torch.finfo(dtype).tiny
    return _rounded_up_root(total, n, dtype, p, extra), ok & (both <= _F64_MAX), ok & (both >= floor * 1e6)


def _rounded_up_root(
    total: torch.Tensor, n: int, dtype: torch.dtype, p: float, extra: Union[torch.Tensor, float] = 0.0
) -> torch.Tensor:
    r"""((Ŝ_i + 2n·tiny)(1 + κ) + E_i)^{1/p}: the certified ℓp bound from the computed sums Ŝ_i of n entries per
    sample (see :func:`per_sample_norms`) and certified bounds E_i on the Σ|g|^p of factored tensors (their
    own slack covers the last add and root), as a new tensor."""
    return (total + 2.0 * n * torch.finfo(dtype).tiny).mul_(1.0 + _rel_error_bound(dtype, p)).add_(extra).pow_(1.0 / p)


def _max_abs_all(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """M_i = ‖g_i‖_∞ over all tensors (float64, on :func:`~opacus_gg._device.float64_device` of the first
    tensor's device; NaN propagates)."""
    device = grads[0].device
    return torch.stack([_max_abs(g).to(device) for g in grads], dim=1).amax(dim=1).to(float64_device(device)).double()


def _rescaled(grads: Sequence[torch.Tensor], p: float) -> torch.Tensor:
    r"""The slow path of :func:`per_sample_norms`: M_i·((Ŝ'_i + 2n·tiny)(1 + κ))^{1/p}·(1 + 4ε) with Ŝ'_i the
    sum on g/M_i (M_i itself at p = ∞, or where M_i is NaN/inf: the caller raises)."""
    device = float64_device(grads[0].device)
    fi = torch.finfo(_coarsest([_float_dtype(g) for g in grads]))  # ε of the divisions g/M_i, in each g's dtype
    n = sum(_flat(g).shape[1] for g in grads)
    maxes = _max_abs_all(grads)
    if math.isinf(p) or not bool(torch.isfinite(maxes).all()):
        return maxes  # p = ∞, or NaN/inf entries (the caller raises)
    safe = torch.where(maxes > 0, maxes, torch.ones_like(maxes))
    total = sum(_sum_pow(_flat(g) / to_device(safe, g.device, g.dtype)[:, None], p).to(device) for g in grads)
    return _rounded_up_root(total, n, _coarsest([_compute_dtype(g) for g in grads]), p) * maxes * (1.0 + 4 * fi.eps)


def clip_factors_deferred(
    grads: Sequence[torch.Tensor], p: float, max_grad_norm: float
) -> Tuple[torch.Tensor, torch.Tensor]:
    r"""Accelerator path: clip factors of the flat ℓp norm over ``grads`` and a 0-dim device bool ``redo``,
    with no host synchronisation. When ``redo`` is False the factors are final; when True (rare) the
    caller recomputes them with :func:`per_sample_norms` (rescaled path) and :func:`check_finite`.

    p < ∞: f_i from the one-pass bound b_i of :func:`per_sample_norms`; sample i needs the redo if Ŝ_i
    overflowed or is NaN, or if it is below 10^6·2n·tiny (where b_i may be loose) AND f_i < 1. A sample
    that is tiny with f_i = 1 needs nothing: its exact norm is ≤ b_i, so the exact factor is 1 as well
    (and the clipped gradient, g_i itself, has ℓp norm ≤ b_i < C). p = ∞: the exact M_i; redo iff some
    M_i is NaN/inf."""
    if math.isinf(p):
        norms = _max_abs_all(grads)
        return clip_factors(norms, max_grad_norm), any_nonfinite(norms)
    bound, finite, tight = _one_pass(grads, p)
    factors = clip_factors(bound, max_grad_norm)
    return factors, ~(finite & (tight | (factors == 1.0))).all()


def clip_factors(norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    r"""Per-sample clip factor min(1, C / (‖g_i‖_p + 1e-6)) (Opacus's formula)."""
    return (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)


def _multiply_dtype(grad_dtype: torch.dtype, dtype: torch.dtype) -> torch.dtype:
    """The dtype :func:`clipped_sum` multiplies and sums in: float64 if the gradients or the stored sum are
    float64, else float32 (16-bit gradients are upcast exactly; the factor is never rounded to 16 bits)."""
    return torch.float64 if torch.float64 in (grad_dtype, dtype) else torch.float32


def _matmul_input_rounding() -> float:
    """Relative rounding a float32 matmul may apply to its inputs under torch's precision settings: 0 at
    "highest"/IEEE, else 2^-8 (bfloat16 inputs, the coarsest that "medium"/"high", TF32 or oneDNN's bf16 use)."""
    exact = (
        torch.get_float32_matmul_precision() == "highest"
        and not torch.backends.cuda.matmul.allow_tf32
        and getattr(torch.backends.mkldnn.matmul, "fp32_precision", "ieee") in ("ieee", "none")
        and getattr(torch.backends.cuda.matmul, "fp32_precision", "ieee") in ("ieee", "none")
    )
    return 0.0 if exact else 2.0**-8


def stored_clip_bound(max_grad_norm: float, p: float, parts: Sequence[Tuple[torch.dtype, torch.dtype, int]]) -> float:
    r"""C' ≤ C to clip to so that the clipped gradient as stored has ℓp norm ≤ C (docs/engine.md, Lemma S).

    ``parts``: (gradient dtype G, stored dtype T, entries n_l) of each tensor clipped with the one factor.
    :func:`clipped_sum` forms f·g in W = :func:`_multiply_dtype` (G, T) from the float64 factor rounded once
    to W, then rounds to T, so each stored entry is ≤ (1 + u_T)((1 + u_W)²(1 + u_M)²·f|g| + η_W) + η_T
    (u unit roundoffs, η half the smallest subnormal, u_M = :func:`_matmul_input_rounding` for float32
    matmuls), and by Minkowski, with f ≤ (1 + 2⁻⁵³)·C'/(b + 10⁻⁶) and ‖g‖_p ≤ b:

        C' = (C − max(2η_W + 2η_T)·n^{1/p}) · (1 − 2a − 2⁻⁵⁰),   a = max(u_T + 2u_W + 2u_M) + 2⁻⁵²,

    n = Σ n_l (n^{1/p} = 1 at p = ∞; 2η is the smallest subnormal, itself a float). Then (1 + a + a²)(1 − 2a)
    < 1 covers the relative roundings, and the factor ≈ 2 on the η term and 2⁻⁵⁰ the float64 roundings of
    this formula. 0 if C is below the underflow term (nothing can be stored)."""
    u_m = _matmul_input_rounding()
    a, eta, n = 0.0, 0.0, 0
    for g_dt, t_dt, numel in parts:
        w_dt = _multiply_dtype(g_dt, t_dt)
        ft, fw = torch.finfo(t_dt), torch.finfo(w_dt)
        a = max(a, ft.eps / 2 + fw.eps + (2 * u_m if w_dt == torch.float32 else 0.0))
        eta = max(eta, ft.tiny * ft.eps + fw.tiny * fw.eps)  # smallest subnormals: 2η each (η_64 is not a float64)
        n += numel
    root = 1.0 if math.isinf(p) else float(n) ** (1.0 / p)
    a += 2.0**-52
    return max(0.0, (float(max_grad_norm) - eta * root) * (1.0 - 2.0 * a - 2.0**-50))


#: columns per chunk of :func:`clipped_sum`'s upcast of 16-bit gradients: B × chunk entries ≈ 2^20
_SUM_CHUNK_ELEMS = 1 << 20


def clipped_sum(factors: torch.Tensor, g: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    r"""Σ_i f_i g_i as a new tensor of ``dtype`` (shape g.shape[1:]), formed in W = :func:`_multiply_dtype`:
    f (float64) rounded once to W (values below 2·tiny_W flushed to 0, which only shrinks), g upcast exactly;
    16-bit g is upcast chunk by chunk (no full-size float32 copy). A batch of one stores fl_T(fl_W(f·g)):
    with f from :func:`stored_clip_bound`'s C' its ℓp norm is ≤ C."""
    w_dt = _multiply_dtype(g.dtype, dtype)
    f = factors.to(float64_device(factors.device)).double()
    f = to_device(torch.where(f < 2.0 * torch.finfo(w_dt).tiny, torch.zeros_like(f), f), g.device, w_dt)
    if g.dtype == w_dt:
        return torch.einsum("i,i...", f, g).to(dtype)
    flat = _flat(g)
    out = torch.empty(flat.shape[1], dtype=w_dt, device=g.device)
    step = max(1, _SUM_CHUNK_ELEMS // max(1, len(g)))
    for a in range(0, flat.shape[1], step):
        torch.mv(flat[:, a : a + step].to(w_dt).T, f, out=out[a : a + step])
    return out.view(g.shape[1:]).to(dtype)


def total_sensitivity(max_grad_norms: Union[float, Sequence[float]], p: float) -> float:
    r"""ℓp sensitivity of per-layer clipping (bounds C_l): ‖(C_l)_l‖_p = (Σ_l C_l^p)^{1/p} (max at p = ∞), rounded UP.

    The noise scale is σ times this value, so it must not fall below the exact norm: float64's vector norm of L
    non-negative terms is within (L + 4) ulps of it (the powers, any order of the sum, the root), so the relative
    margin max(10⁻¹², 2(L + 8)·2⁻⁵²) covers it at every L (10⁻¹², ≈ 4500 ulps, up to L ≈ 2240 layers; twice the
    bound above). A single bound and p = ∞ are exact."""
    if isinstance(max_grad_norms, (int, float)):
        return float(max_grad_norms)
    c = torch.tensor([float(x) for x in max_grad_norms], dtype=torch.float64)
    if math.isinf(p):
        return float(c.max())
    margin = max(1e-12, 2.0 * (c.numel() + 8) * 2.0 ** -52)
    return float(torch.linalg.vector_norm(c, ord=p)) * (1.0 + margin)
