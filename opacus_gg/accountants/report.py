"""The result object of every ε computation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict

__all__ = ["EpsilonReport"]


@dataclass
class EpsilonReport:
    """ε for a history at δ, with its error bounds and the dominating adjacency direction / shift shape.

    ``epsilon`` is the number to publish: ``epsilon_upper`` in certified mode. Paper-mode reports with
    β ≠ 2 have ``certified=False`` and their printout says "NOT a guarantee".
    """

    epsilon: float
    epsilon_lower: float
    epsilon_estimate: float
    epsilon_upper: float
    delta: float
    mode: str = "certified"
    certified: bool = True
    direction: str = "remove"
    shape_k: int = 1
    details: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain-dict view (JSON friendly)."""
        return asdict(self)

    def __str__(self) -> str:
        tag = "certified upper bound" if self.certified else "NOT a guarantee"
        return (
            f"epsilon = {self.epsilon:.4f} ({tag}; mode={self.mode}) at delta = {self.delta:g} "
            f"[lower {self.epsilon_lower:.4f}, estimate {self.epsilon_estimate:.4f}, upper {self.epsilon_upper:.4f}; "
            f"direction={self.direction}, worst shape k={self.shape_k}]"
        )
