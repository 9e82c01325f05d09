"""Query the full-text indexes of any SQLite file.

An FTS3/4/5 index keeps its own copy of every token it indexed. When its content lives
elsewhere (an external-content table, ``content=...``, or a contentless one,
``content=''``) and the content row is deleted without the matching ``'delete'``
command (no delete trigger), the index still holds the secret: ``MATCH`` returns the
row id, while ``SELECT`` over the content table shows nothing. The index's blobs are
prefix-compressed token lists, so no byte pattern finds the secret in them either.

:func:`fulltext_hits` therefore asks SQLite itself, on a connection to a copy of the
file:

* ``MATCH`` queries for the secret's tokens: the secret as a phrase, its letters and
  digits split into the tokens the ``unicode61`` tokenizer makes, and its skeleton as
  a single token (a copy written without separators);
* for FTS5 tables whose content is not their own, every indexed document rebuilt from
  the index (``fts5vocab`` of type ``instance``: each token with its document, column
  and position; tokens joined with spaces, trigrams overlapped) and searched with the
  shared matcher, so a copy spelled with other separators is found too.

A row id the index holds the secret for is reported only when the table's own row (its
content, through the table) does not show it: that copy is counted with the rows.
Shadow tables (``<name>_data``, ``_content``, ``_segments`` ...) are ordinary tables
and are read with the rows by the caller; :func:`shadow_tables` names them.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memkit.scan.matching import SecretMatcher

__all__ = ["FulltextHit", "fulltext_hits", "fulltext_hits_each", "fulltext_tables", "shadow_tables"]

_USING = re.compile(r"\busing\s+(fts[345])\b", re.I)
_TOKENIZE = re.compile(r"\btokenize\s*=\s*['\"]?\s*([A-Za-z0-9_]+)", re.I)
_CONTENT = re.compile(r"\bcontent\s*=", re.I)
_DETAIL = re.compile(r"\bdetail\s*=\s*['\"]?\s*(full|column|none)", re.I)


@dataclass(frozen=True)
class FulltextHit:
    """A row id whose index entry holds the secret while its row does not show it.

    Attributes:
        table: the FTS virtual table.
        rowid: the row id the index returns.
        how: ``MATCH <query>`` or ``index (rebuilt from fts5vocab)``.
        kind: ``exact`` or ``normalized``.
    """

    table: str
    rowid: int
    how: str
    kind: str


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def fulltext_tables(con: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """``(name, module, create sql)`` of every FTS3/4/5 virtual table, by name."""
    out = []
    for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name"):
        found = _USING.search(sql or "")
        if found and "virtual" in (sql or "").lower():
            out.append((name, found.group(1).lower(), sql))
    return out


def shadow_tables(con: sqlite3.Connection) -> set[str]:
    """Names of the shadow tables of every FTS table (``<name>_<suffix>``)."""
    names = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    out = set()
    for vt, _, _ in fulltext_tables(con):
        out |= {n for n in names if n.startswith(vt + "_")}
    return out


def _tokens(secret: str) -> list[str]:
    """The secret's letter-and-digit runs, NFKC case-folded (``unicode61``'s tokens)."""
    folded = unicodedata.normalize("NFKC", secret).casefold()
    return [t for t in re.split(r"[^\w]|_", folded) if t]


def _queries(m: SecretMatcher) -> list[str]:
    out = []
    for phrase in (m.secret, " ".join(_tokens(m.secret)), m.skeleton):
        q = '"' + phrase.replace('"', '""') + '"'
        if phrase.strip() and q not in out:
            out.append(q)
    return out


def _row_shows(con: sqlite3.Connection, table: str, rowid: int, m: SecretMatcher) -> bool:
    try:
        row = con.execute(f"SELECT * FROM {_quote(table)} WHERE rowid = ?", (rowid,)).fetchone()
    except sqlite3.Error:
        return False
    return row is not None and any(isinstance(v, str) and m.search(v) for v in row)


def _rebuilt(con: sqlite3.Connection, table: str, trigram: bool) -> Iterator[tuple[int, str]]:
    """``(rowid, text)`` of each document column as the FTS5 index holds it."""
    vocab = "memkit_vocab_" + re.sub(r"\W", "_", table)
    con.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_quote(vocab)} "
                f"USING fts5vocab(main, {_quote(table)}, 'instance')")
    cur = con.execute(f"SELECT doc, col, offset, term FROM temp.{_quote(vocab)} "
                      "ORDER BY doc, col, offset")
    key, parts, last = None, [], -2
    for doc, col, offset, term in cur:
        if offset is None:
            raise sqlite3.OperationalError("the index stores no token positions")
        if (doc, col) != key:
            if key is not None:
                yield key[0], "".join(parts)
            key, parts, last = (doc, col), [], -2
        if trigram and parts and offset == last + 1:
            parts.append(term[-1:])  # overlapping trigrams: "abc", "bcd" -> "abcd"
        else:
            parts.append((" " if parts else "") + term)
        last = offset
    if key is not None:
        yield key[0], "".join(parts)


def fulltext_hits(con: sqlite3.Connection, m: SecretMatcher,
                  rebuilt: dict[str, dict[int, tuple[str, str]]] | None = None,
                  tables: list[tuple[str, str, str]] | None = None) -> tuple[list[FulltextHit], list[str]]:
    """Index entries holding ``m``'s secret whose rows do not show it (module doc).

    Args:
        con: a connection to a *copy* of the database (a temporary ``fts5vocab``
            table is created in its ``temp`` schema).
        m: the secret's matcher.
        rebuilt: the rows of rebuilt FTS5 documents that hold the secret, by table
            (:func:`_rebuilt_rows`), when the caller read them for many secrets at
            once; by default they are read here.
        tables: the FTS tables to query (:func:`fulltext_tables`; default: all).

    Returns:
        ``(hits, problems)``: one hit per (table, row id); ``problems`` says, per
        table, what could not be queried (no FTS module, an unknown tokenizer, an
        index without token positions), so the caller can report it as not checked.
    """
    hits: dict[tuple[str, int], FulltextHit] = {}
    problems: list[str] = []
    for table, module, sql in fulltext_tables(con) if tables is None else tables:
        tokenizer, detail = _options(sql)
        found: dict[int, tuple[str, str]] = {}
        queries = _queries(m)
        if module == "fts5" and detail != "full":  # no positions: phrases fail; every token
            queries.append(" AND ".join('"' + t.replace('"', '""') + '"' for t in _tokens(m.secret)))
        failed = []
        for q in queries:
            if tokenizer == "trigram" and len(q) < 5:  # under 3 characters: no trigram
                continue
            try:
                rows = con.execute(f"SELECT rowid FROM {_quote(table)} WHERE {_quote(table)} MATCH ?",
                                   (q,)).fetchall()
            except sqlite3.Error as exc:
                failed.append(str(exc))
                continue
            for (rowid,) in rows:
                found.setdefault(rowid, (f"MATCH {_mask_query(q, m)}", "exact"))
        if failed and len(failed) == len(queries):
            problems.append(f"{table} ({module}, tokenize={tokenizer}): the index cannot be "
                            f"queried ({failed[0]})")
        if rebuilt is None:
            rows_of, trouble = _rebuilt_rows(con, table, module, sql, m)
            problems += trouble
        else:
            rows_of = rebuilt.get(table, {})
        for rowid, how in rows_of.items():
            found.setdefault(rowid, how)
        for rowid, (how, kind) in sorted(found.items()):
            if not _row_shows(con, table, rowid, m):
                hits.setdefault((table, rowid), FulltextHit(table, rowid, how, kind))
    return list(hits.values()), problems


def _rebuilt_rows(con: sqlite3.Connection, table: str, module: str, sql: str,
                  m: Any) -> tuple[dict[Any, tuple[str, str]], list[str]]:
    """The rows of an FTS5 table whose content is not its own whose documents, rebuilt
    from the index, hold a copy: ``{rowid: (how, kind)}`` for a matcher, ``{(index,
    rowid): ...}`` for a :class:`~memkit.scan.multi.MultiMatcher` (one read of the
    index for every secret); and the problems."""
    tokenizer, detail = _options(sql)
    if module != "fts5" or not _CONTENT.search(sql):
        return {}, []
    if detail != "full":
        return {}, [f"{table} (fts5, detail={detail}): the index stores no token positions, so its "
                    "documents cannot be rebuilt; only MATCH on the secret's own tokens was checked"]
    found: dict[Any, tuple[str, str]] = {}
    many = hasattr(m, "engine")
    try:
        for rowid, text in _rebuilt(con, table, tokenizer == "trigram"):
            for _s, _e, kind, *idx in m.spans(text):
                found.setdefault((idx[0], rowid) if many else rowid, ("index (rebuilt from fts5vocab)", kind))
    except sqlite3.Error as exc:
        return found, [f"{table} (fts5): the index cannot be read back ({exc})"]
    return found, []


def _options(sql: str) -> tuple[str, str]:
    """An FTS table's tokenizer and (FTS5) detail level, from its ``CREATE`` statement."""
    tokenize, detail = _TOKENIZE.search(sql), _DETAIL.search(sql)
    return (tokenize.group(1).lower() if tokenize else "unicode61",
            detail.group(1).lower() if detail else "full")


