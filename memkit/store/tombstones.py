"""Audit tombstones: a record that a secret was forgotten, which never holds it.

The record holds a salted, stretched hash of the secret (PBKDF2-HMAC-SHA256, 200,000
iterations, keyed with the store's random 16-byte salt), the time, the namespace, a
reason and the ids of the chunks changed; :meth:`memkit.store.tiered.TieredMemoryStore.tombstone`
writes it, :meth:`~memkit.store.tiered.TieredMemoryStore.matches_tombstone` tests a candidate
secret against it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memkit.scan.matching import secret_regex

__all__ = ["PBKDF2_ITERATIONS", "hash_secret", "tombstone_record"]

PBKDF2_ITERATIONS = 200_000
"""Iterations of PBKDF2-HMAC-SHA256 for the tombstone hash."""


def hash_secret(secret: str, salt: bytes) -> str:
    """Hex PBKDF2-HMAC-SHA256 of ``secret`` (UTF-8) with ``salt``, :data:`PBKDF2_ITERATIONS`."""
    return hashlib.pbkdf2_hmac("sha256", secret.encode("utf-8"), salt, PBKDF2_ITERATIONS).hex()


def tombstone_record(secret: str, chunk_ids: Sequence[str], *, namespace: str, reason: str,
                     salt: bytes) -> dict[str, Any]:
    """The tombstone of a deletion (module doc).

    Returns:
        ``id`` (random hex), ``namespace``, ``reason``, ``time`` (ISO-8601 UTC),
        ``chunk_ids``, ``hash``, ``hash_alg``, ``iterations``.

    Raises:
        ValueError: empty secret, or ``reason``/``namespace``/ids containing it.
    """
    if not secret:
        raise ValueError("tombstone: secret must be non-empty")
    pat = secret_regex(secret)
    for label, value in [("reason", reason), ("namespace", namespace), *(("chunk id", i) for i in chunk_ids)]:
        if pat.search(value):
            raise ValueError(f"tombstone: {label} contains the secret; it would be written to disk")
    return {
        "id": uuid.uuid4().hex,
        "namespace": namespace,
        "reason": reason,
        "time": datetime.now(UTC).isoformat(timespec="microseconds"),
        "chunk_ids": list(chunk_ids),
        "hash": hash_secret(secret, salt),
        "hash_alg": "pbkdf2_hmac_sha256",
        "iterations": PBKDF2_ITERATIONS,
    }
