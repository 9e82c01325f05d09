#!/usr/bin/env bash
# Create .venv and install memkit with the given extras (default: none).
#
# Torch: take the CPU build. Prefer a CPU wheel already on this machine
# (pip's find-links), then PyTorch's CPU index, then whatever pip resolves.
#
# llama.cpp (the `llamacpp` extra): llama-cpp-python compiles llama.cpp from
# source. We build it for a portable x86-64 baseline (AVX2/FMA/F16C/BMI2, the
# instruction set of every x86-64 server and desktop since 2013-2015), never with
# -march=native: a native build on a CPU that advertises AMX or AVX-512 dies with
# SIGILL on a machine (or VM) that lacks them. The trade-off is speed on the
# newest CPUs; opt into a native build with MEMKIT_LLAMA_NATIVE=1, or pass your own
# flags with CMAKE_ARGS. pip's wheel cache ignores CMAKE_ARGS, so the wheel is
# built with --no-cache-dir into memkit's own wheelhouse, keyed by the version,
# the flags, the architecture and the Python: a wheel built with other flags is
# never reused, and a venv holding one is reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"
VENV="${MEMKIT_VENV:-.venv}"
CACHE="${MEMKIT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memkit}"

llama_cmake_args() {
  if [ -n "${CMAKE_ARGS:-}" ]; then
    printf '%s' "$CMAKE_ARGS"
    return
  fi
  local common="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
  if [ "${MEMKIT_LLAMA_NATIVE:-0}" = "1" ]; then
    printf '%s' "-DGGML_NATIVE=ON $common"
  elif [ "$(uname -m)" = "x86_64" ]; then
    printf '%s' "-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF \
-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
-DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF $common"
  else
    printf '%s' "-DGGML_NATIVE=OFF $common"
  fi
}

case ",$EXTRAS," in *,llamacpp,*) WANT_LLAMA=1 ;; *) WANT_LLAMA=0 ;; esac
LLAMA_REQ=$(grep -o '"llama-cpp-python\[server\][^"]*"' pyproject.toml | tr -d '"')
LLAMA_ARGS=$(llama_cmake_args)
LLAMA_KEY=$(printf '%s\n%s\n%s\n%s\n' "$LLAMA_REQ" "$LLAMA_ARGS" "$(uname -m)" \
  "$("$PY" -c 'import sys; print(sys.version_info[:2])')" | sha256sum | cut -c1-16)

stamp="$VENV/.memkit-installed${EXTRAS:+-$EXTRAS}"
# The project's own modules in bytecode, kept beside them: an editable install writes
# none, and where PYTHONDONTWRITEBYTECODE is set (containers, CI) every `memkit` run
# would compile them again (0.1 s of each command's start-up, before its workers fork).
# Only sources newer than their bytecode are compiled.
precompile() { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -m compileall -q -j 0 memkit evaluators graphs >/dev/null || true; }
# Install again when a file the install reads has changed since (the compiled scan
# passes, memkit/scan/*.c and *.h, are built by `pip install -e .`).
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ] && [ "$stamp" -nt scripts/setup.sh ] \
   && [ "$stamp" -nt setup.py ] && [ "$stamp" -nt scripts/constraints.txt ] && [ -z "$(find memkit/scan -name '*.[ch]' -newer "$stamp")" ] \
   && { [ "$WANT_LLAMA" = 0 ] || [ "$(cat "$VENV/.memkit-llama-key" 2>/dev/null)" = "$LLAMA_KEY" ]; }; then
  precompile
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

if [ "$WANT_LLAMA" = 1 ] && [ "$(cat "$VENV/.memkit-llama-key" 2>/dev/null)" != "$LLAMA_KEY" ]; then
  wheelhouse="$CACHE/wheels/llama-$LLAMA_KEY"
  if ! ls "$wheelhouse"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "setup: building $LLAMA_REQ with CMAKE_ARGS=$LLAMA_ARGS (a few minutes)" >&2
    rm -rf "$wheelhouse.tmp" && mkdir -p "$wheelhouse.tmp"
    CMAKE_ARGS="$LLAMA_ARGS" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
      pip wheel -q --no-cache-dir --no-deps --no-binary llama-cpp-python -w "$wheelhouse.tmp" "$LLAMA_REQ"
    rm -rf "$wheelhouse" && mv "$wheelhouse.tmp" "$wheelhouse"
    printf '%s\n' "$LLAMA_REQ" "$LLAMA_ARGS" >"$wheelhouse/BUILD-FLAGS"
  fi
  # --force-reinstall: a venv holding a build with other flags gets this one.
  pip install -q --no-deps --force-reinstall "$wheelhouse"/llama_cpp_python-*.whl
  echo "$LLAMA_KEY" >"$VENV/.memkit-llama-key"
fi

spec="."
[ -n "$EXTRAS" ] && spec=".[$EXTRAS]"
# scripts/constraints.txt pins every dependency to the versions CI tests: without it a fresh
# resolve of all extras backtracks until pip gives up (resolution-too-deep).
pip install -q -c scripts/constraints.txt -e "$spec"
# setuptools leaves memkit.egg-info in the checkout; run from here it would shadow the
# installed metadata (its direct_url.json says "editable", which inspect_ai reads to name
# memkit's tasks), so only the installed copy is kept.
rm -rf memkit.egg-info
precompile
touch "$stamp"
