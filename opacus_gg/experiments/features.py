"""Scattering features (Tramèr & Boneh 2021) computed once per dataset split and cached on disk.

Features: images normalized with ImageNet mean/std, then ``kymatio.torch.Scattering2D(J=2, shape=(32, 32))``
(L = 8): each 3×32×32 image → 3 × 81 × 8 × 8 = 243×8×8. kymatio is an optional extra (``pip install
opacus-gg[scatter]``); it is imported lazily, and a shim supplies ``scipy.special.sph_harm`` (removed in
scipy 1.17) from ``sph_harm_y`` before kymatio is imported.

The cache file is keyed by dataset, split, extractor, normalization, size and a fingerprint of the images,
so the costly transform (≈1 s per 256 images on CPU) runs once per dataset, never per epoch.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "normalize_images", "ScatteringExtractor", "StubExtractor",
           "make_extractor", "cached_features", "SCATTER_SHAPE"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SCATTER_SHAPE = (243, 8, 8)


def normalize_images(x: torch.Tensor, mean=IMAGENET_MEAN, std=IMAGENET_STD) -> torch.Tensor:
    """Per-channel (x − mean_c) / std_c for images N×3×H×W in [0, 1]."""
    m = torch.tensor(mean, dtype=x.dtype).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype).view(1, -1, 1, 1)
    return (x - m) / s


def _import_kymatio():
    import scipy.special

    if not hasattr(scipy.special, "sph_harm") and hasattr(scipy.special, "sph_harm_y"):
        # old API sph_harm(m, n, azimuth θ, polar φ) == new sph_harm_y(n, m, polar φ, azimuth θ)
        def sph_harm(m, n, theta, phi):  # pragma: no cover - only with kymatio installed
            return scipy.special.sph_harm_y(n, m, phi, theta)

        scipy.special.sph_harm = sph_harm
    try:
        from kymatio.torch import Scattering2D
    except ImportError as e:
        raise ImportError(
            "data.features=scatter needs kymatio: pip install 'opacus-gg[scatter]' (or pip install kymatio); "
            "in tests use data.features=stub") from e
    return Scattering2D


class ScatteringExtractor:
    """ImageNet-normalize, then kymatio Scattering2D(J=2, L=8): N×3×32×32 → N×243×8×8."""

    name = "scatter-J2-L8"
    normalization = "imagenet"

    def __init__(self, device: str = "cpu") -> None:
        Scattering2D = _import_kymatio()
        self.device = device
        self.scattering = Scattering2D(J=2, shape=(32, 32), L=8).to(device)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = self.scattering(normalize_images(x).to(self.device))
        return out.reshape(x.shape[0], *SCATTER_SHAPE).cpu()


class StubExtractor:
    """Test-only stand-in with the scattering output shape: |1×1 conv(avgpool₄(x))|, fixed weights.

    Not a scattering transform: it exists so that CI exercises the ScatterNet pipeline without kymatio.
    """

    name = "stub"
    normalization = "imagenet"

    def __init__(self, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.weight = torch.randn(SCATTER_SHAPE[0], 3, 1, 1, generator=g)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(F.avg_pool2d(normalize_images(x), 4), self.weight).abs()


def make_extractor(kind: str, device: str = "cpu"):
    """``"scatter"`` → :class:`ScatteringExtractor`, ``"stub"`` → :class:`StubExtractor`."""
    if kind == "scatter":
        return ScatteringExtractor(device)
    if kind == "stub":
        return StubExtractor()
    raise ValueError(f"data.features must be 'scatter' or 'stub' for feature extraction, got {kind!r}")


def _fingerprint(x: torch.Tensor) -> str:
    h = hashlib.sha1()
    h.update(str(tuple(x.shape)).encode())
    h.update(x.contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def cached_features(images: torch.Tensor, extractor: Callable[[torch.Tensor], torch.Tensor], *,
                    cache_dir: Path, dataset: str, split: str, batch_size: int = 256,
                    progress: Optional[Callable] = None) -> torch.Tensor:
    """Return ``extractor(images)``, reading it from ``cache_dir`` if computed before, else computing and saving.

    Key: ``{dataset}_{split}_{extractor.name}_{extractor.normalization}_{N}_{sha1(images)[:16]}.pt``.
    """
    name = getattr(extractor, "name", type(extractor).__name__)
    norm = getattr(extractor, "normalization", "none")
    path = Path(cache_dir) / f"{dataset}_{split}_{name}_{norm}_{len(images)}_{_fingerprint(images)}.pt"
    if path.is_file():
        return torch.load(path, weights_only=True)
    chunks = range(0, len(images), batch_size)
    if progress is not None:
        chunks = progress(chunks, desc=f"features {dataset}/{split}")
    feats = torch.cat([extractor(images[i:i + batch_size]) for i in chunks])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(feats, tmp)
    tmp.replace(path)
    return feats
