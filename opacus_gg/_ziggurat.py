r"""Exact vectorised Ziggurat sampler for the Generalized Gaussian (private; use ``distribution.sample``).

Half-density g(x) = exp(-x^β/β), x ≥ 0 (β ≥ 1), N = 256 equal-area layers (Marsaglia & Tsang 2000;
table built once per β in float64 and cached). Layer 0 is the base strip [0, r] × [0, g(r)] plus the
tail x > r (pseudo-width X_0 = v/g(r)); layer i ≥ 1 is [0, X_i] × [G_i, G_i + v/X_i], X_N = 0 (r is
bisected so that the top layer reaches G ≥ 1, so all N regions have area exactly v and cover g).

One random word per draw (31 uniform bits from int32 ``random_``, 62 from int64): the low 9 bits pick
(layer, sign), the next M bits give u = k·2^-M on an exact lattice (M = 22 in float32, 52 in float64).
x = u·X_i is accepted at once when u < X_{i+1}/X_i (an exact lattice test, ≈ 98–99 % of draws). The
rest is resolved exactly in float64 on that small subset: the wedge by the vertical test y < g(x) with
a fresh float64 uniform y (failures are redrawn from scratch), the tail x > r by an Exp(rate r^{β-1})
proposal shifted to r, accepted with probability exp(-(x^β/β - r^β/β - r^{β-1}(x - r))) ≤ 1 (tangent
bound; h(x) = x^β/β is convex for β ≥ 1).

Two execution paths give the same distribution: on CPU the bulk runs in cache-sized chunks (random
words drawn per chunk, on one intra-op thread) and the rejected positions are found word by word
(8 mask bytes per int64); on accelerators it is one pass over the whole buffer, with the random range
given explicitly to ``random_``. The accelerator path can
be forced on CPU with :func:`opacus_gg._device.accelerator_path` (an internal switch for the tests).
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
from typing import Iterator, Optional, Tuple

import numpy as np
import torch
from scipy import special

from ._device import one_thread, uses_accelerator_path

LAYERS = 256
CHUNK = 1 << 17  # draws per CPU chunk: the chunk's scratch buffers (~1.7 MB) stay in cache
PIPELINE_MIN = 4 * CHUNK  # with ≥ 2 threads, from this size the random words are drawn on a second thread

_TABLES: dict = {}
_TENSORS: dict = {}


def table(beta: float) -> Tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
    """float64 (r, v, X[0..N], G[1..N-1], Gtop[1..N-1]) for exp(-x^β/β) (index 0 of G, Gtop is NaN)."""
    key = float(beta)
    if key in _TABLES:
        return _TABLES[key]
    n_layers = LAYERS
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
    _TABLES[key] = tab
    return tab


def _bits(work_dtype: torch.dtype, accel: bool):
    """(int dtype, right shift, bits of 1.0, uniform bits M, u-lattice factor, random_ upper bound).

    float32: a 31-bit word [0, 2^31) gives 9 index bits and M = 22 uniform bits placed as
    u = k·2^-23 ∈ [0, ½) (the factor 2 is folded into the widths). float64: on CPU the default int64
    ``random_`` gives 63 bits (shift 11); on accelerators ``random_(0, 2^62)`` gives 62 bits (shift 10):
    9 index bits, 1 unused, M = 52 bits."""
    if work_dtype == torch.float32:
        return torch.int32, 9, 0x3F800000, 22, 2.0, 2**31
    return torch.int64, (10 if accel else 11), 0x3FF0000000000000, 52, 1.0, 2**62


def _tensors(beta: float, scale: float, device, work_dtype):
    """Per-(layer, sign) tables of length 2N: signed scaled widths and fast-accept thresholds."""
    key = (float(beta), float(scale), str(device), work_dtype)
    if key in _TENSORS:
        return _TENSORS[key]
    r, v, xs, gs, gt = table(beta)
    mant, fac = _bits(work_dtype, False)[3:5]
    ratio = xs[1:] / xs[:-1]  # fast accept u·fac < X_{i+1}/X_i  <=>  k < ceil(ratio·2^M)
    thr = np.ceil(ratio * 2.0**mant) * 2.0**-mant / fac
    width = np.repeat(xs[:-1], 2) * np.tile([scale * fac, -scale * fac], LAYERS)
    tabs = (
        torch.tensor(width, dtype=work_dtype, device=device),
        torch.tensor(np.repeat(thr, 2), dtype=work_dtype, device=device),
    )
    if len(_TENSORS) > 64:
        _TENSORS.clear()
    _TENSORS[key] = tabs
    return tabs


def _lattice_tensors(beta: float, scale: float, work_dtype):
    """CPU tables by (layer, sign) index, in units of the lattice integer k: fast-accept thresholds
    K_i = ceil(X_{i+1}/X_i · 2^M) (k ≥ K_i is rejected) and signed widths W_i·2^-M' (x = k·W_i·2^-M')."""
    key = ("lattice", float(beta), float(scale), work_dtype)
    if key in _TENSORS:
        return _TENSORS[key]
    width, thr = _tensors(beta, scale, "cpu", work_dtype)
    mant, fac = _bits(work_dtype, False)[3:5]
    lattice = 2.0 ** -(mant + (1 if work_dtype == torch.float32 else 0))
    tabs = (
        (thr.double() / lattice).to(work_dtype),  # integers < 2^53: exact
        (width.double() * lattice).to(work_dtype),  # power-of-two scaling: exact
    )
    _TENSORS[key] = tabs
    return tabs


def tail(k: int, beta: float, r: float, generator: Optional[torch.Generator], device) -> torch.Tensor:
    """k i.i.d. float64 draws of X | X > r, density ∝ exp(-x^β/β): shifted-exponential rejection."""
    lam = r ** (beta - 1.0)
    h_r = r**beta / beta
    out = torch.empty(0, device=device, dtype=torch.float64)
    while out.numel() < k:
        m = 2 * (k - out.numel()) + 16
        e = torch.rand(m, generator=generator, device=device, dtype=torch.float64).neg_().log1p_().neg_()
        x = e.div_(lam).add_(r)
        logp = -(_pow(x, beta).div_(beta) - h_r - lam * (x - r))
        u = torch.rand(m, generator=generator, device=device, dtype=torch.float64)
        out = torch.cat([out, x[u < logp.clamp_(max=0.0).exp_()]])
    return out[:k]


def _fix_tables(beta: float, scale: float, device, work_dtype):
    """float64 tables by (layer, sign) index: u-to-x width, layer bottom height and span (NaN for
    the base layer, so that its vertical test always fails and sends it to the tail), signed scale."""
    key = ("fix", float(beta), float(scale), str(device), work_dtype)
    if key in _TENSORS:
        return _TENSORS[key]
    r, v, xs, gs, gt = table(beta)
    fac = _bits(work_dtype, False)[4]
    t = lambda a: torch.tensor(np.repeat(a, 2), dtype=torch.float64, device=device)  # noqa: E731
    sgn = torch.tensor([scale, -scale] * LAYERS, dtype=torch.float64, device=device)
    tabs = (t(xs[:-1] * fac), t(gs), t(gt - gs), sgn)
    _TENSORS[key] = tabs
    return tabs


def _fix(u, idx, beta, scale, generator, device, work_dtype) -> torch.Tensor:
    """Exact outcome (signed, scaled, float64) of the draws (u, idx) that missed the fast path."""
    r = table(beta)[0]
    width, g_lo, g_span, ssign = _fix_tables(beta, scale, device, work_dtype)
    x = u.to(torch.float64).mul_(width.index_select(0, idx))
    y = torch.rand(x.numel(), generator=generator, device=device, dtype=torch.float64)
    y.mul_(g_span.index_select(0, idx)).add_(g_lo.index_select(0, idx))
    # wedge: vertical test y < g(x) = exp(-x^β/β), x^β as exp(β·log x) (vectorised; pow is not);
    # always False in the base layer (NaN bounds), which sends it to the tail
    ok = y < _pow(x, beta).mul_(-1.0 / beta).exp_()
    res = x.mul_(ssign.index_select(0, idx))
    bad = _positions(~ok)
    if bad.numel():
        ib = idx.index_select(0, bad)
        base = (ib >> 1) == 0
        tl = bad.masked_select(base)
        if tl.numel():  # base layer beyond r: the tail, signed
            sg = ssign.index_select(0, ib.masked_select(base))
            res.index_copy_(0, tl, tail(tl.numel(), beta, r, generator, device).mul_(sg))
        redo = bad.masked_select(~base)
        if redo.numel():  # wedge rejections: fresh draws from scratch
            res.index_copy_(0, redo, sample(redo.numel(), beta, scale, generator, device, work_dtype).to(torch.float64))
    return res


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Indices of the True entries of a bool vector: numpy's vectorised search on the CPU path (~9× torch's
    ``nonzero`` here), ``nonzero`` on the accelerator path."""
    if uses_accelerator_path(mask.device):
        return mask.nonzero().flatten()
    return torch.from_numpy(np.flatnonzero(mask.numpy()))


