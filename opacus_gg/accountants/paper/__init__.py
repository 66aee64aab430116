r"""Paper mode: the GG paper's "Sampled PRV" accountant (Appendix B.3), for reproducing the paper — NOT a guarantee.

Paper mode accounts one coordinate ("one-hot" shift, the paper's dimension-independence claim, which is
false for β ≠ 2: see docs/accounting.md) in the *remove* direction, with the
privacy-loss CDF replaced by a Monte Carlo empirical CDF. Units: noise GG(β, 1), density ∝ exp(-|x|^β/β),
sensitivity a = 1/σ (σ = noise_multiplier).

One step, no subsampling: ℓ(x) = log f(x-a)/f(x) = (|x|^β - |x-a|^β)/β. Under P (x = a + z, z ~ GG(0, 1))
ℓ_P = (|z+a|^β - |z|^β)/β; under Q, ℓ has the law of -ℓ_P (substitute z → -z). Poisson subsampling with
rate q (remove direction, P_q = (1-q)Q + qP against Q) gives the PRV

    Y = log(1 - q + q e^{ℓ}),   F_Y(t) = (1-q)·Pr[-ℓ_P ≤ g(t)] + q·Pr[ℓ_P ≤ g(t)],   g(t) = log((e^t - 1 + q)/q),

so n samples of ℓ_P give an empirical Y with 2n weighted atoms (weights (1-q)/n and q/n). Its domain is
sized from the samples (Chernoff bounds with the empirical cumulant generating function), never from the
Gaussian; it is composed with Opacus's ``discretize``/``compose_heterogeneous``/``DiscretePRV``. Samples are
cached keyed by every parameter that defines them (σ, q, β, n, seed) — the paper code's stale-cache fault
is not reproduced.

Error reporting (see ``docs/paper_mode_and_cli.md``): the paper's Theorem 6 terms (both published versions,
with why they are unusable; closed forms, always), and with ``diagnostics=True`` (by default a query composes
only the ε it prints) the Monte Carlo spread (independent replicates and the sensitivity to the few largest
losses) and a correct high-probability bracket from the Dvoretzky–Kiefer–Wolfowitz–Massart inequality.
"""

from .compose import dkw_radius, sampled_compose_epsilon
from .errors import paper_theorem6_terms
from .prv import DEFAULT_N_SAMPLES, EmpiricalPRV, one_hot_loss_samples, sampled_prv
from .report import PAPER_LABEL, PAPER_LABEL_BETA2, paper_epsilon_report, sampled_epsilon_details

__all__ = [
    "PAPER_LABEL",
    "PAPER_LABEL_BETA2",
    "DEFAULT_N_SAMPLES",
    "EmpiricalPRV",
    "one_hot_loss_samples",
    "sampled_prv",
    "dkw_radius",
    "sampled_compose_epsilon",
    "paper_theorem6_terms",
    "sampled_epsilon_details",
    "paper_epsilon_report",
]
