"""Keep third-party noise off the terminal while a ``memkit`` command runs, unless the
user asks for it (``--verbose``, or ``MEMKIT_VERBOSE=1``).

Libraries memkit drives print things a memkit user cannot act on: platformdirs'
``RuntimeDirWarning`` (``XDG_RUNTIME_DIR`` unset, when ``pgserver`` is imported),
Chroma's ``DeprecationWarning`` s, mem0's log lines about spaCy and keyword search,
transformers' "Loading weights" progress bar. While a command runs (:func:`quiet`):

* warnings are not shown except a ``UserWarning`` raised from memkit's own packages
  (``memkit``, ``graphs``, ``evaluators``: a damaged run, a missing lock), even when
  a library turns warnings back on as it is imported (mem0's client module sets
  ``DeprecationWarning`` to ``default`` for the whole process);
* log records of other packages below ``ERROR`` are dropped (memkit's own, and any
  package's errors, still reach stderr);
* Hugging Face progress bars are off (``HF_HUB_DISABLE_PROGRESS_BARS``).

Everything is restored when the command returns, so a caller that runs commands
in-process (tests, notebooks) keeps its own settings.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["OWN", "quiet", "wants_verbose"]

OWN = ("memkit", "graphs", "evaluators")
"""memkit's own top-level packages: their warnings and log lines are never hidden."""


def wants_verbose(argv: Sequence[str]) -> bool:
    """Whether the command line (or ``MEMKIT_VERBOSE=1``) asks for third-party output."""
    return "--verbose" in argv or os.environ.get("MEMKIT_VERBOSE", "") not in ("", "0")


class _OwnOrError(logging.Filter):
    """Pass memkit's own records and every record at ``ERROR`` or above."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.name.split(".", 1)[0] in OWN


def _own_dirs() -> tuple[Path, ...]:
    dirs = []
    for name in OWN:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            dirs.append(Path(spec.origin).resolve().parent)
    return tuple(dirs)


def _own_file(filename: str, dirs: tuple[Path, ...]) -> bool:
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return False
    return any(path.is_relative_to(d) for d in dirs)


@contextlib.contextmanager
def quiet(verbose: bool = False) -> Iterator[None]:
    """Third-party warnings, log lines and progress bars off for the block (module
    doc); ``verbose=True`` changes nothing."""
    if verbose:
        yield
        return
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_OwnOrError())
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    saved_env = {k: os.environ.get(k) for k in ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY")}
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    root.addHandler(handler)
    dirs = _own_dirs()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.filterwarnings("default", category=UserWarning, module=rf"({'|'.join(OWN)})(\.|$)")
            show = warnings.showwarning

            def own_only(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                         line: str | None = None) -> None:
                if issubclass(category, UserWarning) and _own_file(filename, dirs):
                    show(message, category, filename, lineno, file, line)

            warnings.showwarning = own_only
            yield
    finally:
        root.removeHandler(handler)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
