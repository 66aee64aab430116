"""Time one β-DP-SGD epoch of each paper config on this machine (random inputs of the real shapes).

    python examples/benchmark_epoch.py [--steps 10] [--beta 2] [--device cpu] [adult_fcn ...]
"""

import argparse

import torch

from opacus_gg.experiments.benchmark import time_epoch
from opacus_gg.experiments.config import apply_overrides, bundled_configs, load_config

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("configs", nargs="*", default=[c for c in bundled_configs() if c != "quickstart"])
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--beta", type=float, default=2.0)
parser.add_argument("--device", default="cpu")
args = parser.parse_args()
print(f"torch threads: {torch.get_num_threads()}")
for path in args.configs:
    r = time_epoch(apply_overrides(load_config(path), {"privacy.beta": args.beta, "device": args.device}), args.steps)
    print(f"{r['config']:20s} β={r['beta']:g} d={r['dim']:>8d} B={r['batch_size']:4d}: {r['seconds_per_step']:.3f} s/step "
          f"× {r['steps_per_epoch']} steps = {r['seconds_per_epoch'] / 60:.1f} min/epoch")
