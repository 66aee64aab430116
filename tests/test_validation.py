"""Shared validators: clean values pass through, bad ones raise ValueError naming the parameter and range."""

from __future__ import annotations

import math

import pytest

from opacus_gg import validation as V


def test_good_values():
    assert V.validate_beta(1) == 1.0 and V.validate_beta("2.5") == 2.5
    assert V.validate_noise_multiplier(0) == 0.0
    assert V.validate_max_grad_norm(2) == 2.0
    assert V.validate_max_grad_norm((1, 2.5)) == [1.0, 2.5]
    assert V.validate_clip_norm_p(None, 3.0) == 3.0
    assert V.validate_clip_norm_p(math.inf, 3.0) == math.inf
    assert V.validate_sample_rate(1.0) == 1.0
    assert V.validate_delta(1e-9) == 1e-9
    assert V.validate_epsilon(0.5) == 0.5
    assert V.validate_positive_int(3, "steps") == 3 and V.validate_positive_int(4.0, "steps") == 4
    assert V.validate_rectify_bound(None) is None and V.validate_rectify_bound(2) == 2.0
    assert V.validate_clipping("ghost", 2.0, 2.0) == "ghost"
    assert V.validate_clipping("per_layer", 1.5, 1.5) == "per_layer"


@pytest.mark.parametrize(
    "fn,args,name",
    [
        (V.validate_beta, (0.99,), "beta"),
        (V.validate_beta, (math.inf,), "beta"),
        (V.validate_beta, (None,), "beta"),
        (V.validate_scale, (0.0,), "scale"),
        (V.validate_noise_multiplier, (-0.1,), "noise_multiplier"),
        (V.validate_noise_multiplier, (math.nan,), "noise_multiplier"),
        (V.validate_noise_multiplier, (True,), "noise_multiplier"),
        (V.validate_max_grad_norm, (0.0,), "max_grad_norm"),
        (V.validate_max_grad_norm, (math.inf,), "max_grad_norm"),
        (V.validate_max_grad_norm, ([],), "max_grad_norm"),
        (V.validate_max_grad_norm, ([1.0, 0.0],), r"max_grad_norm\[1\]"),
        (V.validate_clip_norm_p, (0.5, 2.0), "clip_norm_p"),
        (V.validate_clip_norm_p, (math.nan, 2.0), "clip_norm_p"),
        (V.validate_clip_norm_p, (None, 0.5), "beta"),
        (V.validate_sample_rate, (0.0,), "sample_rate"),
        (V.validate_sample_rate, (1.5,), "sample_rate"),
        (V.validate_delta, (0.0,), "delta"),
        (V.validate_delta, (1.0,), "delta"),
        (V.validate_delta, ("x",), "delta"),
        (V.validate_epsilon, (0.0,), "target_epsilon"),
        (V.validate_epsilon, (math.inf,), "target_epsilon"),
        (V.validate_positive_int, (0, "steps"), "steps"),
        (V.validate_positive_int, (2.5, "steps"), "steps"),
        (V.validate_rectify_bound, (0.0,), "rectify_bound"),
        (V.validate_clipping, ("fancy", 2.0, 2.0), "clipping"),
        (V.validate_clipping, ("ghost", 1.5, 1.5), "clipping"),
        (V.validate_clipping, ("ghost", 2.0, 3.0), "clipping"),
        (V.validate_probability, (1.5, "target_unclipped_quantile"), "target_unclipped_quantile"),
    ],
)
def test_bad_values_raise_naming_parameter(fn, args, name):
    with pytest.raises(ValueError, match=name):
        fn(*args)
