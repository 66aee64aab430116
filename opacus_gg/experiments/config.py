"""Experiment configuration: YAML files with defaults, dotted ``key=value`` overrides, validation.

A config is a nested dict with the sections ``data``, ``model``, ``privacy``, ``train`` and
``sweep`` plus the top-level keys ``name``, ``seed``, ``device``, ``output_dir``.
Every key can be overridden from the command line with ``--set section.key=value`` (the value is
parsed as YAML, so ``1e-6``, ``[1, 2]``, ``null`` and ``true`` work).

The paper's configs ship inside the package (``opacus_gg/experiments/configs/*.yaml``): ``load_config``
takes a path to any YAML file or the name of a bundled config (``quickstart``, ``adult_fcn``, …), so
``opacus-gg train --config quickstart`` works from any directory.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Union

import yaml

from ..validation import (
    COUNT_SENSITIVITY,
    validate_ball_bound,
    validate_beta,
    validate_clip_norm_p,
    validate_delta,
    validate_probability,
    validate_noise_multiplier,
    validate_nonnegative,
    validate_positive,
    validate_positive_int,
)

Config = Dict[str, Any]


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-6`` (no dot) as a float (YAML 1.1 would give a string)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def _yaml_load(text: str, source: str = "--set") -> Any:
    """Parse YAML; a syntax error becomes one ValueError line naming ``source`` and the line/column."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        hint = " (the text contains tab characters: YAML indents with spaces only)" if "\t" in text else ""
        raise ValueError(f"{source}: not valid YAML at{where}: {problem}{hint}") from None


#: the configs bundled with the package
CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def bundled_configs() -> list:
    """Names of the configs shipped in :data:`CONFIG_DIR`."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def resolve_config(path: Union[str, Path]) -> Path:
    """An existing file at ``path``; else the bundled config named by its stem (``quickstart``,
    ``quickstart.yaml`` or ``configs/quickstart.yaml``); else ValueError listing the bundled names."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    if p.is_dir():
        raise ValueError(f"--config: {p} is a directory, not a YAML file")
    if p.suffix in ("", ".yaml", ".yml") and (p.parent == Path(".") or p.parent.name == "configs"):
        bundled = CONFIG_DIR / f"{p.stem}.yaml"
        if bundled.is_file():
            return bundled
    raise ValueError(f"--config: no file {str(path)!r} and no bundled config of that name "
                     f"(bundled: {', '.join(bundled_configs())})")

DATASETS = ("digits", "breast_cancer", "synthetic", "cifar10", "svhn", "adult", "imdb")
MODELS = ("mlp", "fcn", "cnn", "scatternet_cnn", "lstm")
FEATURES = ("raw", "scatter", "stub")
CLIPPING = ("flat", "per_layer", "adaptive")

