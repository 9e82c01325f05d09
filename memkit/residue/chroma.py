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
                    (:mod:`memkit.residue.vectors`; what they reveal:
                    :mod:`memkit.residue.weigh`)
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
                    ``index_metadata.pickle``); a copy past the index's
                    elements is heap memory of the writing process, and a
                    note says so
``disk_other``      raw bytes of every other file under the directory
=================== =========================================================

Matching: every spelling of the secret that :mod:`memkit.scan.matching` defines (the one
matcher that forget, redaction, the LLM cache and the probe detectors use too): any
Unicode normal form and case, any separator between its letters and digits, and the
JSON escapes stores write; in bytes, the same over UTF-8, and the text pattern over
the bytes read as UTF-16 and UTF-32 (:mod:`memkit.scan.encodings`). A hit's ``kind`` is
``exact`` or ``normalized`` (``stale`` for ``stale_embedding``); a hit in a wide
encoding names it after its offset (``file@12 [utf-16-le]``). Snippets and locations
mask every occurrence, so a report never contains the secret.

A scan never claims more than it looked at. Files are read by
:mod:`memkit.residue.files`: every file and container member gets a coverage record
(:class:`memkit.residue.coverage.FileCoverage`: size, bytes read, decoders applied, what was
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
files (:mod:`memkit.residue.files`), wide encodings (:mod:`memkit.scan.encodings`), containers
(:mod:`memkit.residue.containers`), full-text indexes (:mod:`memkit.residue.fulltext`), coverage
(:mod:`memkit.residue.coverage`), checkpoints (:mod:`memkit.residue.checkpoints`) and many secrets
(:mod:`memkit.scan.engine`) already live in their own modules, and the command is :mod:`evaluators.cli.residue`.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memkit.residue.checkpoints import scan_checkpoints, scan_saver, threads_with_copies
from memkit.residue.containers import Limits
from memkit.residue.files import CACHE, DISK, HNSW_FILES, SIDE, Scanner, content_kind
from memkit.residue.fulltext import fulltext_hits_each
from memkit.residue.report import PAGE, SURFACES, Hit, ResidueReport, mask_text
from memkit.residue.values import (
    copy_sqlite,
    is_sqlite,
    scan_table,
    scan_text,
    scan_value,
    scan_values,
)
from memkit.scan.matching import SecretMatcher, matcher, secret_bytes_regex

if TYPE_CHECKING:
    from memkit.store.tiered import TieredMemoryStore

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

class NotAChromaDirectory(ValueError):
    """The path is not a Chroma persist directory (no ``chroma.sqlite3`` inside)."""


def _scan_chroma_sql(
    db: Path, report: ResidueReport,
    m: SecretMatcher,
) -> None:
    """``disk_log`` and ``disk_fulltext`` through SQL on a copy of ``chroma.sqlite3``."""
    with tempfile.TemporaryDirectory(prefix="memkit-residue-") as tmp:
        copy = copy_sqlite(db, Path(tmp))
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
                    if len(batch) >= 3 * PAGE:
                        scan_values(report, "disk_log", batch, m)
                        batch = []
                scan_values(report, "disk_log", batch, m)
            fts = sorted(n for n, sql in tables.items() if sql and re.search(r"using\s+fts[345]", sql, re.I))
            for vt in fts:
                for shadow in sorted(t for t in tables if t.startswith(vt + "_")):
                    scan_table(con, report, "disk_fulltext", shadow, "", m)
            hits, problems = fulltext_hits_each(con, m)
            for idx, h in hits:
                report.add(Hit("disk_fulltext", mask_text(f"{h.table} {h.how.split()[0]} rowid={h.rowid}", m), h.kind,
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


class _LazyEmbedder:
    """:func:`memkit.models.chat.embeddings`, loaded on the first ``encode``: a directory
    without stored vectors never pays for loading the model (tens of seconds on a
    loaded machine)."""

    def __init__(self) -> None:
        self._inner: Any = None

    def encode(self, texts: list[str]) -> Any:
        if self._inner is None:
            from memkit.models.chat import embeddings

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
    from memkit.store.keystore import is_sealed
    from memkit.store.tiered import TIERS

    dim: int | None = None
    for col in collections:
        name = prefix + col.name
        for key, value in sorted((col.metadata or {}).items()):
            scan_value(report, "metadata", f"{name}:<collection>:{key}", value,
                        m)
        n = col.count()
        # memkit's tombstone collection holds placeholder vectors, not embeddings.
        check = check_embeddings and (col.metadata or {}).get("memkit") != "tombstones"
        no_doc = sealed = 0
        for off in range(0, n, PAGE):
            res = col.get(limit=PAGE, offset=off, include=["documents", "metadatas", "embeddings"])
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
                    scan_text(report, surface, f"{name}:{rid}", opened[rid].text, m)
                    for key, value in sorted(opened[rid].extra.items()):
                        scan_text(report, "metadata", f"{name}:{rid}:<key>", key, m)
                        scan_value(report, "metadata", f"{name}:{rid}:{key}", value, m)
                if doc:
                    scan_text(report, surface, f"{name}:{rid}", doc, m)
                scan_text(report, "metadata", f"{name}:{rid}:<id>", rid, m)
                for key, value in sorted(meta.items()):
                    scan_text(report, "metadata", f"{name}:{rid}:<key>", key, m)
                    scan_value(report, "metadata", f"{name}:{rid}:{key}", value, m)
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
            # a sealed text (memkit.store.keystore) is compared as its plaintext, opened with the key
            texts = [opened[r].text if r in opened else None if is_sealed(d) else d
                     for r, d in zip(ids, docs, strict=True)]
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
                    head = mask_text(texts[i][:60], m)
                    report.add(Hit("stale_embedding", mask_text(f"{name}:{ids[i]}", m), "stale",
                                   f"cos(stored, embed(text))={c:.3f}; text: {head}"))
        if no_doc:
            report.skip("stale_embedding", f"{name}: {no_doc} records have no document (their "
                                           "text lives elsewhere, e.g. in metadata), so their vectors "
                                           "cannot be compared with it")
        if sealed and keystore is None:
            report.skip("stale_embedding", f"{name}: {sealed} records are sealed (memkit.store.keystore) and "
                                           "no key store was given, so their vectors cannot be compared with "
                                           "their text")


def _open_sealed(keystore: Any, ids: list[str], docs: list[Any], metas: list[Any], report: ResidueReport,
                 name: str) -> dict[str, Any]:
    """Sealed records of a page opened with ``keystore`` (:func:`memkit.store.keystore.open_page`);
    without one their text is not read, so the text surfaces are read in part."""
    from memkit.store.keystore import open_page

    opened, destroyed, missing, sealed = open_page(keystore, ids, docs, metas)
    if sealed and keystore is None:
        for surface in ("text_raw", "text_summary", "text_other"):
            report.skip(surface, f"{name}: {sealed} records are sealed (memkit.store.keystore) and no key store "
                                 "was given, so their text was not read")
    if missing:
        for surface in ("text_raw", "text_summary", "text_other"):
            report.skip(surface, f"{name}: {missing} records are sealed under keys the given key store neither "
                                 "holds nor destroyed, so their text was not read")
    if destroyed and (note := f"{name}: {destroyed} sealed records whose key was destroyed "
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


def _copy_chroma(root: Path, copy: Path) -> None:
    """Copy what chromadb opens of a persist directory: ``chroma.sqlite3`` with its
    journals and the directory of each segment the database lists (all directories
    when it lists none); regular files and directories only (a FIFO would block the
    copy, a link loop would not end: the byte scan lists both as not checked). Other
    files (side files kept in the directory) are not chroma's and are not copied."""
    copy.mkdir()
    copy_sqlite(root / "chroma.sqlite3", copy)
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
    stale_threshold: float, m: SecretMatcher, keystore: Any = None,
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
                                  stale_threshold, m, prefix, keystore)
            finally:
                client.close()


def _scan_leftover_vectors(root: Path, report: ResidueReport, m: Any) -> None:
    """``stale_vector``: one stale hit per vector no live record owns (:mod:`memkit.residue.vectors`)."""
    from memkit.residue.vectors import chroma_leftover_vectors

    read = chroma_leftover_vectors(root)
    for v in read.leftovers:
        rid = f", record {mask_text(v.record_id, m)}" if v.record_id else ""
        report.add(Hit("stale_vector", v.location, "stale", f"{v.surface}: {v.why}{rid}"))
    for surface, why in read.unread.items():
        report.skip("stale_vector", f"{surface}: {why}")
    report.notes += [n for n in read.notes if n not in report.notes]


def _note_slack_copies(report: ResidueReport, root: Path) -> None:
    """A note per HNSW ``data_level0.bin`` whose ``disk_hnsw`` copies lie past its
    elements (:func:`memkit.residue.vectors.elements_end`): heap bytes of the process
    that wrote the file, which a store's ``close`` zeroes; the copies stay counted."""
    from memkit.residue.vectors import elements_end

    past: dict[str, int] = {}
    ends: dict[str, int | None] = {}  # each file's header is read once, however many its copies
    for hit in report.surfaces.get("disk_hnsw", []):
        name, _, rest = hit.location.partition("@")
        offset = rest.split(" ", 1)[0]
        if not name.endswith("data_level0.bin") or not offset.isdigit():
            continue
        if name not in ends:
            ends[name] = elements_end((root / name).parent)
        end = ends[name]
        if end is not None and int(offset) >= end:
            past[name] = past.get(name, 0) + 1
    for name, n in past.items():
        report.notes.append(f"{name}: {n} of its copies lie past the index's elements, in bytes hnswlib never "
                            "reads back (heap memory of the process that wrote the file, which had handled the "
                            "secret); TieredMemoryStore.close() zeroes them, so a store left open or killed "
                            "keeps them")


# --------------------------------------------------------------------------- entry point


def _start_files(report: ResidueReport, m: Any, limits: Limits | None, serde: Any,
                 caches: Sequence[Path], also: Sequence[str | Path]) -> list[Any]:
    """Begin reading the LLM caches and side files (in the worker pool, while the caller
    reads the store): their readings, to finish in this order."""
    files = Scanner(report, m, limits or Limits(), checkpoint_serde=serde)
    return [*(files.start(c, CACHE) for c in caches),
            *(files.start(Path(extra).expanduser(), SIDE) for extra in also)]


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
    checkpoint_serde: Any = None,
) -> ResidueReport:
    """Find every copy of ``secret`` in a store, its directory and caches (module doc).

    Args:
        target: a :class:`~memkit.store.tiered.TieredMemoryStore`, the path of any Chroma
            persist directory, or ``None`` to scan only ``also``, ``cache_paths`` and
            ``checkpointer`` (the store surfaces are then listed as not given). A directory (a persistent store's included) is scanned
            byte by byte, then opened with ``chromadb.PersistentClient`` on a temporary
            copy (all tenants, databases and collections). An in-memory or HTTP store is
            read through its client (its two collections; no disk surfaces).
        secret: the string to look for (exact and normalized form).
        secrets: instead of ``secret``, many strings at once (a user's fingerprint,
            :func:`memkit.residue.fingerprint.fingerprint`): one pass over every surface
            through :class:`memkit.scan.multi.MultiMatcher`; each hit carries its
            ``secret_index`` and :meth:`ResidueReport.per_secret` counts them.
        cache_paths: SQLite files (LLM caches) to scan (``cache`` and ``cache_disk``).
        also: side files or directories a memory layer keeps beside its store
            (history databases, JSON/JSONL, pickles, plain files), each labelled by
            what it is (``side_*`` surfaces).
        checkpointer: a LangGraph checkpointer whose threads to scan
            (:func:`scan_checkpoints`, ``checkpoint`` surface).
        embedder: embedder for ``stale_embedding`` (``encode`` or ``embed_documents``);
            default the store's, else :func:`memkit.models.chat.embeddings`.
        check_embeddings: run the ``stale_embedding`` check.
        stale_threshold: cosine below which a stored vector counts as stale.
        keystore: the :class:`memkit.store.keystore.KeyStore` of a store that encrypts
            at rest (default a store's own): its sealed records are read as their
            plaintext where the key is live (the ``text_*``, ``metadata`` and
            ``stale_embedding`` surfaces); without one those surfaces are read in part.
            A record sealed under a destroyed key is noise: noted, not read.
        limits: bounds on decompressing containers (:class:`memkit.residue.containers.Limits`;
            default 256 MiB per member, 1 GiB per given path, depth 4); a limit reached
            is reported as not checked.
        checkpoint_serde: a LangGraph serializer that reads the checkpoints the
            ``checkpointer`` or a LangGraph checkpoint database in ``also`` holds, e.g.
            ``EncryptedSerializer.from_pycryptodome_aes(key=...)``
            (:mod:`memkit.residue.checkpoints`). Without it an encrypted value is not
            decoded, and the scan is never clean over it.

    Every file under the directory, ``cache_paths`` and ``also`` is read in UTF-8,
    UTF-16 and UTF-32, containers opened, SQLite files read through SQL and their
    full-text indexes queried (:mod:`memkit.residue.files`); each gets a coverage record
    (:attr:`ResidueReport.coverage`).

    Returns:
        :class:`ResidueReport` with every surface of :data:`SURFACES`.

    Raises:
        NotAChromaDirectory: ``target`` is a path without ``chroma.sqlite3``.
        FileNotFoundError / ValueError: a cache path that is missing or not SQLite; an
            empty secret; both or neither of ``secret`` and ``secrets``.
        memkit.residue.pool.WorkerDied: a worker process ended while it read (no verdict).
    """
    if (secret is None) == (secrets is None):
        raise ValueError("scan: give either secret or secrets=[...]")
    if secrets is not None:
        from memkit.scan.multi import MultiMatcher, mask_secret

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
        if not is_sqlite(c):
            raise ValueError(f"cache file {c} is not an SQLite database")

    from memkit.residue.pool import prefork, release

    # worker processes for the files, forked before chromadb starts its threads
    roots = [] if target is None else [Path(target).expanduser() if isinstance(target, (str, os.PathLike))
                                        else getattr(target, "path", None)]
    prefork(m, [*roots, *caches, *(Path(a).expanduser() for a in also)])
    from memkit.store.tiered import TieredMemoryStore  # after the fork: the workers need none of it

    try:  # the workers stop whatever happens (a bad target: their reads are dropped)
        if target is None:
            # side files, caches and checkpointers only: no store was given
            report = ResidueReport(target="side files")
            files_read = _start_files(report, m, limits, checkpoint_serde, caches, also)
            for surface in SURFACES:
                if surface.startswith(("text_", "disk_")) or surface in ("metadata", "stale_embedding", "stale_vector"):
                    report.not_given.append(surface)
        elif isinstance(target, TieredMemoryStore) and target.path is None:
            # In memory or behind a server: nothing on local disk; read through the client.
            report = ResidueReport(target=repr(target))
            files_read = _start_files(report, m, limits, checkpoint_serde, caches, also)
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
            if not is_sqlite(root / "chroma.sqlite3"):
                raise NotAChromaDirectory(f"{root / 'chroma.sqlite3'} is not an SQLite database")
            root = root.resolve()
            report = ResidueReport(target=label)
            if check_embeddings and embedder is None:
                embedder = _LazyEmbedder()
            scanner = Scanner(report, m, limits or Limits(), skip_sql={"chroma.sqlite3"})
            readings = [scanner.start(root, DISK, label="")]
            files_read = _start_files(report, m, limits, checkpoint_serde, caches, also)
            # A compaction killed before a store reopened the directory leaves its build
            # (or the old directory) beside it, holding the same data: read it too.
            from memkit.store.compaction import leftovers

            notes = []
            for extra in leftovers(root):
                notes.append(f"{extra.name}: left beside the store by an interrupted "
                             "compaction (its bytes are scanned; opening the store "
                             "finishes or undoes the compaction)")
                readings.append(scanner.start(extra, DISK, label=f"../{extra.name}"))
            # chromadb's part (the parent's own work) runs while the workers read the files;
            # it goes to a report of its own, added after the files' so the order is the
            # one a scan that read them first writes
            api = ResidueReport(target=label)
            _scan_chroma_sql(root / "chroma.sqlite3", api, m)
            _scan_chroma_dir_api(root, api, embedder, check_embeddings, stale_threshold,
                                 m, keystore)
            _scan_leftover_vectors(root, api, m)
            readings[0].finish()
            _note_slack_copies(report, root)
            for note, reading in zip(notes, readings[1:], strict=True):
                report.notes.append(note)
                reading.finish()
            report.add_part(api.part())
        if not check_embeddings and target is not None:
            report.skip("stale_embedding", "check_embeddings=False")
        for reading in files_read:
            reading.finish()
        if checkpointer is not None:
            scan_saver(checkpointer, m, report, checkpoint_serde)
        if secrets is not None:
            report.secret_labels = [mask_secret(x) for x in m.secrets]
        report.not_given = [
            *report.not_given,
            *(("cache", "cache_disk") if not caches else ()),
            *((s for s in SURFACES if s.startswith("side_")) if not also else ()),
            *(("checkpoint",) if checkpointer is None else ()),
        ]
    finally:
        release(m)
    return report


# --------------------------------------------------------------------------- CLI