def _pow(x: torch.Tensor, beta: float) -> torch.Tensor:
    """x^β for x ≥ 0 (a new tensor): exp(β·log x), vectorised (0 ↦ 0); x itself for β = 1."""
    if beta == 1.0:
        return x.clone()
    return torch.log(x).mul_(beta).exp_()


def _true_positions(mask: torch.Tensor) -> torch.Tensor:
    """Indices of the True entries of a bool vector whose length is a multiple of 8, for sparse masks:
    nonzero over int64 words (8 mask bytes each), then over the bytes of the words that are hit."""
    hit = mask.view(torch.int64).nonzero().flatten()
    if hit.numel() == 0:
        return hit
    row, col = mask.view(-1, 8).index_select(0, hit).nonzero(as_tuple=True)
    return hit.index_select(0, row).mul_(8).add_(col)


def sample(n: int, beta: float, scale: float, generator, device, work_dtype) -> torch.Tensor:
    """n i.i.d. GG(β, scale) draws (flat vector of ``work_dtype`` on ``device``) by the Ziggurat above."""
    device = torch.device(device)
    accel = uses_accelerator_path(device)
    pipelined = torch.get_num_threads() >= 2 and n >= PIPELINE_MIN
    with contextlib.nullcontext() if device.type != "cpu" else one_thread():
        if not accel:
            return _sample_cpu(n, beta, scale, generator, work_dtype, pipelined)
        return _sample(n, beta, scale, generator, device, work_dtype, accel)


