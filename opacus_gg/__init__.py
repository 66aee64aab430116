"""opacus-gg: the Generalized Gaussian mechanism for Opacus (β-DP-SGD, GGNMax, certified accounting).

``from opacus_gg import GGPrivacyEngine`` is the drop-in replacement for ``opacus.PrivacyEngine``; importing
the package registers the certified accountant ``"gg_prv"`` in Opacus's accountant registry.
"""

from . import distribution
from .accountants import GGPRVAccountant
from .distribution import GeneralizedGaussian
from .engine import GGPrivacyEngine

__version__ = "0.1.0"

__all__ = ["distribution", "GeneralizedGaussian", "GGPrivacyEngine", "GGPRVAccountant", "__version__"]