DEFAULTS: Config = {
    "name": "run",
    "seed": 0,
    "device": "cpu",
    "output_dir": "runs/run",
    "overwrite": False,  # an existing run directory is kept: a new one (<dir>-2, -3, …) is used unless true
    "compare_opacus": False,  # also train with opacus.PrivacyEngine (Gaussian, ℓ2) at the same ε, for comparison
    "resume": None,
    "quiet": False,
    "data": {
        "name": "synthetic",
        "root": "data",
        "download": False,
        "features": "raw",  # raw | scatter (kymatio) | stub (test-only stand-in for scattering)
        "cache_dir": None,  # feature cache; default <root>/feature_cache
        "n_train": 2000,  # synthetic only
        "n_test": 1000,
        "n_features": 20,
        "n_classes": 4,
        "class_sep": 2.5,
        "vocab_size": 10000,  # imdb only
        "max_len": 256,
        "limit_train": None,  # use only the first N training examples (debugging / CI)
        "limit_test": None,
    },
    "model": {"name": "mlp", "hidden": None, "width": None, "embed_dim": None, "num_groups": None},  # None = class default
    "privacy": {
        "beta": 2.0,
        "clip_norm_p": None,  # None = beta (ℓβ clipping)
        "target_epsilon": 3.0,
        "target_delta": 1e-5,
        "noise_multiplier": None,  # if set: fixed σ (no calibration to target_epsilon)
        "max_grad_norm": 1.0,  # C (with clipping: adaptive, the initial bound C_0)
        # flat | per_layer (max_grad_norm is the total ℓp sensitivity, split C·L^(−1/p)) | adaptive (any β, p: the
        # bound tracks a quantile of the per-sample ℓp norms, Andrew et al. 2021; its noisy unclipped count is
        # accounted, so σ is solved with it: docs/engine.md, "Adaptive clipping")
        "clipping": "flat",
        # adaptive only (Opacus's AdaClipDPOptimizer arguments). γ = 0.1: on digits at β = p = 1.5 it came within
        # 1.8 points of the best fixed C; the median (γ = 0.5, Andrew et al.'s default) lost 46 (docs/engine.md)
        "target_unclipped_quantile": 0.1,
        "clipbound_learning_rate": 0.2,  # η: C ← C·exp(−η(unclipped fraction − γ))
        "max_clipbound": 100.0,
        "min_clipbound": 0.001,
        "unclipped_num_std": None,  # σ_b of the count; None = train.batch_size / 20 (Andrew et al.); σ_c = 2σ_b
        "poisson_sampling": True,
        "calibration": "certified",  # certified | paper: which ε the σ solver targets
        # the proven bound over the ℓp ball where the PRV covers equal spreads only (β ∉ {1, 2}, d > 1): renyi (fast)
        # | table (tighter, the ball table's PRV for p ≤ 1.8, and p ≤ 2 above β = 2: minutes per σ, kept on disk;
        # docs/accounting.md, "Every shift at PRV level"); GGPrivacyEngine(ball_bound=...)
        "ball_bound": "renyi",
        # also report the paper-mode ε (an estimate, NOT a guarantee for β ≠ 2): false | final | true (every
        # epoch). It is a sampled PRV (10^6 draws per step shape, one composition, without its error bars): 0.1–0.5 s
        # of CPU per evaluation at T ≤ 10^4 (docs/paper_mode_and_cli.md); the default computes it once, after the
        # last epoch
        "paper_epsilon": "final",
        # also compute, after the last epoch, the equal-spread PRV ε beside the proven one (a diagnostic, not a
        # guarantee: seconds to a minute for β ≠ 2 with d > 1, so off by default; every row carries the proven ε)
        "equal_spreads_epsilon": False,
        "eps_error": 0.01,  # accountant discretization error (the reported ε is an upper bound including it)
        "epsilon_tolerance": 0.01,  # σ solver: target ε − 0.01 ≤ certified ε ≤ target ε
    },
    "train": {
        "epochs": 1,
        "batch_size": 256,  # expected batch size (Poisson sampling: q = batch_size / n)
        "max_physical_batch_size": None,
        "eval_batch_size": 1024,
        "optimizer": "sgd",
        "lr": 0.5,
        "momentum": 0.0,
        "weight_decay": 0.0,
        "num_workers": 0,
    },
    "sweep": {
        "betas": [1.0, 1.5, 2.0, 2.5, 3.0, 4.0],
        "target_epsilons": [1.0, 2.0, 3.0],
        "seeds": [0, 1, 2],
        "grid": {},  # extra dotted keys -> list of values (e.g. {"train.lr": [0.5, 1.0]})
    },
}


def _deep_update(base: Config, new: Mapping[str, Any], path: str = "") -> Config:
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_update(base[key], value, f"{path}{key}.")
        else:
            base[key] = copy.deepcopy(value)
    return base


def load_config(path: Union[str, Path, None] = None) -> Config:
    """Load a YAML config over :data:`DEFAULTS` (a missing key keeps its default)."""
    cfg = copy.deepcopy(DEFAULTS)
    if path is None:
        return cfg
    p = resolve_config(path)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"config: cannot read {p}: {e}") from None
    loaded = _yaml_load(text, f"config {p}") or {}
    if not isinstance(loaded, Mapping):
        raise ValueError(f"config: {p} must hold a YAML mapping, got {type(loaded).__name__}")
    unknown = _unknown_keys(loaded, DEFAULTS)
    if unknown:
        raise ValueError(f"config: unknown key(s) in {p}: {', '.join(unknown)}")
    return _deep_update(cfg, loaded)


