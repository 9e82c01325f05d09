"""Hyperscan block-mode databases compiled once per machine and kept.

Compiling the engine's database costs 0.1 s for one secret and about 1 s for 10,000,
all of it before a command's workers can start; loading the same database serialized
costs under a millisecond. :func:`compile_block` keeps each database it compiles in
memkit's cache directory (:func:`memkit.runtime.cache_dir`, ``hyperscan/``), keyed by
the SHA-256 of everything the compile reads (the patterns, their flags, the Hyperscan
and Python package versions, the machine), and stored with that key and the SHA-256 of
its bytes: a file that is truncated, altered, kept for another key or from another
build is compiled again, never trusted. Only the :data:`KEEP` most recently used files are kept. A cache directory
that cannot be written only costs the compile.
"""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Sequence
from typing import Any

import hyperscan

__all__ = ["KEEP", "compile_block"]

KEEP = 64
"""Compiled databases kept in the cache directory (the least recently used go first)."""


def compile_block(expressions: Sequence[bytes], flags: Sequence[int] | int = 0, *, literal: bool = False) -> Any:
    """A block-mode ``hyperscan.Database`` of ``expressions`` (ids: their positions),
    with ``flags`` (one per expression, or one for all), compiled as literals with
    ``literal``: loaded from the cache directory where this exact compile was kept,
    else compiled and kept.

    Raises:
        hyperscan.error: an expression Hyperscan does not compile.
    """
    per = list(flags) if not isinstance(flags, int) else [flags] * len(expressions)
    key = hashlib.sha256()
    for part in (hyperscan.__version__, platform.machine(), platform.python_version(), str(literal), str(len(per))):
        key.update(part.encode() + b"\0")
    for expr, flag in zip(expressions, per, strict=True):
        key.update(len(expr).to_bytes(8, "little") + expr + flag.to_bytes(8, "little"))
    where = _dir()
    path = None if where is None else where / f"{key.hexdigest()[:32]}.hsdb"
    if path is not None:
        db = _load(path, key.digest())
        if db is not None:
            return db
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=list(expressions), ids=list(range(len(expressions))), elements=len(expressions),
               flags=per, literal=literal)
    if path is not None:
        _keep(path, key.digest(), hyperscan.dumpb(db))
    return db


def _dir() -> Any:
    from memkit.runtime import cache_dir

    try:
        d = cache_dir() / "hyperscan"
        d.mkdir(parents=True, exist_ok=True)
        return d
    except OSError:
        return None


def _load(path: Any, key: bytes) -> Any:
    """The database kept at ``path`` for ``key``, or ``None`` (absent, damaged, kept for
    another key)."""
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
        kept, digest, payload = blob[:32], blob[32:64], blob[64:]
        if kept != key or hashlib.sha256(payload).digest() != digest:
            return None
        db = hyperscan.loadb(payload, hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)
        os.utime(path)  # recently used
        return db
    except (OSError, hyperscan.error):
        return None


def _keep(path: Any, key: bytes, payload: bytes) -> None:
    """Write ``key``, the SHA-256 of ``payload`` and ``payload`` at ``path`` atomically;
    keep the :data:`KEEP` most recently used files."""
    try:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(key + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, path)
        kept = sorted(path.parent.glob("*.hsdb"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
