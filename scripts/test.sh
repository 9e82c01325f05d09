#!/usr/bin/env bash
# Run the test suite in .venv (set up by scripts/setup.sh dev,llamacpp) offline.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANONYMIZED_TELEMETRY=False HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export LANGSMITH_TRACING=false LANGCHAIN_TRACING_V2=false
export MEMKIT_CACHE_DIR="${MEMKIT_CACHE_DIR:-$PWD/.memkit-cache}"
.venv/bin/ruff check memkit graphs evaluators tests benchmarks examples
# Every core (xdist); tests sharing a module-scoped fixture stay on one worker
# (tests/conftest.py), the others are spread as workers free up.
exec .venv/bin/python -m pytest -n "${MEMKIT_TEST_WORKERS:-auto}" --dist loadgroup --durations=15 "$@"
