"""Decode LangGraph checkpoint values before matching them: plain, or encrypted.

A LangGraph checkpointer stores each value as ``(type, bytes)`` written by its
serializer: ``JsonPlusSerializer`` writes ``msgpack``, ``json``, ``bytes``,
``bytearray``, ``null`` (``pickle`` only with ``pickle_fallback``); LangGraph's
``EncryptedSerializer`` encrypts those bytes and writes the type ``"<type>+<cipher>"``
(``msgpack+aes`` from ``EncryptedSerializer.from_pycryptodome_aes``: AES, EAX mode by
default, stored as nonce (16 bytes) + tag (16) + ciphertext). Encrypted bytes hold no
copy a byte scan could see, so a value is *read* only once decoded:

* a value is decoded with the serializers given (the caller's, e.g.
  ``EncryptedSerializer.from_pycryptodome_aes(key=...)``), then with LangGraph's own
  ``JsonPlusSerializer`` (never unpickling: ``pickle`` values are matched in their
  raw bytes, as every pickle memkit meets);
* a value none of them decodes -- encrypted without its key, a wrong key, an unknown
  type -- is *not decoded*: its raw bytes are still matched, and the scan says how many
  such values there were and why, so its verdict is never "clean".

:func:`aes_serde` builds the decrypting serializer from a key as LangGraph's
``from_pycryptodome_aes`` expects it (16, 24 or 32 bytes; the ``LANGGRAPH_AES_KEY``
environment variable holds it as text): ``memkit residue --checkpoint-key-env NAME``
reads it from the variable ``NAME`` and never prints it. :func:`scan_checkpoint_db`
reads a LangGraph SQLite checkpoint database met as a side file (its ``checkpoints``
and ``writes`` tables, recognised by their ``type`` columns).
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["AES_KEY_SIZES", "CHECKPOINT_BLOBS", "aes_serde", "decode_typed", "is_checkpoint_db",
           "key_from_env", "scan_checkpoint_db", "why_text"]

AES_KEY_SIZES = (16, 24, 32)
"""AES key lengths in bytes (LangGraph's ``from_pycryptodome_aes`` checks the same)."""

_PLAIN_TYPES = frozenset({"msgpack", "json", "bytes", "bytearray", "null"})


def key_from_env(name: str) -> bytes:
    """The AES key held by environment variable ``name``, as LangGraph reads
    ``LANGGRAPH_AES_KEY`` (its text, UTF-8 encoded).

    Raises:
        ValueError: the variable is unset, or its value is not 16, 24 or 32 bytes long
            (the message never shows the value).
    """
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"--checkpoint-key-env: environment variable {name} is not set")
    key = value.encode()
    if len(key) not in AES_KEY_SIZES:
        raise ValueError(f"--checkpoint-key-env: {name} must hold an AES key of 16, 24 or 32 bytes "
                         f"(it holds {len(key)})")
    return key


class _AnyAesMode:
    """``EncryptedSerializer.from_pycryptodome_aes(key=...)`` in EAX mode (LangGraph's
    default), then in GCM mode: both store nonce + tag + ciphertext and authenticate,
    so a wrong mode (or key) fails verification and is never read as plaintext."""

    def __init__(self, key: bytes) -> None:
        from Crypto.Cipher import AES
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        self._serdes = [EncryptedSerializer.from_pycryptodome_aes(key=key, mode=mode)
                        for mode in (AES.MODE_EAX, AES.MODE_GCM)]

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        error: Exception | None = None
        for serde in self._serdes:
            try:
                return serde.loads_typed(data)
            except (ValueError, KeyError, AssertionError) as exc:  # MAC check failed, no such cipher
                error = exc
        assert error is not None
        raise error

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self._serdes[0].dumps_typed(obj)


def aes_serde(key: bytes) -> Any:
    """A LangGraph serializer that decrypts values LangGraph's
    ``EncryptedSerializer.from_pycryptodome_aes(key=key)`` wrote (EAX mode, its
    default, or GCM); it reads plain values too.

    Raises:
        ValueError: ``key`` is not 16, 24 or 32 bytes.
        ImportError: pycryptodome is not installed (the ``checkpoint-crypto`` extra).
    """
    if len(key) not in AES_KEY_SIZES:
        raise ValueError(f"an AES key is 16, 24 or 32 bytes, got {len(key)}")
    try:
        return _AnyAesMode(key)
    except ImportError as exc:
        raise ImportError("decrypting LangGraph checkpoints needs pycryptodome "
                          "(pip install 'memkit[checkpoint-crypto]')") from exc


