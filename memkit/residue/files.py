"""Read every byte of every file under a path, in every encoding it could hold.

The file side of :func:`memkit.residue.chroma.scan`. For each given
path:

* directories are walked in name order; a symlink inside is followed once (a file
  reached twice, through links or hard links, is read once and recorded as
  ``same_as``; a directory reached twice is not walked again, so link loops end); a
  broken symlink, an unreadable file or directory and a file that is not regular (a
  FIFO, socket or device, never opened) are recorded as not checked;
* every file's bytes are matched as UTF-8 (:mod:`memkit.scan.matching`) and as UTF-16/32
  at every alignment (:mod:`memkit.scan.encodings`);
* an SQLite file is read through SQL (every table's rows; in place, read-only and
  immutable, where no journal lies beside it, else on a copy) and its full-text
  indexes are queried (:mod:`memkit.residue.fulltext`);
* a JSON file in which no copy was found is decoded (UTF-8/16/32, as :func:`json.loads`
  detects) and its strings matched, so a copy split by escapes is found;
* a container (gzip, bzip2, xz, lzma, zstd, zip, tar) is opened and each member goes
  through the same steps, labelled ``container!member``, within
  :class:`memkit.residue.containers.Limits`;
* a file is read to its end whatever its stat size says (``/proc/PID/environ`` says 0,
  ``/sys`` files a page): memory-mapped when it can be, else read until ``read``
  returns nothing (at most :attr:`Limits.max_member_bytes`); its coverage counts the
  bytes read, never the stat size;
* a file whose size, modification time or inode changed while it was read is recorded
  as changed (a file still growing is not called clean).

Each file or member gets a :class:`memkit.residue.coverage.FileCoverage` on the report;
whatever one leaves makes the verdict incomplete (:meth:`ResidueReport.cover`).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from memkit.residue.checkpoints import CHECKPOINT_BLOBS, is_checkpoint_db, scan_checkpoint_db
from memkit.residue.containers import Budget, Limits, Member, container_kind, open_members
from memkit.residue.coverage import FileCoverage, Snapshot
from memkit.residue.fulltext import fulltext_hits_each, fulltext_tables, shadow_tables
from memkit.residue.values import JOURNAL_SUFFIXES, journal_paths
from memkit.scan.encodings import WIDE_ENCODINGS, WideSpan
from memkit.scan.matching import SecretMatcher

__all__ = ["CACHE", "DISK", "HNSW_FILES", "SIDE", "Family", "Scanner", "content_kind"]

SQLITE_MAGIC = b"SQLite format 3\x00"
_PICKLE_SUFFIXES = (".pkl", ".pickle", ".pck")
_JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
_JSON_DECODE_MAX = 64 << 20
_SQLITE_MAP_BYTES = 0x7FFF0000
"""How much of a database SQLite reads through a memory map (its own ceiling, 2 GB)."""
_DECODERS = ["utf-8", *(codec for codec, _ in WIDE_ENCODINGS)]


def _zip_at_end(data: Any) -> bool:
    """Whether a zip's end-of-central-directory record sits near the end of ``data``
    (:func:`zipfile.is_zipfile` then checks it)."""
    import zipfile

    from memkit.residue.containers import as_file

    tail = bytes(data[-(65535 + 22):])
    if b"PK\x05\x06" not in tail:
        return False
    with as_file(data) as src:
        return zipfile.is_zipfile(src)


def content_kind(head: bytes, name: str) -> str:
    """``sqlite``, ``pickle``, ``json`` or ``file``, by content (SQLite magic, pickle
    protocol byte) and name."""
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    suffix = os.path.splitext(name)[1].lower()
    if suffix in _PICKLE_SUFFIXES or (len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5):
        return "pickle"
    if suffix in _JSON_SUFFIXES:
        return "json"
    return "file"


@dataclass(frozen=True)
class Family:
    """Which surfaces a given path's findings are counted under.

    Attributes:
        raw: surface of a file's bytes, from its content kind and its label.
        rows: surface of SQLite rows read through SQL.
        fulltext: surface of full-text index entries whose rows are gone.
    """

    raw: Callable[[str, str], str]
    rows: str
    fulltext: str


SIDE = Family(raw=lambda kind, label: "side_disk" if kind == "sqlite" else f"side_{kind}",
              rows="side_sqlite", fulltext="side_fulltext")
"""Side files (``also``)."""

CACHE = Family(raw=lambda kind, label: "cache_disk", rows="cache", fulltext="cache")
"""LLM cache files (``cache_paths``)."""

HNSW_FILES = frozenset(
    {"data_level0.bin", "link_lists.bin", "header.bin", "length.bin", "index_metadata.pickle"}
)
"""File names of chroma's local HNSW segment."""


