#!/usr/bin/env bash
# The one prepared script for the GPU machine (../shared/docs/gpu_check.md; docs/gpu.md): kcse vs
# HF transformers, eager and under torch.compile, training and encoding speed on its GPU
# (benchmarks/gpu.py). Run it from anywhere in the repository; it prints the table and writes
# $OUT/gpu.json (every figure), $OUT/gpu.txt (the table) and $OUT/logs/ (each stack's stderr,
# one file a stack) ($OUT: /tmp/kcse-gpu unless set).
#
# That machine has JAX, PyTorch and transformers, but no TensorFlow, Keras or keras-hub and no
# package registry: Keras and keras-hub travel as wheels in .whl/, fetched beforehand by
# benchmarks/fetch_gpu_wheels.sh (WHEELS=FOLDER: elsewhere). They are installed (again, on a warm
# machine: --upgrade) into $SITE (/tmp/site unless set), put on PYTHONPATH after whatever
# PYTHONPATH already holds (so a hider of packages can come first, as in the simulation of
# docs/gpu.md).
#
# Defaults: BERT-base shape, batch 64, lengths 64 and 128, bfloat16, all three stacks, up to 3
# alternated rounds but none that should end more than 360 s after the start (one round takes
# ~4 minutes on an H200: see docs/gpu.md), then one first-steps-only process a stack for the
# cached compilations. Arguments go on to gpu.py after these and win (--tiny, --runs 1,
# --deadline 200, --precisions float32,bfloat16...).
#
# Exits 0 only when gpu.py succeeded and its JSON holds kcse's rows.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kcse-gpu}
SITE=${SITE:-/tmp/site}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT/logs"
if ! ls "$WHEELS"/*.whl > /dev/null 2>&1; then
    echo "no wheels in $WHEELS/: run benchmarks/fetch_gpu_wheels.sh first" >&2
    exit 2
fi
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target "$SITE" \
    "$WHEELS"/*.whl || exit 2
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$SITE:$PWD KERAS_BACKEND=jax
export XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
python3 benchmarks/gpu.py --deadline 360 --worker-timeout 240 --json "$OUT/gpu.json" \
    --logs "$OUT/logs" "$@" 2>&1 | tee "$OUT/gpu.txt"
status=${PIPESTATUS[0]}
python3 - "$OUT/gpu.json" <<'CHECK' || exit 3
import json
import sys

rows = json.load(open(sys.argv[1])).get("stacks", {}).get("kcse", {}).get("summary")
if not rows:
    sys.exit(f"{sys.argv[1]}: no kcse rows")
print(f"{sys.argv[1]}: kcse rows {', '.join(rows)}")
CHECK
exit "$status"
