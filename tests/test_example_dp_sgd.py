"""examples/dp_sgd.py: the headline use (a plain Opacus loop with GGPrivacyEngine) runs and learns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_dp_sgd_example_runs_and_learns():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "dp_sgd.py"), "--epochs", "2", "--n-train", "600", "--beta", "1.5"],
        capture_output=True, text=True, env=env, timeout=600, check=True,
    ).stdout
    eps = [float(e) for e in re.findall(r"ε ≤ ([0-9.]+)", out)]
    assert len(eps) == 2 and 0 < eps[0] < eps[1] < float("inf"), out
    correct, total = map(int, re.search(r"Accuracy: (\d+)/(\d+)", out).groups())
    assert total == 1000 and correct / total > 0.8, out  # chance is 0.5
