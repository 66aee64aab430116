"""Reproduce the GG paper's β-DP-SGD study (Figure 4 / Table 1) for one dataset config.

    python examples/paper_study.py cifar10_scatternet --data-root data --output-dir runs/cifar_study
    # extra flags go to `opacus-gg sweep` (e.g. --betas 1,2,3 --target-epsilons 1,3 --seeds 0 --no-grid --epochs 5)
"""

import sys

from opacus_gg.cli import main

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(["sweep", "--config", sys.argv[1], *sys.argv[2:]]))
