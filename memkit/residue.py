"""Where does a string still live? A read-only residue scanner for Chroma stores.

README ("What counts as a copy") and the paper's Forgetting Residue Score (arXiv 2606.10062,
deletion modes): after ``forget``, a secret may survive in places the retrieval API
never shows. :func:`scan` looks at every surface, through the chroma API and in the
raw bytes, and reports each copy:

=================== =========================================================
surface             what is scanned
=================== =========================================================
``text_raw``        documents of memkit ``raw`` chunks (all collections)
``text_summary``    documents of memkit ``summary`` chunks
``text_other``      documents memkit did not write (no memkit ``tier``)
``metadata``        record ids, metadata values (list items too), collection
                    metadata
``stale_embedding`` stored vectors whose cosine to the embedding of their
                    current text is below ``stale_threshold`` (0.99) while the
                    current text lacks the secret: the vector still encodes an
                    older text (e.g. redaction without re-embedding)
``stale_vector``    stored vectors no live record owns: HNSW elements of deleted
                    records (``data_level0.bin``, deleted or not yet), vectors in
                    chroma's log of deleted or rewritten records
                    (:mod:`memkit.vectors`; what they reveal:
                    :mod:`memkit.vector_weigh`)
``cache``           every text/blob value of every table of each SQLite file
                    in ``cache_paths`` (LLM caches)
``cache_disk``      raw bytes of those cache files and their -wal/-journal
``side_sqlite``     live rows of every table of each SQLite side file in
                    ``also`` (another memory layer's history database ...)
``side_disk``       raw bytes of those SQLite side files (freed pages included)
``side_fulltext``   FTS3/4/5 tables of SQLite side files: their shadow tables,
                    and index entries (``MATCH`` on the secret's tokens, FTS5
                    documents rebuilt from the index) whose row is gone
``side_json``       JSON / JSONL side files (raw text: escapes are matched)
``side_pickle``     pickle side files (raw bytes; never unpickled)
``side_file``       any other side file (raw bytes)
                    (containers inside ``also`` are opened: each member is
                    counted by what it is, labelled ``container!member``)
``checkpoint``      every checkpoint and pending write of every thread of a
                    LangGraph checkpointer (``checkpointer=``): channel values
                    (messages included), metadata; location names the thread
``disk_sqlite``     raw bytes of ``chroma.sqlite3`` (free pages and freed
                    cells included)
``disk_wal``        raw bytes of ``*-wal``, ``*-journal``, ``*-shm`` files
``disk_log``        rows of chroma's write-ahead log table ``embeddings_queue``
                    (read through SQL)
``disk_fulltext``   FTS5 tables (content and index blobs, read through SQL)
                    and an FTS5 ``MATCH`` query for the secret
``disk_hnsw``       raw bytes of HNSW segment files (``data_level0.bin``,
                    ``link_lists.bin``, ``header.bin``, ``length.bin``,
                    ``index_metadata.pickle``)
``disk_other``      raw bytes of every other file under the directory
=================== =========================================================

Matching: every spelling of the secret that :mod:`memkit.matching` defines (the one
matcher that forget, redaction, the LLM cache and the probe detectors use too): any
Unicode normal form and case, any separator between its letters and digits, and the
JSON escapes stores write; in bytes, the same over UTF-8, and the text pattern over
the bytes read as UTF-16 and UTF-32 (:mod:`memkit.encodings`). A hit's ``kind`` is
``exact`` or ``normalized`` (``stale`` for ``stale_embedding``); a hit in a wide
encoding names it after its offset (``file@12 [utf-16-le]``). Snippets and locations
mask every occurrence, so a report never contains the secret.

A scan never claims more than it looked at. Files are read by
:mod:`memkit.filescan`: every file and container member gets a coverage record
(:class:`memkit.coverage.FileCoverage`: size, bytes read, decoders applied, what was
left), and a file not fully covered (a format memkit cannot open, an unreadable or
special file, a broken link, a file that changed during the scan, a container limit
reached) is listed in :attr:`ResidueReport.unchecked` under its surface. So is a
surface it could not check (disk surfaces of a store behind a server, stale
embeddings of records that have no document, collections of another dimension,
``check_embeddings=False``). :attr:`ResidueReport.clean` is then False even when no
copy was found (:attr:`ResidueReport.verdict` says which).

Read-only: files are read with ``open(..., "rb")``; SQL and the chroma API run on
temporary copies, so the scan never creates ``-wal``/``-journal`` files or migrates
the target. The ``stale_embedding`` check re-embeds every document (about 4 ms per
chunk with MiniLM on two CPU cores); ``check_embeddings=False`` skips it, and
collections whose dimension differs from the embedder's are skipped (noted in
:attr:`ResidueReport.notes`). A vector from another embedding model counts as stale.

Why this module is long: :func:`scan` holds the per-surface logic of one report for
every surface of a Chroma directory (SQL rows, the embeddings queue, full-text
tables, stale embeddings) and for caches, side files and checkpointers; reading
files (:mod:`memkit.filescan`), wide encodings (:mod:`memkit.encodings`), containers
(:mod:`memkit.containers`), full-text indexes (:mod:`memkit.fulltext`), coverage
(:mod:`memkit.coverage`) and many secrets (:mod:`memkit.scan_engine`) already live in
their own modules, and the command is :mod:`evaluators.cli.residue`.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memkit.containers import Limits
from memkit.coverage import FileCoverage, coverage_summary
from memkit.filescan import CACHE, DISK, HNSW_FILES, SIDE, Scanner, content_kind
from memkit.fulltext import fulltext_hits_each
from memkit.matching import SecretMatcher, matcher, scalar_text, secret_bytes_regex
from memkit.store import TIERS

if TYPE_CHECKING:
    from memkit.store import TieredMemoryStore

__all__ = [
    "scan_checkpoints",
    "threads_with_copies",
    "side_file_kind",
    "HNSW_FILES",
    "SURFACES",
    "Hit",
    "Limits",
    "NotAChromaDirectory",
    "ResidueReport",
    "scan",
    "secret_bytes_regex",
]

SURFACES: tuple[str, ...] = (
    "text_raw",
    "text_summary",
    "text_other",
    "metadata",
    "stale_embedding",
    "stale_vector",
    "cache",
    "cache_disk",
    "side_sqlite",
    "side_disk",
    "side_fulltext",
    "side_json",
    "side_pickle",
    "side_file",
    "checkpoint",
    "disk_sqlite",
    "disk_wal",
    "disk_log",
    "disk_fulltext",
    "disk_hnsw",
    "disk_other",
)
"""Every surface a :class:`ResidueReport` counts (module doc)."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_WAL_SUFFIXES = ("-wal", "-journal", "-shm")
_WINDOW = 24
_MASK = "[SECRET]"
_PAGE = 2000