def _read_to_end(fh: Any, cap: int) -> tuple[bytes, list[str]]:
    """Read ``fh`` until ``read`` returns nothing, at most ``cap`` bytes (then what was
    left is said): for files whose stat size is not their length (``/proc``, ``/sys``:
    0 or a page)."""
    chunks, n = [], 0
    while n <= cap:
        chunk = fh.read(min(1 << 20, cap + 1 - n))
        if not chunk:
            return b"".join(chunks), []
        chunks.append(chunk)
        n += len(chunk)
    data = b"".join(chunks)[:cap]
    return data, [f"limit reached: max_member_bytes = {cap} bytes read of a file whose length "
                  "its size does not give; the rest was not read"]


def _disk_raw(kind: str, label: str) -> str:
    if "!" in label:
        return "disk_other"
    name = label.rsplit("/", 1)[-1]
    if name == "chroma.sqlite3":
        return "disk_sqlite"
    if name.endswith(JOURNAL_SUFFIXES):
        return "disk_wal"
    return "disk_hnsw" if name in HNSW_FILES else "disk_other"


DISK = Family(raw=_disk_raw, rows="disk_other", fulltext="disk_fulltext")
"""Files of a chroma persist directory (labels relative to it)."""


class _Inline:
    """A scan of a path by walking it here, in ``finish()`` (a family the worker pool does
    not plan)."""

    def __init__(self, scanner: Scanner, top: Path, family: Family, label: str, budget: Budget) -> None:
        self.args = (scanner, top, family, label, budget)
        self.done = False

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        scanner, top, family, label, budget = self.args
        if top.is_dir():
            scanner._walk(top, label, family, set(), budget)
        else:
            scanner._entry(top, label, family, set(), budget)


