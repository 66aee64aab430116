"""The README's Python blocks run as pasted (each in a fresh interpreter), every output it quotes in a ``console``
block is what the command prints now (so no quoted output can go stale), and its first command's pieces are
real: the bundled config it names exists and the ``--dim`` it passes is the quickstart model's size."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the subprocesses import this checkout first (and what the caller's PYTHONPATH adds)
_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
#: (command, quoted output) for each ``$ opacus-gg …`` line of a console block and the lines under it
CONSOLE = [(m.group(1), m.group(2).rstrip("\n"))
           for block in re.findall(r"```console\n(.*?)```", README, flags=re.S)
           for m in re.finditer(r"^\$ (opacus-gg [^\n]*)\n((?:(?!\$ )[^\n]*\n)*)", block, flags=re.M)]


def test_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_python_block_runs_as_pasted(index: int, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True, text=True, timeout=600,
                       cwd=str(tmp_path), env=_ENV)
    assert r.returncode == 0, f"README python block {index} failed:\n{BLOCKS[index]}\n{r.stderr[-3000:]}"


def test_readme_quotes_outputs() -> None:
    assert len(CONSOLE) >= 1


def _console_case(command: str, quoted: str):
    """A README command as a test case; one that builds a ball table (~2 min on one core) is slow, run by CI too."""
    marks = [pytest.mark.slow, pytest.mark.ci_slow] if "--ball-bound table" in command else []
    return pytest.param(command, quoted, id=command, marks=marks)


@pytest.mark.parametrize("command, quoted", [_console_case(c, q) for c, q in CONSOLE])
def test_quoted_output_is_what_the_command_prints(command: str, quoted: str) -> None:
    r = subprocess.run([sys.executable, "-m", "opacus_gg", *shlex.split(command)[1:]], capture_output=True,
                       text=True, timeout=600, env=_ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n") == quoted, f"README quotes for `{command}`:\n{quoted}\nit prints:\n{r.stdout}"


def test_first_command_matches_the_quickstart() -> None:
    from opacus_gg.experiments.config import load_config
    from opacus_gg.experiments.data import load_dataset
    from opacus_gg.experiments.models import build_model, count_parameters

    first = re.search(r"```bash\n(pip install torch.*?)\n```", README, flags=re.S).group(1)
    assert '".[experiments]"' in first and "opacus-gg train --config quickstart" in first
    dim = int(re.search(r"--dim (\d+)", first).group(1))
    cfg = load_config("quickstart")
    b = load_dataset(cfg["data"])
    assert count_parameters(build_model(cfg["model"], b.num_classes, b.input_shape)) == dim
