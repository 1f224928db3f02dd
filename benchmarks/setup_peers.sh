#!/usr/bin/env bash
# Create the separate venv holding the optional benchmark peers (PlaidML 0.7, TVM, PyTorch,
# onnx2torch). ONNX Runtime runs from the project's own venv (its test extra).
# They are never installed into the project's venv. Each install may fail on its own
# (PlaidML 0.7 is old and may have no build for this Python); the suite then reports that
# peer as missing and goes on.
set -u
VENV="${STRIPE_BENCH_PEERS_VENV:-$HOME/.cache/stripe-bench/peers-venv}"
PY="${PYTHON:-python3}"
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || exit 1
"$VENV/bin/pip" install -q --upgrade pip numpy
"$VENV/bin/pip" install plaidml==0.7.0 || echo "setup_peers: plaidml==0.7.0 did not install" >&2
"$VENV/bin/pip" install apache-tvm || echo "setup_peers: apache-tvm did not install" >&2
# PyTorch's CPU build (its own index: the default wheel brings the CUDA libraries too)
"$VENV/bin/pip" install torch --index-url https://download.pytorch.org/whl/cpu \
    || echo "setup_peers: torch did not install" >&2
# onnx2torch converts the whole-model benchmark's ONNX files to torch modules
# (benchmarks/models.py). --no-deps: its only other dependency, torchvision, serves its
# NonMaxSuppression/RoiAlign converters, and a torchvision wheel must match the installed
# torch exactly; the worker stands in for it when it is missing.
"$VENV/bin/pip" install onnx && "$VENV/bin/pip" install --no-deps onnx2torch \
    || echo "setup_peers: onnx/onnx2torch did not install (no PyTorch column in models.py)" >&2
echo "peers venv: $VENV"
"$VENV/bin/python" -c "import plaidml" 2>/dev/null && echo "plaidml: ok" || echo "plaidml: missing"
"$VENV/bin/python" -c "import tvm" 2>/dev/null && echo "tvm: ok" || echo "tvm: missing"
"$VENV/bin/python" -c "import torch" 2>/dev/null && echo "torch: ok" || echo "torch: missing"
"$VENV/bin/python" -c "import onnx2torch" 2>/dev/null && echo "onnx2torch: ok" \
    || echo "onnx2torch: missing (or needs the worker's torchvision stand-in)"
