#!/usr/bin/env bash
# The GPU checks of one session with a lent CUDA machine (not CI): the CUDA variants of the device tests, the step
# and sampler benchmarks on the GPU, then the fast test suite with the GPU present. Logs go to $OUT (default
# /tmp/gpu_out). Wheels the machine lacks (opacus, prv-accountant, dp-accounting, dm-tree) travel in .whl/
# (see /work/.library/device/README.md); the repository itself is imported from the working tree.
#     bash benchmarks/gpu.sh [tests|bench|profile|suite ...]   (default: tests bench suite, in that order)
set -uo pipefail
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PIP_DISABLE_PIP_VERSION_CHECK=1
if ! python3 -c "import opacus, prv_accountant, dp_accounting" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, numpy, scipy, opacus, opacus_gg; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'numpy', numpy.__version__, 'scipy', scipy.__version__, 'opacus', opacus.__version__, torch.cuda.get_device_name())" \
    | tee -a "$OUT/gpu.txt"
steps=${*:-tests bench suite}
for s in $steps; do
    case $s in
    tests)  # every test with a CUDA variant, run on the GPU
        timeout 240 python3 -m pytest -q -p no:cacheprovider -rfEs -k cuda tests/test_devices.py \
            tests/test_stored_clipping.py tests/test_step_memory.py tests/test_ghost_gg.py tests/test_norm_kernels.py \
            tests/test_pate.py 2>&1 | tee "$OUT/cuda_tests.log" ;;
    bench)
        timeout 150 python3 benchmarks/step_overhead.py --device cuda --runs 3 2>&1 | tee "$OUT/step_overhead.log"
        timeout 90 python3 benchmarks/sampler.py --device cuda --runs 3 2>&1 | tee "$OUT/sampler.log" ;;
    profile)
        timeout 120 python3 benchmarks/profile_step.py --device cuda --graph 2>&1 | tee "$OUT/profile.log" ;;
    suite)  # the README's fast suite, with the GPU present, over the machine's cores; failures named as they come
        timeout ${SUITE_TIMEOUT:-300} python3 -m pytest -m "not slow or ci_slow" -p no:cacheprovider -n 16 -v -rfE \
            2>&1 | grep --line-buffered -E "FAILED|ERROR|passed|failed|Error" | tee "$OUT/suite.log" ;;
    esac
done
