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
(:mod:`memkit.coverage`), checkpoints (:mod:`memkit.checkpoints`) and many secrets
(:mod:`memkit.scan_engine`) already live in their own modules, and the command is :mod:`evaluators.cli.residue`.
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

from memkit.checkpoints import _scan_checkpoints, scan_checkpoints, threads_with_copies
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
_BATCH_BYTES = 4 << 20
"""Text read from SQL rows per :func:`_scan_values` call (bounds its memory)."""


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


class _Text:
    """One text of :func:`_scan_values`: where it is, its copies, the strings of the JSON
    it holds when it shows none (read as :func:`_scan_text` reads them)."""

    __slots__ = ("location", "text", "depth", "spans", "kids")

    def __init__(self, location: str, text: str, depth: int) -> None:
        self.location, self.text, self.depth = location, text, depth
        self.spans: list[Any] = []
        self.kids: list[_Text] = []


def _scan_values(report: ResidueReport, surface: str, items: Sequence[tuple[str, Any]], m: Any) -> None:
    """:func:`_scan_value` of each ``(location, value)``, with the same hits in the same
    order, for many values at once: one scan engine pass over every text of a level
    (:func:`memkit.multi_matcher.may_hold`) names those that may hold a copy, and only
    those are matched, instead of one matcher call per text."""
    from memkit.multi_matcher import may_hold

    order: list[Any] = []
    texts: list[_Text] = []

    def flatten(location: str, value: Any) -> None:
        text = scalar_text(value)
        if text is not None:
            node = _Text(location, text, 0)
            order.append(node)
            texts.append(node)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            order.append((location, bytes(value)))
        elif isinstance(value, (list, tuple)):
            for n, v in enumerate(value):
                flatten(f"{location}[{n}]", v)

    for location, value in items:
        flatten(location, value)
    level = texts
    while level:
        deeper: list[_Text] = []
        for node, may in zip(level, may_hold(m, [n.text for n in level]), strict=True):
            node.spans = m.spans(node.text) if may else []
            if not node.spans and node.depth < 4 and node.text[:1] in "[{\"":
                try:
                    decoded = json.loads(node.text)
                except (ValueError, RecursionError):
                    continue
                for path, inner in _strings_in(decoded, ":<json>"):
                    if inner != node.text:
                        node.kids.append(_Text(node.location + path, inner, node.depth + 1))
                deeper += node.kids
        level = deeper

    def emit(node: _Text) -> None:
        if node.spans:
            loc = _mask(node.location, m)
            for s, e, kind, *index in node.spans:
                lo, hi = max(0, s - _WINDOW), min(len(node.text), e + _WINDOW)
                report.add(Hit(surface, loc, kind, _render(node.text, 0, node.spans, lo, hi), *index))
        for kid in node.kids:
            emit(kid)

    for item in order:
        if isinstance(item, _Text):
            emit(item)
        else:
            _scan_buffer(report, surface, item[0], item[1], m)


def _printable(b: bytes) -> str:
    return "".join(chr(x) if 32 <= x < 127 else "." for x in b)


def _scan_buffer(
    report: ResidueReport,
    surface: str,
    location: str,
    data: bytes | mmap.mmap,
    m: SecretMatcher,
) -> None:
    from memkit.encodings import byte_spans

    matches = byte_spans(m, data)
    if not matches:
        return
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
    m: SecretMatcher, skip: frozenset[str] = frozenset(),
) -> None:
    """Match every text/blob value of ``table`` (but the columns in ``skip``, read elsewhere)."""
    cur = con.execute(f"SELECT * FROM {_quote(table)}")
    cols = [d[0] for d in cur.description]
    batch: list[tuple[str, Any]] = []
    size = 0
    for n, row in enumerate(cur):
        for col, value in zip(cols, row, strict=True):
            if isinstance(value, (str, bytes)) and col not in skip:
                batch.append((f"{prefix}{table}:row{n}:{col}", value))
                size += len(value)
        if size >= _BATCH_BYTES:
            _scan_values(report, surface, batch, m)
            batch, size = [], 0
    _scan_values(report, surface, batch, m)


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
                batch: list[tuple[str, Any]] = []
                for seq, topic, rid, meta in cur:
                    for col, value in (("topic", topic), ("id", rid), ("metadata", meta)):
                        if isinstance(value, (str, bytes)):
                            batch.append((f"embeddings_queue:seq_id={seq}:{col}", value))
                    if len(batch) >= 3 * _PAGE:
                        _scan_values(report, "disk_log", batch, m)
                        batch = []
                _scan_values(report, "disk_log", batch, m)
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
    stale_threshold: float, m: SecretMatcher, prefix: str = "",
) -> None:
    dim: int | None = None
    for col in collections:
        name = prefix + col.name
        for key, value in sorted((col.metadata or {}).items()):
            _scan_value(report, "metadata", f"{name}:<collection>:{key}", value,
                        m)
        n = col.count()
        # memkit's tombstone collection holds placeholder vectors, not embeddings.
        check = check_embeddings and (col.metadata or {}).get("memkit") != "tombstones"
        no_doc = 0
        for off in range(0, n, _PAGE):
            res = col.get(limit=_PAGE, offset=off, include=["documents", "metadatas", "embeddings"])
            ids = res["ids"]
            if not ids:
                break
            docs = res.get("documents") or [None] * len(ids)
            metas = res.get("metadatas") or [None] * len(ids)
            vecs = res.get("embeddings")
            for rid, doc, meta in zip(ids, docs, metas, strict=True):
                meta = meta or {}
                tier = meta.get("tier")
                surface = f"text_{tier}" if tier in TIERS and "namespace" in meta else "text_other"
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
            rows = [i for i, d in enumerate(docs) if d]
            if not rows:
                continue
            fresh = _encode(embedder, [docs[i] for i in rows])
            norms = np.linalg.norm(stored[rows], axis=1)
            norms[norms == 0] = 1.0
            cos = np.einsum("ij,ij->i", stored[rows], fresh) / norms
            for i, c in zip(rows, cos, strict=True):
                if c < stale_threshold and not m.search(docs[i]):
                    head = _mask(docs[i][:60], m)
                    report.add(Hit("stale_embedding", _mask(f"{name}:{ids[i]}", m), "stale",
                                   f"cos(stored, embed(text))={c:.3f}; text: {head}"))
        if no_doc:
            report.skip("stale_embedding", f"{name}: {no_doc} records have no document (their "
                                           "text lives elsewhere, e.g. in metadata), so their vectors "
                                           "cannot be compared with it")


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