def _unknown_keys(d: Mapping[str, Any], ref: Mapping[str, Any], prefix: str = "") -> list:
    out = []
    for k, v in d.items():
        if k not in ref:
            out.append(prefix + k)
        elif isinstance(v, Mapping) and isinstance(ref[k], dict) and k != "grid":
            out.extend(_unknown_keys(v, ref[k], prefix + k + "."))
    return out


def set_key(cfg: Config, dotted: str, value: Any) -> None:
    """Set ``cfg[a][b] = value`` for ``dotted = "a.b"``; the key must exist in :data:`DEFAULTS`."""
    parts = dotted.split(".")
    node: Any = cfg
    ref: Any = DEFAULTS
    for i, part in enumerate(parts):
        if not isinstance(ref, dict) or part not in ref:
            raise ValueError(f"--set: unknown config key {dotted!r}")
        if i == len(parts) - 1:
            node[part] = value
        else:
            node, ref = node[part], ref[part]


def parse_override(text: str) -> tuple:
    """Parse ``"section.key=value"`` into ``(key, value)`` with the value read as YAML."""
    if "=" not in text:
        raise ValueError(f"--set expects key=value, got {text!r}")
    key, raw = text.split("=", 1)
    return key.strip(), _yaml_load(raw, f"--set {text}")


def apply_overrides(cfg: Config, overrides: Union[Mapping[str, Any], Iterable[str]]) -> Config:
    """Apply dotted overrides (a mapping or ``key=value`` strings) to a copy of ``cfg``."""
    out = copy.deepcopy(cfg)
    items = overrides.items() if isinstance(overrides, Mapping) else map(parse_override, overrides)
    for key, value in items:
        set_key(out, key, value)
    return out


