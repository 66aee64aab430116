"""GGPrivacyEngine: an unchanged Opacus loop, equality with Opacus at β = 2, GG noise law, bad input."""

from __future__ import annotations

import contextlib
import math
from fractions import Fraction

import pytest
import torch
from opacus import PrivacyEngine
from scipy import stats
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine, distribution
from opacus_gg.clipping import total_sensitivity
from opacus_gg.optimizers import GGDPOptimizer, GGDPPerLayerOptimizer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _setup(seed=0, n=64, batch=16, d_in=10):
    torch.manual_seed(seed)
    X = torch.randn(n, d_in)
    y = torch.randint(0, 2, (n,))
    model = nn.Sequential(nn.Linear(d_in, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    dl = DataLoader(TensorDataset(X, y), batch_size=batch)
    return model, opt, dl


def _train(model, opt, dl, epochs=2):
    for _ in range(epochs):
        for xb, yb in dl:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()


def _opacus_vs_gg(accountant, engine_kw, **mp_kw):
    out = []
    for cls, kw in ((PrivacyEngine, {}), (GGPrivacyEngine, engine_kw)):
        model, opt, dl = _setup()
        pe = cls(accountant=accountant)
        torch.manual_seed(1)  # Poisson sampling uses the global RNG
        model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.1,
                                         max_grad_norm=1.0, noise_generator=torch.Generator().manual_seed(2),
                                         **kw, **mp_kw)
        _train(model, opt, dl)
        out.append(([p.detach().clone() for p in model.parameters()], pe.get_epsilon(1e-5), opt))
    return out


@pytest.mark.parametrize("accountant", ["prv", "rdp"])
@pytest.mark.parametrize("clipping,mgn", [("flat", 1.0), ("per_layer", [0.5, 0.5, 0.6, 0.3])])
def test_beta2_equals_opacus_bit_for_bit(accountant, clipping, mgn):
    (pa, ea, _), (pb, eb, ob) = _opacus_vs_gg(accountant, {"beta": 2.0}, clipping=clipping) if mgn == 1.0 else \
        _opacus_vs_gg_mgn(accountant, clipping, mgn)
    assert isinstance(ob, (GGDPOptimizer, GGDPPerLayerOptimizer))
    if clipping == "flat":
        assert all(torch.equal(a, b) for a, b in zip(pa, pb))
    else:  # the one deliberate difference: the noise scale's sensitivity in float64, rounded up (Opacus: float32)
        opacus_total = torch.norm(torch.Tensor(mgn), p=2).item()
        assert ob.max_grad_norm == total_sensitivity(mgn, 2.0) >= opacus_total * (1 - 1e-6)
        assert Fraction(ob.max_grad_norm) ** 2 >= sum(Fraction(c) ** 2 for c in mgn)  # ≥ the exact ‖(C_l)‖_2
        assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(pa, pb))
    assert ea == eb


def _opacus_vs_gg_mgn(accountant, clipping, mgn):
    out = []
    for cls, kw in ((PrivacyEngine, {}), (GGPrivacyEngine, {"beta": 2.0})):
        model, opt, dl = _setup()
        pe = cls(accountant=accountant)
        torch.manual_seed(1)
        model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.1,
                                         max_grad_norm=mgn, clipping=clipping,
                                         noise_generator=torch.Generator().manual_seed(2), **kw)
        _train(model, opt, dl)
        out.append(([p.detach().clone() for p in model.parameters()], pe.get_epsilon(1e-5), opt))
    return out


def test_unchanged_opacus_loop_beta_15_gg_prv():
    model, opt, dl = _setup()
    before = [p.detach().clone() for p in model.parameters()]
    pe = GGPrivacyEngine()
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                     max_grad_norm=1.0, beta=1.5)
    _train(model, opt, dl)
    assert isinstance(opt, GGDPOptimizer)
    assert (opt.beta, opt.clip_norm_p, opt.dim) == (1.5, 1.5, 10 * 8 + 8 + 8 * 2 + 2)
    assert pe.accountant.mechanism() == "gg_prv"
    assert len(pe.accountant) == len(pe.accountant.history) == 1  # Opacus: len() counts history entries
    assert sum(e[2] for e in pe.accountant.history) == 8
    assert tuple(pe.accountant.history[-1][3:]) == (1.5, opt.dim, 1.5)
    eps = pe.get_epsilon(1e-5)
    assert 0 < eps < math.inf
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))