class NotAChromaDirectory(ValueError):
    """The path is not a Chroma persist directory (no ``chroma.sqlite3`` inside)."""


@dataclass(frozen=True)
class Hit:
    """One copy of the secret.

    Attributes:
        surface: one of :data:`SURFACES`.
        location: ``collection:id[:key]``, ``file@offset``, ``table:row:column``...
        kind: ``exact``, ``normalized`` or ``stale``.
        snippet: surrounding text with every occurrence replaced by ``[SECRET]``.
        secret_index: with ``scan(..., secrets=[...])``, the index of the secret this
            is a copy of (``None`` for one secret, and for ``stale`` hits).
    """

    surface: str
    location: str
    kind: str
    snippet: str
    secret_index: int | None = None


@dataclass
class ResidueReport:
    """Copies of a secret per surface (module doc).

    Attributes:
        target: what was scanned.
        surfaces: hits per surface; every surface of :data:`SURFACES` is a key.
        notes: what was skipped and why.
        unchecked: surfaces (wholly or partly) not checked, with the reasons.
        not_given: surfaces whose inputs the caller did not give (no ``cache_paths``:
            ``cache``/``cache_disk``; no ``also``: the ``side_*`` surfaces; no
            ``checkpointer``: ``checkpoint``). Their count is 0 because nothing was
            scanned, not because something was found clean; the verdict covers what
            was given, and the CLI and :meth:`to_dict` say which were not.
        coverage: one :class:`~memkit.coverage.FileCoverage` per file and container
            member read (module doc); those not fully covered are in ``unchecked``.
        names: the surfaces this report counts, in order (default :data:`SURFACES`,
            a Chroma directory's; a PostgreSQL database's are
            :data:`memkit.pg_residue.PG_SURFACES`).
    """

    target: str
    surfaces: dict[str, list[Hit]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unchecked: dict[str, list[str]] = field(default_factory=dict)
    not_given: list[str] = field(default_factory=list)
    coverage: list[FileCoverage] = field(default_factory=list)
    names: tuple[str, ...] = SURFACES

    def __post_init__(self) -> None:
        for s in self.names:
            self.surfaces.setdefault(s, [])

    def cover(self, record: FileCoverage) -> None:
        """Record what was read of one file; one not fully covered is listed in
        :attr:`unchecked` under its surface (``path: reasons``)."""
        self.coverage.append(record)
        if not record.complete:
            why = "; ".join(record.left) or f"{record.bytes_read} of {record.size} bytes read"
            self.skip(record.surface, f"{record.path}: {why}")

    secret_labels: list[str] = field(default_factory=list)
    """With ``scan(..., secrets=[...])``: each secret masked
    (:func:`memkit.multi_matcher.mask_secret`), by index; empty for one secret."""

    def per_secret(self) -> list[dict[str, Any]]:
        """With several secrets: ``[{"index", "secret" (masked), "total", "counts"
        (per surface, non-zero only)}]`` for every secret, in the order given."""
        rows = [{"index": i, "secret": label, "total": 0, "counts": {}}
                for i, label in enumerate(self.secret_labels)]
        for surface in self.names:
            for h in self.surfaces.get(surface, []):
                if h.secret_index is not None and h.secret_index < len(rows):
                    row = rows[h.secret_index]
                    row["total"] += 1
                    row["counts"][surface] = row["counts"].get(surface, 0) + 1
        return rows

    def skip(self, surface: str, reason: str) -> None:
        """Record that ``surface`` was not (fully) checked, and why."""
        if surface not in self.names:
            raise ValueError(f"unknown surface {surface!r}")
        self.unchecked.setdefault(surface, [])
        if reason not in self.unchecked[surface]:
            self.unchecked[surface].append(reason)
        note = f"{surface} not checked: {reason}"
        if note not in self.notes:
            self.notes.append(note)

    def counts(self) -> dict[str, int]:
        """Number of hits per surface, zeros included, in :attr:`names` order."""
        return {s: len(self.surfaces.get(s, [])) for s in self.names}

    @property
    def total(self) -> int:
        """Hits over all surfaces."""
        return sum(self.counts().values())

    @property
    def clean(self) -> bool:
        """True when every surface was checked and none holds a copy."""
        return self.total == 0 and not self.unchecked

    @property
    def verdict(self) -> str:
        """``"clean"``, ``"copies remain"``, or ``"incomplete"`` (no copy found on the
        checked surfaces, but some were not checked)."""
        if self.total:
            return "copies remain"
        return "incomplete" if self.unchecked else "clean"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: target, clean, verdict, total, counts, unchecked,
        not_given, hits per surface, notes, coverage (one record per file) and its
        one-line summary."""
        return {
            "target": self.target,
            "clean": self.clean,
            "verdict": self.verdict,
            "total": self.total,
            "counts": self.counts(),
            "unchecked": {k: list(v) for k, v in self.unchecked.items()},
            "not_given": list(self.not_given),
            "surfaces": {s: [asdict(h) for h in self.surfaces.get(s, [])] for s in self.names},
            "notes": list(self.notes),
            "coverage_summary": coverage_summary(self.coverage),
            "coverage": [r.to_dict() for r in self.coverage],
            **({"per_secret": self.per_secret()} if self.secret_labels else {}),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent)

    def add(self, hit: Hit) -> None:
        """Record a hit (its surface must be in :attr:`names`)."""
        if hit.surface not in self.names:
            raise ValueError(f"unknown surface {hit.surface!r}")
        self.surfaces.setdefault(hit.surface, []).append(hit)


# --------------------------------------------------------------------------- matching


def _render(chars: str, start: int, spans: Sequence[tuple[int, int, str]], lo: int, hi: int) -> str:
    """Text of ``chars[lo:hi]`` (``start`` = offset of ``chars``) with spans masked."""
    out: list[str] = []
    i = lo
    for s, e, *_ in sorted(spans):
        s, e = max(s, lo), min(e, hi)
        if e <= i or s >= hi:
            continue
        if s > i:
            out.append(chars[i - start : s - start])
        out.append(_MASK)
        i = e
    if i < hi:
        out.append(chars[i - start : hi - start])
    return "".join(out).replace("\n", " ")


def _mask(text: str, m: SecretMatcher) -> str:
    return m.text.sub(_MASK, text)


def _scan_text(report: ResidueReport, surface: str, location: str, text: str, m: SecretMatcher,
               depth: int = 0) -> None:
    spans = m.spans(text)
    loc = _mask(location, m)
    for s, e, kind, *index in spans:
        lo, hi = max(0, s - _WINDOW), min(len(text), e + _WINDOW)
        report.add(Hit(surface, loc, kind, _render(text, 0, spans, lo, hi), *index))
    # A JSON document (LangChain's serialised prompts, chroma's log rows) can hold the
    # secret only through its escapes (``\u00df`` for ``ß``): search it decoded too, as
    # :func:`memkit.matching.contains_secret` (the forget's cache purge) does.
    if not spans and depth < 4 and text[:1] in "[{\"":
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            return
        for path, inner in _strings_in(decoded, ":<json>"):
            if inner != text:
                _scan_text(report, surface, location + path, inner, m, depth + 1)


def _printable(b: bytes) -> str:
    return "".join(chr(x) if 32 <= x < 127 else "." for x in b)


def _scan_buffer(
    report: ResidueReport,
    surface: str,
    location: str,
    data: bytes | mmap.mmap,
    m: SecretMatcher,
) -> None:
    matches = m.byte_spans(data)
    loc = _mask(location, m)
    for s, e, kind, *index in matches:
        lo, hi = max(0, s - _WINDOW), min(len(data), e + _WINDOW)
        window = _printable(bytes(data[lo:hi]))
        report.add(Hit(surface, f"{loc}@{s}", kind, _render(window, lo, matches, lo, hi), *index))


def _scan_value(
    report: ResidueReport, surface: str, location: str, value: Any,
    m: SecretMatcher,
) -> None:
    text = scalar_text(value)
    if text is not None:
        _scan_text(report, surface, location, text, m)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        _scan_buffer(report, surface, location, bytes(value), m)
    elif isinstance(value, (list, tuple)):
        for n, v in enumerate(value):
            _scan_value(report, surface, f"{location}[{n}]", v, m)


# --------------------------------------------------------------------------- SQLite


def _copy_sqlite(src: Path, dst_dir: Path) -> Path:
    """Copy an SQLite file and its -wal/-journal into ``dst_dir``; return the copy."""
    dst = dst_dir / src.name
    shutil.copy2(src, dst)
    for suf in ("-wal", "-journal"):
        side = src.with_name(src.name + suf)
        if side.exists():
            shutil.copy2(side, dst_dir / side.name)
    return dst


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(16) == _SQLITE_MAGIC


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _scan_table(
    con: sqlite3.Connection, report: ResidueReport, surface: str, table: str, prefix: str,
    m: SecretMatcher,
) -> None:
    cur = con.execute(f"SELECT * FROM {_quote(table)}")
    cols = [d[0] for d in cur.description]
    for n, row in enumerate(cur):
        for col, value in zip(cols, row, strict=True):
            if isinstance(value, (str, bytes)):
                _scan_value(report, surface, f"{prefix}{table}:row{n}:{col}", value,
                            m)


def _scan_chroma_sql(
    db: Path, report: ResidueReport,
    m: SecretMatcher,
) -> None:
    """``disk_log`` and ``disk_fulltext`` through SQL on a copy of ``chroma.sqlite3``."""
    with tempfile.TemporaryDirectory(prefix="memkit-residue-") as tmp:
        copy = _copy_sqlite(db, Path(tmp))
        con = sqlite3.connect(copy)
        try:
            tables = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type='table'"))
            if "embeddings_queue" in tables:
                cur = con.execute("SELECT seq_id, topic, id, metadata FROM embeddings_queue")
                for seq, topic, rid, meta in cur:
                    for col, value in (("topic", topic), ("id", rid), ("metadata", meta)):
                        if isinstance(value, (str, bytes)):
                            _scan_value(report, "disk_log", f"embeddings_queue:seq_id={seq}:{col}",
                                        value, m)
            fts = sorted(n for n, sql in tables.items() if sql and re.search(r"using\s+fts[345]", sql, re.I))
            for vt in fts:
                for shadow in sorted(t for t in tables if t.startswith(vt + "_")):
                    _scan_table(con, report, "disk_fulltext", shadow, "", m)
            hits, problems = fulltext_hits_each(con, m)
            for idx, h in hits:
                report.add(Hit("disk_fulltext", _mask(f"{h.table} {h.how.split()[0]} rowid={h.rowid}", m), h.kind,
                               f"full-text index holds the secret ({h.how}); its row does not show it", idx))
            for problem in problems:
                report.skip("disk_fulltext", f"chroma.sqlite3: {problem}")
        finally:
            con.close()


def side_file_kind(path: Path) -> str:
    """What a side file is, by its content (SQLite magic, pickle protocol byte) and
    name: ``"sqlite"``, ``"pickle"``, ``"json"`` or ``"file"``."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    return content_kind(head, path.name)


# --------------------------------------------------------------------------- checkpoints


def _strings_in(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """``(path, text)`` of every string a checkpoint value holds: messages (content,
    additional kwargs, tool calls), mappings (keys too), sequences, pydantic models,
    dataclasses, numbers; anything else by its ``repr``."""
    if depth > 50:
        return
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, (bytes, bytearray)):
        yield path, bytes(obj).decode("utf-8", errors="replace")
    elif isinstance(obj, bool) or obj is None:
        return
    elif isinstance(obj, (int, float)):
        yield path, str(obj)
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _strings_in(k, f"{path}.<key>", depth + 1)
            yield from _strings_in(v, f"{path}.{k}", depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for i, v in enumerate(obj):
            yield from _strings_in(v, f"{path}[{i}]", depth + 1)
    elif hasattr(obj, "model_dump"):
        yield from _strings_in(obj.model_dump(), path, depth + 1)
    elif is_dataclass(obj) and not isinstance(obj, type):
        yield from _strings_in(asdict(obj), path, depth + 1)
    else:
        yield path, repr(obj)


def scan_checkpoints(saver: Any, secret: str, *, report: ResidueReport | None = None) -> ResidueReport:
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
    its own connection, uncommitted rows included). Any other saver is read with
    ``saver.list(None)`` and the ``checkpoint`` surface is listed as not checked (writes
    without a checkpoint cannot be seen through that API). A stored value the saver's
    serializer cannot decode is matched in its raw bytes and listed as not checked.

    Args:
        saver: a LangGraph ``BaseCheckpointSaver``.
        secret: the string to look for (:mod:`memkit.matching`).
        report: add to this report instead of a new one.

    Returns:
        The report.
    """
    return _scan_checkpoints(saver, matcher(secret), report)


def _scan_checkpoints(saver: Any, m: Any, report: ResidueReport | None) -> ResidueReport:
    report = report if report is not None else ResidueReport(target=repr(saver))
    if all(hasattr(saver, a) for a in ("storage", "blobs", "writes", "serde")):
        _scan_memory_saver(saver, report, m)
    elif isinstance(getattr(saver, "conn", None), sqlite3.Connection) and hasattr(saver, "serde"):
        _scan_sqlite_saver(saver, report, m)
    elif type(saver).__name__ == "PostgresSaver" and hasattr(saver, "serde"):
        _scan_postgres_saver(saver, report, m)
    else:
        _scan_listed(saver, report, m)
        report.skip("checkpoint", f"{type(saver).__name__}: read through list(); pending writes "
                                  "whose checkpoint was deleted are not visible through it")
    return report


def _scan_listed(saver: Any, report: ResidueReport, m: SecretMatcher) -> None:
    for tup in saver.list(None):
        cfg = (tup.config or {}).get("configurable", {})
        where = f"thread={cfg.get('thread_id')}:checkpoint={cfg.get('checkpoint_id')}"
        checkpoint = tup.checkpoint or {}
        for channel, value in (checkpoint.get("channel_values") or {}).items():
            for path, text in _strings_in(value, f":{channel}"):
                _scan_text(report, "checkpoint", where + path, text, m)
        for path, text in _strings_in(tup.metadata or {}, ":<metadata>"):
            _scan_text(report, "checkpoint", where + path, text, m)
        for task_id, channel, value in tup.pending_writes or ():
            for path, text in _strings_in(value, f":<pending {task_id}>:{channel}"):
                _scan_text(report, "checkpoint", where + path, text, m)


def _scan_typed(saver: Any, report: ResidueReport, m: SecretMatcher, where: str,
                typed: tuple[str, bytes]) -> None:
    """A value as the saver stored it (``(type, bytes)``): decoded by its serializer
    and matched; matched as raw bytes when it cannot be decoded."""
    if typed[0] == "empty":
        return
    try:
        value = saver.serde.loads_typed(typed)
    except Exception as exc:  # any serializer error: the raw bytes are still matched
        _scan_buffer(report, "checkpoint", where, bytes(typed[1] or b""), m)
        report.skip("checkpoint", f"{where.split(':', 1)[0]}: a stored value of type "
                                  f"{typed[0]!r} cannot be decoded ({type(exc).__name__}); "
                                  "its raw bytes were matched")
        return
    if isinstance(value, Mapping) and "channel_values" in value:  # a checkpoint
        for channel, inner in (value.get("channel_values") or {}).items():
            for path, text in _strings_in(inner, f":{channel}"):
                _scan_text(report, "checkpoint", where + path, text, m)
        return
    for path, text in _strings_in(value, ""):
        _scan_text(report, "checkpoint", where + path, text, m)


def _scan_memory_saver(saver: Any, report: ResidueReport, m: SecretMatcher) -> None:
    storage = {t: {ns: dict(cps) for ns, cps in nss.items()} for t, nss in list(saver.storage.items())}
    for thread, nss in storage.items():
        for ns, cps in nss.items():
            for cid, (cp, meta, _parent) in cps.items():
                where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
                _scan_typed(saver, report, m, where, cp)
                _scan_typed(saver, report, m, where + ":<metadata>", meta)
    for (thread, ns, channel, version), typed in list(saver.blobs.items()):
        where = f"thread={thread}:checkpoint=<blob {channel}@{version}>" + (f":ns={ns}" if ns else "")
        _scan_typed(saver, report, m, where + f":{channel}", typed)
    for (thread, ns, cid), writes in list(saver.writes.items()):
        orphan = cid not in storage.get(thread, {}).get(ns, {})
        where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        for (task_id, _idx), (_, channel, typed, _path) in list(writes.items()):
            mark = " (checkpoint deleted)" if orphan else ""
            _scan_typed(saver, report, m, f"{where}:<pending {task_id}{mark}>:{channel}", typed)


def _scan_sqlite_saver(saver: Any, report: ResidueReport, m: SecretMatcher) -> None:
    import contextlib

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
        _scan_typed(saver, report, m, where, (typ, blob))
        if meta is not None:
            try:
                decoded = json.loads(meta)
            except (ValueError, TypeError):
                _scan_value(report, "checkpoint", where + ":<metadata>", meta, m)
            else:
                for path, text in _strings_in(decoded, ":<metadata>"):
                    _scan_text(report, "checkpoint", where + path, text, m)
    for thread, ns, cid, task_id, channel, typ, value in writes:
        mark = "" if (thread, ns, cid) in present else " (checkpoint deleted)"
        where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        _scan_typed(saver, report, m, f"{where}:<pending {task_id}{mark}>:{channel}", (typ, value))


def _scan_postgres_saver(saver: Any, report: ResidueReport, m: SecretMatcher) -> None:
    """A ``PostgresSaver``'s tables read through a connection of memkit's own (same
    server, database and ``search_path``): every checkpoint (JSON), channel blob and
    pending write, decoded by the saver's serializer."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

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
        for path, text in _strings_in(checkpoint, ""):
            _scan_text(report, "checkpoint", where + path, text, m)
        for path, text in _strings_in(meta or {}, ":<metadata>"):
            _scan_text(report, "checkpoint", where + path, text, m)
    for thread, ns, channel, version, typ, blob in blobs:
        where = f"thread={thread}:checkpoint=<blob {channel}@{version}>" + (f":ns={ns}" if ns else "")
        _scan_typed(saver, report, m, where + f":{channel}", (typ, bytes(blob) if blob is not None else b""))
    for thread, ns, cid, task_id, channel, typ, blob in writes:
        mark = "" if (thread, ns, cid) in present else " (checkpoint deleted)"
        where = f"thread={thread}:checkpoint={cid}" + (f":ns={ns}" if ns else "")
        _scan_typed(saver, report, m, f"{where}:<pending {task_id}{mark}>:{channel}", (typ, bytes(blob)))


def threads_with_copies(report: ResidueReport) -> set[str]:
    """Thread ids whose checkpoints hold a copy (from ``checkpoint`` hit locations)."""
    out = set()
    for hit in report.surfaces.get("checkpoint", []):
        head = hit.location.split(":checkpoint=", 1)[0]
        out.add(head.removeprefix("thread="))
    return out


# --------------------------------------------------------------------------- chroma API


class _LazyEmbedder:
    """:func:`memkit.models.embeddings`, loaded on the first ``encode``: a directory
    without stored vectors never pays for loading the model (tens of seconds on a
    loaded machine)."""

    def __init__(self) -> None:
        self._inner: Any = None

    def encode(self, texts: list[str]) -> Any:
        if self._inner is None:
            from memkit.models import embeddings

            self._inner = embeddings()
        inner = self._inner
        return inner.encode(texts) if hasattr(inner, "encode") else inner.embed_documents(texts)


def _encode(embedder: Any, texts: list[str]) -> np.ndarray:
    if hasattr(embedder, "encode"):
        out = np.asarray(embedder.encode(texts), dtype=np.float32)
    else:
        out = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


def _scan_collections(
    collections: Iterable[Any], report: ResidueReport, embedder: Any, check_embeddings: bool,
    stale_threshold: float, m: SecretMatcher, prefix: str = "", keystore: Any = None,
) -> None:
    from memkit.keystore import is_sealed

    dim: int | None = None
    for col in collections:
        name = prefix + col.name
        for key, value in sorted((col.metadata or {}).items()):
            _scan_value(report, "metadata", f"{name}:<collection>:{key}", value,
                        m)
        n = col.count()
        # memkit's tombstone collection holds placeholder vectors, not embeddings.
        check = check_embeddings and (col.metadata or {}).get("memkit") != "tombstones"
        no_doc = sealed = 0
        for off in range(0, n, _PAGE):
            res = col.get(limit=_PAGE, offset=off, include=["documents", "metadatas", "embeddings"])
            ids = res["ids"]
            if not ids:
                break
            docs = res.get("documents") or [None] * len(ids)
            metas = res.get("metadatas") or [None] * len(ids)
            vecs = res.get("embeddings")
            opened = _open_sealed(keystore, ids, docs, metas, report, name)
            for rid, doc, meta in zip(ids, docs, metas, strict=True):
                meta = meta or {}
                tier = meta.get("tier")
                surface = f"text_{tier}" if tier in TIERS and "namespace" in meta else "text_other"
                if rid in opened:  # a sealed record whose key is live: its plaintext is a live copy
                    _scan_text(report, surface, f"{name}:{rid}", opened[rid].text, m)
                    for key, value in sorted(opened[rid].extra.items()):
                        _scan_text(report, "metadata", f"{name}:{rid}:<key>", key, m)
                        _scan_value(report, "metadata", f"{name}:{rid}:{key}", value, m)
                if doc:
                    _scan_text(report, surface, f"{name}:{rid}", doc, m)
                _scan_text(report, "metadata", f"{name}:{rid}:<id>", rid, m)
                for key, value in sorted(meta.items()):
                    _scan_text(report, "metadata", f"{name}:{rid}:<key>", key, m)
                    _scan_value(report, "metadata", f"{name}:{rid}:{key}", value, m)
            if not check or vecs is None or len(vecs) == 0:
                continue
            stored = np.asarray(vecs, dtype=np.float32)
            if dim is None:
                dim = int(_encode(embedder, ["dimension probe"]).shape[1])
            if stored.shape[1] != dim:
                report.skip("stale_embedding", f"{name}: vectors of dimension {stored.shape[1]}, "
                                               f"the embedder's is {dim}")
                check = False
                continue
            no_doc += sum(1 for d in docs if not d)
            # a sealed text (memkit.keystore) is compared as its plaintext, opened with the key
            texts = [opened[r].text if r in opened else None if is_sealed(d) else d for r, d in zip(ids, docs, strict=True)]
            sealed += sum(1 for r, d in zip(ids, docs, strict=True) if is_sealed(d) and r not in opened)
            rows = [i for i, d in enumerate(texts) if d]
            if not rows:
                continue
            fresh = _encode(embedder, [texts[i] for i in rows])
            norms = np.linalg.norm(stored[rows], axis=1)
            norms[norms == 0] = 1.0
            cos = np.einsum("ij,ij->i", stored[rows], fresh) / norms
            for i, c in zip(rows, cos, strict=True):
                if c < stale_threshold and not m.search(texts[i]):
                    head = _mask(texts[i][:60], m)
                    report.add(Hit("stale_embedding", _mask(f"{name}:{ids[i]}", m), "stale",
                                   f"cos(stored, embed(text))={c:.3f}; text: {head}"))
        if no_doc:
            report.skip("stale_embedding", f"{name}: {no_doc} records have no document (their "
                                           "text lives elsewhere, e.g. in metadata), so their vectors "
                                           "cannot be compared with it")
        if sealed and keystore is None:
            report.skip("stale_embedding", f"{name}: {sealed} records are sealed (memkit.keystore) and no "
                                           "key store was given, so their vectors cannot be compared with their text")


def _open_sealed(keystore: Any, ids: list[str], docs: list[Any], metas: list[Any], report: ResidueReport,
                 name: str) -> dict[str, Any]:
    """Sealed records of a page opened with ``keystore`` (:func:`memkit.keystore.open_page`);
    without one their text is not read, so the text surfaces are read in part."""
    from memkit.keystore import open_page

    opened, destroyed, sealed = open_page(keystore, ids, docs, metas)
    if sealed and keystore is None:
        for surface in ("text_raw", "text_summary", "text_other"):
            report.skip(surface, f"{name}: {sealed} records are sealed (memkit.keystore) and no key store "
                                 "was given, so their text was not read")
    elif destroyed and (note := f"{name}: {destroyed} sealed records whose key was destroyed "
                                "(unreadable)") not in report.notes:
        report.notes.append(note)
    return opened


def _not_regular(directory: str, names: list[str]) -> list[str]:
    import stat as stat_mod

    out = []
    for n in names:
        try:
            mode = os.lstat(os.path.join(directory, n)).st_mode
        except OSError:
            out.append(n)
            continue
        if not (stat_mod.S_ISREG(mode) or stat_mod.S_ISDIR(mode)):
            out.append(n)
    return out


def _db_pairs(db: Path) -> list[tuple[str, str]]:
    """(tenant, database) pairs of a chroma.sqlite3 (read on a copy by the caller)."""
    con = sqlite3.connect(db)
    try:
        return [(t, n) for n, t in con.execute("SELECT name, tenant_id FROM databases ORDER BY tenant_id, name")]
    finally:
        con.close()


def _scan_chroma_dir_api(
    root: Path, report: ResidueReport, embedder: Any, check_embeddings: bool,
    stale_threshold: float, m: SecretMatcher, keystore: Any = None,
) -> None:
    import chromadb
    from chromadb.config import Settings

    with tempfile.TemporaryDirectory(prefix="memkit-residue-") as tmp:
        copy = Path(tmp) / "chroma"
        # regular files and directories only: a FIFO would block the copy, a link loop
        # would not end (the byte scan lists both as not checked)
        shutil.copytree(root, copy, symlinks=True, ignore=_not_regular)
        pairs = _db_pairs(copy / "chroma.sqlite3")
        multi = len(pairs) > 1
        for tenant, database in pairs:
            client = chromadb.PersistentClient(
                path=str(copy), settings=Settings(anonymized_telemetry=False),
                tenant=tenant, database=database,
            )
            try:
                prefix = f"{tenant}/{database}/" if multi else ""
                _scan_collections(client.list_collections(), report, embedder, check_embeddings,
                                  stale_threshold, m, prefix, keystore)
            finally:
                client.close()


def _scan_leftover_vectors(root: Path, report: ResidueReport, m: Any) -> None:
    """``stale_vector``: one stale hit per vector no live record owns (:mod:`memkit.vectors`)."""
    from memkit.vectors import chroma_leftover_vectors

    read = chroma_leftover_vectors(root)
    for v in read.leftovers:
        rid = f", record {_mask(v.record_id, m)}" if v.record_id else ""
        report.add(Hit("stale_vector", v.location, "stale", f"{v.surface}: {v.why}{rid}"))
    for surface, why in read.unread.items():
        report.skip("stale_vector", f"{surface}: {why}")
    report.notes += [n for n in read.notes if n not in report.notes]


# --------------------------------------------------------------------------- entry point


def scan(
    target: TieredMemoryStore | str | Path | None,
    secret: str | None = None,
    *,
    secrets: Sequence[str] | None = None,
    cache_paths: Sequence[str | Path] = (),
    also: Sequence[str | Path] = (),
    checkpointer: Any = None,
    embedder: Any = None,
    check_embeddings: bool = True,
    stale_threshold: float = 0.99,
    limits: Limits | None = None,
    keystore: Any = None,
) -> ResidueReport:
    """Find every copy of ``secret`` in a store, its directory and caches (module doc).

    Args:
        target: a :class:`~memkit.store.TieredMemoryStore`, the path of any Chroma
            persist directory, or ``None`` to scan only ``also``, ``cache_paths`` and
            ``checkpointer`` (the store surfaces are then listed as not given). A directory (a persistent store's included) is scanned
            byte by byte, then opened with ``chromadb.PersistentClient`` on a temporary
            copy (all tenants, databases and collections). An in-memory or HTTP store is
            read through its client (its two collections; no disk surfaces).
        secret: the string to look for (exact and normalized form).
        secrets: instead of ``secret``, many strings at once (a user's fingerprint,
            :func:`memkit.fingerprint.fingerprint`): one pass over every surface
            through :class:`memkit.multi_matcher.MultiMatcher`; each hit carries its
            ``secret_index`` and :meth:`ResidueReport.per_secret` counts them.
        cache_paths: SQLite files (LLM caches) to scan (``cache`` and ``cache_disk``).
        also: side files or directories a memory layer keeps beside its store
            (history databases, JSON/JSONL, pickles, plain files), each labelled by
            what it is (``side_*`` surfaces).
        checkpointer: a LangGraph checkpointer whose threads to scan
            (:func:`scan_checkpoints`, ``checkpoint`` surface).
        embedder: embedder for ``stale_embedding`` (``encode`` or ``embed_documents``);
            default the store's, else :func:`memkit.models.embeddings`.
        check_embeddings: run the ``stale_embedding`` check.
        stale_threshold: cosine below which a stored vector counts as stale.
        keystore: the :class:`memkit.keystore.KeyStore` of a store that encrypts at
            rest (default a store's own): the ``stale_embedding`` check compares a
            sealed record's vector with its plaintext; without the key those records
            are listed as not checked. Every other surface reads what is stored: a
            sealed text is ciphertext there.
        limits: bounds on decompressing containers (:class:`memkit.containers.Limits`;
            default 256 MiB per member, 1 GiB per given path, depth 4); a limit reached
            is reported as not checked.

    Every file under the directory, ``cache_paths`` and ``also`` is read in UTF-8,
    UTF-16 and UTF-32, containers opened, SQLite files read through SQL and their
    full-text indexes queried (:mod:`memkit.filescan`); each gets a coverage record
    (:attr:`ResidueReport.coverage`).

    Returns:
        :class:`ResidueReport` with every surface of :data:`SURFACES`.

    Raises:
        NotAChromaDirectory: ``target`` is a path without ``chroma.sqlite3``.
        FileNotFoundError / ValueError: a cache path that is missing or not SQLite; an
            empty secret; both or neither of ``secret`` and ``secrets``.
    """
    from memkit.store import TieredMemoryStore

    if (secret is None) == (secrets is None):
        raise ValueError("scan: give either secret or secrets=[...]")
    if secrets is not None:
        from memkit.multi_matcher import MultiMatcher, mask_secret

        m: Any = MultiMatcher(list(secrets))
    else:
        m = matcher(secret)
    caches = [Path(p) for p in cache_paths]
    for a in also:
        if not Path(a).expanduser().exists():
            raise FileNotFoundError(f"side file not found: {a}")
    for c in caches:
        if not c.is_file():
            raise FileNotFoundError(f"cache file not found: {c}")
        if not _is_sqlite(c):
            raise ValueError(f"cache file {c} is not an SQLite database")

    if target is None:
        # side files, caches and checkpointers only: no store was given
        report = ResidueReport(target="side files")
        for surface in SURFACES:
            if surface.startswith(("text_", "disk_")) or surface in ("metadata", "stale_embedding", "stale_vector"):
                report.not_given.append(surface)
    elif isinstance(target, TieredMemoryStore) and target.path is None:
        # In memory or behind a server: nothing on local disk; read through the client.
        report = ResidueReport(target=repr(target))
        if check_embeddings and embedder is None:
            embedder = target.embedder
        if getattr(target, "_kind", "") == "memory":
            report.notes.append("in-memory store: there are no files, so no disk surfaces (and no stale "
                                "vectors memkit can read: chroma keeps them in the process)")
        else:
            for surface in ("disk_sqlite", "disk_wal", "disk_log", "disk_fulltext", "disk_hnsw", "disk_other",
                            "stale_vector"):
                report.skip(surface, "the store is behind a server: its files are not readable here "
                                     "(scan the server's --path directory)")
        _scan_collections(target.own_collections(), report, embedder, check_embeddings,
                          stale_threshold, m, keystore=keystore or target.keystore)
    else:
        # A directory (a persistent store's own, or any chroma directory): bytes first,
        # then the chroma API on a copy. Reading through a live client is avoided because
        # chroma rewrites HNSW files on the first read after a client opens.
        if isinstance(target, TieredMemoryStore):
            assert target.path is not None
            root, label, keystore = target.path, repr(target), keystore or target.keystore
            if check_embeddings and embedder is None:
                embedder = target.embedder
        else:
            root = Path(target).expanduser()
            label = str(root.resolve()) if root.exists() else str(root)
        if not root.exists():
            raise NotAChromaDirectory(f"{root} does not exist")
        if not root.is_dir() or not (root / "chroma.sqlite3").is_file():
            inner = sorted(p.parent for p in root.glob("*/chroma.sqlite3")) if root.is_dir() else []
            hint = f"; did you mean {inner[0]}?" if inner else ""
            raise NotAChromaDirectory(
                f"{root} is not a Chroma persist directory (no chroma.sqlite3 inside){hint}"
            )
        if not _is_sqlite(root / "chroma.sqlite3"):
            raise NotAChromaDirectory(f"{root / 'chroma.sqlite3'} is not an SQLite database")
        root = root.resolve()
        report = ResidueReport(target=label)
        if check_embeddings and embedder is None:
            embedder = _LazyEmbedder()
        scanner = Scanner(report, m, limits or Limits(), skip_sql={"chroma.sqlite3"})
        scanner.path(root, DISK, label="")
        # A compaction killed before a store reopened the directory leaves its build
        # (or the old directory) beside it, holding the same data: read it too.
        from memkit.compaction import leftovers

        for extra in leftovers(root):
            report.notes.append(f"{extra.name}: left beside the store by an interrupted "
                                "compaction (its bytes are scanned; opening the store "
                                "finishes or undoes the compaction)")
            scanner.path(extra, DISK, label=f"../{extra.name}")
        _scan_chroma_sql(root / "chroma.sqlite3", report, m)
        _scan_chroma_dir_api(root, report, embedder, check_embeddings, stale_threshold,
                             m, keystore)
        _scan_leftover_vectors(root, report, m)
    if not check_embeddings and target is not None:
        report.skip("stale_embedding", "check_embeddings=False")
    files = Scanner(report, m, limits or Limits())
    for c in caches:
        files.path(c, CACHE)
    for extra in also:
        files.path(Path(extra).expanduser(), SIDE)
    if checkpointer is not None:
        _scan_checkpoints(checkpointer, m, report)
    if secrets is not None:
        report.secret_labels = [mask_secret(x) for x in m.secrets]
    report.not_given = [
        *report.not_given,
        *(("cache", "cache_disk") if not caches else ()),
        *((s for s in SURFACES if s.startswith("side_")) if not also else ()),
        *(("checkpoint",) if checkpointer is None else ()),
    ]
    return report


# --------------------------------------------------------------------------- CLI
