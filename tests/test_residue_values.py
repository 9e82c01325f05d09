"""memkit.residue.values: many values at once (:func:`scan_values`) against one at a time
(:func:`scan_value`), and :func:`json_strings` against :func:`strings_in`."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit.residue.report import ResidueReport
from memkit.residue.values import json_strings, scan_value, scan_values, strings_in
from memkit.scan.matching import matcher
from memkit.scan.multi import MultiMatcher

SECRETS = ["XQ7-VIOLET-3829", "Gießen-Nord", "5551234", "Giessen-Ost"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_json_strings_are_the_strings_strings_in_yields(value):
    assert json_strings(value) == [text for _, text in strings_in(value, "")]


def test_json_strings_stop_where_strings_in_stops():
    deep: object = "at the bottom"
    for k in range(60):
        deep = [deep, str(k)] if k % 2 else {"k": deep, str(k): 1.5}
    assert json_strings(deep) == [text for _, text in strings_in(deep, "")]
    assert "at the bottom" not in json_strings(deep)


def _doc(rng: random.Random, k: int) -> str:
    """A row as memory layers write them: JSON with escapes, a copy (or none) somewhere."""
    filler = " ".join(rng.choice(["cat", "window", "\u201cquoted\u201d", "line\nbreak", "tab\there"]) for _ in range(8))
    where = k % 9
    body: dict = {"document": filler, "metadata": {"user": f"u{k}"}}
    if where == 1:
        body["document"] += " XQ7-VIOLET-3829"
    elif where == 2:  # only an escape spells it
        return json.dumps({"document": filler + " XQ7-VIOLET-3829"}).replace("VIOLET", "VIO\\u004cET")
    elif where == 3:  # JSON inside JSON inside JSON: only the third decoding reads "ß" (folded: "ss")
        body["metadata"]["raw"] = json.dumps({"inner": json.dumps({"deep": "Gießen-Ost"})})
    elif where == 4:  # a character that folds to two
        body["document"] += " giessen nord"
    elif where == 5:
        body["metadata"]["Gießen-Nord"] = "as a key"
    elif where == 6:  # a number the decoder writes otherwise (5.551234e6 -> 5551234.0)
        body["metadata"]["n"] = 5.551234e6
        return json.dumps(body).replace("5551234.0", "5.551234e6")
    elif where == 7:  # the copy split by an escape only a decoder reads as a separator
        body["document"] += " XQ7\\nVIOLET\\t3829"
    return json.dumps(body, ensure_ascii=k % 2 == 0)


@pytest.mark.parametrize("many", [False, True])
def test_many_values_at_once_have_the_hits_of_one_at_a_time(many):
    rng = random.Random(3)
    items: list[tuple[str, object]] = [(f"row{k}", _doc(rng, k)) for k in range(90)]
    items += [("blob", b"\x00XQ7-VIOLET-3829\x00"), ("list", ["nothing", '{"a": "5551234"}']),
              ("broken", '{"document": "XQ7-VIOLET-3829'), ("plain", "x")]
    for m in ([MultiMatcher(SECRETS)] if many else [matcher(s) for s in SECRETS]):
        one = ResidueReport(target="t")
        for location, value in items:
            scan_value(one, "disk_sqlite", location, value, m)
        at_once = ResidueReport(target="t")
        scan_values(at_once, "disk_sqlite", items, m)
        assert at_once.to_dict() == one.to_dict()
        assert one.total >= 5  # the planted copies are there to be found
    assert any(".deep" in h.location for hits in one.surfaces.values() for h in hits)  # the third decoding


@pytest.mark.parametrize("text", [
    "XQ7<!--" + "\u00e9" * 300 + "-->VIOLET-3829",
    "XQ7<b " + "\u00e9" * 300 + ">VIOLET-3829",
    '{"note": "XQ7<i title=' + "\u4e00" * 200 + '>VIOLET-3829"}',
    "XQ7<i title=" + "\U0001d400" * 480 + ">VIOLET-3829",
])
def test_a_tag_of_500_characters_is_one_separator_in_bytes_too(text):
    """A tag or comment body is bounded in characters, in text and in bytes alike: a copy
    split by one of up to 500 characters of several bytes each is found by every reader
    (the byte pattern, the prefilter of many values, many secrets at once, the UTF-16
    reading), not by the text pattern alone."""
    from memkit.scan.encodings import wide_spans
    from memkit.scan.multi import may_hold

    one, many = matcher(SECRETS[0]), MultiMatcher(SECRETS)
    assert one.spans(text) and may_hold(one, [text]) == [True] and may_hold(many, [text]) == [True]
    assert [(s, e, i) for s, e, _, i in many.spans(text)] == [(s, e, 0) for s, e, _ in one.spans(text)]
    assert one.byte_spans(text.encode()) and many.byte_spans(text.encode())
    for m in (one, many):
        at_once, alone = ResidueReport(target="t"), ResidueReport(target="t")
        scan_values(at_once, "disk_sqlite", [("row", text)], m)
        scan_value(alone, "disk_sqlite", "row", text, m)
        assert at_once.to_dict() == alone.to_dict() and alone.total == 1
    assert wide_spans(b"\x00" * 8 + text.encode("utf-16-le"), one)


def _tables(path, encoding: str = "UTF-8") -> dict[str, list[tuple]]:
    """An SQLite database written with ``sqlite3``, one table per case: copies the rows
    show only decoded, split by control bytes, in non-ASCII text, in blobs, behind NULs,
    next to tables that hold none (``{table: rows}``)."""
    import sqlite3

    rng = random.Random(9)
    plain = [(k, " ".join(rng.choice(["cat", "window", "line\nbreak", "tab\there"]) for _ in range(9)), k * 2)
             for k in range(200)]
    jsonish = [(k, json.dumps({"document": f"caf\u00e9 \u2014 \u201cq\u201d <b>x</b> {k}", "n": k}), None)
               for k in range(200)]
    cases = {
        "plain": plain,
        "jsonish": jsonish,
        "empty": [],
        "numbers": [(k, k * 1.5, None) for k in range(50)],
        "blank": [(1, "", ""), (2, None, "")],
        "docs": [(k, _doc(random.Random(k), k), None) for k in range(40)],
        "escaped": [*jsonish[:50], (999, '{"a": "XQ7-\\ud835\\udc15IOLET-3829"}', None)],
        "tag": [*jsonish[:50], (999, '{"a": "XQ7\\u003cb\\u003eVIOLET-3829"}', None)],
        "number": [*jsonish[:50], (999, '{"n": 5.551234e6}', None)],
        "control": [*plain[:50], (999, "XQ7\x01VIOLET\x023829", None)],
        "nul": [*plain[:50], (999, "XQ7\x00VIOLET-3829", None)],
        "folding": [*plain[:50], (999, "Gie\u00dfen-Ost", None)],
        "accented": [*plain[:50], (999, "Gie\u00dfen-Nord", None)],
        "fullwidth": [*plain[:50], (999, "\uff38\uff31\uff17-VIOLET-3829", None)],
        "blob": [*plain[:50], (999, b"XQ7-VIOLET-3829", None)],
        "second_column": [*plain[:50], (999, "nothing", "XQ7-VIOLET-3829")],
        "verbatim": [*plain[:50], (999, "XQ7-VIOLET-3829", None)],
    }
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA encoding = '{encoding}'")
    for name, rows in cases.items():
        con.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, body, extra)")
        con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()
    return cases


def _every_row(con, table: str, m) -> ResidueReport:
    """What reading every row records: the rows as Python's sqlite3 gives them (texts
    decoded), all passed to :func:`scan_values`."""
    report = ResidueReport(target="t")
    cur = con.execute(f"SELECT * FROM {table}")
    cols = [d[0] for d in cur.description]
    scan_values(report, "disk_sqlite", [(f"t:{table}:row{n}:{c}", v) for n, row in enumerate(cur)
                                        for c, v in zip(cols, row, strict=True) if isinstance(v, (str, bytes))], m)
    return report


@pytest.mark.parametrize("many", [False, True])
@pytest.mark.parametrize("encoding", ["UTF-8", "UTF-16le"])
def test_the_rows_a_table_scan_passes_over_record_nothing(tmp_path, monkeypatch, many, encoding):
    """``scan_table`` (its rows' texts matched joined, only the rows that may record read)
    records what reading every row records, for copies only decoding, a control byte,
    folding or a second column show, in blobs and behind NULs; and it names no row of
    the tables of plain text and of JSON with harmless escapes, in either encoding."""
    import sqlite3

    from memkit.residue import values
    from memkit.residue.values import scan_table

    db = tmp_path / "t.db"
    cases = _tables(db, encoding)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA encoding").fetchone()[0] == encoding.upper().replace("LE", "le")
    for m in ([MultiMatcher(SECRETS)] if many else [matcher(s) for s in SECRETS]):
        for table in cases:
            got = ResidueReport(target="t")
            scan_table(con, got, "disk_sqlite", table, "t:", m)
            assert got.to_dict() == _every_row(con, table, m).to_dict(), table
    many_m = MultiMatcher(SECRETS)
    for table in ["escaped", "tag", "number", "control", "nul", "folding", "accented", "fullwidth", "blob", "second_column",
                  "verbatim", "docs"]:
        assert _every_row(con, table, many_m).total >= 1, table  # each case is one: its rows show a copy
    read: list[str] = []
    monkeypatch.setattr(values, "scan_values", lambda report, surface, items, m: read.extend(loc for loc, _ in items))
    clean = set()
    for table in cases:
        read.clear()
        scan_table(con, ResidueReport(target="t"), "disk_sqlite", table, "t:", many_m)
        if not read:
            clean.add(table)
    assert clean == {"plain", "jsonish", "empty", "numbers", "blank"}


@pytest.mark.parametrize("mode", ["delete", "wal"])
def test_a_database_with_no_journal_is_read_where_it_lies_and_left_as_it_was(tmp_path, mode):
    """A database with no journal beside it is read in place: its rows (a copy only
    decoding shows, in a table of plain rows) are found, and the directory holds the same
    files with the same bytes and times after; with a -wal beside it, a row only the
    -wal holds is found too (read on a copy, which SQLite may checkpoint)."""
    import sqlite3

    from memkit.residue.containers import Limits
    from memkit.residue.files import SIDE, Scanner

    d = tmp_path / "d"
    d.mkdir()
    db = d / "m.db"
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA journal_mode = {mode}")
    con.execute("CREATE TABLE notes (body TEXT)")
    con.executemany("INSERT INTO notes VALUES (?)", [(f"row {k} plain words",) for k in range(300)]
                    + [('{"a": "XQ7-\\ud835\\udc15IOLET-3829"}',)])
    con.commit()
    con.close()
    assert not [p.name for p in d.iterdir() if p.name != "m.db"]

    def state() -> dict[str, tuple[bytes, int]]:
        return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in d.iterdir()}

    before = state()
    report = ResidueReport(target="t")
    Scanner(report, MultiMatcher(SECRETS), Limits()).file(db, str(db), SIDE)
    assert state() == before
    assert [h.location for hits in report.surfaces.values() for h in hits] == [
        "m.db:notes:row300:body:<json>.a"]
    if mode != "wal":
        return
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO notes VALUES ('XQ7\\x01VIOLET 3829')".replace("\\x01", "\x01"))
    writer.commit()
    assert (d / "m.db-wal").exists()
    before = state()
    report = ResidueReport(target="t")
    Scanner(report, MultiMatcher(SECRETS), Limits()).file(db, str(db), SIDE)
    assert {k: v for k, v in state().items() if k != "m.db-shm"} == {k: v for k, v in before.items() if k != "m.db-shm"}
    writer.close()
    assert "m.db:notes:row301:body" in [h.location for hits in report.surfaces.values() for h in hits]


def test_rows_read_before_an_error_are_recorded():
    """A row SQLite cannot give (TEXT that is not UTF-8) stops the table, and the copy in
    the row before it is recorded all the same."""
    import sqlite3

    from memkit.residue.values import scan_table

    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (a)")
    con.execute("INSERT INTO t VALUES ('XQ7-VIOLET-3829')")
    con.execute("INSERT INTO t VALUES (CAST(x'ff' AS TEXT))")
    report = ResidueReport(target="t")
    with pytest.raises(sqlite3.OperationalError):
        scan_table(con, report, "disk_sqlite", "t", "db:", matcher(SECRETS[0]))
    assert [h.location for hits in report.surfaces.values() for h in hits] == ["db:t:row0:a"]


@pytest.mark.parametrize("skip", [frozenset(), frozenset({"value"})])
def test_an_index_that_disagrees_with_its_table_is_not_read_for_it(tmp_path, skip):
    """An index rewritten to cover another table (a crafted or corrupt file): the rows
    and the proof that they hold nothing both read the table itself, so the copy in the
    table is found with and without the proof."""
    import sqlite3

    from memkit.residue.values import scan_table

    db = tmp_path / "c.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE writes (thread_id TEXT, value BLOB)")
    con.executemany("INSERT INTO writes VALUES (?, ?)", [("clean", b"x"), ("XQ7-VIOLET-3829", b"x"), ("clean", b"x")])
    con.execute("CREATE TABLE other (thread_id TEXT, value BLOB)")
    con.executemany("INSERT INTO other VALUES (?, ?)", [("clean", b"x")] * 3)
    cols = "thread_id" if skip else "thread_id, value"  # an index that covers what the proof reads
    con.execute(f"CREATE INDEX i ON other ({cols})")
    con.commit()
    con.execute("PRAGMA writable_schema = 1")
    con.execute(f"UPDATE sqlite_master SET tbl_name = 'writes', sql = 'CREATE INDEX i ON writes ({cols})' "
                "WHERE name = 'i'")
    con.commit()
    con.close()
    con = sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True)
    report = ResidueReport(target="t")
    scan_table(con, report, "disk_sqlite", "writes", "db:", matcher(SECRETS[0]), skip)
    assert [h.location for hits in report.surfaces.values() for h in hits] == ["db:writes:row1:thread_id"]


def test_a_journal_that_is_no_file_is_not_copied(tmp_path):
    """A ``-wal`` that is a directory: the database is read, nothing raised."""
    import sqlite3

    from memkit.residue.containers import Limits
    from memkit.residue.files import SIDE, Scanner

    db = tmp_path / "x.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (a)")
    con.execute("INSERT INTO t VALUES ('{\"a\": \"XQ7-\\ud835\\udc15IOLET-3829\"}')")
    con.commit()
    con.close()
    (tmp_path / "x.db-wal").mkdir()
    report = ResidueReport(target="t")
    Scanner(report, MultiMatcher(SECRETS), Limits()).file(db, "x.db", SIDE)
    assert [h.location for hits in report.surfaces.values() for h in hits] == ["x.db:t:row0:a:<json>.a"]


@pytest.mark.parametrize("pooled", [False, True])
def test_a_symlinked_database_is_read_with_the_journal_beside_its_target(tmp_path, monkeypatch, pooled):
    """A database given by a symlink, in WAL mode, held open by its writer with every
    row still in the -wal beside the target (where SQLite keeps it): its rows are read
    with that -wal, and the -wal's bytes too; nothing is read in place as if it had no
    journal, so the copy is found, not reported clean."""
    import sqlite3

    from memkit.residue import pool
    from memkit.residue.containers import Limits
    from memkit.residue.files import SIDE, Scanner

    (tmp_path / "tgt").mkdir()
    (tmp_path / "scan").mkdir()
    db = tmp_path / "tgt" / "store.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode = wal")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("CREATE TABLE store (value TEXT)")
    writer.execute("INSERT INTO store VALUES (?)", ('{"text": "code \\u0058Q7-VIOLET-3829"}',))
    (tmp_path / "scan" / "link.db").symlink_to("../tgt/store.db")
    assert SECRETS[0].encode() not in db.read_bytes() and (tmp_path / "tgt" / "store.db-wal").exists()
    monkeypatch.setattr(pool, "_INLINE_BYTES", 0 if pooled else 1 << 60)
    try:
        report = ResidueReport(target="t")
        Scanner(report, MultiMatcher(SECRETS), Limits()).path(tmp_path / "scan", SIDE)
    finally:
        pool.release()
        writer.close()
    found = [h.location for hits in report.surfaces.values() for h in hits]
    assert f"{tmp_path}/scan/link.db-wal" in {c.path for c in report.coverage}
    assert any(loc.startswith("link.db:store:row0:value") for loc in found), found
    assert any(loc.startswith(f"{tmp_path}/scan/link.db-wal@") for loc in found), found


@pytest.mark.parametrize("seed", range(3))
def test_a_snippet_reads_the_copies_near_it_as_it_reads_them_all(seed):
    """:class:`SpanIndex` gives :func:`render_masked` the copies near a window: the
    snippet is the one all copies give (overlapping, nested, adjacent and long ones)."""
    from memkit.residue.report import SpanIndex, render_masked

    rng = random.Random(seed)
    text = "".join(rng.choice("ab \n") for _ in range(3000))
    spans = []
    for _ in range(400):
        s = rng.randrange(0, 2990)
        spans.append((s, min(3000, s + rng.choice([1, 5, 15, 80, 600])), rng.choice(["exact", "normalized"]), None))
    near = SpanIndex(spans)
    for s, e, *_ in spans:
        lo, hi = max(0, s - 24), min(len(text), e + 24)
        assert render_masked(text, 0, near.near(lo, hi), lo, hi) == render_masked(text, 0, spans, lo, hi)
    assert render_masked(text, 0, SpanIndex([]).near(0, 50), 0, 50) == text[:50].replace("\n", " ")


_TEXT_PIECES = ["XQ7", "VIOLET", "3829", "-", " ", "violet", "\uff36", "\u00e9", "\u0301", "\u00df", "<b>", "<!--",
                "\\u00e9", "\\u0041", "\\ud835\\udc15", "\\n", "\\\\", "1e5", "1.5", "NaN", "\x01", "\x00", '{"a": "',
                '"}', "[", "caf\u00e9", "word", "\u24cb"]


@pytest.mark.parametrize("seed", range(3))
def test_a_table_scan_names_every_text_its_reading_would_match_or_decode(seed):
    """``_may_record`` (over texts joined, as a table scan batches them) names every text
    that :func:`scan_values` would match (``may_hold``) or decode as JSON (not proven by
    :func:`decoding_adds_nothing`), whatever its neighbours: ASCII or not, with breakers
    and NULs; among plain ASCII texts, only those."""
    from memkit.residue.values import _may_record
    from memkit.scan.json_escapes import decoding_adds_nothing
    from memkit.scan.multi import may_hold

    rng = random.Random(40 + seed)
    for m in (matcher(SECRETS[0]), MultiMatcher(SECRETS)):
        for _ in range(150):
            texts = ["".join(rng.choice(_TEXT_PIECES) for _ in range(rng.randrange(0, 9))) for _ in range(rng.randrange(1, 8))]
            may = may_hold(m, texts)
            needs = {t for t, text in enumerate(texts) if may[t] or (text[:1] in '[{"' and not decoding_adds_nothing([text])[0])}
            named = set(_may_record(b"\0".join(t.encode() for t in texts), len(texts), m))
            assert needs <= named, texts
            if all(t.isascii() and "\0" not in t and not any(0 < ord(c) < 32 and c not in "\t\n\r\x0b\x0c\x1b"
                                                               or c == "\x7f" for c in t) for t in texts):
                # plain ASCII: named only for a copy or a rule of the JSON proof
                assert named <= {t for t in range(len(texts)) if may[t] or not decoding_adds_nothing([texts[t]])[0]}


def test_a_table_read_in_batches_by_rowid_labels_each_row_as_a_scan_reads_it(tmp_path, monkeypatch):
    """Rows joined by SQLite a batch at a time (several batches here), rowids out of
    insertion order and negative, copies in later batches, in blobs, in nearly every row
    of a batch (one range query) and in few (one query per row), tables WITHOUT ROWID and
    with every rowid name taken by a column (read row by row), and FTS5: each records what
    reading every row records, labelled with the row's place in a scan."""
    import sqlite3

    from memkit.residue import values
    from memkit.residue.values import scan_table

    monkeypatch.setattr(values, "_ROWS_FIRST", 7)
    monkeypatch.setattr(values, "_BATCH_BYTES", 2000)
    rng = random.Random(5)
    db = tmp_path / "b.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE shuffled (id INTEGER PRIMARY KEY, body, extra)")
    ids = rng.sample(range(-500, 500), 300)
    for k, i in enumerate(ids):
        body = "XQ7-VIOLET-3829" if k % 37 == 5 else "plain words " * rng.randrange(1, 30)
        extra = b"XQ7-VIOLET-3829" if k == 201 else (None if k % 3 else k * 1.5)
        con.execute("INSERT INTO shuffled VALUES (?, ?, ?)", (i, body, extra))
    con.execute("CREATE TABLE dense (body)")
    con.executemany("INSERT INTO dense VALUES (?)", [(f"{k} XQ7-VIOLET-3829 {k}",) for k in range(60)])
    con.execute("CREATE TABLE noid (k TEXT PRIMARY KEY, body) WITHOUT ROWID")
    con.executemany("INSERT INTO noid VALUES (?, ?)", [(f"k{k:03d}", "XQ7 VIOLET 3829" if k == 40 else "x")
                                                       for k in range(80)])
    con.execute('CREATE TABLE shadow (rowid, "_ROWID_", oid, body)')
    con.executemany("INSERT INTO shadow VALUES (?, ?, ?, ?)", [(1, 2, 3, "XQ7-VIOLET-3829"), (4, 5, 6, "y")])
    con.execute('CREATE TABLE half (rowid TEXT, body)')
    con.executemany("INSERT INTO half VALUES (?, ?)", [("XQ7-VIOLET-3829", "a"), ("b", "XQ7-VIOLET-3829")])
    con.execute("CREATE VIRTUAL TABLE notes USING fts5(body)")
    con.executemany("INSERT INTO notes VALUES (?)", [("x",)] * 20 + [("XQ7-VIOLET-3829",)])
    con.commit()
    m = MultiMatcher(SECRETS)
    for table in ["shuffled", "dense", "noid", "shadow", "half", "notes"]:
        got = ResidueReport(target="t")
        scan_table(con, got, "disk_sqlite", table, "t:", m)
        want = _every_row(con, table, m)
        assert want.total >= 1, table
        assert got.to_dict() == want.to_dict(), table