def _copy_chroma(root: Path, copy: Path) -> None:
    """Copy what chromadb opens of a persist directory: ``chroma.sqlite3`` with its
    journals and the directory of each segment the database lists (all directories
    when it lists none); regular files and directories only (a FIFO would block the
    copy, a link loop would not end: the byte scan lists both as not checked). Other
    files (side files kept in the directory) are not chroma's and are not copied."""
    copy.mkdir()
    _copy_sqlite(root / "chroma.sqlite3", copy)
    try:
        con = sqlite3.connect(copy / "chroma.sqlite3")
        try:
            ids = {str(i) for (i,) in con.execute("SELECT id FROM segments")}
        finally:
            con.close()
    except sqlite3.Error:
        ids = set()
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False) and (not ids or entry.name in ids):
            shutil.copytree(entry.path, copy / entry.name, symlinks=True, ignore=_not_regular)


def _db_pairs(db: Path) -> list[tuple[str, str]]:
    """(tenant, database) pairs of a chroma.sqlite3 (read on a copy by the caller)."""
    con = sqlite3.connect(db)
    try:
        return [(t, n) for n, t in con.execute("SELECT name, tenant_id FROM databases ORDER BY tenant_id, name")]
    finally:
        con.close()


def _scan_chroma_dir_api(
    root: Path, report: ResidueReport, embedder: Any, check_embeddings: bool,
    stale_threshold: float, m: SecretMatcher,
) -> None:
    import chromadb
    from chromadb.config import Settings

    with tempfile.TemporaryDirectory(prefix="memkit-residue-") as tmp:
        copy = Path(tmp) / "chroma"
        _copy_chroma(root, copy)
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
                                  stale_threshold, m, prefix)
            finally:
                client.close()


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
    checkpoint_serde: Any = None,
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
        limits: bounds on decompressing containers (:class:`memkit.containers.Limits`;
            default 256 MiB per member, 1 GiB per given path, depth 4); a limit reached
            is reported as not checked.
        checkpoint_serde: a LangGraph serializer that reads the checkpoints the
            ``checkpointer`` or a LangGraph checkpoint database in ``also`` holds, e.g.
            ``EncryptedSerializer.from_pycryptodome_aes(key=...)``
            (:mod:`memkit.checkpoints`). Without it an encrypted value is not
            decoded, and the scan is never clean over it.

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

    from memkit import scan_pool

    # worker processes for the files, forked before chromadb starts its threads
    roots = [] if target is None else [getattr(target, "path", None) if isinstance(target, TieredMemoryStore)
                                        else Path(target).expanduser()]
    scan_pool.prefork(m, [*roots, *caches, *(Path(a).expanduser() for a in also)])
    if target is None:
        # side files, caches and checkpointers only: no store was given
        report = ResidueReport(target="side files")
        for surface in SURFACES:
            if surface.startswith(("text_", "disk_")) or surface in ("metadata", "stale_embedding"):
                report.not_given.append(surface)
    elif isinstance(target, TieredMemoryStore) and target.path is None:
        # In memory or behind a server: nothing on local disk; read through the client.
        report = ResidueReport(target=repr(target))
        if check_embeddings and embedder is None:
            embedder = target.embedder
        if getattr(target, "_kind", "") == "memory":
            report.notes.append("in-memory store: there are no files, so no disk surfaces")
        else:
            for surface in ("disk_sqlite", "disk_wal", "disk_log", "disk_fulltext", "disk_hnsw", "disk_other"):
                report.skip(surface, "the store is behind a server: its files are not readable here "
                                     "(scan the server's --path directory)")
        _scan_collections(target.own_collections(), report, embedder, check_embeddings,
                          stale_threshold, m)
    else:
        # A directory (a persistent store's own, or any chroma directory): bytes first,
        # then the chroma API on a copy. Reading through a live client is avoided because
        # chroma rewrites HNSW files on the first read after a client opens.
        if isinstance(target, TieredMemoryStore):
            assert target.path is not None
            root, label = target.path, repr(target)
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
                             m)
    if not check_embeddings and target is not None:
        report.skip("stale_embedding", "check_embeddings=False")
    files = Scanner(report, m, limits or Limits(), checkpoint_serde=checkpoint_serde)
    for c in caches:
        files.path(c, CACHE)
    for extra in also:
        files.path(Path(extra).expanduser(), SIDE)
    if checkpointer is not None:
        _scan_checkpoints(checkpointer, m, report, checkpoint_serde)
    if secrets is not None:
        report.secret_labels = [mask_secret(x) for x in m.secrets]
    report.not_given = [
        *report.not_given,
        *(("cache", "cache_disk") if not caches else ()),
        *((s for s in SURFACES if s.startswith("side_")) if not also else ()),
        *(("checkpoint",) if checkpointer is None else ()),
    ]
    scan_pool.release(m)
    return report


# --------------------------------------------------------------------------- CLI