def _sample_cpu(n: int, beta: float, scale: float, generator, work_dtype, pipelined: bool = False) -> torch.Tensor:
    """CPU path: chunks of ``CHUNK`` draws whose scratch stays in cache, random words from ``random_``'s
    default range; the lattice integer k itself is converted to float (x = k exactly, k < 2^52), so that
    the threshold test is k ≥ K_i and x = k·(W_i·2^-M') is one rounded product, as on the accelerator path
    (W_i·2^-M' is exact: a power-of-two scaling). The fast-accept compare and the search for the few
    rejected positions run in numpy (vectorised; torch's bool-output compare is ~4× slower here).

    ``pipelined`` (≥ 2 torch threads): a second thread draws the chunks' random words, in chunk order,
    while this one transforms the previous chunk. The generator is used in the same order either way,
    so the output is bit-identical to the serial path."""
    thr_k, width_k = _lattice_tensors(beta, scale, work_dtype)
    int_dtype, shift, _, mant, fac, _ = _bits(work_dtype, False)
    out = torch.empty(n, dtype=work_dtype)
    if n == 0:
        return out
    c = min(n, CHUNK)
    idx_buf = torch.empty(c, dtype=int_dtype)
    w_buf = torch.empty(c, dtype=work_dtype)
    m_buf = np.empty(c, dtype=np.bool_)
    rej_pos, rej_k, rej_idx = [], [], []
    for a, k in _random_chunks(n, c, int_dtype, generator, pipelined):
        m = len(k)
        x, idx, w = out[a : a + m], idx_buf[:m], w_buf[:m]
        torch.bitwise_and(k, 2 * LAYERS - 1, out=idx)
        k.bitwise_right_shift_(shift)
        x.copy_(k)
        torch.index_select(thr_k, 0, idx, out=w)
        mask = m_buf[:m]
        np.greater_equal(x.numpy(), w.numpy(), out=mask)
        r = torch.from_numpy(np.flatnonzero(mask))
        if r.numel():
            rej_pos.append(r + a)
            rej_k.append(k.index_select(0, r))
            rej_idx.append(idx.index_select(0, r))
        torch.index_select(width_k, 0, idx, out=w)
        x.mul_(w)
    if rej_pos:
        lattice = 2.0 ** -(mant + (1 if work_dtype == torch.float32 else 0))
        u = torch.cat(rej_k).to(torch.float64).mul_(lattice).to(work_dtype)  # u = k·2^-M' exactly
        ix = torch.cat(rej_idx)
        fixed = _fix(u, ix, beta, scale, generator, torch.device("cpu"), work_dtype).to(work_dtype)
        out.index_copy_(0, torch.cat(rej_pos), fixed)
    return out


