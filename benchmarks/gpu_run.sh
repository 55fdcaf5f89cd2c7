#!/usr/bin/env bash
# The one prepared script for the GPU machine (docs: ../shared/docs/gpu_check.md): kcse vs
# HF transformers, training and encoding speed on its GPU (benchmarks/gpu.py). Run it from the
# repository root; it prints the table and writes $OUT/gpu.json (every figure) and $OUT/gpu.txt
# ($OUT: /tmp/kcse-gpu unless set).
#
# That machine has JAX, PyTorch and transformers, but no TensorFlow, Keras or keras-hub and no
# package registry: Keras and keras-hub travel as wheels in .whl/. Fetch them once on the
# development machine, in the repository root (Python 3.12 wheels for that machine):
#
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#       --platform manylinux_2_17_x86_64 -d .whl keras==3.15.1 keras-hub==0.32.0 namex optree
#
# (not kagglehub: installed without its own dependencies it breaks `import keras_hub`), and send
# the ignored .whl folder along with the working tree.
#
# Defaults: BERT-base shape, batch 64, lengths 64 and 128, float32 and bfloat16, kcse / HF eager /
# torch.compile, up to 3 alternated runs each, but no round of runs that should end later than
# --deadline seconds after the start. Not timed there yet: from the compile times of the GPU
# notes (kcse ~20 s, torch.compile ~35 s per shape, 4 shapes each) a first round should take
# ~5 minutes, later rounds less (their caches filled); with one round, gpu.py runs kcse and
# torch.compile once more for their cached first steps only. Arguments given to this script go
# on to gpu.py and win (e.g. --runs 1, --deadline 300, --precisions bfloat16).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kcse-gpu}
mkdir -p "$OUT"
if ! ls .whl/*.whl > /dev/null 2>&1; then
    echo "no wheels in .whl/: see the top of $0" >&2
    exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 benchmarks/gpu.py --runs 3 --deadline 450 --worker-timeout 300 \
    --json "$OUT/gpu.json" "$@" 2>&1 | tee "$OUT/gpu.txt"
