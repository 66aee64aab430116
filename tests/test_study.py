"""The β study (``opacus-gg study``) on a tiny grid: equal proven ε within each (ε, β, p) group, C mapped to ℓp by
the norm ratio, the tables and the figure; and the ℓp clipping helper against an independent norm computation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from opacus_gg.experiments.study import (aggregate, best_c, drop_in, markdown_tables, run_study, study_config,
                                         write_outputs)
from opacus_gg.tuning import grad_norm_ratio, lp_max_grad_norm


def test_study_on_a_tiny_grid_keeps_epsilon_per_group_and_maps_c(tmp_path: Path) -> None:
    cfg = study_config("breast_cancer", overrides=["train.epochs=1"])
    res = run_study(cfg, tmp_path, betas=[1.0, 2.0], epsilons=[8.0], seeds=[0, 1], c_grid=[0.3, 1.0],
                    workers=1, log=lambda s: None)
    rows = res["rows"]
    assert len(rows) == 3 * 2 * 2 and all(r["error"] is None for r in rows)  # groups (1,1), (1,2), (2,2)
    ratio = float(res["ratios"]["1"])
    d = rows[0]["dim"]
    assert 1.0 < ratio < d ** 0.5  # ‖g‖₂ ≤ ‖g‖₁ ≤ √d‖g‖₂, strict for a non-degenerate gradient
    for r in rows:
        assert r["epsilon_scope"] == "proven" and r["epsilon"] <= 8.0
        assert r["max_grad_norm"] == pytest.approx(r["c2"] * (ratio if r["clip_norm_p"] == 1.0 else 1.0))
        same = [s for s in rows if (s["beta"], s["clip_norm_p"]) == (r["beta"], r["clip_norm_p"])]
        assert {s["noise_multiplier"] for s in same} == {r["noise_multiplier"]}  # one σ per group: equal ε
    agg = aggregate(rows)
    assert len(agg) == 6 and all(a["n"] == 2 for a in agg)
    assert len(best_c(agg)) == 3
    (gap,) = drop_in(agg)
    assert gap["beta"] == 1.0 and gap["gap_l2"] >= 0 and gap["gap_lbeta"] >= 0  # the grid's best is the max
    paths = write_outputs(res, tmp_path, "breast_cancer")
    table = paths["table"].read_text()
    assert "| 8 | 1 | ℓβ (p = 1) |" in table and "| 8 | 1 | ℓ2 (p = 2) |" in table and "(proven)" in table
    assert "ball table" not in table  # the caption names the bound: privacy.ball_bound = table only where set
    assert "every shift of the ℓp ball, the ball table's PRV where it applies)" in markdown_tables(
        agg, dataset="breast_cancer", delta=1e-5, ball_bound="table")
    assert paths["figure"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = run_study(cfg, tmp_path, betas=[1.0, 2.0], epsilons=[8.0], seeds=[0, 1], c_grid=[0.3, 1.0],
                      workers=2, log=lambda s: None)  # finished runs are reused, groups in two processes, in order
    assert again["rows"] == rows


def test_grad_norm_ratio_matches_an_independent_norm_and_scales_c() -> None:
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(7, 3, 4, generator=g), torch.randn(7, 5, generator=g)]
    grads[1][0] = 0.0
    flat = torch.cat([t.flatten(1) for t in grads], 1).double()
    for p in (1.0, 1.5, 3.0, math.inf):
        want = torch.quantile(torch.linalg.vector_norm(flat, ord=p, dim=1) / flat.norm(dim=1), 0.5).item()
        assert grad_norm_ratio(grads, p) == pytest.approx(want, rel=1e-4)
        assert lp_max_grad_norm(0.5, p, grads) == pytest.approx(0.5 * want, rel=1e-4)
    one_hot = [torch.zeros(3, 10)]
    one_hot[0][:, 2] = 1.0
    assert grad_norm_ratio(one_hot, 1.0) == pytest.approx(1.0, rel=1e-4)  # one coordinate: every norm agrees
    with pytest.raises(ValueError, match="every per-sample gradient is zero"):
        grad_norm_ratio([torch.zeros(4, 3)], 1.5)
    with pytest.raises(ValueError, match="clip_norm_p"):
        lp_max_grad_norm(1.0, 0.5, grads)
    with pytest.raises(ValueError, match="max_grad_norm"):
        lp_max_grad_norm(-1.0, 1.5, grads)