def test_beta2_gg_prv_close_to_opacus_prv():
    from opacus.accountants import PRVAccountant

    model, opt, dl = _setup()
    pe = GGPrivacyEngine()  # gg_prv
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.1,
                                     max_grad_norm=1.0, beta=2.0)
    _train(model, opt, dl)
    e = pe.get_epsilon(1e-5)
    ref = PRVAccountant()
    ref.history = [(1.1, 0.25, 8)]
    e_op = ref.get_epsilon(1e-5)
    # certified (both adjacency directions, upper bound) vs Opacus's remove-direction estimate
    assert e_op * 0.98 <= e <= e_op * 1.15, (e, e_op)


def _zero_grad_step(beta, sigma=1.0, mgn=2.0, rectify=None, d=200):
    """One step on a model whose loss has zero gradient: the update is exactly −lr·noise."""
    torch.manual_seed(0)
    model = nn.Linear(d, d)
    w0 = [p.detach().clone() for p in model.parameters()]
    dl = DataLoader(TensorDataset(torch.randn(8, d)), batch_size=8)
    pe = GGPrivacyEngine()
    model, opt, dl = pe.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
                                     data_loader=dl, noise_multiplier=sigma, max_grad_norm=mgn, beta=beta,
                                     loss_reduction="sum", rectify_bound=rectify, poisson_sampling=False,
                                     noise_generator=torch.Generator().manual_seed(5))
    (xb,) = next(iter(dl))
    opt.zero_grad()
    (model(xb) * 0).sum().backward()
    opt.step()
    return torch.cat([(a - b.detach()).flatten() for a, b in zip(w0, model.parameters())])


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0])
def test_noise_law_is_gg(beta):
    noise = _zero_grad_step(beta).double().numpy()
    ref = stats.gennorm(beta, scale=2.0 * beta ** (1 / beta))  # s = σ·C = 2
    assert stats.kstest(noise, ref.cdf).pvalue > 1e-3
    # and it is not Gaussian noise of the same scale
    assert stats.kstest(noise, stats.norm(scale=2.0).cdf).pvalue < 1e-4


def test_rectify_bound_clamps_noisy_sum():
    noise = _zero_grad_step(1.5, sigma=5.0, rectify=3.0)
    assert noise.abs().max() <= 3.0 + 1e-6
    assert (noise.abs() == 3.0).float().mean() > 0.3  # most coordinates hit the bound at s = 10


def test_nan_gradient_raises_and_leaves_parameters():
    model, opt, dl = _setup()
    pe = GGPrivacyEngine()
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                     max_grad_norm=1.0, beta=3.0, poisson_sampling=False)
    before = [p.detach().clone() for p in model.parameters()]
    xb, yb = next(iter(dl))
    xb = xb.clone()
    xb[3, 0] = float("nan")
    opt.zero_grad()
    nn.functional.cross_entropy(model(xb), yb).backward()
    with pytest.raises(FloatingPointError):
        opt.step()
    assert all(torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
    assert len(pe.accountant) == 0


def test_gradient_accumulation_matches_opacus_and_accounts_q():
    res = []
    for cls, kw in ((PrivacyEngine, {}), (GGPrivacyEngine, {"beta": 2.0})):
        model, opt, dl = _setup()
        pe = cls(accountant="prv")
        model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                         max_grad_norm=1.0, poisson_sampling=False,
                                         noise_generator=torch.Generator().manual_seed(3), **kw)
        it = iter(dl)
        for _ in range(2):
            for _ in range(2):  # two micro-batches per step
                xb, yb = next(it)
                nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            opt.zero_grad()
        res.append(([p.detach().clone() for p in model.parameters()], pe.accountant.history))
    assert all(torch.equal(a, b) for a, b in zip(res[0][0], res[1][0]))
    assert res[0][1] == res[1][1] == [(1.0, 0.5, 2)]


