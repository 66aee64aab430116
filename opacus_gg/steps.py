r"""How many optimizer steps a training run of ``epochs`` epochs takes: the one formula for the σ solver,
the engine, the CLI's ``--epochs`` and the training configs.

With Poisson sampling at rate q an epoch is n_b batches; Opacus's ``DPDataLoader`` sets q = 1/len(loader)
and its sampler then yields ``int(1/q)`` batches, which floating point can make one short of len(loader).
Accounting ``int(epochs/q)`` steps can therefore *undercount* what training runs (75 batches × 3 epochs:
``int(3/(1/75)) = 224`` where 225 run). Here

    n_b = len(data_loader) if a loader is given, else ⌈1/q⌉ (= round(1/q) when 1/q is within 1e-9 of an integer),
    T   = ⌈epochs · n_b⌉ (again rounding to the integer when within 1e-9),

which is never below the number of steps Opacus's loaders run.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sized

from .validation import STEPS_MAX, validate_positive, validate_sample_rate

__all__ = ["batches_per_epoch", "expected_batch_size", "steps_for_epochs"]

#: relative distance to an integer below which a float is taken to be that integer (floating-point noise)
_INTEGER_SLACK = 1e-9


def _near_integer(x: float, rounding: Callable[[float], int]) -> int:
    """``rounding(x)`` (``math.ceil`` or ``math.floor``), except that x within ``_INTEGER_SLACK`` (relative)
    of an integer n gives n."""
    n = round(x)
    if abs(x - n) <= _INTEGER_SLACK * max(1.0, abs(x)):
        return int(n)
    return int(rounding(x))


def expected_batch_size(n_samples: int, n_batches: int) -> int:
    r"""Expected Poisson batch size N·q with q = 1/n_b, as Opacus's ``int(N·q)`` but without its float
    truncation: N·(1/n_b) is 0.9999… for N = n_b = 49, and Opacus's 0 then divides the noisy sum by zero
    (inf parameters). Rounded to the integer when within 1e-9 of one, else floored (as Opacus)."""
    if n_batches < 1:
        raise ValueError(f"n_batches must be at least 1, got {n_batches}")
    return _near_integer(n_samples * (1.0 / n_batches), math.floor)


def batches_per_epoch(*, sample_rate: Optional[float] = None, data_loader: Optional[Sized] = None) -> int:
    """n_b: ``len(data_loader)`` when given, else ⌈1/q⌉ (1/q rounded when it is an integer up to float noise)."""
    if data_loader is not None:
        n = len(data_loader)
        if n < 1:
            raise ValueError(f"data_loader must yield at least one batch per epoch, got len(data_loader)={n}")
        return int(n)
    if sample_rate is None:
        raise ValueError("batches_per_epoch needs sample_rate or data_loader")
    return _near_integer(1.0 / validate_sample_rate(sample_rate), math.ceil)


def steps_for_epochs(
    epochs: float, *, sample_rate: Optional[float] = None, data_loader: Optional[Sized] = None
) -> int:
    r"""T = ⌈epochs · n_b⌉ steps (see the module docstring); never fewer than training runs."""
    epochs = validate_positive(epochs, "epochs")
    n_b = batches_per_epoch(sample_rate=sample_rate, data_loader=data_loader)
    if not epochs * n_b <= STEPS_MAX:
        raise ValueError(f"epochs must give at most {STEPS_MAX:.3g} steps ({n_b} batches per epoch), got {epochs!r}")
    return max(1, _near_integer(epochs * n_b, math.ceil))
