"""Copies in stored values, recorded into a :class:`~memkit.residue.report.ResidueReport`.

:func:`scan_text` / :func:`scan_buffer` / :func:`scan_value` match a text, bytes or a
stored value and add one masked :class:`~memkit.residue.report.Hit` per copy (a JSON
text is read decoded too, down to four levels of JSON inside JSON);
:func:`scan_table` and :func:`scan_values` read SQL rows in batches, one scan engine
pass per level for all of them; :func:`strings_in` walks a nested value and
:func:`json_strings` is its fast path for what :func:`json.loads` returns.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from memkit.residue.report import (
    SQLITE_MAGIC,
    Hit,
    ResidueReport,
    SpanIndex,
    mask_text,
    render_masked,
)
from memkit.scan.matching import SecretMatcher, scalar_text

__all__ = ["JOURNAL_SUFFIXES", "copy_sqlite", "is_sqlite", "json_strings", "printable", "quote_identifier",
           "journal_paths", "scan_buffer", "scan_table", "scan_text", "scan_value", "scan_values", "strings_in"]

_WINDOW = 24
"""Characters of context kept on each side of a copy (masked)."""
_BATCH_BYTES = 4 << 20
"""Text read from SQL rows per :func:`scan_values` call (bounds its memory)."""


def scan_text(report: ResidueReport, surface: str, location: str, text: str, m: SecretMatcher,
               depth: int = 0) -> None:
    spans = m.spans(text)
    loc, near = mask_text(location, m), SpanIndex(spans)
    for s, e, kind, *index in spans:
        lo, hi = max(0, s - _WINDOW), min(len(text), e + _WINDOW)
        report.add(Hit(surface, loc, kind, render_masked(text, 0, near.near(lo, hi), lo, hi), *index))
    # A JSON document (LangChain's serialised prompts, chroma's log rows) can hold the
    # secret only through its escapes (``\u00df`` for ``ß``): search it decoded too, as
    # :func:`memkit.scan.matching.contains_secret` (the forget's cache purge) does.
    if not spans and depth < 4 and text[:1] in "[{\"":
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            return
        for path, inner in strings_in(decoded, ":<json>"):
            if inner != text:
                scan_text(report, surface, location + path, inner, m, depth + 1)


class _Text:
    """One text of :func:`scan_values`: where it is, its copies, the strings of the JSON
    it holds when it shows none (read as :func:`scan_text` reads them)."""

    __slots__ = ("location", "text", "depth", "spans", "kids")

    def __init__(self, location: str, text: str, depth: int) -> None:
        self.location, self.text, self.depth = location, text, depth
        self.spans: list[Any] = []
        self.kids: list[_Text] = []


def scan_values(report: ResidueReport, surface: str, items: Sequence[tuple[str, Any]], m: Any) -> None:
    """:func:`scan_value` of each ``(location, value)``, with the same hits in the same
    order, for many values at once: one scan engine pass over every text of a level
    (:func:`memkit.scan.multi.may_hold`) names those that may hold a copy, and only
    those are matched, instead of one matcher call per text."""
    from memkit.scan.json_escapes import decoding_adds_nothing
    from memkit.scan.multi import may_hold

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
        docs: list[tuple[_Text, Any, list[str]]] = []  # (node, its JSON decoded, the strings that holds)
        json_texts: list[_Text] = []
        for node, may in zip(level, may_hold(m, [n.text for n in level]), strict=True):
            node.spans = m.spans(node.text) if may else []
            if not node.spans and node.depth < 4 and node.text[:1] in "[{\"":
                json_texts.append(node)
        # a text none of whose escapes can hide a copy needs no decoding (the proof:
        # memkit.scan.json_escapes)
        for node, proven in zip(json_texts, decoding_adds_nothing([n.text for n in json_texts]), strict=True):
            if proven:
                continue
            try:
                decoded = json.loads(node.text)
            except (ValueError, RecursionError):
                continue
            docs.append((node, decoded, json_strings(decoded)))
        # the strings of one document joined (by NUL, as may_hold joins texts): a document
        # none of whose strings may hold a copy needs no record per string, only its
        # strings that are JSON again (read at the next level)
        whole = may_hold(m, ["\0".join(strings) for _, _, strings in docs])
        deeper: list[_Text] = []
        for (node, decoded, strings), may in zip(docs, whole, strict=True):
            if not may and (node.depth + 1 >= 4 or not any(x[:1] in "[{\"" for x in strings)):
                continue
            for path, inner in strings_in(decoded, ":<json>"):
                if inner != node.text and (may or inner[:1] in "[{\""):
                    node.kids.append(_Text(node.location + path, inner, node.depth + 1))
            deeper += node.kids
        level = deeper

    def emit(node: _Text) -> None:
        if node.spans:
            loc, near = mask_text(node.location, m), SpanIndex(node.spans)
            for s, e, kind, *index in node.spans:
                lo, hi = max(0, s - _WINDOW), min(len(node.text), e + _WINDOW)
                report.add(Hit(surface, loc, kind, render_masked(node.text, 0, near.near(lo, hi), lo, hi), *index))
        for kid in node.kids:
            emit(kid)

    for item in order:
        if isinstance(item, _Text):
            emit(item)
        else:
            scan_buffer(report, surface, item[0], item[1], m)


def printable(b: bytes) -> str:
    return "".join(chr(x) if 32 <= x < 127 else "." for x in b)


def scan_buffer(
    report: ResidueReport,
    surface: str,
    location: str,
    data: bytes | mmap.mmap,
    m: SecretMatcher,
) -> None:
    from memkit.scan.encodings import byte_spans

    matches = byte_spans(m, data)
    if not matches:
        return
    loc, near = mask_text(location, m), SpanIndex(matches)
    for s, e, kind, *index in matches:
        lo, hi = max(0, s - _WINDOW), min(len(data), e + _WINDOW)
        window = printable(bytes(data[lo:hi]))
        report.add(Hit(surface, f"{loc}@{s}", kind, render_masked(window, lo, near.near(lo, hi), lo, hi), *index))


def scan_value(
    report: ResidueReport, surface: str, location: str, value: Any,
    m: SecretMatcher,
) -> None:
    text = scalar_text(value)
    if text is not None:
        scan_text(report, surface, location, text, m)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        scan_buffer(report, surface, location, bytes(value), m)
    elif isinstance(value, (list, tuple)):
        for n, v in enumerate(value):
            scan_value(report, surface, f"{location}[{n}]", v, m)


# --------------------------------------------------------------------------- SQLite


JOURNAL_SUFFIXES = ("-wal", "-journal", "-shm")
"""The files SQLite keeps beside a database: its write-ahead log, its rollback journal,
the WAL's shared-memory index."""