def _number(name: str, value: Any) -> Any:
    """A YAML number (int or float, not a bool or a string); its range is checked by :mod:`opacus_gg.validation`."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return value


def _positive(name: str, value: Any, *, integer: bool = False, allow_zero: bool = False) -> None:
    """A finite number > 0 (≥ 0 with ``allow_zero``), an integer with ``integer``."""
    _number(name, value)
    if integer:
        validate_positive_int(value, name, minimum=0 if allow_zero else 1)
    elif allow_zero:
        validate_nonnegative(value, name)
    else:
        validate_positive(value, name)


def validate_config(cfg: Config) -> Config:
    """Check every key's type and range; raise ``ValueError`` naming the key and its allowed range."""
    d, m, p, t = cfg["data"], cfg["model"], cfg["privacy"], cfg["train"]
    if d["name"] not in DATASETS:
        raise ValueError(f"data.name must be one of {DATASETS}, got {d['name']!r}")
    if m["name"] not in MODELS:
        raise ValueError(f"model.name must be one of {MODELS}, got {m['name']!r}")
    if d["features"] not in FEATURES:
        raise ValueError(f"data.features must be one of {FEATURES}, got {d['features']!r}")
    beta = validate_beta(_number("privacy.beta", p["beta"]), "privacy.beta")
    if p["clip_norm_p"] is not None:
        validate_clip_norm_p(_number("privacy.clip_norm_p", p["clip_norm_p"]), beta, "privacy.clip_norm_p")
    _positive("privacy.max_grad_norm", p["max_grad_norm"])
    validate_delta(_number("privacy.target_delta", p["target_delta"]), "privacy.target_delta")
    if p["noise_multiplier"] is None:
        _positive("privacy.target_epsilon", p["target_epsilon"])
    else:
        validate_noise_multiplier(_number("privacy.noise_multiplier", p["noise_multiplier"]),
                                  "privacy.noise_multiplier", allow_zero=False)
    if p["calibration"] not in ("certified", "paper"):
        raise ValueError(f"privacy.calibration must be 'certified' or 'paper', got {p['calibration']!r}")
    validate_ball_bound(p["ball_bound"], "privacy.ball_bound")
    if p["clipping"] not in CLIPPING:
        raise ValueError(f"privacy.clipping must be one of {CLIPPING}, got {p['clipping']!r}")
    validate_probability(_number("privacy.target_unclipped_quantile", p["target_unclipped_quantile"]),
                         "privacy.target_unclipped_quantile")
    _positive("privacy.clipbound_learning_rate", p["clipbound_learning_rate"], allow_zero=True)
    _positive("privacy.max_clipbound", p["max_clipbound"])
    _positive("privacy.min_clipbound", p["min_clipbound"])
    if p["max_clipbound"] <= p["min_clipbound"]:
        raise ValueError(f"privacy.max_clipbound must be larger than privacy.min_clipbound, got "
                         f"{p['max_clipbound']!r} <= {p['min_clipbound']!r}")
    if p["unclipped_num_std"] is not None:
        validate_noise_multiplier(_number("privacy.unclipped_num_std", p["unclipped_num_std"]),
                                  "privacy.unclipped_num_std", allow_zero=False, sensitivity=COUNT_SENSITIVITY)
    if p["clipping"] == "adaptive" and p["calibration"] == "paper":
        raise ValueError("privacy.calibration='paper' cannot go with privacy.clipping='adaptive': the paper's "
                         "accounting has no count query (use calibration 'certified')")
    _positive("privacy.eps_error", p["eps_error"])
    _positive("privacy.epsilon_tolerance", p["epsilon_tolerance"])
    if not isinstance(p["equal_spreads_epsilon"], bool):
        raise ValueError(f"privacy.equal_spreads_epsilon must be true or false, got {p['equal_spreads_epsilon']!r}")
    if p["paper_epsilon"] not in (True, False, "final"):
        raise ValueError(f"privacy.paper_epsilon must be true, false or 'final', got {p['paper_epsilon']!r}")
    _positive("train.epochs", t["epochs"], integer=True)
    _positive("train.batch_size", t["batch_size"], integer=True)
    _positive("train.eval_batch_size", t["eval_batch_size"], integer=True)
    if t["max_physical_batch_size"] is not None:
        _positive("train.max_physical_batch_size", t["max_physical_batch_size"], integer=True)
    _positive("train.lr", t["lr"])
    _positive("train.momentum", t["momentum"], allow_zero=True)
    _positive("train.weight_decay", t["weight_decay"], allow_zero=True)
    if t["optimizer"] not in ("sgd", "adam"):
        raise ValueError(f"train.optimizer must be 'sgd' or 'adam', got {t['optimizer']!r}")
    _positive("seed", cfg["seed"], integer=True, allow_zero=True)
    dev = cfg["device"]
    if not (isinstance(dev, str) and re.fullmatch(r"cpu|mps|cuda(:[0-9]+)?", dev)):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {dev!r} (--device)")
    for key in ("overwrite", "compare_opacus", "quiet"):
        if not isinstance(cfg[key], bool):
            raise ValueError(f"{key} must be true or false, got {cfg[key]!r}")
    for key in ("n_train", "n_test", "n_features", "vocab_size", "max_len"):
        _positive(f"data.{key}", d[key], integer=True)
    validate_positive_int(d["n_classes"], "data.n_classes", minimum=2, allow_float=False)
    for key in ("limit_train", "limit_test"):
        if d[key] is not None:
            _positive(f"data.{key}", d[key], integer=True)
    if m["name"] == "scatternet_cnn" and d["features"] == "raw":
        raise ValueError("model.name=scatternet_cnn needs data.features 'scatter' (or 'stub' in tests), got 'raw'")
    if m["name"] in ("cnn", "scatternet_cnn") and d["name"] not in ("cifar10", "svhn"):
        raise ValueError(f"model.name={m['name']} needs an image dataset (cifar10, svhn), got {d['name']!r}")
    if (m["name"] == "lstm") != (d["name"] == "imdb"):
        raise ValueError("model.name=lstm goes with data.name=imdb (and imdb needs the lstm model)")
    return cfg
