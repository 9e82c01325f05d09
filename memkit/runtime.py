"""Where memkit keeps its files, and the error a model spec raises.

Shared by :mod:`memkit.models` and :mod:`memkit.llamacpp` (both re-export them).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ModelSpecError", "cache_dir"]


class ModelSpecError(ValueError):
    """A model spec that cannot be turned into a model; the message says what to install or start."""


def cache_dir() -> Path:
    """Directory for memkit's assembled model files and caches.

    ``$MEMKIT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/memkit`` (``~/.cache/memkit``).
    """
    base = os.environ.get("MEMKIT_CACHE_DIR")
    if base:
        path = Path(base)
    else:
        path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "memkit"
    path.mkdir(parents=True, exist_ok=True)
    return path
