"""opacus-gg: the Generalized Gaussian mechanism for Opacus (β-DP-SGD, GGNMax, certified accounting)."""

from . import distribution
from .distribution import GeneralizedGaussian

__version__ = "0.1.0"

__all__ = ["distribution", "GeneralizedGaussian", "__version__"]

try:  # the engine and accountants are optional at import time while the package is assembled
    from .accountants import GGPRVAccountant  # noqa: F401
    from .engine import GGPrivacyEngine  # noqa: F401

    __all__ += ["GGPrivacyEngine", "GGPRVAccountant"]
except ImportError:  # pragma: no cover
    pass