def test_make_private_with_epsilon_beta2_equals_opacus():
    sig = []
    for cls, kw in ((PrivacyEngine, {}), (GGPrivacyEngine, {"beta": 2.0})):
        model, opt, dl = _setup()
        pe = cls(accountant="rdp")
        _, opt, _ = pe.make_private_with_epsilon(module=model, optimizer=opt, data_loader=dl, target_epsilon=3.0,
                                                 target_delta=1e-5, epochs=5, max_grad_norm=1.0, **kw)
        sig.append(opt.noise_multiplier)
    assert sig[0] == sig[1]


def test_make_private_with_epsilon_gg_prv_is_certified():
    from opacus_gg.accountants import compute_epsilon

    model, opt, dl = _setup()
    pe = GGPrivacyEngine()
    _, opt, dl = pe.make_private_with_epsilon(module=model, optimizer=opt, data_loader=dl, target_epsilon=4.0,
                                              target_delta=1e-5, epochs=2, max_grad_norm=1.0, beta=1.5,
                                              epsilon_tolerance=0.1)
    rep = compute_epsilon(noise_multiplier=opt.noise_multiplier, sample_rate=0.25, steps=8, delta=1e-5,
                          beta=1.5, dim=opt.dim, clip_norm_p=1.5)
    assert rep.certified and 4.0 - 0.2 <= rep.epsilon <= 4.0


def test_per_layer_total_sensitivity_is_lp():
    model, opt, dl = _setup()
    pe = GGPrivacyEngine()
    cs = [1.0, 2.0, 1.0, 2.0]
    _, opt, _ = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                max_grad_norm=cs, clipping="per_layer", beta=3.0)
    assert isinstance(opt, GGDPPerLayerOptimizer)
    assert opt.max_grad_norm == pytest.approx((2 * 1 + 2 * 8) ** (1 / 3))


