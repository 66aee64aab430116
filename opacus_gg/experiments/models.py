"""Models of the paper's study (Appendix E.1), all Opacus-compatible (no BatchNorm; DPLSTM for IMDB).

- :class:`ScatterNetCNN` — Tramèr & Boneh's CNN on 243×8×8 scattering features: GroupNorm(81 groups, no affine)
  → Conv3×3 243→64 → Tanh → MaxPool2 → Conv3×3 64→64 → Tanh → Linear 1024→10 (≈187k parameters).
  The paper's code normalized with BatchNorm on private data and dropped that privacy cost; GroupNorm is
  per-example and costs nothing.
- :class:`CNN` — Tramèr & Boneh's end-to-end CNN on raw 3×32×32 images (Tanh, GroupNorm-free).
- :class:`FCN` — Adult: in → 32 → 2 with ReLU (123 inputs in the paper's binarized Adult; ours is the
  number of one-hot + numeric columns).
- :class:`LSTMClassifier` — IMDB: Embedding(10k, 100) → opacus DPLSTM(100) → Linear(100, 2) (≈1.08M parameters).
- :class:`MLP` — the synthetic quickstart task.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

import torch
from torch import nn

__all__ = ["ScatterNetCNN", "CNN", "FCN", "LSTMClassifier", "MLP", "build_model", "count_parameters"]


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters d = Σ numel(p) (the accountant's ``dim``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class ScatterNetCNN(nn.Module):
    """CNN head on scattering features: x ∈ R^{243×8×8} → logits ∈ R^{num_classes}."""

    def __init__(self, in_channels: int = 243, num_groups: int = 81, width: int = 64, num_classes: int = 10):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, in_channels, affine=False)
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2),
            nn.Conv2d(width, width, 3, padding=1), nn.Tanh(),
        )
        self.classifier = nn.Linear(width * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(self.norm(x)).flatten(1))


class CNN(nn.Module):
    """Tramèr–Boneh CIFAR CNN: [Conv-Tanh-Conv-Tanh-MaxPool]×3 (widths w, 2w, 4w) → Linear 128 → Tanh → Linear."""

    def __init__(self, width: int = 32, num_classes: int = 10, in_channels: int = 3):
        super().__init__()
        layers = []
        c = in_channels
        for w in (width, 2 * width, 4 * width):
            layers += [nn.Conv2d(c, w, 3, padding=1), nn.Tanh(), nn.Conv2d(w, w, 3, padding=1), nn.Tanh(),
                       nn.MaxPool2d(2)]
            c = w
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(c * 4 * 4, 128), nn.Tanh(), nn.Linear(128, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


class FCN(nn.Module):
    """Two-layer fully connected net: Linear(in, hidden) → ReLU → Linear(hidden, num_classes)."""

    def __init__(self, in_features: int, hidden: int = 32, num_classes: int = 2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


MLP = FCN  # the synthetic task uses the same two-layer net


class LSTMClassifier(nn.Module):
    """Embedding(V, e) → opacus DPLSTM(e, h) → last hidden state → Linear(h, num_classes)."""

    def __init__(self, vocab_size: int = 10000, embed_dim: int = 100, hidden: int = 100, num_classes: int = 2):
        super().__init__()
        from opacus.layers import DPLSTM

        # no padding_idx: Opacus's per-sample embedding gradients ignore it (token 0 is a learned pad vector)
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = DPLSTM(embed_dim, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embedding(x))
        return self.fc(out[:, -1, :])


def build_model(model_cfg: Dict[str, Any], num_classes: int, input_shape: Sequence[int],
                vocab_size: int = 10000) -> nn.Module:
    """Build the model named ``model_cfg["name"]``; optional size keys: hidden, width, embed_dim, num_groups."""
    name = model_cfg["name"]

    def opt(key: str, default: int) -> int:
        v = model_cfg.get(key)
        return default if v is None else int(v)

    if name in ("mlp", "fcn"):
        return FCN(int(input_shape[0]), opt("hidden", 32), num_classes)
    if name == "scatternet_cnn":
        return ScatterNetCNN(int(input_shape[0]), opt("num_groups", 81),
                             opt("width", 64), num_classes)
    if name == "cnn":
        return CNN(opt("width", 32), num_classes, int(input_shape[0]))
    if name == "lstm":
        return LSTMClassifier(vocab_size, opt("embed_dim", 100), opt("hidden", 100),
                              num_classes)
    raise ValueError(f"model.name must be one of mlp, fcn, cnn, scatternet_cnn, lstm; got {name!r}")
