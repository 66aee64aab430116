"""Start-up time of the ``opacus-gg`` command line (target: < 1 s), in fresh processes.

    python benchmarks/cli_startup.py [--repeats 5]

Times ``opacus-gg --help``, ``opacus-gg epsilon --help``, an argparse error (missing options), a value error
(``--dim`` missing for β = 1.5), ``--version`` and ``train``'s answers to a bad config, checkpoint or data root; prints the median and the minimum wall time of each over
``--repeats`` runs of ``python -m opacus_gg`` (the console script does the same import). torch and opacus are
imported only inside the commands that compute, so none of these should load them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = {
    "opacus-gg --help": ["--help"],
    "opacus-gg epsilon --help": ["epsilon", "--help"],
    "argument error (missing options)": ["epsilon", "--beta", "2"],
    "value error (--dim required)": ["epsilon", "--beta", "1.5", "--noise-multiplier", "1", "--sample-rate",
                                     "0.01", "--steps", "10", "--delta", "1e-5"],
    "opacus-gg --version": ["--version"],
    "train: unknown config": ["train", "--config", "nosuch"],
    "train: --resume without a checkpoint": ["train", "--config", "quickstart", "--resume", "/nonexistent/ckpt.pt"],
    "train: missing --data-root": ["train", "--config", "quickstart", "--set", "data.name=cifar10", "--data-root",
                                   "/nonexistent"],
}


def time_case(argv: list, repeats: int, env: dict) -> list:
    """Wall seconds of ``python -m opacus_gg argv`` in fresh processes."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "opacus_gg", *argv], capture_output=True, env=env, check=False)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per case (default 5)")
    args = ap.parse_args()
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    time_case(["--version"], 1, env)  # warm the file cache
    t_py = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=False)
        t_py.append(time.perf_counter() - t0)
    print(f"{'case':<36} {'median s':>9} {'min s':>7}  (python -c pass: median {statistics.median(t_py):.3f} s)")
    worst = 0.0
    for name, argv in CASES.items():
        t = time_case(argv, args.repeats, env)
        worst = max(worst, statistics.median(t))
        print(f"{name:<36} {statistics.median(t):>9.3f} {min(t):>7.3f}")
    print(f"slowest median: {worst:.3f} s ({'meets' if worst < 1.0 else 'MISSES'} the < 1 s target)")


if __name__ == "__main__":
    main()