def test_ghost_clipping_beta2_runs():
    model, opt, dl = _setup()
    pe = GGPrivacyEngine(accountant="prv")
    model, opt, crit, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                           max_grad_norm=1.0, clipping="ghost", criterion=nn.CrossEntropyLoss())
    xb, yb = next(iter(dl))
    opt.zero_grad()
    crit(model(xb), yb).backward()
    opt.step()
    assert opt.beta == 2.0 and len(pe.accountant) == 1


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"beta": 0.5}, "beta"),
        ({"beta": float("nan")}, "beta"),
        ({"noise_multiplier": -1.0}, "noise_multiplier"),
        ({"max_grad_norm": 0.0}, "max_grad_norm"),
        ({"max_grad_norm": [1.0, -1.0, 1.0, 1.0], "clipping": "per_layer"}, r"max_grad_norm\[1\]"),
        ({"clipping": "foo"}, "clipping"),
        ({"clipping": "per_layer", "max_grad_norm": 0.0}, "max_grad_norm"),
        ({"grad_sample_mode": "ghost_fsdp", "beta": 1.5}, "grad_sample_mode"),
        ({"clipping": "per_layer", "max_grad_norm": [1.0, 1.0]}, "max_grad_norm"),
        ({"max_grad_norm": [1.0, 1.0, 1.0, 1.0]}, "max_grad_norm"),
        ({"clipping": "ghost", "beta": 1.5}, "clipping"),
        ({"clipping": "ghost", "beta": 2.0, "clip_norm_p": 3.0}, "clipping"),
        ({"clip_norm_p": 0.5}, "clip_norm_p"),
        ({"rectify_bound": -1.0}, "rectify_bound"),
    ],
)
def test_bad_make_private_input(kw, match):
    model, opt, dl = _setup()
    args = dict(noise_multiplier=1.0, max_grad_norm=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        GGPrivacyEngine().make_private(module=model, optimizer=opt, data_loader=dl, **args)


@pytest.mark.parametrize("acc", ["prv", "rdp", "gdp"])
@pytest.mark.parametrize("kw", [{"beta": 1.5}, {"beta": 3.0}, {"beta": 2.0, "clip_norm_p": 3.0}])
def test_gaussian_accountant_refuses_gg(acc, kw):
    model, opt, dl = _setup()
    with pytest.raises(ValueError, match="Gaussian"):
        GGPrivacyEngine(accountant=acc).make_private(module=model, optimizer=opt, data_loader=dl,
                                                     noise_multiplier=1.0, max_grad_norm=1.0, **kw)
    with pytest.raises(ValueError, match="Gaussian"):
        GGPrivacyEngine(accountant=acc).make_private_with_epsilon(
            module=model, optimizer=opt, data_loader=dl, target_epsilon=1.0, target_delta=1e-5, epochs=1,
            max_grad_norm=1.0, **kw)


def test_bad_epsilon_inputs():
    model, opt, dl = _setup()
    pe = GGPrivacyEngine()
    for kw, match in (({"target_epsilon": 0.0}, "target_epsilon"), ({"target_delta": 1.0}, "target_delta"),
                      ({"epochs": 0}, "epochs")):
        args = dict(target_epsilon=1.0, target_delta=1e-5, epochs=1, max_grad_norm=1.0)
        args.update(kw)
        with pytest.raises(ValueError, match=match):
            pe.make_private_with_epsilon(module=model, optimizer=opt, data_loader=dl, **args)
    for d in (0.0, 1.0, -1e-5, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            pe.get_epsilon(d)


def test_secure_mode_refused_for_non_gaussian():
    prm = nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match="secure_mode"):
        GGDPOptimizer(torch.optim.SGD([prm], lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0,
                      expected_batch_size=4, beta=1.5, secure_mode=True)
    # at β = 2 Opacus's own secure path is used
    GGDPOptimizer(torch.optim.SGD([prm], lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=4,
                  beta=2.0, secure_mode=True)


def test_no_poisson_sampling_warns():
    model, opt, dl = _setup()
    with pytest.warns(UserWarning, match="NOT a guarantee"):
        GGPrivacyEngine().make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                       max_grad_norm=1.0, beta=1.5, poisson_sampling=False)


def test_adaptive_clipping_beta2_runs():
    from opacus_gg.optimizers import GGAdaClipDPOptimizer

    model, opt, dl = _setup()
    pe = GGPrivacyEngine()
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                     max_grad_norm=1.0, clipping="adaptive", target_unclipped_quantile=0.5,
                                     clipbound_learning_rate=0.2, max_clipbound=10.0, min_clipbound=0.1,
                                     unclipped_num_std=5.0)
    assert isinstance(opt, GGAdaClipDPOptimizer)
    _train(model, opt, dl, epochs=1)
    assert len(pe.accountant) > 0


# -- make_private_with_epsilon: Opacus's σ at β = 2, steps from steps_for_epochs -------------------------


@pytest.mark.parametrize(
    "accountant,solver_kw",
    [("prv", {"eps_error": 0.05}), ("prv", {"epsilon_tolerance": 0.5}), ("rdp", {"alphas": [2.0, 4.0, 8.0]}),
     ("gdp", {})],
)
def test_make_private_with_epsilon_forwards_solver_keywords(accountant, solver_kw):
    """σ equals Opacus's with the same solver keywords (4 batches × 5 epochs: Opacus's int(5/0.25) = 20 = T)."""
    sig = []
    for cls, kw in ((PrivacyEngine, {}), (GGPrivacyEngine, {"beta": 2.0})):
        model, opt, dl = _setup()
        _, opt, _ = cls(accountant=accountant).make_private_with_epsilon(
            module=model, optimizer=opt, data_loader=dl, target_epsilon=2.0, target_delta=1e-5, epochs=5,
            max_grad_norm=1.0, **solver_kw, **kw)
        sig.append(opt.noise_multiplier)
    assert sig[0] == sig[1]
    if solver_kw:  # the keyword matters: dropping it changes Opacus's σ
        model, opt, dl = _setup()
        _, opt, _ = PrivacyEngine(accountant=accountant).make_private_with_epsilon(
            module=model, optimizer=opt, data_loader=dl, target_epsilon=2.0, target_delta=1e-5, epochs=5,
            max_grad_norm=1.0)
        assert opt.noise_multiplier != sig[1]


def _epsilon_after_exact_epochs(n_batches: int, epochs: int, beta: float, accountant: str, target: float):
    """make_private_with_epsilon on n_batches single-example batches, train exactly `epochs` epochs."""
    torch.manual_seed(0)
    model = nn.Linear(1, 1)  # d = 2
    ds = TensorDataset(torch.randn(n_batches, 1), torch.randn(n_batches, 1))
    pe = GGPrivacyEngine(accountant=accountant)
    model, opt, dl = pe.make_private_with_epsilon(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.01), data_loader=DataLoader(ds, batch_size=1),
        target_epsilon=target, target_delta=1e-5, epochs=epochs, max_grad_norm=1.0, beta=beta)
    steps = 0
    for _ in range(epochs):
        for xb, yb in dl:
            opt.zero_grad()
            ((model(xb) - yb) ** 2).sum().backward()  # also on an empty Poisson batch
            opt.step()
            steps += 1
    return steps, pe.get_epsilon(1e-5)