@pytest.mark.parametrize("rowid", [True, False])
@pytest.mark.parametrize("nul", [False, True])
def test_a_text_that_is_not_utf8_in_a_later_batch_stops_the_table_after_the_rows_before_it(monkeypatch, rowid, nul):
    """Rows before the first text that is not UTF-8 are recorded (texts holding NULs
    before it in its batch too), none after; the error names the column and row, never
    the text, which here holds the secret."""
    import sqlite3

    from memkit.residue import values
    from memkit.residue.values import scan_table

    monkeypatch.setattr(values, "_ROWS_FIRST", 4)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, a, b)" if rowid else
                "CREATE TABLE t (k INTEGER PRIMARY KEY, a, b) WITHOUT ROWID")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(k, "x\x00y" if nul and k in (5, 8) else "x",
                                                        "XQ7-VIOLET-3829" if k in (3, 9) else "y") for k in range(14)])
    con.execute("UPDATE t SET a = CAST('XQ7-VIOLET-3829' || x'ff' AS TEXT) WHERE k = 11")
    report = ResidueReport(target="t")
    with pytest.raises(sqlite3.OperationalError) as err:
        scan_table(con, report, "disk_sqlite", "t", "db:", matcher(SECRETS[0]))
    assert [h.location for hits in report.surfaces.values() for h in hits] == ["db:t:row3:b", "db:t:row9:b"]
    assert "row 11" in str(err.value) and "'a'" in str(err.value) and "VIOLET" not in str(err.value)
