"""The main job from Python: β-DP-SGD (β = 1.5) on scikit-learn's digits, ε with its scope every epoch,
then Opacus's Gaussian DP-SGD at the same ε. Runs from any directory (the config ships with the package).

    python examples/quickstart.py            # same as: opacus-gg train --config quickstart
"""

from opacus_gg.experiments.config import load_config
from opacus_gg.experiments.train import epsilon_text, run

if __name__ == "__main__":
    result = run(load_config("quickstart"))
    print(f"final test accuracy {result['final_test_accuracy']:.4f}, "
          f"ε = {epsilon_text(result['epsilon'], result['epsilon_scope'])} at δ = {result['target_delta']:g}")