_EPOCH_PAIRS_CI = [(75, 3)]
_EPOCH_PAIRS_SLOW = [(3, 1), (7, 3), (10, 7), (29, 2), (49, 3), (75, 3), (83, 6), (100, 1)]


def _check_no_overshoot(n_batches, epochs, beta, accountant):
    from opacus_gg.steps import steps_for_epochs

    target = 3.0
    steps, eps = _epsilon_after_exact_epochs(n_batches, epochs, beta, accountant, target)
    assert steps == steps_for_epochs(epochs, sample_rate=1 / n_batches) == n_batches * epochs
    assert eps <= target, (n_batches, epochs, beta, eps)


@pytest.mark.parametrize("n_batches,epochs", _EPOCH_PAIRS_CI)
@pytest.mark.parametrize("beta,accountant", [(1.5, "gg_prv"), (2.0, "gg_prv"), (2.0, "prv")])
def test_epsilon_after_training_never_exceeds_target(n_batches, epochs, beta, accountant):
    """75 × 3: Opacus's int(3/(1/75)) = 224 steps would give ε(225) = 3.0009 > 3 at β = 1.5."""
    _check_no_overshoot(n_batches, epochs, beta, accountant)


@pytest.mark.slow
@pytest.mark.parametrize("n_batches,epochs", _EPOCH_PAIRS_SLOW)
@pytest.mark.parametrize("beta,accountant", [(1.5, "gg_prv"), (2.0, "gg_prv"), (2.0, "prv")])
def test_epsilon_after_training_never_exceeds_target_many(n_batches, epochs, beta, accountant):
    _check_no_overshoot(n_batches, epochs, beta, accountant)


# -- per-layer clipping: total ℓp sensitivity ----------------------------------------------------------


@pytest.mark.parametrize("beta", [1.5, 2.0, 3.0])
def test_per_layer_total_c_is_split_for_lp(beta):
    """A single max_grad_norm C with clipping='per_layer' gives C_l = C·L^(−1/p), total ‖(C_l)‖_p = C."""
    model, opt, dl = _setup()
    _, opt, _ = GGPrivacyEngine().make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                               max_grad_norm=2.0, clipping="per_layer", beta=beta)
    L = 4
    assert opt.max_grad_norms == pytest.approx([2.0 * L ** (-1 / beta)] * L, rel=1e-15)
    assert opt.max_grad_norm == pytest.approx(2.0, rel=1e-6)  # Opacus's own ℓ2 total is float32 at β = 2


def test_opacus_l2_split_costs_noise_under_lp():
    """Opacus's C/√L split under ℓp (p = 1.5, L = 10) has total sensitivity C·L^(1/p−1/2) = 1.468·C."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2, 2, bias=False) for _ in range(10)])
    dl = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)
    _, opt, _ = GGPrivacyEngine().make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                               data_loader=dl, noise_multiplier=1.0, clipping="per_layer",
                                               max_grad_norm=[1.0 / math.sqrt(10)] * 10, beta=1.5)
    assert opt.max_grad_norm == pytest.approx(10 ** (1 / 1.5 - 0.5), rel=3e-12)  # rounded up by 1e-12
    assert 1.46 < opt.max_grad_norm < 1.47


# -- Opacus conventions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("accountant", ["prv", "rdp", "gdp"])
def test_get_epsilon_before_any_step_as_opacus(accountant):
    """Before any step GGPrivacyEngine answers exactly as Opacus's engine with the same accountant."""
    def outcome(engine):
        try:
            return engine.get_epsilon(1e-5)
        except Exception as e:  # Opacus's own behaviour (prv: ValueError, gdp: IndexError) is the reference
            return type(e)

    assert outcome(GGPrivacyEngine(accountant=accountant)) == outcome(PrivacyEngine(accountant=accountant))


