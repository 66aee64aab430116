"""The paper's figures beyond training: privacy curves ε(σ) per β (:mod:`.curves`), GG outlier probabilities
(:mod:`.outliers`), the PATE/GGNMax experiments (:mod:`.pate_experiments`) and the β study's accuracy
against β (:mod:`.beta_study`) and the proven trade-off curve (:mod:`.tradeoff`)."""

from __future__ import annotations

import os
from typing import Any, Union


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (imported lazily: plotting is optional)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Union[str, "os.PathLike[str]"], dpi: int = 120) -> str:
    """Lay out ``fig``, write it to ``path`` (parent folders created) at ``dpi``, close it; returns ``path``."""
    fig.tight_layout()
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path
