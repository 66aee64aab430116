"""β-DP-SGD experiments: configs, data loading, models, the training loop, sweeps and reports.

The paper's study (Section 5, Appendix E.1 of the GG mechanism paper) lives here: the bundled configs
(``opacus_gg/experiments/configs/*.yaml``, referred to by name) → :func:`opacus_gg.experiments.train.run` →
per-epoch CSV/JSON → :mod:`opacus_gg.experiments.sweep` (β × target ε × seeds) → :mod:`opacus_gg.experiments.report`
(Figure-4-style plot and Table-1-style markdown); the other figures (privacy curves, outliers, PATE) are in
:mod:`opacus_gg.experiments.figures`.
"""

from .config import load_config, apply_overrides, validate_config

__all__ = ["load_config", "apply_overrides", "validate_config"]
