"""Models of the study are the paper's sizes and Opacus-compatible; scattering features are cached once."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch
from opacus import GradSampleModule
from opacus.validators import ModuleValidator

from opacus_gg.experiments.features import SCATTER_SHAPE, StubExtractor, cached_features, make_extractor
from opacus_gg.experiments.models import CNN, FCN, LSTMClassifier, ScatterNetCNN, build_model, count_parameters


def _per_sample_grads_match(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    """Opacus per-sample gradients equal the gradients of each example computed alone."""
    ref = copy.deepcopy(model)
    gsm = GradSampleModule(model, loss_reduction="sum")
    torch.nn.functional.cross_entropy(gsm(x), y, reduction="sum").backward()
    for i in range(len(x)):
        ref.zero_grad()
        torch.nn.functional.cross_entropy(ref(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            # float32 per-sample vs single-sample backward: summation order differs
            assert torch.allclose(p.grad_sample[i], q.grad, atol=1e-5, rtol=1e-4)


def test_scatternet_head_on_random_features() -> None:
    torch.manual_seed(0)
    model = ScatterNetCNN()
    assert count_parameters(model) == 187_210  # Tramèr & Boneh: ≈187k
    assert isinstance(model.norm, torch.nn.GroupNorm) and model.norm.num_groups == 81
    assert ModuleValidator.validate(model, strict=False) == []  # no BatchNorm: nothing private is pooled
    x = torch.randn(4, *SCATTER_SHAPE)
    assert model(x).shape == (4, 10)
    _per_sample_grads_match(model, x, torch.tensor([0, 3, 9, 3]))


def test_fcn_cnn_lstm_shapes_sizes_and_dp_compatibility() -> None:
    torch.manual_seed(0)
    fcn = FCN(123)
    assert count_parameters(fcn) == 123 * 32 + 32 + 32 * 2 + 2  # the paper's 123 → 32 → 2
    _per_sample_grads_match(fcn, torch.randn(3, 123), torch.tensor([0, 1, 1]))

    cnn = CNN(width=4)
    assert cnn(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert ModuleValidator.validate(cnn, strict=False) == []

    lstm = LSTMClassifier()
    n = count_parameters(lstm)
    assert 1.0e6 < n < 1.2e6  # ≈1M parameters: 10k×100 embedding + DPLSTM(100, 100) + Linear(100, 2)
    assert ModuleValidator.validate(lstm, strict=False) == []
    small = LSTMClassifier(vocab_size=50, embed_dim=8, hidden=6)
    _per_sample_grads_match(small, torch.randint(0, 50, (3, 7)), torch.tensor([0, 1, 0]))


def test_build_model_reads_size_overrides() -> None:
    m = build_model({"name": "scatternet_cnn", "width": 8, "num_groups": 81}, 10, SCATTER_SHAPE)
    assert isinstance(m, ScatterNetCNN) and m.classifier.in_features == 8 * 16
    m = build_model({"name": "lstm", "hidden": None, "embed_dim": 16}, 2, (32,), vocab_size=100)
    assert m.embedding.weight.shape == (100, 16)
    with pytest.raises(ValueError, match="model.name"):
        build_model({"name": "resnet"}, 10, (3, 32, 32))


class CountingExtractor(StubExtractor):
    """A fake extractor that counts the images it transformed."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += len(x)
        return super().__call__(x)


def test_feature_cache_computes_once_per_dataset_split(tmp_path: Path) -> None:
    x = torch.rand(10, 3, 32, 32)
    ext = CountingExtractor()
    f1 = cached_features(x, ext, cache_dir=tmp_path, dataset="cifar10", split="train", batch_size=4)
    assert f1.shape == (10, *SCATTER_SHAPE) and ext.calls == 10
    f2 = cached_features(x, ext, cache_dir=tmp_path, dataset="cifar10", split="train")
    assert ext.calls == 10 and torch.equal(f1, f2)  # read from disk, not recomputed
    cached_features(x, ext, cache_dir=tmp_path, dataset="cifar10", split="test")
    assert ext.calls == 20  # another split → another key
    ext.normalization = "cifar"
    cached_features(x, ext, cache_dir=tmp_path, dataset="cifar10", split="train")
    assert ext.calls == 30  # another normalization → another key
    cached_features(x + 0.01, CountingExtractor(), cache_dir=tmp_path, dataset="cifar10", split="train")
    assert len(list(tmp_path.glob("*.pt"))) == 4  # changed images never hit a stale cache
    assert all("cifar10_" in p.name for p in tmp_path.glob("*.pt"))


@pytest.mark.skipif(importlib.util.find_spec("kymatio") is not None, reason="kymatio is installed")
def test_scatter_without_kymatio_says_how_to_install() -> None:
    with pytest.raises(ImportError, match=r"opacus-gg\[scatter\]"):
        make_extractor("scatter")


@pytest.mark.skipif(importlib.util.find_spec("kymatio") is None, reason="kymatio not installed")
def test_scattering_shape_with_kymatio() -> None:  # pragma: no cover - optional extra
    ext = make_extractor("scatter")
    assert ext(torch.rand(2, 3, 32, 32)).shape == (2, *SCATTER_SHAPE)
