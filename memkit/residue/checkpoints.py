"""LangGraph checkpoints for the residue scan: what a saver holds, decoded before it is
matched (plain or encrypted values).

:func:`scan_checkpoints` reads a checkpointer's own storage (``InMemorySaver``,
``SqliteSaver``; any other saver through ``list()``, marked not checked) and
:func:`scan_checkpoint_db` a LangGraph SQLite checkpoint database met as a side file
(:mod:`memkit.residue.files`); both decode every stored value as follows.

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

import contextlib
import json
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # memkit.residue.chroma imports this module: its names are imported where used
    from memkit.residue.report import ResidueReport
    from memkit.scan.matching import SecretMatcher

__all__ = ["AES_KEY_SIZES", "CHECKPOINT_BLOBS", "aes_serde", "decode_typed", "is_checkpoint_db",
           "key_from_env", "scan_checkpoint_db", "scan_checkpoints", "threads_with_copies", "why_text"]

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


# --------------------------------------------------------------------------- savers


def scan_checkpoints(saver: Any, secret: str, *, report: ResidueReport | None = None,
                     serde: Any = None) -> ResidueReport:
    """Find every copy of ``secret`` in a LangGraph checkpointer, reading what the saver
    really holds rather than what ``list()`` shows: every stored checkpoint (channel
    values, metadata), every channel blob, and every pending write, including writes
    whose checkpoint no longer exists (LangGraph issue #7206: ``delete_thread`` followed
    by a late ``put_writes`` with the pre-delete config stores them again, and
    ``list()`` never returns them). Hits go on the ``checkpoint`` surface; each
    location is ``thread=<id>:checkpoint=<id>:<path>`` (the secret masked; a channel
    blob's checkpoint is ``<blob channel@version>``; a write without checkpoint is
    marked ``(checkpoint deleted)``), so copies can be counted per thread.

    Savers read from their storage: ``InMemorySaver`` (its ``storage``, ``blobs`` and
    ``writes``) and ``SqliteSaver`` (its ``checkpoints`` and ``writes`` tables, through
    its own connection, uncommitted rows included) and ``PostgresSaver`` (its three tables,
    through a connection of memkit's own). Any other saver is read with
    ``saver.list(None)`` and the ``checkpoint`` surface is listed as not checked (writes
    without a checkpoint cannot be seen through that API). Each stored value is decoded
    (:func:`memkit.residue.checkpoints.decode_typed`: ``serde``, then the saver's own
    serializer, then LangGraph's ``JsonPlusSerializer``); a value none decodes (an
    encrypted one without its key) is matched in its raw bytes and the surface is
    listed as not checked, with how many such values there were.

    Args:
        saver: a LangGraph ``BaseCheckpointSaver``.
        secret: the string to look for (:mod:`memkit.scan.matching`).
        report: add to this report instead of a new one.
        serde: a LangGraph serializer that reads what the saver wrote, e.g.
            ``EncryptedSerializer.from_pycryptodome_aes(key=...)`` or
            :func:`memkit.residue.checkpoints.aes_serde`.

    Returns:
        The report.
    """
    from memkit.scan.matching import matcher

    return scan_saver(saver, matcher(secret), report, serde)


@dataclass
class _Decoding:
    """The serializers a checkpoint scan decodes with, and what it could not decode."""

    serdes: list[Any]
    keyed: bool = False
    left: Counter[tuple[str, str]] = field(default_factory=Counter)
    total: int = 0


def scan_saver(saver: Any, m: Any, report: ResidueReport | None, serde: Any = None) -> ResidueReport:
    from memkit.residue.report import ResidueReport

    report = report if report is not None else ResidueReport(target=repr(saver))
    own = getattr(saver, "serde", None)  # LangGraph's EncryptedSerializer has a cipher
    dec = _Decoding([s for s in (serde, own) if s is not None],
                    keyed=serde is not None or hasattr(own, "cipher"))
    if all(hasattr(saver, a) for a in ("storage", "blobs", "writes", "serde")):
        _scan_memory_saver(saver, report, m, dec)
    elif isinstance(getattr(saver, "conn", None), sqlite3.Connection) and hasattr(saver, "serde"):
        _scan_sqlite_saver(saver, report, m, dec)
    elif type(saver).__name__ == "PostgresSaver" and hasattr(saver, "serde"):
        _scan_postgres_saver(saver, report, m, dec)
    else:
        _scan_listed(saver, report, m)
        report.skip("checkpoint", f"{type(saver).__name__}: read through list(); pending writes "
                                  "whose checkpoint was deleted are not visible through it")
    for reason in why_text(dec.left, dec.total):
        report.skip("checkpoint", f"{type(saver).__name__}: {reason}")
    return report


def _scan_listed(saver: Any, report: ResidueReport, m: SecretMatcher) -> None:
    from memkit.residue.values import scan_text, strings_in

    for tup in saver.list(None):
        cfg = (tup.config or {}).get("configurable", {})
        where = f"thread={cfg.get('thread_id')}:checkpoint={cfg.get('checkpoint_id')}"
        checkpoint = tup.checkpoint or {}
        for channel, value in (checkpoint.get("channel_values") or {}).items():
            for path, text in strings_in(value, f":{channel}"):
                scan_text(report, "checkpoint", where + path, text, m)
        for path, text in strings_in(tup.metadata or {}, ":<metadata>"):
            scan_text(report, "checkpoint", where + path, text, m)
        for task_id, channel, value in tup.pending_writes or ():
            for path, text in strings_in(value, f":<pending {task_id}>:{channel}"):
                scan_text(report, "checkpoint", where + path, text, m)


def _scan_typed(dec: _Decoding, report: ResidueReport, m: SecretMatcher, where: str,
                typed: tuple[str, bytes]) -> None:
    """A value as the saver stored it (``(type, bytes)``): decoded
    (:func:`memkit.residue.checkpoints.decode_typed`) and matched; matched as raw bytes,
    and counted in ``dec.left``, when it is not decoded."""
    from memkit.residue.values import scan_buffer, scan_text, strings_in

    if typed[0] == "empty":
        return
    dec.total += 1
    value, why = decode_typed((str(typed[0]), bytes(typed[1] or b"")), dec.serdes, keyed=dec.keyed)
    if why is not None:
        scan_buffer(report, "checkpoint", where, bytes(typed[1] or b""), m)
        dec.left[(why, str(typed[0]))] += 1
        return
    if isinstance(value, Mapping) and "channel_values" in value:  # a checkpoint
        for channel, inner in (value.get("channel_values") or {}).items():
            for path, text in strings_in(inner, f":{channel}"):
                scan_text(report, "checkpoint", where + path, text, m)
        return
    for path, text in strings_in(value, ""):
        scan_text(report, "checkpoint", where + path, text, m)


def _scan_memory_saver(saver: Any, report: ResidueReport, m: SecretMatcher, dec: _Decoding) -> None:
    storage = {t: {ns: dict(cps) for ns, cps in nss.items()} for t, nss in list(saver.storage.items())}
    for thread, nss in storage.items():
        for ns, cps in nss.items():
            for cid, (cp, meta, _parent) in cps.items():
                where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
                _scan_typed(dec, report, m, where, cp)
                _scan_typed(dec, report, m, where + ":<metadata>", meta)
    for (thread, ns, channel, version), typed in list(saver.blobs.items()):
        where = f"thread={thread}:checkpoint=<blob {channel}@{version}>" + (f":ns={ns}" if ns else "")
        _scan_typed(dec, report, m, where + f":{channel}", typed)
    for (thread, ns, cid), writes in list(saver.writes.items()):
        orphan = cid not in storage.get(thread, {}).get(ns, {})
        where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        for (task_id, _idx), (_, channel, typed, _path) in list(writes.items()):
            mark = " (checkpoint deleted)" if orphan else ""
            _scan_typed(dec, report, m, f"{where}:<pending {task_id}{mark}>:{channel}", typed)


def _scan_sqlite_saver(saver: Any, report: ResidueReport, m: SecretMatcher, dec: _Decoding) -> None:
    from memkit.residue.values import scan_text, scan_value, strings_in

    lock = getattr(saver, "lock", None) or contextlib.nullcontext()
    with lock:
        cps = saver.conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata "
            "FROM checkpoints").fetchall()
        writes = saver.conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, channel, type, value "
            "FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx").fetchall()
    present = set()
    for thread, ns, cid, typ, blob, meta in cps:
        present.add((thread, ns, cid))
        where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        _scan_typed(dec, report, m, where, (typ, blob))
        if meta is not None:
            try:
                decoded = json.loads(meta)
            except (ValueError, TypeError):
                scan_value(report, "checkpoint", where + ":<metadata>", meta, m)
            else:
                for path, text in strings_in(decoded, ":<metadata>"):
                    scan_text(report, "checkpoint", where + path, text, m)
    for thread, ns, cid, task_id, channel, typ, value in writes:
        mark = "" if (thread, ns, cid) in present else " (checkpoint deleted)"
        where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        _scan_typed(dec, report, m, f"{where}:<pending {task_id}{mark}>:{channel}", (typ, value))


def _scan_postgres_saver(saver: Any, report: ResidueReport, m: SecretMatcher, dec: _Decoding) -> None:
    """A ``PostgresSaver``'s tables read through a connection of memkit's own (same
    server, database and ``search_path``): every checkpoint (JSON), channel blob and
    pending write, writes whose checkpoint was deleted included."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from memkit.residue.values import scan_text, strings_in

    conn = saver.conn
    if hasattr(conn, "info"):
        params = conninfo_to_dict(conn.info.dsn)
        if getattr(conn.info, "password", None):
            params["password"] = conn.info.password
        conninfo = make_conninfo(**params)
    else:  # a connection pool
        conninfo = str(conn.conninfo)
    with psycopg.connect(conninfo, autocommit=True) as own:
        cps = own.execute("SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata "
                          "FROM checkpoints").fetchall()
        blobs = own.execute("SELECT thread_id, checkpoint_ns, channel, version, type, blob "
                            "FROM checkpoint_blobs").fetchall()
        writes = own.execute("SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, channel, type, blob "
                             "FROM checkpoint_writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
                             ).fetchall()
    present = set()
    for thread, ns, cid, checkpoint, meta in cps:
        present.add((thread, ns, cid))
        where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        for path, text in strings_in(checkpoint, ""):
            scan_text(report, "checkpoint", where + path, text, m)
        for path, text in strings_in(meta or {}, ":<metadata>"):
            scan_text(report, "checkpoint", where + path, text, m)
    for thread, ns, channel, version, typ, blob in blobs:
        where = f"thread={thread}:checkpoint=<blob {channel}@{version}>" + (f":ns={ns}" if ns else "")
        _scan_typed(dec, report, m, where + f":{channel}", (typ, bytes(blob) if blob is not None else b""))
    for thread, ns, cid, task_id, channel, typ, blob in writes:
        mark = "" if (thread, ns, cid) in present else " (checkpoint deleted)"
        where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        _scan_typed(dec, report, m, f"{where}:<pending {task_id}{mark}>:{channel}", (typ, bytes(blob)))


def threads_with_copies(report: ResidueReport) -> set[str]:
    """Thread ids whose checkpoints hold a copy (from ``checkpoint`` hit locations)."""
    out = set()
    for hit in report.surfaces.get("checkpoint", []):
        head = hit.location.split(":checkpoint=", 1)[0]
        out.add(head.removeprefix("thread="))
    return out