def test_get_epsilon_before_any_step_gg_prv_is_zero():
    assert GGPrivacyEngine().get_epsilon(1e-5) == 0.0


def test_ghost_fsdp_beta2_equals_opacus():
    """grad_sample_mode='ghost_fsdp' (FSDP2, one gloo process; the model where FSDP2 puts it: CUDA where present) at
    β = 2: Opacus's parameters bit for bit."""
    import socket

    import torch.distributed as dist
    from opacus.utils.fsdp_utils import FSDP2Wrapper

    from opacus_gg.optimizers import GGFSDPOptimizerFastGradientClipping

    def run(cls, kw):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5))
        dp_model = FSDP2Wrapper(model)  # on a CUDA device where one is present
        dev = next(model.parameters()).device
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        ds = TensorDataset(torch.randn(32, 10), torch.randint(0, 5, (32,)))
        pe = cls(accountant="prv")
        dp_model, opt, crit, dl = pe.make_private(
            module=dp_model, optimizer=opt, criterion=nn.CrossEntropyLoss(), data_loader=DataLoader(ds, batch_size=16),
            noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False, grad_sample_mode="ghost_fsdp",
            noise_generator=torch.Generator(device=dev).manual_seed(3), **kw)
        for x, y in dl:
            opt.zero_grad()
            crit(dp_model(x.to(dev)), y.to(dev)).backward()
            opt.step()
        return opt, [p.full_tensor().detach().clone() for p in model.parameters()], pe.accountant.history

    sock = socket.socket()
    sock.bind(("localhost", 0))
    port = sock.getsockname()[1]
    sock.close()
    dist.init_process_group("gloo", init_method=f"tcp://localhost:{port}", rank=0, world_size=1)
    try:
        o_ref, w_ref, h_ref = run(PrivacyEngine, {})
        o_gg, w_gg, h_gg = run(GGPrivacyEngine, {"beta": 2.0})
    finally:
        dist.destroy_process_group()
    assert isinstance(o_gg, GGFSDPOptimizerFastGradientClipping)
    assert h_gg == h_ref == [(1.0, 0.5, 2)]
    assert all(torch.equal(a, b) for a, b in zip(w_ref, w_gg))


@pytest.mark.parametrize("n", [49, 98, 3, 7, 29, 83, 100])
def test_expected_batch_size_is_not_truncated_by_floating_point(n):
    """Opacus's int(N·(1/n_b)) is 0 for N = n_b = 49 (and n_b − 1 … for other N): the noisy sum would be divided
    by 0. The engine sets N/n_b (floored as Opacus when it is not an integer) and training stays finite."""
    from opacus_gg.steps import expected_batch_size

    assert expected_batch_size(n, n) == 1 and expected_batch_size(3 * n, n) == 3
    assert expected_batch_size(10, 4) == 2  # not an integer: floored, as in Opacus
    torch.manual_seed(0)
    model = nn.Linear(1, 1)
    ds = TensorDataset(torch.randn(n, 1), torch.randn(n, 1))
    _, opt, dl = GGPrivacyEngine().make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.01), data_loader=DataLoader(ds, batch_size=1),
        noise_multiplier=0.8, max_grad_norm=1.0, beta=1.5)
    assert opt.expected_batch_size == 1
    for xb, yb in dl:
        opt.zero_grad()
        ((model(xb) - yb) ** 2).sum().backward()
        opt.step()
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_expected_batch_size_rejects_no_batches():
    from opacus_gg.steps import expected_batch_size

    with pytest.raises(ValueError, match="n_batches"):
        expected_batch_size(10, 0)


def test_lp_clipping_advice_is_shown_once_and_only_for_lbeta_clipping_at_beta_not_2(monkeypatch):
    import warnings

    from opacus_gg import engine as engine_module

    def warned(**kw):
        model, opt, dl = _setup()
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            GGPrivacyEngine().make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                           max_grad_norm=1.0, **kw)
        return [w for w in rec if issubclass(w.category, engine_module.ClippingAdvice)]

    monkeypatch.setattr(engine_module, "_ADVICE_SHOWN", False)
    assert warned(beta=2.0) == [] and warned(beta=1.5, clip_norm_p=2.0) == [] and warned(beta=3.0, clip_norm_p=2) == []
    (first,) = warned(beta=1.5)
    text = str(first.message)
    assert "clip_norm_p=2" in text and "lp_max_grad_norm" in text and "\n" not in text
    assert first.filename == __file__  # points at the caller's make_private line
    assert warned(beta=1.5) == [] and warned(beta=3.0) == []  # once per process
    monkeypatch.setattr(engine_module, "_ADVICE_SHOWN", False)
    assert "looser" in str(warned(beta=3.0)[0].message)


