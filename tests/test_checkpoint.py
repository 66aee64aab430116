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


def _fresh_adaptive(seed=0):
    torch.manual_seed(seed)
    X = torch.randn(48, 6)
    y = torch.randint(0, 3, (48,))
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    pe = GGPrivacyEngine()
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=DataLoader(TensorDataset(X, y),
                                     batch_size=12), noise_multiplier=1.2, max_grad_norm=1.0, beta=1.5,
                                     clipping="adaptive", target_unclipped_quantile=0.5, clipbound_learning_rate=0.5,
                                     max_clipbound=10.0, min_clipbound=0.01, unclipped_num_std=1.0)
    return pe, model, opt, dl


def test_checkpoint_restores_the_adaptive_clip_bound(tmp_path):
    """clipping='adaptive': the checkpoint holds the current bound C_t and loading continues from it (Opacus's
    checkpoints hold only the wrapped optimizer's state); a checkpoint without it (Opacus's, or older) still loads,
    with a warning, the history restored and C_t restarting at the optimizer's bound."""
    from opacus_gg.engine import CLIP_BOUND_KEY

    pe_a, model_a, opt_a, dl_a = _fresh_adaptive()
    _epoch(model_a, opt_a, dl_a)
    c_t = opt_a.max_grad_norm
    assert c_t != 1.0
    path = tmp_path / "ada.pt"
    pe_a.save_checkpoint(path=path, module=model_a, optimizer=opt_a, checkpoint_dict={"epoch": 1})
    pe_b, model_b, opt_b, _ = _fresh_adaptive(seed=1)
    ckpt = pe_b.load_checkpoint(path=path, module=model_b, optimizer=opt_b)
    assert opt_b.max_grad_norm == c_t and ckpt["epoch"] == 1
    assert pe_b.accountant.history == pe_a.accountant.history and len(pe_b.accountant.history[0]) == 7

    old = torch.load(path, weights_only=False)
    del old[CLIP_BOUND_KEY]
    torch.save(old, path)
    pe_c, model_c, opt_c, _ = _fresh_adaptive(seed=1)
    with pytest.warns(UserWarning, match="restarts at max_grad_norm=1"):
        pe_c.load_checkpoint(path=path, module=model_c, optimizer=opt_c)
    assert opt_c.max_grad_norm == 1.0 and pe_c.get_epsilon(DELTA) == pe_a.get_epsilon(DELTA)


# -- interoperability with Opacus's PrivacyEngine (β = 2, Gaussian accountants) ---------------------------


def _fresh_gaussian(cls, accountant, seed=0):
    """(engine, model, optimizer, loader) for Opacus's PrivacyEngine or GGPrivacyEngine at β = 2."""
    torch.manual_seed(seed)
    X = torch.randn(48, 6)
    y = torch.randint(0, 3, (48,))
    torch.manual_seed(seed + 100)  # model init may differ between runs: loading must overwrite it
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    dl = DataLoader(TensorDataset(X, y), batch_size=12)
    pe = cls(accountant=accountant)
    kw = {"beta": 2.0} if cls is GGPrivacyEngine else {}
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.2,
                                     max_grad_norm=1.0, noise_generator=torch.Generator().manual_seed(seed + 7), **kw)
    return pe, model, opt, dl


def _resume(src_cls, dst_cls, accountant, tmp_path):
    """Train one epoch with src_cls, save, load into dst_cls, train one more epoch; ε after each epoch."""
    from opacus import PrivacyEngine

    assert {src_cls, dst_cls} <= {PrivacyEngine, GGPrivacyEngine}
    pe_a, model_a, opt_a, dl_a = _fresh_gaussian(src_cls, accountant)
    torch.manual_seed(11)  # Poisson sampling uses the global RNG
    _epoch(model_a, opt_a, dl_a)
    eps1 = pe_a.get_epsilon(DELTA)
    path = tmp_path / f"{src_cls.__name__}_{accountant}.pt"
    pe_a.save_checkpoint(path=path, module=model_a, optimizer=opt_a)

    pe_b, model_b, opt_b, dl_b = _fresh_gaussian(dst_cls, accountant, seed=1)
    pe_b.load_checkpoint(path=path, module=model_b, optimizer=opt_b)
    assert all(torch.equal(a, b) for a, b in zip(model_a.parameters(), model_b.parameters()))
    eps1_loaded = pe_b.get_epsilon(DELTA)
    torch.manual_seed(12)
    _epoch(model_b, opt_b, dl_b)
    return eps1, eps1_loaded, pe_b.get_epsilon(DELTA), list(pe_b.accountant.history), \
        [p.detach().clone() for p in model_b.parameters()]