def decode_typed(typed: tuple[str, bytes], serdes: Sequence[Any], *,
                 keyed: bool | None = None) -> tuple[Any, str | None]:
    """Decode one stored ``(type, bytes)`` value.

    Tries each serializer of ``serdes`` (their ``loads_typed``), then LangGraph's
    ``JsonPlusSerializer`` for the plain types (module doc).

    Args:
        typed: the stored value.
        serdes: serializers to try, in order.
        keyed: whether one of them holds a key (default: any was given); decides
            whether an encrypted value that none decodes is ``"encrypted"`` (no key)
            or ``"not decrypted"`` (a key that failed).

    Returns:
        ``(value, None)``, or ``(None, why)`` when it is not decoded: ``why`` is
        ``"encrypted"``, ``"not decrypted"``, ``"pickle"`` (never unpickled) or
        ``"not decoded"``.
    """
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    typ = str(typed[0])
    for serde in serdes:
        try:
            return serde.loads_typed(typed), None
        except Exception:  # noqa: BLE001, S112 - any serializer error: the next one is tried
            continue
    if "+" in typ:
        return None, "not decrypted" if (bool(serdes) if keyed is None else keyed) else "encrypted"
    if typ == "pickle":
        return None, "pickle"
    if typ in _PLAIN_TYPES:
        try:
            return JsonPlusSerializer().loads_typed(typed), None
        except Exception:  # noqa: BLE001 - a corrupt value: matched raw, said not decoded
            return None, "not decoded"
    return None, "not decoded"


def why_text(counts: Counter[tuple[str, str]], total: int) -> list[str]:
    """One sentence per reason values were left not decoded, from ``{(why, type): n}``
    over ``total`` values (``pickle`` values are matched in their raw bytes, as every
    pickle memkit meets, and are not listed)."""
    by_why: dict[str, list[tuple[str, int]]] = {}
    for (why, typ), n in sorted(counts.items()):
        if why != "pickle":
            by_why.setdefault(why, []).append((typ, n))
    out = []
    for why, types in by_why.items():
        n = sum(k for _, k in types)
        kinds = ", ".join(f"{t!r}: {k}" for t, k in types)
        if why == "encrypted":
            out.append(f"{n} of {total} stored values are encrypted ({kinds}) and were not decoded: "
                       "give the key (memkit residue --checkpoint-key-env NAME, or "
                       "scan(checkpoint_serde=...))")
        elif why == "not decrypted":
            out.append(f"{n} of {total} stored values ({kinds}) could not be decrypted with the key or "
                       "serializer given (a wrong key?) and were not decoded")
        else:
            out.append(f"{n} of {total} stored values ({kinds}) could not be decoded")
    return out


def is_checkpoint_db(con: sqlite3.Connection) -> bool:
    """Whether an SQLite database is a LangGraph checkpoint store (``SqliteSaver``):
    tables ``checkpoints`` (``type``, ``checkpoint``) and ``writes`` (``type``,
    ``value``)."""
    def columns(table: str) -> set[str]:
        return {row[1] for row in con.execute(f'PRAGMA table_info("{table}")')}

    try:
        return {"type", "checkpoint"} <= columns("checkpoints") and {"type", "value"} <= columns("writes")
    except sqlite3.Error:
        return False


Emit = Callable[[str, Any], None]
"""``(location, value)``: where a value goes to be matched."""

CHECKPOINT_BLOBS = {"checkpoints": frozenset({"checkpoint"}), "writes": frozenset({"value"})}
"""The columns of a checkpoint database that hold serialized values (read by
:func:`scan_checkpoint_db`, decoded, rather than as raw row bytes)."""


def scan_checkpoint_db(con: sqlite3.Connection, emit: Emit, emit_raw: Emit, serdes: Sequence[Any]) -> list[str]:
    """Decode every stored value of a LangGraph SQLite checkpoint database (every
    checkpoint and every pending write, those whose checkpoint is gone included) and
    pass each to ``emit`` as ``("checkpoints:thread=T:checkpoint=C", value)`` or
    ``("writes:thread=T:checkpoint=C:<pending TASK>:CHANNEL", value)``; a value not
    decoded goes to ``emit_raw`` with its raw bytes.

    Returns:
        Why some values were not read (empty when every value was decoded): counts of
        encrypted values without a key, values the key did not decrypt, undecodable
        ones (raw bytes of each are matched by the row scan anyway).
    """
    left: Counter[tuple[str, str]] = Counter()
    total = 0
    rows = [("checkpoints", r) for r in con.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, '', '', type, checkpoint FROM checkpoints")]
    rows += [("writes", r) for r in con.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, channel, type, value FROM writes")]
    for table, (thread, ns, cid, task, channel, typ, blob) in rows:
        if typ is None or blob is None or typ == "empty":
            continue
        total += 1
        where = f"{table}:thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        if table == "writes":
            where += f":<pending {task}>:{channel}"
        value, why = decode_typed((str(typ), bytes(blob)), serdes)
        if why is None:
            emit(where, value)
        else:
            emit_raw(where, bytes(blob))
            left[(why, str(typ))] += 1
    return why_text(left, total)