@pytest.mark.parametrize("beta, dim", [(1.5, 3), (3.0, 3)])  # the Rényi bound over the ℓp ball (β ≠ 2, d > 1)
def test_get_epsilon_leaves_the_users_once_per_location_warnings_alone(beta, dim):
    """get_epsilon must not change the warnings filters: doing so resets Python's once-per-location registry,
    so a warning the user's loop raises (torch's full-backward-hook notice, say) would repeat every epoch."""
    import warnings

    from opacus_gg.accountants import compute_epsilon

    def user_code():
        warnings.warn("a notice from the user's training loop", UserWarning)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        for _ in range(3):
            user_code()
            compute_epsilon(noise_multiplier=1.0, sample_rate=0.05, steps=20, delta=1e-5, beta=beta, dim=dim)
    assert sum("user's training loop" in str(w.message) for w in seen) == 1


@pytest.mark.parametrize("method", ["make_private", "make_private_with_epsilon"])
@pytest.mark.parametrize("wrong,right", [("betta", "beta"), ("clip_norm", "clip_norm_p"),
                                         ("poisson_sampling_", "poisson_sampling"), ("loss_reduce", "loss_reduction")])
def test_misspelt_keyword_is_refused_naming_the_closest(method, wrong, right):
    """A misspelt keyword (which Opacus's **kwargs swallowed: betta=1.5 trained Gaussian β = 2) is refused
    before anything is built, naming the closest valid keyword."""
    model, opt, dl = _setup()
    kw = (dict(noise_multiplier=1.0) if method == "make_private"
          else dict(target_epsilon=3.0, target_delta=1e-5, epochs=1))
    with pytest.raises(ValueError, match=rf"unknown keyword '{wrong}'; did you mean '{right}'\?"):
        getattr(GGPrivacyEngine(), method)(module=model, optimizer=opt, data_loader=dl, max_grad_norm=1.0,
                                           **kw, **{wrong: 1.5})
    assert not hasattr(model, "_module")


def test_make_private_uses_the_validated_noise_multiplier():
    """noise_multiplier="1.0" is cleaned to the float 1.0 that validation accepted (it used to stay a string and
    fail later inside step())."""
    model, opt, dl = _setup()
    model, opt, dl = GGPrivacyEngine().make_private(module=model, optimizer=opt, data_loader=dl,
                                                    noise_multiplier="1.0", max_grad_norm=1.0, beta=1.5)
    assert opt.noise_multiplier == 1.0 and isinstance(opt.noise_multiplier, float)
    _train(model, opt, dl, epochs=1)


def test_secure_mode_error_says_beta_2_first():
    """Without torchcsprng, GGPrivacyEngine(secure_mode=True) fails with Opacus's ImportError led by the reason
    that matters at β ≠ 2 (secure mode exists only at β = 2)."""
    try:
        import torchcsprng  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torchcsprng is installed: the ImportError path does not arise")
    with pytest.raises(ImportError, match=r"^secure_mode=True works only with beta=2.*torchcsprng"):
        GGPrivacyEngine(secure_mode=True)


def test_shuffled_batches_are_not_reported_as_a_guarantee():
    """poisson_sampling=False: the gg_prv report is scoped "shuffled" (certified False, printed "NOT a guarantee
    (shuffled batches)"), not "proven"; the same run with Poisson sampling is proven."""
    from opacus_gg.accountants.report import SCOPE_TEXT

    for poisson, scope in ((False, "shuffled"), (True, "proven")):
        model, opt, dl = _setup()
        pe = GGPrivacyEngine()
        with pytest.warns(UserWarning) if not poisson else contextlib.nullcontext():
            model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                             max_grad_norm=1.0, beta=1.5, poisson_sampling=poisson)
        _train(model, opt, dl, epochs=1)
        report = pe.accountant.get_epsilon_report(1e-5)
        assert report.scope == scope and report.certified is poisson
        assert report.to_dict()["certified"] is poisson
        assert SCOPE_TEXT[scope] in report.summary()
    assert SCOPE_TEXT["shuffled"] == "NOT a guarantee (shuffled batches)"


