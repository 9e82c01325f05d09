"""memkit: audit the memory of LLM agents for privacy.

The ``memkit`` package holds the library primitives (tiered store, canaries,
LongMemEval loading, models, extractive backend, residue scanner). Graph wiring
lives in ``graphs`` and measurement in ``evaluators``; ``memkit`` imports neither.
"""

import os as _os

# Telemetry off and hubs offline before chromadb / transformers are imported anywhere.
_os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
_os.environ.setdefault("HF_HUB_OFFLINE", "1")
_os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
_os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
_os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

__version__ = "0.1.0"