def journal_paths(db: Path) -> list[tuple[str, Path]]:
    """``(suffix, path)`` of each journal file SQLite may keep for database ``db``, in
    :data:`JOURNAL_SUFFIXES` order, whether or not it exists: beside the file ``db``
    resolves to (SQLite follows a symlinked database to its target and keeps its
    journals there), then beside ``db`` itself where that is another place."""
    real = Path(os.path.realpath(db))
    places = [real] if Path(os.path.realpath(db.parent)) / db.name == real else [real, db]
    return [(suf, p.with_name(p.name + suf)) for p in places for suf in JOURNAL_SUFFIXES]


def copy_sqlite(src: Path, dst_dir: Path) -> Path:
    """Copy an SQLite file and its -wal/-journal (:func:`journal_paths`, where they are
    regular files) into ``dst_dir``, named as SQLite looks for them beside the copy;
    return the copy. A journal gone before it is copied (a writer finished) is left
    out: the database then changed, which the caller's snapshot reports.

    Raises:
        OSError: the database itself cannot be copied.
    """
    dst = dst_dir / src.name
    shutil.copy2(src, dst)
    for suf, side in journal_paths(src):
        target = dst_dir / (dst.name + suf)
        if suf == "-shm" or target.exists() or not side.is_file():
            continue
        try:
            shutil.copy2(side, target)
        except FileNotFoundError:
            continue
    return dst


