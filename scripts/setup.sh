#!/usr/bin/env bash
# Create .venv and install memkit with the given extras (default: none).
# Torch: take the CPU build. Prefer a CPU wheel already on this machine
# (pip's find-links), then PyTorch's CPU index, then whatever pip resolves.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"
VENV="${MEMKIT_VENV:-.venv}"
stamp="$VENV/.memkit-installed${EXTRAS:+-$EXTRAS}"
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip "$@"; }
pip install -q --upgrade pip setuptools wheel
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  tmp=$(mktemp -d)
  if pip download -q --no-deps --no-index -d "$tmp" "torch==2.13.0" >/dev/null 2>&1; then
    # A CPU wheel lies on this machine (pip's find-links): take it, deps from the index.
    pip install -q "torch==2.13.0"
  else
    # Elsewhere: PyTorch's CPU index, then whatever pip resolves (may be a CUDA build).
    pip install -q --timeout 20 --retries 1 "torch>=2.2" --index-url https://download.pytorch.org/whl/cpu \
      || pip install -q "torch>=2.2"
  fi
  rm -rf "$tmp"
fi
spec="."
[ -n "$EXTRAS" ] && spec=".[$EXTRAS]"
# Build llama-cpp-python for the CPU with the host's instruction set.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"
pip install -q -e "$spec"
touch "$stamp"
