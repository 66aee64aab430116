r"""Per-coordinate Rényi moments of the GG pair and the Poisson-subsampled RDP of one equal spread.

Units: noise scale 1, one-coordinate shift ``a``; P = GG(a), Q = GG(0) with density ∝ exp(-|x|^β/β). The
one-coordinate privacy loss is ℓ = log(dP/dQ) and its moments are

    M(j) = E_Q[e^{jℓ}] = ∫ p^j q^{1-j} dx = exp((j-1)·D_j(P‖Q))      (M(0) = M(1) = 1),

computed in log space by an enclosing quadrature (:func:`log_moments_upper`: Gauss–Legendre with a rigorous
analytic error bound, or a monotone bound, on every subinterval between 0, a and the integrand's peak, and
closed-form tail bounds), so the result is an upper bound, never an estimate. By reflection x → a - x,
D_α(P‖Q) = D_α(Q‖P). A shift spread equally over k coordinates (``‖μ‖_p = 1/noise_multiplier``, each
coordinate moving by a_k) has M_k(j) = M(j; a_k)^k.

Poisson subsampling with rate q, integer order α ≥ 2:

* remove (exact):  E_Q[(1-q+qe^ℓ)^α] = Σ_j C(α,j)(1-q)^{α-j} q^j M(j);
* add (upper bound), the smaller of
  - Jensen (convexity of x^{1-α}):  E_Q[(1-q+qe^ℓ)^{1-α}] ≤ (1-q) + q·M̄(α), M̄(α) = ∫Q^αP^{1-α} the reverse
    moment, = M(α) for the symmetric pairs of this library only (GG shifts, their products; false for a general
    pair: docs/accounting.md, Lemma 6),
  - Taylor with Lagrange remainder (f(y) = (1+y)^{1-α}, y = q(e^ℓ-1) ≥ -q, f'' ≤ f''(-q)):
    E_Q[(1-q+qe^ℓ)^{1-α}] ≤ 1 + C(α,2)(1-q)^{-α-1} q² χ², with χ² = M(2) - 1.

Used by the proven bound over the ℓp ball (:mod:`.ball_rdp`), the prv_accountant variable
(:mod:`.prv_variable`) and the RDP companion (:mod:`opacus_gg.companions.rdp`).
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy import special

from ..validation import validate_beta, validate_clip_norm_p, validate_positive, validate_sample_rate
from .shapes import per_coordinate_shift

__all__ = ["DEFAULT_ORDERS", "log_moment", "log_moments_upper", "renyi_divergence", "subsampled_rdp",
           "subsampled_rdp_from_log_moments"]

DEFAULT_ORDERS: List[int] = list(range(2, 65)) + [80, 96, 128, 160, 192, 256]
_LOG_INF = 1e8  # log-moments beyond this are treated as +inf (the order is useless anyway)


def _log_z(beta: float) -> float:
    """log of the GG(β, 1) normaliser 2 β^{1/β} Γ(1 + 1/β)."""
    return math.log(2.0) + math.log(beta) / beta + special.gammaln(1.0 + 1.0 / beta)


#: Gauss–Legendre rule of each subinterval and the Bernstein ellipse parameter of its error bound
_GL_N = 16
_GL_T, _GL_W = np.polynomial.legendre.leggauss(_GL_N)
_RHO = 2.9
#: |I − Q_n| ≤ _GL_C · sup_{E_ρ}|f| · (half-width) (Trefethen, ATAP Thm 19.3: (64/15) ρ^{−2n}/(ρ² − 1))
_GL_C = 64.0 / 15.0 * _RHO ** (-2 * _GL_N) / (_RHO ** 2 - 1.0)
_A_RHO = 0.5 * (_RHO + 1.0 / _RHO)  # the ellipse's semi-axes, in half-widths
_B_RHO = 0.5 * (_RHO - 1.0 / _RHO)
_GRADE = 3.0  # subintervals [δ, 3δ] towards a branch point: the ellipse stays clear of it (needs ratio < 3.7)
_GRADE_LEVELS = 16  # 3^{-16} ≈ 2.3e-8 of a piece is left to the crude bound h·sup f next to 0 and a (then refined)
_LEVELS = _GRADE ** -np.arange(_GRADE_LEVELS, 0, -1.0)  # 3^{-16} … 3^{-1}, ascending
#: initial subdivision of a piece [p, q] (as fractions of q − p), graded towards p and/or q when they are 0 or a
_FRACTIONS = {(lo, hi): np.concatenate([[0.0], _LEVELS if lo else [], [0.5], (1.0 - _LEVELS[::-1]) if hi else [], [1.0]])
              for lo in (False, True) for hi in (False, True)}
_TAIL_MARGIN = 60.0  # tails cut where the integrand is below e^{−60} of its peak (then bounded in closed form)
_EPS = 2.0 ** -52
_MAX_INTERVALS = 1500  # a shift whose bound is still loose with this many subintervals keeps it (valid, looser)
_MAX_ROUNDS = 40  # refinement rounds (each halves the loose subintervals of every shift still loose)
_NODE_ROWS = 512  # subintervals whose node values are computed together (16 nodes each: 64 KiB per array)


_moment_cache: Dict[Tuple[float, float, float, float], float] = {}


def _peak(j: float, a: float, beta: float) -> float:
    """The maximiser x* of g (module doc of :func:`log_moments_upper`); inf where it is beyond float range."""
    if j > 1.0:
        if beta == 1.0:
            return a
        r = ((j - 1.0) / j) ** (1.0 / (beta - 1.0))
        return a / (1.0 - r) if r < 1.0 else math.inf
    lo, hi = 0.0, a  # 0 < j < 1: g concave, g' decreasing on [0, a] from > 0 to < 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if j * (a - mid) ** (beta - 1.0) - (1.0 - j) * mid ** (beta - 1.0) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def cached_split(shifts: np.ndarray, cache: dict, key) -> Tuple[np.ndarray, list]:
    """(values, indices still to compute) for a batch of shifts: 0 where a = 0, the cached value where ``cache``
    holds ``key(i, a)``, and the index i otherwise (the caller fills those in)."""
    out = np.zeros(shifts.shape)
    todo = []
    for i, a in enumerate(shifts.tolist()):
        if a == 0.0:
            continue
        k = key(i, a)
        if k in cache:
            out[i] = cache[k]
        else:
            todo.append(i)
    return out, todo


def log_moments_upper(j, shifts: Sequence[float], beta: float, epsrel) -> np.ndarray:
    r"""Upper bounds on log M(j; a) = log ∫ e^{g(x)} dx − log Z for every shift a in ``shifts`` (one batch),
    g(x) = −(j|x − a|^β + (1 − j)|x|^β)/β, j > 0: enclosures, not estimates (docs/accounting.md, "The moment
    quadrature encloses"). ``epsrel`` (scalar or per shift): the bounds stop refining once within it. ``j``: one
    order, or one per shift (several orders in one batch: each shift's value is the one it gets alone, as every
    operation on a subinterval is elementwise and each shift's subintervals keep their order).

    g is unimodal (peak x* = a/(1 − r), r = ((j−1)/j)^{1/(β−1)}, for j > 1; the root of g' in [0, a] for j < 1)
    and between the breakpoints 0, a, x* each piece is one analytic function ((±z)^β, (±(z − a))^β). On each
    subinterval [c − h/2, c + h/2]: Gauss–Legendre with 16 nodes plus (64/15)·M·ρ^{−32}/(ρ² − 1)·(h/2), M ≥
    sup|e^{g}| on the Bernstein ellipse E_ρ (ρ = 2.9; Trefethen, ATAP Thm 19.3), with Re g(x + iv) ≤ g(x) +
    v²/2·sup|g''| (g' is real on the axis), sup g on the ellipse's real extent at the clipped peak (g unimodal)
    and sup|g''| ≤ |g''(c)| + radius·sup|g'''| over the ellipse's bounding box (|g'''| ≤ (β−1)|β−2|(j|w_a|^{β−3}
    + |1−j||w_0|^{β−3})); or the monotone bound h·e^{sup g} (g is monotone on each piece), wherever smaller and
    wherever the ellipse would reach 0 or a (a branch point, or the end of the piece's analytic function).
    Subintervals are graded (ratio 3) towards 0 and a, then split where the bounds are loose. Tails beyond −L
    and R: g ≤ −|x|^β/β (x < 0); g ≤ −x^β/(2β) for x ≥ 2βja (j > 1, from (x − a)^β ≥ x^β − βa x^{β−1}), or
    −(x − a)^β/β (j < 1); integrated in closed form with x^β ≥ X^{β−1}x. Every value e^{g − g*} is raised by
    its own floating-point error (8 ulps of its operands, and the node's rounding × |g'|), the sums by n ulps.
    """
    shifts = np.atleast_1d(np.asarray(shifts, dtype=np.float64))
    eps_arr = np.broadcast_to(np.asarray(epsrel, dtype=np.float64), shifts.shape)
    j_arr = np.broadcast_to(np.asarray(j, dtype=np.float64), shifts.shape)
    log_z = _log_z(beta)
    sl, jl, el, bf = shifts.tolist(), j_arr.tolist(), eps_arr.tolist(), float(beta)  # Python floats, read per shift
    out, todo = cached_split(shifts, _moment_cache, lambda i, a: (jl[i], a, bf, el[i]))
    todo = [i for i in todo if jl[i] != 1.0]  # M(1) = 1
    if not todo:
        return out
    pieces, setups = [], {}
    for i in todo:
        a, j = sl[i], jl[i]
        x_star = _peak(j, a, beta)
        g_star = -(j * abs(x_star - a) ** beta + (1.0 - j) * abs(x_star) ** beta) / beta if math.isfinite(x_star) \
            else math.inf
        if not math.isfinite(g_star) or g_star - log_z > _LOG_INF:
            out[i] = math.inf
            continue
        # the peak is known to ~1e-14 relative: g' there is ~0, bounded by g1(x*) (the slack of every sup g)
        g1 = j * (abs(x_star - a) + 1e-14 * abs(x_star)) ** (beta - 1.0) + abs(1.0 - j) * abs(x_star) ** (beta - 1.0)
        slack = 1e-14 * (abs(x_star) + a) * g1 * (1.0 + 1e-14) + 1e-15 * abs(g_star)
        margin = max(_TAIL_MARGIN + g_star, 1.0)
        if j > 1.0:
            R = max(x_star, a, 2.0 * beta * j * a, 1.0, (2.0 * beta * margin) ** (1.0 / beta))
            tail = 2.0 * beta / R ** (beta - 1.0) * math.exp(-R ** beta / (2.0 * beta) - g_star)
        else:
            R = a + max(1.0, (beta * margin) ** (1.0 / beta))
            tail = beta / (R - a) ** (beta - 1.0) * math.exp(-(R - a) ** beta / beta - g_star)
        L = max(1.0, (beta * margin) ** (1.0 / beta))
        tail += beta / L ** (beta - 1.0) * math.exp(-L ** beta / beta - g_star)
        setups[i] = (x_star, g_star, slack, tail)
        edges = [-L] + sorted({0.0, a, x_star}) + [R]
        pieces += [(p, q, (p in (0.0, a), q in (0.0, a)), i) for p, q in zip(edges[:-1], edges[1:]) if q > p]
    if not pieces:
        for i in todo:
            _moment_cache[(jl[i], sl[i], bf, el[i])] = out[i]
        return out
    xl, xr, owner = _graded_pieces(pieces)
    n = len(shifts)
    base = np.zeros((5, n))
    base[:, list(setups)] = np.array([(sl[i], x_star, g_star, slack, jl[i])
                                      for i, (x_star, g_star, slack, _) in setups.items()]).T
    params = _row_parameters(base)
    # every order ≥ 1 (the ball's duals): every call's rows take the path without abs (read once per batch)
    signed = True if min(jl[i] for i in setups) >= 1.0 else None
    tot, cnt = refine_enclosure(xl, xr, owner, n, eps_arr,
                                lambda l, r, o: _subinterval_bounds(l, r, np.take(params, o, axis=1), beta, signed))
    tot, cnt = tot.tolist(), cnt.tolist()
    for i, (x_star, g_star, slack, tail) in setups.items():
        # round-off of the sums of positive terms: ≤ (number of terms) ulps each for the 16-node dot products and
        # the per-shift sum over subintervals (np.bincount adds in sequence), plus the tails
        total = (tot[i] + tail) * (1.0 + 2.0 * (cnt[i] + _GL_N + 4) * _EPS)
        if not math.isfinite(total):
            out[i] = math.inf
            continue
        val = g_star - log_z + math.log(total)
        out[i] = val + 4.0 * _EPS * (abs(g_star) + abs(log_z) + abs(val)) + 1e-300
    for i in todo:
        _moment_cache[(jl[i], sl[i], bf, el[i])] = out[i]
    return out


def _row_parameters(base: np.ndarray) -> np.ndarray:
    """The rows a, x*, g*, slack, j of ``base`` (one column per shift) and, computed once per shift, 1 − j, |j|,
    |1 − j|, |g*|: the parameters :func:`_subinterval_bounds` reads per subinterval (gathered by owner; each the float
    the subinterval's row would compute from its own copy: elementwise)."""
    params = np.empty((9, base.shape[1]))
    params[:5] = base
    np.subtract(1.0, base[4], out=params[5])
    np.abs(base[4], out=params[6])
    np.abs(params[5], out=params[7])
    np.abs(base[2], out=params[8])
    return params


def _graded_pieces(pieces: list) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(xl, xr, owner) of the initial subintervals of ``pieces`` [(p, q, graded ends, owner)], in their order: the
    points p + (q − p)·_FRACTIONS[graded ends], the last one q (all pieces of one kind at once: the same floats as
    one piece at a time, every operation elementwise)."""
    kinds: Dict[tuple, list] = {}
    for k, piece in enumerate(pieces):
        kinds.setdefault(piece[2], []).append(k)
    XL, XR, own, seq = [], [], [], []
    for kind, ks in kinds.items():
        p, q, owner = (np.array([pieces[k][f] for k in ks]) for f in (0, 1, 3))
        pts = p[:, None] + (q - p)[:, None] * _FRACTIONS[kind][None, :]
        pts[:, -1] = q
        m = pts.shape[1] - 1
        XL.append(pts[:, :-1].ravel())
        XR.append(pts[:, 1:].ravel())
        own.append(np.repeat(owner, m))
        seq.append(np.repeat(ks, m))
    order = np.argsort(np.concatenate(seq), kind="stable")  # back to the pieces' order, each piece's in its own
    return np.concatenate(XL)[order], np.concatenate(XR)[order], np.concatenate(own)[order]


def refine_enclosure(xl: np.ndarray, xr: np.ndarray, owner: np.ndarray, n: int, epsrel: np.ndarray,
                     bounds: Callable[[np.ndarray, np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]]):
    r"""(Σ upper, number of subintervals) per owner 0 … n−1 of a cover of each owner's integral by subintervals
    [xl, xr]: ``bounds(xl, xr, owner)`` gives (upper, lower) per subinterval (upper a rigorous bound, lower only a
    refinement target); while an owner's Σ(upper − lower) exceeds ``epsrel`` × Σ upper (and it has fewer than
    1500 subintervals, at most 40 rounds), its subintervals whose gap exceeds a quarter of its share are halved,
    and so are those whose bound is +∞ (a crude bound that overflowed on a wide subinterval). Any cover gives a
    valid sum: the splitting only tightens it.

    Each owner's sums are ``np.bincount``'s, which adds an owner's entries in array order; the subintervals of a
    round are those of the round before less the ones split (in their order), then the left halves, then the right
    halves. The arrays only grow: a subinterval split, or one whose owner has settled, stays where it is, moved to
    the unused bin n (split) or left in a bin that is no longer read (settled owner: count 0, never loose), and
    the halves are appended; so each read bin adds the same entries in the same order as arrays rebuilt every
    round would. The dead entries are dropped (the order kept) once they are half of the arrays."""
    out_tot, out_cnt = np.zeros(n), np.zeros(n, dtype=np.int64)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        upper, lower = bounds(xl, xr, owner)
        size = xl.size
        cap = 2 * size + 64
        XL, XR, OW, UP, GP = (np.empty(cap), np.empty(cap), np.empty(cap, dtype=owner.dtype), np.empty(cap),
                              np.empty(cap))
        XL[:size], XR[:size], OW[:size], UP[:size] = xl, xr, owner, upper
        np.subtract(upper, lower, out=GP[:size])  # the gap of each subinterval, once
        cnt = np.bincount(owner, minlength=n + 1)  # bin n: the subintervals split (count 0: never loose)
        eps = np.append(epsrel, 0.0)
        dead = 0
        for _ in range(_MAX_ROUNDS):
            ow, up, gap = OW[:size], UP[:size], GP[:size]
            tot = np.bincount(ow, up, minlength=n + 1)
            share = eps * tot
            at_inf, live = tot == np.inf, cnt > 0  # (each read twice below)
            # live (cnt > 0): an owner settled earlier (count 0) is never loose, as its empty sums were not
            loose = ((np.bincount(ow, gap, minlength=n + 1) > share) | at_inf) & (cnt < _MAX_INTERVALS) & live
            # per owner, then read per subinterval: the same operations on the same operands; the threshold NaN
            # where the owner is not loose (a comparison with NaN is false), so one gather gives loose & (gap > it),
            # and the (rare) infinite bounds read loose themselves: only a loose owner's sum is +∞ then (a sum with
            # a NaN is NaN, never loose), so they are looked for only where one is
            split = gap > np.where(loose, 0.25 * share / cnt, np.nan)[ow]
            if (loose & at_inf).any():
                where_inf = np.flatnonzero(up == np.inf)
                split[where_inf] = loose[ow[where_inf]]
            split = np.flatnonzero(split)  # as indices, in their order
            halved = ow[split]
            n_split = np.bincount(halved, minlength=n + 1)
            busy = n_split > 0
            done = ~busy & live
            np.copyto(out_tot, tot[:n], where=done[:n])
            np.copyto(out_cnt, cnt[:n], where=done[:n])
            if not halved.size:
                return out_tot, out_cnt
            dead += int(np.sum(cnt[done])) + split.size
            cnt = np.where(busy, cnt + n_split, 0)  # the next round's count: each split adds one subinterval
            left, right = XL[split], XR[split]
            ow[split] = n
            if 2 * dead > size:  # drop the dead entries, in order (each read bin: the same entries, the same order)
                keep = np.flatnonzero(cnt[ow] > 0)
                size = keep.size
                for arr in (XL, XR, OW, UP, GP):
                    arr[:size] = arr[keep]
                dead = 0
            k = split.size
            if size + 2 * k > cap:
                cap = 2 * (size + 2 * k)
                XL, XR, OW, UP, GP = (np.concatenate([arr[:size], np.empty(cap - size, dtype=arr.dtype)])
                                      for arr in (XL, XR, OW, UP, GP))
            nl, nr, no = XL[size: size + 2 * k], XR[size: size + 2 * k], OW[size: size + 2 * k]
            nl[:k] = left
            np.add(left, right, out=nl[k:])
            nl[k:] *= 0.5  # the midpoints 0.5·(left + right)
            nr[:k] = nl[k:]
            nr[k:] = right
            no[:k] = halved
            no[k:] = halved
            nu, nlo = bounds(nl, nr, no)
            UP[size: size + 2 * k] = nu
            np.subtract(nu, nlo, out=GP[size: size + 2 * k])
            size += 2 * k
        # _MAX_ROUNDS rounds: the owners split in the last one sum their subintervals as they are now
        np.copyto(out_tot, np.bincount(OW[:size], UP[:size], minlength=n + 1)[:n], where=busy[:n])
        np.copyto(out_cnt, cnt[:n], where=busy[:n])
        return out_tot, out_cnt


def gauss_legendre_nodes(xl: np.ndarray, xr: np.ndarray):
    r"""(nodes, half-widths, ellipse box) of the 16-node Gauss–Legendre rule on each subinterval [xl, xr]:
    nodes x (rows), hw = (xr − xl)/2, and the bounding box [ext_lo, ext_hi] × [−V, V] of its Bernstein ellipse
    E_ρ (ρ = 2.9): ext = c ∓ ½(ρ + 1/ρ)·hw, V = ½(ρ − 1/ρ)·hw."""
    c, hw, ext_lo, ext_hi, V = _gauss_legendre_box(xl, xr)
    return _gauss_legendre_points(c, hw), hw, ext_lo, ext_hi, V


def _gauss_legendre_box(xl: np.ndarray, xr: np.ndarray):
    """(centres c, half-widths hw, ext_lo, ext_hi, V) of :func:`gauss_legendre_nodes`, without the nodes."""
    c = 0.5 * (xl + xr)
    hw = 0.5 * (xr - xl)
    a_hw = _A_RHO * hw  # once for both ends (the same product)
    return c, hw, c - a_hw, c + a_hw, _B_RHO * hw


def _gauss_legendre_points(c: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """The nodes of :func:`gauss_legendre_nodes` (rows: subintervals of centre c, half-width hw), elementwise."""
    return c[:, None] + hw[:, None] * _GL_T[None, :]


def _gauss_legendre_points_t(c: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """:func:`_gauss_legendre_points` transposed, node k of subinterval i at [k, i] (a row's parameters then
    broadcast along the contiguous axis), each the same float c + hw·t_k."""
    x = _GL_T[:, None] * hw
    x += c
    return x


def gauss_legendre_bounds(hw: np.ndarray, values: np.ndarray, log_sup: np.ndarray, ok: np.ndarray,
                          crude: np.ndarray, crude_lower=0.0):
    r"""(upper, lower) on ∫ f over each subinterval from f's values at the nodes of :func:`gauss_legendre_nodes`
    (each already rounded up) and log_sup ≥ log sup_{E_ρ} |f| (f analytic inside E_ρ where ``ok``):
    |∫ f − hw·Σ w_k f(x_k)| ≤ (64/15)·ρ^{−32}/(ρ² − 1)·sup_{E_ρ}|f|·hw (Trefethen, ATAP Thm 19.3); upper is the
    smaller of that and ``crude`` (a bound of the caller's, the only one where not ``ok``), lower ≥ 0 only a
    refinement target: GL minus its error bound where ``ok``, else ``crude_lower`` (the caller's lower end of the
    integral there, 0 by default)."""
    gl = hw * (values @ _GL_W)
    err = _GL_C * np.exp(log_sup) * hw
    ok = ok & np.isfinite(err)
    return np.where(ok, np.minimum(gl + err, crude), crude), np.where(ok, np.maximum(gl - err, 0.0), crude_lower)


def _subinterval_bounds(xl: np.ndarray, xr: np.ndarray, prm: np.ndarray, beta: float,
                        signed: Optional[bool] = None):
    r"""(upper, lower) on ∫_{xl}^{xr} e^{g − g*} per subinterval (``prm`` rows: a, x*, g*, slack, j, 1 − j, |j|,
    |1 − j|, |g*| per subinterval, :func:`_row_parameters` gathered by owner): upper =
    min(GL + its error bound, h·e^{sup g − g*}) (GL only where the ellipse avoids 0 and a), lower = GL − error bound
    (only a refinement target). ``signed``: True where the caller knows every row's j ≥ 1 (else read from the rows)."""
    a, x_star, g_star, slack, c_a, c_0, abs_a, abs_0, abs_g = prm

    def g(x, a):
        return -(c_a * np.abs(x - a) ** beta + c_0 * np.abs(x) ** beta) / beta

    c, hw, ext_lo, ext_hi, V = _gauss_legendre_box(xl, xr)  # the nodes: below, on the rows that read them
    h = (xr - xl) * (1.0 + 2 * _EPS)

    # the ellipse avoids 0 and a (its box [ext_lo, ext_hi] × [−V, V] does: xl, xr finite, so no NaN): Gauss–Legendre
    # there, the crude bound elsewhere; there the distances of the box from a and 0 (min; max where read: β ≥ 3)
    ok = ((a < ext_lo) | (ext_hi < a)) & ((0.0 < ext_lo) | (ext_hi < 0.0))
    ua, va, u0, v0 = np.abs(ext_lo - a), np.abs(ext_hi - a), np.abs(ext_lo), np.abs(ext_hi)
    da_lo, d0_lo = np.minimum(ua, va), np.minimum(u0, v0)
    if beta >= 3.0:
        da_hi, d0_hi = np.hypot(np.maximum(ua, va), V), np.hypot(np.maximum(u0, v0), V)
    # node values only on the rows that read them (0 on the others: their GL sum is not read, and each row's sum is
    # its own), in blocks of rows that stay in cache; each operation is one of exp(g − g* + err) as written in
    # the comments (elementwise, the same floats: fl(−u − v) = −fl(u + v) and |fl(u·t)| = fl(|u|·t) for t ≥ 0,
    # rounding being symmetric)
    values = np.zeros((c.size, _GL_N))
    rows = np.nonzero(ok)[0]
    scale = 1.0 + 1.0 / beta
    # j ≥ 1 on every row (the integer orders): n_a ≥ 0 and n_0 ≤ 0, so |n_a·t| = n_a·t and n_0·t = −(|n_0|·t) (t ≥ 0)
    if signed is None:
        signed = bool(np.all(c_a >= 0.0)) and bool(np.all(c_0 <= 0.0))
    for k in range(0, rows.size, _NODE_ROWS):
        b = rows[k: k + _NODE_ROWS]
        xb = _gauss_legendre_points_t(c[b], hw[b])  # the block's nodes, transposed
        t_0 = np.abs(xb)
        t_a = np.subtract(xb, a[b], out=xb)
        np.abs(t_a, out=t_a)
        pa, p0 = t_a ** beta, t_0 ** beta
        # floating-point error of g − g* at each node: its operands (8 ulps) and the node's own rounding (× |g'|):
        # err = 8ε·((|n_a||x − a|^β + |n_0||x|^β)(1 + 1/β) + |g*| + |x|·g1), g1 = |n_a||x − a|^{β−1} + |n_0||x|^{β−1}
        g1 = t_a ** (beta - 1.0)
        g1 *= abs_a[b]
        g1_0 = t_0 ** (beta - 1.0)
        abs_0b = abs_0[b]
        g1_0 *= abs_0b
        g1 += g1_0
        g1 *= t_0
        pa *= c_a[b]  # n_a·|x − a|^β
        if signed:
            p0 *= abs_0b  # |n_0||x|^β = −n_0|x|^β
            w = np.subtract(pa, p0, out=t_0)  # (t_0 read for the last time above)
        else:
            p0 *= c_0[b]  # n_0|x|^β
            w = np.add(pa, p0, out=t_0)
        w /= beta
        w += g_star[b]  # −(g − g*), g = −(n_a|x − a|^β + n_0|x|^β)/β
        if not signed:
            np.abs(pa, out=pa)
            np.abs(p0, out=p0)
        pa += p0
        pa *= scale
        pa += abs_g[b]
        pa += g1
        pa *= 8 * _EPS  # err
        pa -= w  # g − g* + err
        values[b] = np.exp(pa, out=pa).T
    # sup g on the ellipse's real extent and on the subinterval (g monotone on each piece: an end or the peak): g at
    # the peak clipped to each, both in one array (np.clip's floats: no NaN)
    x_c = np.empty((2, c.size))
    np.minimum(np.maximum(x_star, ext_lo, out=x_c[0]), ext_hi, out=x_c[0])
    np.minimum(np.maximum(x_star, xl, out=x_c[1]), xr, out=x_c[1])
    sup_real, sup_sub = g(x_c, a) + slack
    # sup |g''| over the box: |g''(c)| (real, keeps the cancellation) + radius · sup |g'''| (needs none)
    g2_c = (beta - 1.0) * np.abs(c_a * np.abs(c - a) ** (beta - 2.0) + c_0 * np.abs(c) ** (beta - 2.0))
    if beta >= 3.0:  # (|n_a|, |n_0|, |g*|: the arrays above, the same floats)
        g3 = (beta - 1.0) * (beta - 2.0) * (abs_a * da_hi ** (beta - 3.0) + abs_0 * d0_hi ** (beta - 3.0))
    else:
        g3 = (beta - 1.0) * abs(beta - 2.0) * (abs_a * da_lo ** (beta - 3.0) + abs_0 * d0_lo ** (beta - 3.0))
    g2 = g2_c * (1.0 + 1e-12) + np.hypot(_A_RHO * hw, V) * g3
    crude = h * np.exp(sup_sub - g_star + 8 * _EPS * (np.abs(sup_sub) + abs_g))
    return gauss_legendre_bounds(hw, values, sup_real + 0.5 * V * V * g2 - g_star, ok, crude)


def clear_moment_cache() -> None:
    """Forget every cached moment bound (the next call is cold)."""
    _moment_cache.clear()


def log_moment(j: float, a: float, beta: float, *, epsrel: float = 1e-11) -> float:
    r"""log M(j) = log ∫ p^j q^{1-j} dx for P = GG(a), Q = GG(0), scale 1 (= (j-1)·D_j(P‖Q)).

    An upper bound (:func:`log_moments_upper`, an enclosing quadrature), within ``epsrel`` of M(j) where the
    analytic error bounds reach it (they do to ~1e-13); β = 2 closed form j(j-1)a²/2 (the tests' reference).
    """
    beta = validate_beta(beta)
    j = float(j)
    if not math.isfinite(j) or j < 0:
        raise ValueError(f"order j must be a finite number ≥ 0, got {j!r}")
    return float(log_moments_upper(j, [abs(float(a))], beta, float(epsrel))[0])


def renyi_divergence(alpha: float, a: float, beta: float) -> float:
    r"""D_α(GG(a)‖GG(0)) = log M(α)/(α-1) for α > 1 (symmetric in the order of the pair)."""
    alpha = float(alpha)
    if not alpha > 1.0:
        raise ValueError(f"alpha must be > 1, got {alpha!r}")
    return log_moment(alpha, a, beta) / (alpha - 1.0)


def subsampled_rdp(
    orders: Sequence[int], *, noise_multiplier: float, sample_rate: float, beta: float, k: int = 1,
    clip_norm_p: Optional[float] = None,
) -> Dict[str, np.ndarray]:
    r"""One-step RDP (remove exact, add upper bound) of the shape spread over k coordinates, per order.

    Returns ``{"remove": array, "add": array}`` with RDP values at each integer order α ≥ 2 (see module doc).
    """
    beta = validate_beta(beta)
    sigma = validate_positive(noise_multiplier, "noise_multiplier")
    q = validate_sample_rate(sample_rate)
    p = validate_clip_norm_p(clip_norm_p, beta)
    orders = [int(o) for o in orders]
    if any(o < 2 for o in orders):
        raise ValueError("orders must be integers ≥ 2")
    a_k = per_coordinate_shift(sigma, int(k), p)
    logm = np.array([k * log_moment(j, a_k, beta) for j in range(max(orders) + 1)])  # log M_k(j)
    return subsampled_rdp_from_log_moments(orders, q, logm)


def subsampled_rdp_from_log_moments(orders: Sequence[int], sample_rate: float, logm: np.ndarray) -> Dict[str, np.ndarray]:
    r"""One-step RDP per integer order α ≥ 2 of the Poisson-subsampled pair whose moments are logm[j] = log M(j),
    j = 0 … max(orders) (exact values, or upper bounds: both results are non-decreasing in every logm[j]).

    remove: log Σ_j C(α,j)(1-q)^{α-j} q^j M(j) / (α-1) (exact); add: log min(Jensen, Taylor) / (α-1), Jensen
    (1-q) + q·M(α), Taylor 1 + C(α,2)(1-q)^{-α-1} q² (M(2) - 1) (module doc). The Jensen term is valid only for a
    symmetric pair (reverse moment = forward moment, as for every GG pair): the caller's responsibility.
    """
    q = float(sample_rate)
    lm2 = float(logm[2])
    if lm2 <= 0.0:  # no shift: χ² = 0
        log_chi2 = -math.inf
    else:  # log χ² = log(M(2) - 1)
        log_chi2 = math.log(math.expm1(lm2)) if lm2 < 700 else lm2 + math.log1p(-math.exp(-lm2))
    remove, add = [], []
    for alpha in orders:
        alpha = int(alpha)
        j = np.arange(alpha + 1)
        log_binom = special.gammaln(alpha + 1) - special.gammaln(j + 1) - special.gammaln(alpha - j + 1)
        with np.errstate(divide="ignore"):
            log_terms = log_binom + j * math.log(q) + logm[: alpha + 1]
        if q < 1.0:
            log_terms = log_terms + (alpha - j) * math.log1p(-q)
        else:
            log_terms = np.where(j == alpha, log_terms, -np.inf)
        remove.append(float(special.logsumexp(log_terms)) / (alpha - 1))
        # add direction: min(Jensen, Taylor) upper bounds of E_Q[(1-q+qe^ℓ)^{1-α}]
        jensen = float(np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + logm[alpha]))
        if q < 1.0:
            taylor = float(np.logaddexp(
                0.0, math.log(alpha * (alpha - 1) / 2) - (alpha + 1) * math.log1p(-q) + 2 * math.log(q) + log_chi2
            ))
            add.append(min(jensen, taylor) / (alpha - 1))
        else:
            add.append(jensen / (alpha - 1))
    return {"remove": np.array(remove), "add": np.array(add)}
