"""Where memkit keeps its files, the error a model spec raises, and how a
``module:attribute`` spec is imported.

Shared by :mod:`memkit.models.chat` and :mod:`memkit.models.llamacpp` (both re-export the first
two); :func:`import_spec` is the one resolver of ``module:factory`` for designs,
targets and the command line.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["ModelSpecError", "SpecError", "cache_dir", "import_spec"]


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


class SpecError(ValueError):
    """A ``module:attribute`` spec that cannot be imported; the message names the spec."""


def import_spec(spec: str, what: str) -> Any:
    """The object a ``module:attribute`` spec names (dotted attributes allowed).

    The current directory is importable first, so ``myapp.agent:build`` works from the
    project's root as it does in ``python -c``.

    Args:
        spec: ``package.module:attribute``.
        what: the option or role named in errors (``--design``, ``target``).

    Raises:
        SpecError: no ``:``, a module that cannot be imported, or a missing attribute.
    """
    mod_name, sep, attr = spec.strip().partition(":")
    if not sep or not mod_name or not attr:
        raise SpecError(f"{what} {spec!r}: give module:attribute (e.g. myapp.agent:build)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise SpecError(f"{what} {spec!r}: cannot import module {mod_name!r}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise SpecError(f"{what} {spec!r}: module {mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