def _random_chunks(n: int, c: int, int_dtype, generator, pipelined: bool) -> Iterator[Tuple[int, torch.Tensor]]:
    """(offset, words) for the chunks [a, a + c) of [0, n), in order; words = ``random_`` over a reused
    buffer (valid until the next item). Pipelined: drawn ahead by a producer thread into 3 rotating buffers
    (torch releases the GIL in ``random_``), handed over through queues; its errors are re-raised here."""
    spans = [(a, min(c, n - a)) for a in range(0, n, c)]
    if not pipelined:
        buf = torch.empty(c, dtype=int_dtype)
        for a, m in spans:
            yield a, buf[:m].random_(generator=generator)
        return
    free: queue.Queue = queue.Queue()
    ready: queue.Queue = queue.Queue()
    stop = threading.Event()
    for _ in range(3):
        free.put(torch.empty(c, dtype=int_dtype))

    def produce() -> None:
        try:
            for a, m in spans:
                buf = free.get()
                if stop.is_set():
                    return
                ready.put((a, buf, buf[:m].random_(generator=generator)))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            ready.put(e)

    worker = threading.Thread(target=produce, name="opacus_gg-ziggurat-words", daemon=True)
    worker.start()
    try:
        for _ in spans:
            item = ready.get()
            if isinstance(item, BaseException):
                raise item
            a, buf, words = item
            yield a, words
            free.put(buf)
    finally:
        stop.set()
        free.put(None)  # wakes the producer if it waits for a buffer
        worker.join()


def _sample(n: int, beta: float, scale: float, generator, device, work_dtype, accel: bool) -> torch.Tensor:
    width, thr = _tensors(beta, scale, device, work_dtype)
    int_dtype, shift, one_bits, _, _, hi = _bits(work_dtype, accel)
    out = torch.empty(n, device=device, dtype=work_dtype)
    if n == 0:
        return out
    bits = out.view(int_dtype)
    c = n if accel else min(n, CHUNK)  # accelerators: one pass, rejected positions found in one go
    c8 = -(-c // 8) * 8
    idx_buf = torch.empty(c, device=device, dtype=int_dtype)
    w_buf = torch.empty(c, device=device, dtype=work_dtype)
    m_buf = torch.zeros(c8, device=device, dtype=torch.bool)  # padded to whole int64 words (pad stays False)
    rej_pos, rej_u, rej_idx = [], [], []
    for a in range(0, n, c):
        m = min(c, n - a)
        b, x = bits[a : a + m], out[a : a + m]
        idx, w, mask = idx_buf[:m], w_buf[:m], m_buf[:m]
        if accel:  # ask for the non-negative range explicitly rather than rely on the device's default one
            b.random_(0, hi, generator=generator)
        else:  # CPU default: [0, 2^31) for int32, [0, 2^63) for int64; drawn per chunk, while in cache
            b.random_(generator=generator)
        torch.bitwise_and(b, 2 * LAYERS - 1, out=idx)
        b.bitwise_right_shift_(shift).bitwise_or_(one_bits)
        x.sub_(1.0)  # u = k·2^-M in [0, 1), exact
        torch.index_select(thr, 0, idx, out=w)
        torch.ge(x, w, out=mask)
        if m < c8:
            m_buf[m:].zero_()
        rej = mask.nonzero().flatten() if accel else _true_positions(m_buf)
        if rej.numel():
            rej_pos.append(rej + a)
            rej_u.append(x.index_select(0, rej))
            rej_idx.append(idx.index_select(0, rej))
        torch.index_select(width, 0, idx, out=w)
        x.mul_(w)
    if rej_pos:
        pos = torch.cat(rej_pos) if len(rej_pos) > 1 else rej_pos[0]
        u = torch.cat(rej_u) if len(rej_u) > 1 else rej_u[0]
        ix = torch.cat(rej_idx) if len(rej_idx) > 1 else rej_idx[0]
        out[pos] = _fix(u, ix, beta, scale, generator, device, work_dtype).to(work_dtype)
    return out