@dataclass
class Scanner:
    """One scan's state: the report, the matcher, the limits, what was read.

    Attributes:
        report: the :class:`memkit.residue.chroma.ResidueReport` to add to.
        m: the secret's matcher.
        limits: container limits.
        seen: ``(device, inode)`` of every file read, with the label it was read as.
        skip_sql: labels of SQLite files whose rows someone else reads
            (``chroma.sqlite3``: through the chroma API).
        checkpoint_serde: a LangGraph serializer (``loads_typed``) for the values of a
            LangGraph checkpoint database met as a side file, e.g. one that decrypts
            (:mod:`memkit.residue.checkpoints`); ``None``: plain values only.
    """

    report: Any
    m: SecretMatcher
    limits: Limits = field(default_factory=Limits)
    seen: dict[tuple[int, int], str] = field(default_factory=dict)
    skip_sql: set[str] = field(default_factory=set)
    checkpoint_serde: Any = None

    FAMILIES: ClassVar[dict[str, Family]] = {"DISK": DISK, "SIDE": SIDE, "CACHE": CACHE}
    """The families by name (the worker pool, :mod:`memkit.residue.pool`, sends names)."""
    journal_paths = staticmethod(journal_paths)
    content_kind = staticmethod(content_kind)

    # ------------------------------------------------------------------ walking

    def path(self, top: Path, family: Family, label: str | None = None) -> None:
        """Scan a given file or directory (module doc)."""
        self.start(top, family, label).finish()

    def start(self, top: Path, family: Family, label: str | None = None) -> Any:
        """Begin scanning a given file or directory: its files are read in worker
        processes (:mod:`memkit.residue.pool`) while the caller goes on; the returned
        reading's ``finish()`` adds the findings to :attr:`report` in walk order (so
        the report is the one :meth:`path` writes). Without workers the files are read
        in ``finish()``."""
        label = label if label is not None else str(top)
        budget = Budget(self.limits.max_total_bytes)
        from memkit.residue.pool import start_path

        reading = start_path(self, top, family, label, budget)
        return reading if reading is not None else _Inline(self, top, family, label, budget)

    def _walk(self, d: Path, label: str, family: Family, dirs: set[tuple[int, int]],
              budget: Budget) -> None:
        try:
            st = os.stat(d)
        except OSError as exc:
            self._cover(FileCoverage(label, family.raw("file", label), 0,
                                     left=[f"directory cannot be read ({exc.strerror or exc})"]))
            return
        key = (st.st_dev, st.st_ino)
        if key in dirs:
            self.report.notes.append(f"{label}: directory reached again through a link; "
                                     "its files were read once")
            return
        dirs.add(key)
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            self._cover(FileCoverage(label, family.raw("file", label), 0,
                                     left=[f"directory cannot be listed ({exc.strerror or exc})"]))
            return
        for e in entries:
            self._entry(Path(e.path), f"{label}/{e.name}" if label else e.name, family, dirs, budget)

    def _entry(self, p: Path, label: str, family: Family, dirs: set[tuple[int, int]],
               budget: Budget) -> None:
        if p.is_symlink():
            try:
                p.resolve(strict=True)
            except (OSError, RuntimeError) as exc:
                self._cover(FileCoverage(label, family.raw("file", label), 0,
                                         left=[f"broken or looping symlink to {os.readlink(p)!r} ({exc})"]))
                return
        try:
            st = os.stat(p)
        except OSError as exc:
            self._cover(FileCoverage(label, family.raw("file", label), 0,
                                     left=[f"cannot be stat'ed ({exc.strerror or exc})"]))
            return
        import stat as stat_mod

        if stat_mod.S_ISDIR(st.st_mode):
            self._walk(p, label, family, dirs, budget)
        elif stat_mod.S_ISREG(st.st_mode):
            self.file(p, label, family, budget)
        else:
            self._cover(FileCoverage(label, family.raw("file", label), 0,
                                     left=["not a regular file (FIFO, socket or device): not opened"]))

    # ------------------------------------------------------------------ one file

    def claim(self, p: Path, label: str, family: Family, surface: str | None = None) -> os.stat_result | None:
        """``p``'s stat when this scan has not read its inode yet (it is then marked
        read); else ``None``, with its coverage recorded (cannot be stat'ed, or the
        same file as one read under another name)."""
        try:
            st = os.stat(p)
        except OSError as exc:
            self._cover(FileCoverage(label, surface or family.raw("file", label), 0,
                                     left=[f"cannot be stat'ed ({exc.strerror or exc})"]))
            return None
        key = (st.st_dev, st.st_ino)
        if key in self.seen:
            self._cover(FileCoverage(label, surface or family.raw("file", label), st.st_size,
                                     same_as=self.seen[key]))
            return None
        self.seen[key] = label
        return st

    def file(self, p: Path, label: str, family: Family, budget: Budget | None = None,
             surface: str | None = None) -> None:
        """Read one regular file (module doc); ``surface`` overrides the family's."""
        budget = budget or Budget(self.limits.max_total_bytes)
        before = Snapshot.of(p)
        st = self.claim(p, label, family, surface)
        if st is None:
            return
        try:
            fh = open(p, "rb")  # noqa: SIM115 (closed below, mmap needs the descriptor)
        except OSError as exc:
            self._cover(FileCoverage(label, surface or family.raw("file", label), st.st_size,
                                     left=[f"unreadable ({exc.strerror or exc})"]))
            return
        with fh:
            data: Any = None
            left: list[str] = []
            if st.st_size:
                try:
                    data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):
                    data = None  # /proc, /sys and other files that cannot be mapped
            if data is None:  # its stat size is no length (0 in /proc): read it to its end
                try:
                    data, left = _read_to_end(fh, self.limits.max_member_bytes)
                except OSError as exc:
                    self._cover(FileCoverage(label, surface or family.raw("file", label), st.st_size,
                                             left=[f"unreadable ({exc.strerror or exc})"]))
                    return
            try:
                kind = content_kind(bytes(data[:16]), p.name)
                cov = FileCoverage(label, surface or family.raw(kind, label), len(data), left=left)
                self._data(data, label, family, cov, 0, budget,
                           path=p if isinstance(data, mmap.mmap) else None, kind=kind)
            finally:
                if isinstance(data, mmap.mmap):
                    data.close()
        after = Snapshot.of(p)
        if before != after:
            cov.left.append("changed during the scan (size, modification time or inode "
                            "differ before and after): scan again when it is idle")
        self._cover(cov)
        if kind == "sqlite":  # its journal files: counted with it, read once
            for suf, side in journal_paths(p):
                if side.is_file():
                    self.file(side, label + suf, family, budget,
                              surface=family.raw("sqlite", label + suf))

    def _data(self, data: Any, label: str, family: Family, cov: FileCoverage, depth: int,
              budget: Budget, *, path: Path | None = None, kind: str | None = None) -> None:
        """Every reading of one file's or member's bytes (module doc)."""
        head = bytes(data[:512])
        kind = kind or content_kind(head[:16], label.rsplit("!", 1)[-1])
        found = self.raw(data, cov.surface, label, kind)
        cov.bytes_read = len(data)
        cov.decoders += _DECODERS
        if kind == "sqlite":
            self._sqlite(data, label, family, cov, path)
        elif kind == "json" and not found:
            self._json(data, label, cov)
        box = self.box(data, label, kind)
        if box is None:
            return
        if depth >= self.limits.max_depth:
            cov.left.append(f"limit reached: max_depth = {self.limits.max_depth} containers deep; "
                            "this container was not opened")
            return
        if not box.startswith("unsupported:"):
            cov.decoders.append(box)
        for member in open_members(box, data, label.rsplit("!", 1)[-1], self.limits, budget):
            if not member.name:
                cov.left.extend(member.left)
                continue
            self.member(member, f"{label}!{member.name}", family, depth, budget)

    def member(self, member: Member, label: str, family: Family, depth: int, budget: Budget) -> None:
        """Read one member of a container ``depth`` deep (its own readings at ``depth +
        1``), labelled ``label``, with its coverage record."""
        kind = content_kind(member.data[:16], member.name)
        cov = FileCoverage(label, family.raw(kind, label), member.size)
        if member.data:
            self._data(member.data, label, family, cov, depth + 1, budget, kind=kind)
        cov.left.extend(member.left)
        self._cover(cov)

    @staticmethod
    def box(data: Any, label: str, kind: str) -> str | None:
        """The container kind :meth:`_data` opens ``data`` (labelled ``label``, of content
        kind ``kind``) as, or ``None``: :func:`memkit.residue.containers.container_kind`
        of its head and name, or a zip at its end (self-extracting, appended)."""
        box = container_kind(bytes(data[:512]), label.rsplit("!", 1)[-1].rsplit("/", 1)[-1])
        if box is None and kind == "file" and _zip_at_end(data):
            box = "zip"
        return box

    # ------------------------------------------------------------------ readings

    def raw(self, data: Any, surface: str, label: str, kind: str = "file") -> int:
        """Match ``data`` (of content kind ``kind``, :func:`content_kind`) as UTF-8 and
        as UTF-16/32; add the hits; return how many."""
        from memkit.residue.pieces import raw_copies

        spans, wide = raw_copies(self.m, data)
        return self.raw_hits(data, surface, label, spans, wide)

    def raw_hits(self, data: Any, surface: str, label: str, spans: list[tuple[int, int, str, int | None]],
                 wide: list[WideSpan]) -> int:
        """Add the hits of :meth:`raw` from its UTF-8 ``spans`` and ``wide`` copies (byte
        offsets into ``data``, which gives the snippets); return how many."""
        from memkit.residue.report import Hit, SpanIndex, mask_text, render_masked
        from memkit.residue.values import printable

        m, report = self.m, self.report
        loc, near = mask_text(label, m), SpanIndex(spans)
        for s, e, kind, idx in spans:
            lo, hi = max(0, s - 24), min(len(data), e + 24)
            window = printable(bytes(data[lo:hi]))
            report.add(Hit(surface, f"{loc}@{s}", kind, render_masked(window, lo, near.near(lo, hi), lo, hi), idx))
        for w in wide:
            lo, hi = max(0, w.text_start - 24), min(len(w.text), w.text_end + 24)
            snippet = render_masked(w.text, 0, [(w.text_start, w.text_end, w.kind)], lo, hi)
            snippet = "".join(c if c.isprintable() else "." for c in snippet)
            report.add(Hit(surface, f"{loc}@{w.start} [{w.encoding}]", w.kind, snippet, w.secret_index))
        return len(spans) + len(wide)

    def _json(self, data: Any, label: str, cov: FileCoverage) -> None:
        from memkit.residue.values import scan_values, strings_in
        from memkit.scan.json_escapes import decoding_adds_nothing_joined

        if len(data) > _JSON_DECODE_MAX:
            self.report.notes.append(f"{label}: over {_JSON_DECODE_MAX} bytes, not decoded as "
                                     "JSON (its bytes were matched)")
            return
        if decoding_adds_nothing_joined(data):  # the file as one text (or several, split at NULs: the same bytes)
            # nothing the raw reading (which found no copy) did not read: memkit.scan.json_escapes
            cov.decoders.append("json")
            return
        raw = bytes(data)
        try:
            docs = [json.loads(raw)]
        except (ValueError, RecursionError):
            try:  # JSON Lines
                docs = [json.loads(line) for line in raw.splitlines() if line.strip()]
            except (ValueError, RecursionError):
                return
        cov.decoders.append("json")
        scan_values(self.report, cov.surface, [
            (label + where, text) for n, doc in enumerate(docs)
            for where, text in strings_in(doc, f":<json>{'' if len(docs) == 1 else f'[{n}]'}")], self.m)

    def _sqlite(self, data: Any, label: str, family: Family, cov: FileCoverage,
                path: Path | None) -> None:
        """Rows of every table and full-text index entries (module doc)."""
        if label in self.skip_sql:
            return
        from memkit.residue.values import copy_sqlite

        with contextlib.ExitStack() as stack:
            if path is not None and not any(side.is_file() for _, side in journal_paths(path)):
                # no journal to apply: read in place, read-only, no lock taken, nothing written
                target, uri = path.absolute().as_uri() + "?mode=ro&immutable=1", True
            else:  # a copy, which SQLite may recover or checkpoint as it opens it
                tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memkit-residue-")))
                if path is not None:
                    try:
                        copy = copy_sqlite(path, tmp)
                    except OSError as exc:
                        cov.left.append(f"SQLite database cannot be copied to be read ({exc.strerror or exc})")
                        return
                else:
                    copy = tmp / "member.sqlite"
                    copy.write_bytes(bytes(data))
                target, uri = str(copy), False
            try:
                con = sqlite3.connect(target, uri=uri)
            except sqlite3.Error as exc:
                cov.left.append(f"SQLite database cannot be opened ({exc})")
                return
            try:
                # pages read through a map, not copied into SQLite's cache (the raw reading
                # above maps the same file): a third less time for the rows
                con.execute(f"PRAGMA mmap_size = {_SQLITE_MAP_BYTES}")
                self._sqlite_rows(con, label, family, cov)
            except sqlite3.Error as exc:
                cov.left.append(f"SQLite database cannot be read ({exc})")
            finally:
                con.close()

    def _sqlite_rows(self, con: sqlite3.Connection, label: str, family: Family, cov: FileCoverage) -> None:
        from memkit.residue.report import Hit, mask_text
        from memkit.residue.values import scan_table

        m, report = self.m, self.report
        names = [n for (n,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        shadows = shadow_tables(con)
        fts = {n for n, _, _ in fulltext_tables(con)}
        name = label.rsplit("/", 1)[-1]
        checkpoints = is_checkpoint_db(con)
        for t in names:
            surface = family.fulltext if t in shadows or t in fts else family.rows
            skip = CHECKPOINT_BLOBS.get(t, frozenset()) if checkpoints else frozenset()
            try:
                scan_table(con, report, surface, t, f"{name}:", m, skip)
            except sqlite3.Error as exc:
                cov.left.append(f"table {t} cannot be read ({exc})")
        cov.decoders.append("sqlite")
        if checkpoints:
            self._checkpoints(con, label, name, family, cov)
        hits, problems = fulltext_hits_each(con, m)
        if fts:
            cov.decoders.append("fulltext")
        for idx, h in hits:
            report.add(Hit(family.fulltext, mask_text(f"{name}:{h.table} {h.how.split()[0]} rowid={h.rowid}", m), h.kind,
                           f"full-text index holds the secret ({h.how}); its row does not show it", idx))
        cov.left.extend(problems)
        for problem in problems:
            report.skip(family.fulltext, f"{label}: {problem}")

    def _checkpoints(self, con: sqlite3.Connection, label: str, name: str, family: Family,
                     cov: FileCoverage) -> None:
        """A LangGraph checkpoint database: every stored value decoded
        (:func:`memkit.residue.checkpoints.scan_checkpoint_db`); values left encrypted or
        undecodable make the file not fully checked."""
        from memkit.residue.values import scan_text, scan_value, strings_in

        def decoded(where: str, value: Any) -> None:
            for path, text in strings_in(value, ""):
                scan_text(self.report, family.rows, f"{name}:{where}{path}", text, self.m)

        def raw(where: str, blob: Any) -> None:
            scan_value(self.report, family.rows, f"{name}:{where}", blob, self.m)

        serdes = [] if self.checkpoint_serde is None else [self.checkpoint_serde]
        try:
            left = scan_checkpoint_db(con, decoded, raw, serdes)
        except sqlite3.Error as exc:
            left = [f"LangGraph checkpoint tables cannot be read ({exc})"]
        cov.decoders.append("langgraph-checkpoint")
        for reason in left:
            cov.left.append(reason)
            self.report.skip(family.rows, f"{label}: {reason}")

    def _cover(self, cov: FileCoverage) -> None:
        self.report.cover(cov)

