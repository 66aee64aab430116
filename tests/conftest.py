"""Shared fixtures: tiny, learnable datasets written in the real on-disk formats (never downloaded), by the
package's own demo-data writers (:mod:`opacus_gg.experiments.demo_data`, also ``opacus-gg demo-data``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Tuple

import pytest

from opacus_gg.experiments.demo_data import write_adult, write_cifar10, write_demo_data, write_imdb, write_svhn

__all__ = ["write_adult", "write_cifar10", "write_imdb", "write_svhn"]

#: test files of the full command only (marked ``full``, deselected by the README's quick tier ``-m "not slow and
#: not full"``): they train models end to end, spawn processes (DDP, the CLI in a subprocess, the example script)
#: or run Opacus's own engine suite. Each still runs in the full command (``.ci/run``); the accountant's soundness
#: properties, the engine, clipping, noise and the CLI's answers keep their tests in the quick tier.
FULL_ONLY_FILES = frozenset({
    "test_opacus_suite.py", "test_ddp.py", "test_example_dp_sgd.py", "test_readme_snippets.py",
    "test_experiments_run.py", "test_experiments_sweep.py", "test_experiments_train.py",
    "test_experiments_train_more.py", "test_study.py", "test_cli_outputs.py", "test_pate_experiments.py",
    "test_accountant_tight.py",
    # research tools of benchmarks/ (issue 35: the Base's ceiling, C4's decay lemmas, C3's remainder, C5's Base,
    # the adaptive lower bounds, the large-d table prototype):
    # diagnostics that no published number reads
    "test_base_ceiling.py", "test_contour_decay.py", "test_contour_remainder.py", "test_adaptive_worst.py",
    "test_bigd_table.py", "test_contour_base.py",
})
#: single tests of the full command only: the slowest of the quick files (30–150 s each on the loaded 2-core
#: machine), each with a faster sibling in the quick tier that checks the same property (named beside it)
FULL_ONLY_TESTS = frozenset({
    # sibling: test_proven_epsilon_is_above_the_lower_bound_oracle (one segment; the schedule's is composed alike)
    "test_accountant_properties.py::test_proven_epsilon_of_a_schedule_is_above_the_lower_bound_oracle",
    # siblings: test_table_bound_publishes_the_smaller_proven_epsilon_labelled_prv_table, the solver's own tests
    "test_ball_table.py::test_solver_table_bound_lowers_sigma_and_meets_the_target",
    # siblings: the same test at (1.2, 1.5, 1) and (1.8, 1.8, 4)
    "test_ball_table.py::test_table_top_pair_dominates_one_and_two_coordinate_shifts_in_both_orientations[3.0-1.5-1]",
    "test_ball_table.py::test_table_top_pair_dominates_one_and_two_coordinate_shifts_in_both_orientations[1.2-1.2-1]",
    "test_ball_table.py::test_table_top_pair_dominates_one_and_two_coordinate_shifts_in_both_orientations[1.5-1.5-1]",
    # siblings: test_table_above_beta_two_at_p_two_is_above_the_oracle_for_one_two_and_k_equal_coordinates (the same
    # table at (3, 2)), test_mean_variance_bound_is_above_the_exact_curves_and_rounded_up
    "test_ball_table.py::test_table_top_pair_dominates_one_and_two_coordinate_shifts_in_both_orientations[3.0-2.0-above2]",
    "test_ball_table.py::test_table_top_pair_dominates_one_and_two_coordinate_shifts_in_both_orientations[2.5-2.0-above2]",
    # sibling: test_table_bound_publishes_the_smaller_proven_epsilon_labelled_prv_table (the same API path at β = 1.2)
    "test_ball_table.py::test_table_bound_above_beta_two_at_p_two_is_published_between_the_one_coordinate_prv_and_renyi",
    # siblings: the same test at d = 2 and 3 (σ = 1) and d = 2 (σ = 2)
    "test_ball_count.py::test_top_pair_dominates_one_two_and_equal_coordinate_shifts_and_a_thin_spread[4-1.0]",
    # sibling: test_large_beta_at_one_coordinate_is_a_proven_number_or_inf_with_its_reason
    "test_extreme_inputs.py::test_large_beta_many_coordinates_is_a_true_bound_not_an_overflow_artefact",
    # sibling: test_report_diagnostics.py (the default report never composes the equal-spread PRV, same ε)
    "test_accountant_cache.py::test_get_epsilon_is_the_report_epsilon_and_skips_the_equal_spread_prv",
    # siblings: every in-process CLI test (this one runs the console script in a subprocess)
    "test_cli_accounting.py::test_console_script_runs",
    # siblings: the same tests at their other parameters
    "test_accountant_ball_rdp.py::test_order_tiers_match_the_full_order_set[1.0-0.02-300]",
    "test_accountant_oracle.py::test_one_coordinate_epsilon_matches_dp_accounting[2.5-1.5-0.05-100-1e-05-0.0002]",
    # (2026-11-29: the quick tier had grown to 4.5–5.4 min; the slowest of its tests with a quick sibling moved here)
    # siblings: the same test at d = 3, σ = 2 and d = 4, σ = 2
    "test_ball_count.py::test_top_pair_dominates_one_two_and_equal_coordinate_shifts_and_a_thin_spread[2-1.0]",
    "test_ball_count.py::test_top_pair_dominates_one_two_and_equal_coordinate_shifts_and_a_thin_spread[2-2.0]",
    # sibling: test_count_table_is_below_the_renyi_bound_and_above_the_oracle_where_published (β = p)
    "test_ball_count.py::test_count_table_epsilon_is_above_the_oracle_where_beta_and_p_differ",
    # sibling: the same test at (3.0, 100)
    "test_accountant_roundoff.py::test_shape_pairs_pass_their_mass_checks_and_the_prv_is_computed[1.5-1000000]",
    # sibling: test_table_bound_publishes_the_smaller_proven_epsilon_labelled_prv_table (the table's API path), the
    # module's Gaussian-domination tests
    "test_gaussian_domination.py::test_published_epsilon_is_the_smallest_proven_bound_with_the_table_too",
    # sibling: test_readme_setting_and_its_cli_line_are_above_the_long_run_oracle_in_2410_coordinates
    "test_long_run_sweep.py::test_gaussian_prv_and_delta_at_ten_thousand_steps_are_above_the_oracle_and_close_to_it",
    # sibling: test_low_order_delta_is_below_the_integer_orders_above_the_oracle_and_monotone (the same orders)
    "test_low_orders.py::test_published_epsilon_uses_the_low_orders_and_is_above_the_oracle_for_explicit_shapes",
    # sibling: the same test at setting3 (the Rényi bound published, β = 3)
    "test_report_diagnostics.py::test_published_epsilon_is_bit_identical_with_and_without_diagnostics[setting2-rdp]",
    # siblings: the same test at seg0 … seg3
    "test_tradeoff.py::test_subsampled_curve_is_above_the_independent_lower_bound[seg4-shifts4-None]",
    # (2026-11-29, second session: the quick tier again near 5 min; the slowest with a quick sibling moved here)
    # siblings: the same tests over every path but the β = 3 count table (the β = 1.5 count table kept)
    "test_shared_state.py::test_cached_arrays_are_unchanged_after_other_queries_read_them[every-path]",
    "test_shared_state.py::test_a_query_repeated_among_others_returns_the_same_floats_warm_and_cold[every-path]",
    # siblings: the same test at d = 3, σ = 2 and d = 4, σ = 2
    "test_ball_count.py::test_top_pair_dominates_one_two_and_equal_coordinate_shifts_and_a_thin_spread[3-1.0]",
    # siblings: the sweep's β = p = 2.62 setting (the orders in (1, 2)), test_low_orders.py
    "test_soundness_sweep.py::test_published_epsilon_delta_and_tradeoff_are_above_the_oracle_at_every_shape[beta10.4522-p10.4522-d2]",
    "test_soundness_sweep.py::test_published_epsilon_delta_and_tradeoff_are_above_the_oracle_at_every_shape[beta11.0726-p5.9017-d3]",
    # siblings: test_gaussian_domination.py's test_published_epsilon_near_two_is_above_rigorous_lower_bounds[1.6, 1.9]
    "test_soundness_sweep.py::test_published_epsilon_delta_and_tradeoff_are_above_the_oracle_at_every_shape[beta1.9986-p1.9986-d100]",
    # the contour Base in the library (siblings named as ..._quick, or beside each)
    "test_ball_contour.py::test_float_error_rate_is_above_the_arb_one_and_within_one_percent[2.5]",
    "test_ball_contour.py::test_float_error_rate_is_above_the_arb_one_and_within_one_percent[2.2]",
    "test_ball_contour.py::test_float_error_rate_is_above_the_arb_one_and_within_one_percent[3.0]",
    "test_ball_contour.py::test_float_error_rate_is_above_the_arb_one_and_within_one_percent[2.05]",
    "test_ball_contour.py::test_shipped_data_is_what_export_writes[2.5]",
    "test_ball_contour.py::test_shipped_data_is_what_export_writes[2.2]",
    "test_ball_contour.py::test_shipped_data_is_what_export_writes[3.0]",
    "test_ball_contour.py::test_shipped_data_is_what_export_writes[2.05]",
    # sibling: test_contour_base_applies_at_beta_with_data_p_two_and_a_small_base_cell_only
    "test_ball_contour.py::test_fallback_table_is_the_moments_table_bit_for_bit",
    # sibling: the same test at (0.2, 5, 2.5)
    "test_ball_contour.py::test_contour_table_is_above_the_oracle_and_below_the_moments_table[1.0-1-2.5]",
    # sibling: the same test at β = 2.5 (the β = 2.2 / 3 / 2.05 data: also test_float_error_rate_..._quick[2.2 / 3.0 /
    # 2.05]; β = 3 and 2.05 keep their (0.2, 5) case in the quick tier)
    "test_ball_contour.py::test_contour_table_is_above_the_oracle_and_below_the_moments_table[1.0-1-2.2]",
    "test_ball_contour.py::test_contour_table_is_above_the_oracle_and_below_the_moments_table[0.2-5-2.2]",
    "test_ball_contour.py::test_contour_table_is_above_the_oracle_and_below_the_moments_table[1.0-1-3.0]",
    "test_ball_contour.py::test_contour_table_is_above_the_oracle_and_below_the_moments_table[1.0-1-2.05]",
    # siblings: test_float_error_rate_is_above_the_arb_one_and_within_one_percent_quick (K_float ≥ K_Arb), the oracle
    "test_ball_contour.py::test_contour_table_is_above_the_arb_contour_table",
    # sibling: the same test at β = 2.5 (the family maximum, Lemma M1)
    "test_family_composition.py::test_family_epsilon_lies_between_the_rigorous_lower_bounds_and_the_envelope[3.0]",
})


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Mark the tests of :data:`FULL_ONLY_FILES` and :data:`FULL_ONLY_TESTS` ``full``."""
    for item in items:
        if item.path.name in FULL_ONLY_FILES or f"{item.path.name}::{item.name}" in FULL_ONLY_TESTS:
            item.add_marker(pytest.mark.full)


@pytest.fixture(scope="session", autouse=True)
def _ball_table_cache(tmp_path_factory: pytest.TempPathFactory):
    """Ball tables the tests build go to a fresh directory (subprocesses inherit it), never the user's disk cache
    (:mod:`opacus_gg.accountants.table_cache`)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPACUS_GG_CACHE", str(tmp_path_factory.mktemp("opacus_gg_cache")))
        yield


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory with all four generated datasets (CIFAR-10, SVHN, Adult, IMDB)."""
    return write_demo_data(tmp_path_factory.mktemp("data"))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture) -> Callable[[List[str]], Tuple[int, str, str]]:
    """Run ``opacus-gg argv`` in-process → (exit code, stdout, stderr); argparse's SystemExit is its exit code."""
    from opacus_gg.cli import main

    def run(argv: List[str]) -> Tuple[int, str, str]:
        try:
            code = main(argv)
        except SystemExit as e:
            code = int(e.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