@pytest.mark.parametrize("accountant", ["prv", "rdp"])
def test_opacus_checkpoint_resumes_in_gg_engine_and_back(accountant, tmp_path):
    """An Opacus checkpoint loads into GGPrivacyEngine (β = 2) and vice versa; the ε trajectory and the
    parameters after resuming equal those of Opacus resuming from the same checkpoint."""
    from opacus import PrivacyEngine

    ref = _resume(PrivacyEngine, PrivacyEngine, accountant, tmp_path)
    for src, dst in ((PrivacyEngine, GGPrivacyEngine), (GGPrivacyEngine, PrivacyEngine),
                     (GGPrivacyEngine, GGPrivacyEngine)):
        got = _resume(src, dst, accountant, tmp_path)
        assert got[:4] == ref[:4], (src.__name__, dst.__name__)
        assert all(torch.equal(a, b) for a, b in zip(got[4], ref[4]))
    eps1, eps1_loaded, eps2, history, _ = ref
    assert eps1 == eps1_loaded < eps2
    assert history == [(1.2, 0.25, 8)]  # uninterrupted two epochs: one segment of 8 steps


@pytest.mark.parametrize("accountant", ["prv", "rdp"])
def test_opacus_gaussian_checkpoint_loads_into_the_default_gg_prv_engine(accountant, tmp_path):
    """An Opacus checkpoint (Gaussian steps (σ, q, T)) loads into GGPrivacyEngine's default gg_prv accountant: the
    parameters are Opacus's, the steps are recorded at β = 2 whatever the engine's β, and ε is the certified
    Gaussian ε of that history; training on adds segments; a gg_prv checkpoint still refuses a prv engine."""
    from opacus import PrivacyEngine

    from opacus_gg.accountants import compute_epsilon

    pe, model, opt, dl = _fresh_gaussian(PrivacyEngine, accountant)
    _epoch(model, opt, dl)
    path = tmp_path / "opacus.pt"
    pe.save_checkpoint(path=path, module=model, optimizer=opt)
    (sigma, q, steps), = pe.accountant.history
    torch.manual_seed(1)
    model_b = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
    opt_b = torch.optim.SGD(model_b.parameters(), lr=0.05, momentum=0.9)
    gg = GGPrivacyEngine()  # the default accountant, gg_prv
    model_b, opt_b, dl_b = gg.make_private(module=model_b, optimizer=opt_b, data_loader=dl, noise_multiplier=1.2,
                                           max_grad_norm=1.0, beta=1.5, clip_norm_p=2.0)
    gg.load_checkpoint(path=path, module=model_b, optimizer=opt_b)
    assert gg.accountant.mechanism() == "gg_prv"
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), model_b.parameters()))
    assert gg.accountant.history == [(sigma, q, steps, 2.0, 1, 2.0)]  # Gaussian steps, not the engine's β = 1.5
    eps = gg.get_epsilon(DELTA)
    assert eps == compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA).epsilon
    _epoch(model_b, opt_b, dl_b)
    assert len(gg.accountant.history) == 2 and gg.accountant.history[1][3] == 1.5 and gg.get_epsilon(DELTA) > eps
    path_gg = tmp_path / "gg.pt"
    gg.save_checkpoint(path=path_gg, module=model_b, optimizer=opt_b)
    with pytest.raises(ValueError, match="gg_prv"):
        GGPrivacyEngine(accountant="prv").load_checkpoint(path=path_gg, module=model_b, optimizer=opt_b)


# -- safe loading (weights_only=True by default) and a validated accountant history -----------------------


