"""Checkpoints: model, optimizer and the gg_prv accountant's full history round-trip; ε continues unchanged."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

DELTA = 1e-5


def _fresh(seed=0):
    torch.manual_seed(seed)
    X = torch.randn(48, 6)
    y = torch.randint(0, 3, (48,))
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    dl = DataLoader(TensorDataset(X, y), batch_size=12)
    pe = GGPrivacyEngine()
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.2,
                                     max_grad_norm=1.0, beta=3.0)
    return pe, model, opt, dl


def _epoch(model, opt, dl):
    for xb, yb in dl:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()


def test_checkpoint_roundtrip_and_epsilon_trajectory(tmp_path):
    # uninterrupted: two epochs, with a sigma change between them (heterogeneous history)
    pe, model, opt, dl = _fresh()
    _epoch(model, opt, dl)
    eps1 = pe.get_epsilon(DELTA)
    opt.noise_multiplier = 1.5
    _epoch(model, opt, dl)
    eps2 = pe.get_epsilon(DELTA)
    full_history = list(pe.accountant.history)

    # interrupted after epoch 1
    pe_a, model_a, opt_a, dl_a = _fresh()
    _epoch(model_a, opt_a, dl_a)
    path = tmp_path / "ckpt.pt"
    pe_a.save_checkpoint(path=path, module=model_a, optimizer=opt_a)

    pe_b, model_b, opt_b, dl_b = _fresh(seed=1)  # different init: everything must come from the file
    pe_b.load_checkpoint(path=path, module=model_b, optimizer=opt_b)
    for a, b in zip(model_a.parameters(), model_b.parameters()):
        assert torch.equal(a, b)
    sa, sb = opt_a.state_dict(), opt_b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for k in sa["state"]:
        assert torch.equal(sa["state"][k]["momentum_buffer"], sb["state"][k]["momentum_buffer"])
    assert pe_b.accountant.history == pe_a.accountant.history
    assert (pe_b.accountant.beta, pe_b.accountant.dim) == (pe_a.accountant.beta, pe_a.accountant.dim)
    assert tuple(pe_b.accountant.history[0][3:]) == (3.0, 6 * 5 + 5 + 5 * 3 + 3, 3.0)
    assert pe_b.get_epsilon(DELTA) == eps1

    opt_b.noise_multiplier = 1.5
    _epoch(model_b, opt_b, dl_b)
    assert pe_b.accountant.history == full_history
    assert pe_b.get_epsilon(DELTA) == eps2
    assert eps2 > eps1


def test_checkpoint_refuses_other_accountant(tmp_path):
    pe, model, opt, dl = _fresh()
    _epoch(model, opt, dl)
    path = tmp_path / "ckpt.pt"
    pe.save_checkpoint(path=path, module=model, optimizer=opt)
    other = GGPrivacyEngine(accountant="prv")
    with pytest.raises(ValueError, match="gg_prv"):
        other.load_checkpoint(path=path, module=model, optimizer=opt)