_BATCH = 256
"""Secrets whose phrases one ``MATCH ... OR ...`` query tries at once."""


def _may_match(con: sqlite3.Connection, tables: list[tuple[str, str, str]],
               secrets: list[str]) -> dict[str, set[int]]:
    """Per FTS table, the secrets (indices) whose ``MATCH`` queries may return a row: the
    phrases of :data:`_BATCH` secrets at a time joined by ``OR`` in one query (the union
    of their rows); a batch that returns a row, or that the index refuses, is kept whole
    (each of its secrets is then queried alone, and a refusal reported). Tables whose
    queries are not phrases alone (FTS5 without token positions) keep every secret."""
    out: dict[str, set[int]] = {}
    for table, module, sql in tables:
        tokenizer, detail = _options(sql)
        if module == "fts5" and detail != "full":
            out[table] = set(range(len(secrets)))
            continue
        keep: set[int] = set()
        for b in range(0, len(secrets), _BATCH):
            chunk = range(b, min(len(secrets), b + _BATCH))
            phrases = [q for i in chunk for q in _queries(_OneSecret(secrets[i]))  # type: ignore[arg-type]
                       if not (tokenizer == "trigram" and len(q) < 5)]
            if not phrases:
                continue
            try:
                row = con.execute(f"SELECT 1 FROM {_quote(table)} WHERE {_quote(table)} MATCH ? LIMIT 1",
                                  (" OR ".join(phrases),)).fetchone()
            except sqlite3.Error:
                row = (1,)
            if row is not None:
                keep.update(chunk)
        out[table] = keep
    return out


