"""The main job from Python: β-DP-SGD (β = 1.5) on built-in synthetic data, certified ε per epoch.

    python examples/quickstart.py            # same as: opacus-gg train --config configs/quickstart.yaml
"""

from opacus_gg.experiments.config import load_config
from opacus_gg.experiments.train import run

if __name__ == "__main__":
    result = run(load_config("configs/quickstart.yaml"))
    print(f"final test accuracy {result['final_test_accuracy']:.4f}, certified ε = {result['epsilon']:.4f}")