class _Payload:
    """Unpickling this object touches ``marker``: a stand-in for arbitrary code in a checkpoint."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_pickled_payload_in_a_checkpoint_does_not_run(tmp_path):
    """A checkpoint carrying a pickled object is refused by default (one-line ValueError, nothing run, the
    model untouched); only an explicit ``weights_only=False`` from the caller runs it."""
    pe, model, opt, dl = _fresh()
    _epoch(model, opt, dl)
    marker, path = tmp_path / "ran", tmp_path / "evil.pt"
    pe.save_checkpoint(path=path, module=model, optimizer=opt, checkpoint_dict={"extra": _Payload(marker)})
    pe_b, model_b, opt_b, _ = _fresh(seed=1)
    before = [q.detach().clone() for q in model_b.parameters()]
    for kwargs in (None, {"weights_only": True}, {"map_location": "cpu"}):
        with pytest.raises(ValueError, match="weights_only=True") as e:
            pe_b.load_checkpoint(path=path, module=model_b, optimizer=opt_b, torch_load_kwargs=kwargs)
        assert "\n" not in str(e.value)
    assert not marker.exists()
    assert all(torch.equal(a, b) for a, b in zip(before, model_b.parameters())) and len(pe_b.accountant) == 0
    pe_b.load_checkpoint(path=path, module=model_b, optimizer=opt_b, torch_load_kwargs={"weights_only": False})
    assert marker.exists()  # the caller's explicit opt-out is respected


@pytest.mark.parametrize("weights_only", [True, False])
def test_both_kinds_of_checkpoint_load_either_way(weights_only, tmp_path):
    """Opacus's and our checkpoints load into GGPrivacyEngine with an explicit weights_only of either value
    (Opacus's inherited method raised 'got multiple values for keyword argument')."""
    from opacus import PrivacyEngine

    for cls in (PrivacyEngine, GGPrivacyEngine):
        pe, model, opt, dl = _fresh_gaussian(cls, "prv")
        _epoch(model, opt, dl)
        path = tmp_path / f"{cls.__name__}.pt"
        pe.save_checkpoint(path=path, module=model, optimizer=opt)
        pe_b, model_b, opt_b, _ = _fresh_gaussian(GGPrivacyEngine, "prv", seed=1)
        pe_b.load_checkpoint(path=path, module=model_b, optimizer=opt_b,
                           torch_load_kwargs={"weights_only": weights_only})
        assert all(torch.equal(a, b) for a, b in zip(model.parameters(), model_b.parameters()))
        assert pe_b.accountant.history == pe.accountant.history


_GOOD = (1.2, 0.25, 4, 3.0, 53, 3.0)


@pytest.mark.parametrize("bad,field", [
    ((float("nan"), 0.25, 4, 3.0, 53, 3.0), "noise_multiplier"),
    (("1.2", 0.25, 4, 3.0, 53, 3.0), "numbers"),
    ((-1.2, 0.25, 4, 3.0, 53, 3.0), "noise_multiplier"),
    ((1.2, 0.25, -4, 3.0, 53, 3.0), "steps"),
    ((1.2, 0.25, 4, 3.0, -53, 3.0), "dim"),
    ((1.2, -0.25, 4, 3.0, 53, 3.0), "sample_rate"),
    ((1.2, 0.25, 4, 0.5, 53, 3.0), "beta"),
])
def test_bad_accountant_history_is_refused_before_anything_loads(bad, field, tmp_path):
    """A history entry with a NaN, string or negative σ/steps/dim/q (negative steps would cancel real ones) is
    refused with one error naming the entry and the field; model and accountant keep their state."""
    pe, model, opt, dl = _fresh()
    path = tmp_path / "bad.pt"
    pe.accountant.history = [_GOOD, bad]
    pe.save_checkpoint(path=path, module=model, optimizer=opt)
    pe_b, model_b, opt_b, dl_b = _fresh(seed=1)
    _epoch(model_b, opt_b, dl_b)
    history, before = list(pe_b.accountant.history), [q.detach().clone() for q in model_b.parameters()]
    with pytest.raises(ValueError, match=rf"history'\]\[1\].*{field}"):
        pe_b.load_checkpoint(path=path, module=model_b, optimizer=opt_b)
    assert pe_b.accountant.history == history
    assert all(torch.equal(a, b) for a, b in zip(before, model_b.parameters()))
    with pytest.raises(ValueError, match=field):  # the accountant's own loader checks the same
        pe_b.accountant.load_state_dict({"mechanism": "gg_prv", "history": [_GOOD, bad]})


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", "truncated"])
def test_unreadable_checkpoint_is_one_line_error(content, tmp_path, cli):
    """A truncated or garbage file: a one-line ValueError from the engine; the CLI's ``train --resume`` exits 2
    with one line on stderr (no traceback)."""
    pe, model, opt, dl = _fresh()
    path = tmp_path / "ckpt.pt"
    pe.save_checkpoint(path=path, module=model, optimizer=opt)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if content == "truncated" else content)
    with pytest.raises(ValueError, match="cannot be read") as e:
        pe.load_checkpoint(path=path, module=model, optimizer=opt)
    assert "\n" not in str(e.value)
    code, _, err = cli(["train", "--config", "quickstart", "--output-dir", str(tmp_path / "run"), "--quiet",
                        "--set", "data.name=synthetic", "--resume", str(path)])
    assert code == 2 and "cannot be read" in err and err.count("\n") == 1, err