def is_sqlite(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(16) == SQLITE_MAGIC


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def scan_table(
    con: sqlite3.Connection, report: ResidueReport, surface: str, table: str, prefix: str,
    m: SecretMatcher, skip: frozenset[str] = frozenset(),
) -> None:
    """Match every text/blob value of ``table`` (but the columns in ``skip``, read
    elsewhere), as :func:`scan_values` reads them: the same hits in the same order.

    The table is read from itself (``NOT INDEXED``), a batch of rows at a time, its texts
    as SQLite stores them (UTF-8, no string built); one engine pass and one pass of the
    JSON proof over a batch's texts joined name the rows that may record something
    (:func:`_may_record`), and only those rows are read as :func:`scan_values` reads
    them. A table with a rowid in a UTF-8 database has each column's texts joined by
    SQLite, batch by batch in rowid order (the order a scan reads it), and its named rows
    fetched by rowid; any other is fetched row by row.

    Raises:
        sqlite3.Error: the table cannot be read, or a text in it is not UTF-8 (the rows
            before it are recorded).
    """
    q = quote_identifier(table)
    cols = [d[0] for d in con.execute(f"SELECT * FROM {q} NOT INDEXED LIMIT 0").description]
    read = [k for k, c in enumerate(cols) if c not in skip]
    where = f"{prefix}{table}"
    names = {c.lower() for c in cols}
    rid = next((r for r in ("rowid", "_rowid_", "oid") if r not in names), None)
    if rid is not None and con.execute("PRAGMA encoding").fetchone()[0] == "UTF-8":
        try:
            con.execute(f"SELECT {rid} FROM {q} NOT INDEXED LIMIT 0")
        except sqlite3.OperationalError:  # WITHOUT ROWID
            rid = None
        else:
            _scan_by_rowid(con, report, surface, where, q, cols, read, rid, m)
            return
    _scan_fetched(con, report, surface, where, q, read, m)


_ROWS_FIRST = 256
"""Rows in the first batch :func:`_scan_by_rowid` joins; later ones hold about
:data:`_BATCH_BYTES` of text at the rows' mean size so far."""


def _scan_by_rowid(con: sqlite3.Connection, report: ResidueReport, surface: str, where: str, q: str,
                   cols: list[str], read: list[int], rid: str, m: Any) -> None:
    """:func:`scan_table` of a table with a rowid (``rid``: a name for it no column
    has) in a UTF-8 database: per batch, one aggregate query joins each column's texts
    (an empty text for any other value, so text ``k`` of every column is row ``k``) and
    lists the rowids; rows named by :func:`_may_record`, or holding a blob, are fetched
    by rowid as Python's sqlite3 gives them."""
    alias = "r"
    while alias.lower() in {c.lower() for c in cols}:
        alias += "_"
    quoted = [quote_identifier(c) for c in cols]
    joins = [f"CAST(group_concat(CASE WHEN typeof({c}) = 'text' THEN {c} ELSE '' END, char(0)) AS BLOB)"
             for c in quoted]
    blob = " OR ".join(f"typeof({quoted[k]}) = 'blob'" for k in read) or "0"
    inner = f"SELECT {rid} AS {alias}, * FROM {q} NOT INDEXED"
    first, last, base, per, seen = True, 0, 0, _ROWS_FIRST, 0
    while True:
        batch = f"({inner}{'' if first else f' WHERE {rid} > ?'} ORDER BY {rid} LIMIT ?)"
        args = (per,) if first else (last, per)
        row = con.execute(f"SELECT count(*), max({alias}), group_concat(CASE WHEN {blob} THEN {alias} END), "
                          f"{', '.join(joins)} FROM {batch}", args).fetchone()
        count = row[0]
        if not count:
            return
        if any(j and not j.isascii() and not _utf8(j) for j in row[3:]):
            # a text that is not UTF-8: this batch row by row, which stops at that row, as a
            # scan that decodes every row does, after recording the rows before it
            _scan_fetched(con, report, surface, where, q, read, m, base=base,
                          where_sql=f"{'' if first else f' WHERE {rid} > ?'} ORDER BY {rid} LIMIT ?", args=args)
        else:
            _scan_named(con, report, surface, where, q, cols, read, rid, alias, m, first, args, base, row)
        first, last, base = False, row[1], base + count
        seen += sum(len(j or b"") for j in row[3:])
        per = max(1, min(1 << 16, _BATCH_BYTES * base // max(seen, 1)))


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _scan_named(con: sqlite3.Connection, report: ResidueReport, surface: str, where: str, q: str,
                cols: list[str], read: list[int], rid: str, alias: str, m: Any, first: bool,
                args: tuple[int, ...], base: int, row: tuple[Any, ...]) -> None:
    """One batch of :func:`_scan_by_rowid` whose texts are all UTF-8 (``row``: its
    count, last rowid, rowids holding a blob, then each column's texts joined): the rows
    :func:`_may_record` names, or that hold a blob, fetched by rowid and read by
    :func:`scan_values`; the ``k``-th text of each column is the batch's ``k``-th row
    by rowid, the order it feeds the aggregates in."""
    count = row[0]
    named: set[int] = set()
    for k in read:
        joined = row[3 + k] or b""
        if len(joined) != count - 1:  # else no text in this column (an empty text records nothing)
            named.update(_may_record(joined, count, m))
    if not named and not row[2]:
        return
    rowids = [int(x) for x in con.execute(
        f"SELECT group_concat({alias}) FROM (SELECT {rid} AS {alias} FROM {q} NOT INDEXED"
        f"{'' if first else f' WHERE {rid} > ?'} ORDER BY {rid} LIMIT ?)", args).fetchone()[0].split(",")]
    if row[2]:
        blobs = {int(x) for x in row[2].split(",")}
        named.update(k for k, x in enumerate(rowids) if x in blobs)
    chosen = sorted(rowids[r] for r in named)
    fetched: dict[int, tuple[Any, ...]] = {}
    if len(chosen) > count // 8:  # most of the batch: one range query
        for values in con.execute(f"SELECT {rid}, * FROM {q} NOT INDEXED WHERE {rid} >= ? AND {rid} <= ? "
                                  f"ORDER BY {rid}", (chosen[0], chosen[-1])):
            fetched[values[0]] = values[1:]
    else:
        for x in chosen:
            fetched[x] = con.execute(f"SELECT * FROM {q} NOT INDEXED WHERE {rid} = ?", (x,)).fetchone()
    n_of = {x: base + i for i, x in enumerate(rowids)}
    items: list[tuple[str, Any]] = []
    for x in chosen:
        values = fetched[x]
        items += [(f"{where}:row{n_of[x]}:{cols[k]}", values[k]) for k in read if isinstance(values[k], (str, bytes))]
    for start in range(0, len(items), 256):  # bounded batches, as a table's rows are matched
        scan_values(report, surface, items[start:start + 256], m)


def _scan_fetched(con: sqlite3.Connection, report: ResidueReport, surface: str, where: str, q: str,
                  read: list[int], m: Any, *, base: int = 0, where_sql: str = "", args: tuple[Any, ...] = ()) -> None:
    """:func:`scan_table` of any table (or of the rows ``where_sql`` and ``args`` select,
    the first of them row ``base``), row by row: texts fetched as UTF-8 bytes
    (:class:`_StoredText`), a batch of about :data:`_BATCH_BYTES` at a time. A text that
    is not UTF-8 stops it after the rows before it are recorded; the error names its
    column and row, never its text (which may hold a secret)."""
    factory = con.text_factory
    con.text_factory = _StoredText
    rows: list[tuple[int, tuple[Any, ...]]] = []
    size, cols = 0, []
    try:
        cur = con.execute(f"SELECT * FROM {q} NOT INDEXED{where_sql}", args)
        cols = [d[0] for d in cur.description]
        for n, row in enumerate(cur, base):
            for k, v in enumerate(row):  # a text Python cannot decode stops the table, as a str row would
                if isinstance(v, _StoredText) and not v.isascii() and not _utf8(v):
                    raise sqlite3.OperationalError(f"Could not decode to UTF-8 column '{cols[k]}' of row {n}")
            rows.append((n, row))
            size += sum(len(row[k]) for k in read if isinstance(row[k], bytes))
            if size >= _BATCH_BYTES:
                _scan_rows(report, surface, where, cols, read, rows, m)
                rows, size = [], 0
    except sqlite3.Error:  # the rows read before it are recorded too
        _scan_rows(report, surface, where, cols, read, rows, m)
        raise
    finally:
        con.text_factory = factory
    _scan_rows(report, surface, where, cols, read, rows, m)


class _StoredText(bytes):
    """A text value as SQLite gives it (UTF-8), told from a blob (plain :class:`bytes`)."""

    __slots__ = ()


def _scan_rows(report: ResidueReport, surface: str, where: str, cols: list[str], read: list[int],
               rows: list[tuple[int, tuple[Any, ...]]], m: Any) -> None:
    """:func:`scan_values` of the values in columns ``read`` of those of ``rows``
    (``(ordinal, values)``, texts as :class:`_StoredText`) that :func:`_may_record`
    names, labelled ``{where}:row{n}:{column}``."""
    texts: list[bytes] = []
    owner: list[int] = []
    blobs: set[int] = set()
    for r, (_n, row) in enumerate(rows):
        for k in read:
            v = row[k]
            if isinstance(v, _StoredText):
                texts.append(v)
                owner.append(r)
            elif isinstance(v, bytes):
                blobs.add(r)
    items: list[tuple[str, Any]] = []
    for r in sorted(blobs | {owner[t] for t in _may_record(b"\0".join(texts), len(texts), m)}):
        n, row = rows[r]
        for k in read:
            v = row[k]
            if isinstance(v, _StoredText):
                items.append((f"{where}:row{n}:{cols[k]}", v.decode("utf-8")))
            elif isinstance(v, bytes):
                items.append((f"{where}:row{n}:{cols[k]}", bytes(v)))
    if items:
        scan_values(report, surface, items, m)


def _may_record(joined: bytes, count: int, m: Any) -> list[int]:
    """Which of ``count`` texts, given as their UTF-8 joined by NUL bytes (``joined``),
    :func:`scan_values` may record a hit for, a superset: every other one provably
    records nothing. Where no text holds a NUL or a byte
    :func:`memkit.scan.multi.text_bytes` rewrites, ``joined`` is what
    :func:`memkit.scan.multi.may_hold` matches; then a text records nothing when no copy
    the engine finds starts in it, it holds no character that folds to several (the
    only texts ``may_hold`` reads again, folded), and it is not decoded as JSON or its
    decoding provably adds nothing (:mod:`memkit.scan.json_escapes`: an ASCII text no
    rule leaves unproven). Where the joined bytes break those conditions, every text is
    named."""
    import bisect

    from memkit.scan.engine import single_engine
    from memkit.scan.json_escapes import joins, unproven
    from memkit.scan.multi import MultiMatcher, texts_holding_folds

    if not count:
        return []
    engine = m.engine if isinstance(m, MultiMatcher) else single_engine(m.secret)
    nuls, breaker, non_ascii = joins(joined)
    if engine is None or len(nuls) != count - 1 or breaker:
        return list(range(count))
    starts = [0, *(nuls + 1).tolist()]
    named: set[int] = set()
    for spans in engine.scan_bytes(joined).values():
        named.update(bisect.bisect_right(starts, s) - 1 for s, _e, _k in spans)
    if non_ascii:
        named.update(texts_holding_folds(joined, starts))
        ends = [*(nuls).tolist(), len(joined)]
        named.update(t for t in range(count) if joined[starts[t]:starts[t] + 1] in (b"[", b"{", b'"')
                     and not joined[starts[t]:ends[t]].isascii())
    # the proof's pass: one offset inside each text it leaves unproven (the byte after)
    named.update(bisect.bisect_right(starts, to - 1) - 1 for to in unproven(joined))
    return sorted(named)


def json_strings(obj: Any) -> list[str]:
    """The texts :func:`strings_in` yields for a value :func:`json.loads` returns (dicts,
    lists, strings, numbers, booleans, ``None``), without their paths: the same
    strings, in the same order, at a fraction of the cost. Any other value is read by
    :func:`strings_in` itself."""
    out: list[str] = []
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        o, depth = stack.pop()
        if depth > 50:
            continue
        t = type(o)
        if t is str:
            out.append(o)
        elif t is dict:
            for k, v in reversed(list(o.items())):
                stack.append((v, depth + 1))
                stack.append((k, depth + 1))
        elif t is list:
            stack.extend((v, depth + 1) for v in reversed(o))
        elif t is int or t is float:
            out.append(str(o))
        elif o is not None and t is not bool:
            out.extend(x for _, x in strings_in(o, "", depth))
    return out


def strings_in(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
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
            yield from strings_in(k, f"{path}.<key>", depth + 1)
            yield from strings_in(v, f"{path}.{k}", depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for i, v in enumerate(obj):
            yield from strings_in(v, f"{path}[{i}]", depth + 1)
    elif hasattr(obj, "model_dump"):
        yield from strings_in(obj.model_dump(), path, depth + 1)
    elif is_dataclass(obj) and not isinstance(obj, type):
        yield from strings_in(asdict(obj), path, depth + 1)
    else:
        yield path, repr(obj)
