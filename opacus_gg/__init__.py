"""opacus-gg: the Generalized Gaussian mechanism for Opacus (β-DP-SGD, GGNMax, certified accounting).

``from opacus_gg import GGPrivacyEngine`` is the drop-in replacement for ``opacus.PrivacyEngine``; it imports
:mod:`opacus_gg.accountants`, which registers the accountant ``"gg_prv"`` in Opacus's accountant registry.
The public names are loaded on first use (PEP 562), so ``import opacus_gg`` — and with it the ``opacus-gg``
command line's start-up — does not import torch or opacus.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "distribution": ("opacus_gg.distribution", None),
    "GeneralizedGaussian": ("opacus_gg.distribution", "GeneralizedGaussian"),
    "GGPrivacyEngine": ("opacus_gg.engine", "GGPrivacyEngine"),
    "GGPRVAccountant": ("opacus_gg.accountants", "GGPRVAccountant"),
}

__all__ = ["distribution", "GeneralizedGaussian", "GGPrivacyEngine", "GGPRVAccountant", "__version__"]


def __getattr__(name: str) -> Any:
    """Import ``opacus_gg.<name>`` on first access (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'opacus_gg' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = import_module(module) if attr is None else getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