_OVERFLOW = [(b, dt, sigma, mgn, f"overflow {dt}") for b in (1.5, 2.0, 3.0)
             for dt, sigma, mgn in ((torch.float32, 1e6, 1e33), (torch.float16, 2e4, 1.0))]
_UNDERFLOW = [(b, dt, 1.0, mgn, f"below the smallest GG.*{dt}") for b, dt, mgn in
              ((1.5, torch.float32, 1e-31), (3.0, torch.float32, 1e-31), (2.0, torch.float32, 1e-39),
               (1.5, torch.float16, 1e-5))]


@pytest.mark.parametrize("beta,dtype,sigma,mgn,message", _OVERFLOW + _UNDERFLOW)
def test_noise_scale_outside_what_the_dtype_and_sampler_represent_is_refused_before_the_write(
        beta, dtype, sigma, mgn, message):
    """σ·C whose noise would overflow the parameters' dtype (float32 beyond 3.4e38, fp16 beyond 65504; it used to
    write inf into the parameters, and the next step blamed the gradient), or below distribution.min_scale (β ≠ 2
    in float32: the CPU lattice widths turn subnormal, ≈ 3.6e-31 at β = 1.5; β = 2: s below float32's smallest
    normal; fp16: below 6.1e-5; at s ≈ 1e-39 the CPU sampler's float32 draws were 73 % zeros, KS p = 0, and the
    step went through): ValueError naming the dtype before anything changes."""
    if sigma * mgn < 1.0:
        assert sigma * mgn < distribution.min_scale(beta, dtype)
    torch.manual_seed(0)
    prm = torch.nn.Parameter(torch.randn(50, dtype=dtype))
    before = prm.detach().clone()
    opt = GGDPOptimizer(torch.optim.SGD([prm], lr=0.1), noise_multiplier=sigma, max_grad_norm=mgn,
                        expected_batch_size=4, beta=beta)
    hook = []
    opt.attach_step_hook(lambda o: hook.append(1))
    prm.grad_sample = torch.randn(4, 50, dtype=dtype)
    with pytest.raises(ValueError, match=message):
        opt.step()
    assert torch.equal(prm.detach(), before) and prm.grad is None and not hook and prm.summed_grad is None


@pytest.mark.parametrize("beta", [1.5, 3.0])
def test_sampler_is_exact_at_its_smallest_scale_and_collapses_far_below(beta):
    """At s = distribution.min_scale(β, float32) the CPU draws / s are GG(β, 1) (KS, 20000 draws); at 2⁻²⁸ of it
    (s ≈ 1e-39, below float32's smallest normal) most draws are 0: what the refusal above prevents."""
    m = distribution.min_scale(beta, torch.float32)
    ref = stats.gennorm(beta, scale=distribution.gennorm_scale(beta, 1.0)).cdf
    x = distribution.sample(20000, beta, m, generator=torch.Generator().manual_seed(0)).double().numpy() / m
    assert stats.kstest(x, ref).pvalue > 1e-3
    s = m * 2.0**-28
    y = distribution.sample(20000, beta, s, generator=torch.Generator().manual_seed(0)).double().numpy() / s
    assert (y == 0).mean() > 0.5 and stats.kstest(y, ref).pvalue < 1e-10


def test_noise_range_tail_bound_holds():
    """The bound behind validate_noise_scale: P(|X| > t) ≤ exp(−(t/s)^β/β) for GG(β, s), t ≥ s (quadrature)."""
    from scipy import integrate, special

    for beta in (1.0, 1.5, 2.0, 3.0, 8.0):
        z = 2 * beta ** (1 / beta) * special.gamma(1 + 1 / beta)
        for t in (1.0, 1.5, 3.0, 6.0):
            tail = 2 * integrate.quad(lambda x: math.exp(-x**beta / beta), t, math.inf, epsabs=0, epsrel=1e-10)[0] / z
            assert tail <= math.exp(-t**beta / beta)