class _OneSecret:
    """What the full-text queries ask of one secret's matcher, the matcher compiled
    only when a row is found (tens of milliseconds each: thousands of secrets must not
    pay it up front)."""

    def __init__(self, secret: str) -> None:
        from memkit.scan.matching import skeleton

        self.secret = secret
        self.skeleton = skeleton(secret)

    def search(self, text: str) -> bool:
        from memkit.scan.matching import matcher

        return matcher(self.secret).search(text)


def fulltext_hits_each(con: sqlite3.Connection, m: Any) -> tuple[list[tuple[int | None, FulltextHit]], list[str]]:
    """:func:`fulltext_hits` for each secret of ``m`` (a matcher, or a
    :class:`~memkit.scan.multi.MultiMatcher`: the secrets' ``MATCH`` queries tried many
    at a time (:func:`_may_match`), then one set per secret where a batch found rows;
    the rebuilt documents read once for all of them).

    Returns:
        ``(hits, problems)``: ``(secret index or None, hit)`` pairs, and each problem once.
    """
    if not hasattr(m, "engine"):
        found, problems = fulltext_hits(con, m)
        return [(None, h) for h in found], problems
    problems: list[str] = []
    rebuilt: dict[int, dict[str, dict[int, tuple[str, str]]]] = {}
    first = {}
    for i, secret in enumerate(m.secrets):
        first.setdefault(secret, i)
    tables = fulltext_tables(con)
    for table, module, sql in tables:
        rows, trouble = _rebuilt_rows(con, table, module, sql, m)
        problems += [p for p in trouble if p not in problems]
        for (i, rowid), how in rows.items():
            rebuilt.setdefault(i, {}).setdefault(table, {})[rowid] = how
    may = _may_match(con, tables, list(m.secrets))
    hits: list[tuple[int | None, FulltextHit]] = []
    for idx, secret in enumerate(m.secrets):
        mine = rebuilt.get(first[secret], {})
        asked = [t for t in tables if idx in may[t[0]] or t[0] in mine]
        if not asked:  # no query of its returns a row, and no rebuilt document holds it
            continue
        found, trouble = fulltext_hits(con, _OneSecret(secret), mine, asked)  # type: ignore[arg-type]
        hits += [(idx, h) for h in found]
        problems += [p for p in trouble if p not in problems]
    return hits, problems


def _mask_query(q: str, m: SecretMatcher) -> str:
    return "<the secret's tokens>" if m.search(q) or m.skeleton in q else q
