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
           "holds_nothing", "journal_paths", "scan_buffer", "scan_table", "scan_text", "scan_value", "scan_values", "strings_in"]

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
    m: SecretMatcher, skip: frozenset[str] = frozenset(), *, whole_first: bool = False,
) -> None:
    """Match every text/blob value of ``table`` (but the columns in ``skip``, read
    elsewhere), as :func:`scan_values` reads them. With ``whole_first`` (the caller
    expects no copy: its raw bytes showed none) and nothing to skip, first ask
    :func:`holds_nothing`, and read no row where it says so.

    Raises:
        sqlite3.Error: the table cannot be read (rows read before it are recorded).
    """
    cur = con.execute(f"SELECT * FROM {quote_identifier(table)} NOT INDEXED")  # the table's rows, not an index's
    cols = [d[0] for d in cur.description]
    if whole_first and not skip and holds_nothing(con, table, cols, m):
        return
    batch: list[tuple[str, Any]] = []
    size = 0
    try:
        for n, row in enumerate(cur):
            for col, value in zip(cols, row, strict=True):
                if isinstance(value, (str, bytes)) and col not in skip:
                    batch.append((f"{prefix}{table}:row{n}:{col}", value))
                    size += len(value)
            if size >= _BATCH_BYTES:
                scan_values(report, surface, batch, m)
                batch, size = [], 0
    except sqlite3.Error:  # the rows read before it are recorded too
        scan_values(report, surface, batch, m)
        raise
    scan_values(report, surface, batch, m)


def holds_nothing(con: sqlite3.Connection, table: str, cols: Sequence[str], m: Any) -> bool:
    """Whether :func:`scan_table` would record nothing from columns ``cols`` of
    ``table``, proven from all their values at once: each column's texts joined by
    SQLite (``group_concat`` over the table's own rows, as :func:`scan_table` reads
    them, never an index; no row read into Python) are held by no copy
    (:func:`memkit.scan.multi.none_may_hold`), and decoding them as JSON adds nothing
    (:func:`memkit.scan.json_escapes.decoding_adds_nothing_joined`): so
    :func:`scan_values` finds no span and decodes nothing. ``False`` (read the rows)
    where any column holds a blob, the database is not UTF-8, or SQLite fails (the rows
    then show what they can)."""
    from memkit.scan.json_escapes import decoding_adds_nothing_joined
    from memkit.scan.multi import none_may_hold

    if not cols:
        return True
    aggregates = []
    for col in cols:
        c = quote_identifier(col)
        aggregates += [f"CAST(group_concat(CASE WHEN typeof({c}) = 'text' THEN {c} END, char(0)) AS BLOB)",
                       f"total(typeof({c}) = 'text')", f"total(typeof({c}) = 'blob')"]
    try:
        if con.execute("PRAGMA encoding").fetchone()[0] != "UTF-8":
            return False
        row = con.execute(f"SELECT {', '.join(aggregates)} FROM {quote_identifier(table)} NOT INDEXED").fetchone()
    except sqlite3.Error:
        return False
    for k in range(0, len(row), 3):
        joined, texts, blobs = row[k] or b"", int(row[k + 1]), row[k + 2]
        if blobs or not (none_may_hold(m, joined, texts) and decoding_adds_nothing_joined(joined)):
            return False
    return True


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
