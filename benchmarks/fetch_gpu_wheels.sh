#!/usr/bin/env bash
# Fetches the wheels benchmarks/gpu_run.sh installs on the GPU machine, which has JAX, PyTorch and
# transformers but no Keras, keras-hub or package registry (../shared/docs/gpu_check.md): Keras
# 3.15.1, keras-hub 0.32.0 and their two dependencies that machine lacks, for its Python (3.12).
# Not kagglehub: installed without its own dependencies it breaks `import keras_hub`; absent,
# keras-hub imports fine.
#
# Run from anywhere, on a machine with a package registry; the wheels go to .whl/ in the
# repository root (ignored through .git/info/exclude, sent with the working tree):
#
#   bash benchmarks/fetch_gpu_wheels.sh
#
# WHEELS=FOLDER puts them elsewhere; PYTHON_VERSION=3.11 fetches another Python's wheels (to
# simulate the GPU run on this machine: see docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=${WHEELS:-.whl}
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
if [ "$WHEELS" = .whl ]; then
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"
    grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
fi
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 -d "$WHEELS" keras==3.15.1 keras-hub==0.32.0 namex optree
ls "$WHEELS"/*.whl
