"""PostgreSQL read the way PostgreSQL writes it: compressed values, TOAST chunks, WAL
records and compressed page images, tables in any schema or tablespace, ``pg_wal``
on another disk, and ``memkit residue postgresql://...``.

Every test runs a real PostgreSQL 16 (pgserver). The ground truth never comes from
memkit: values through SQL, chunk rows read from the TOAST table with SQL, bytes
found with ``bytes.count``/``bytes.find`` (``grep -a``), tuples located by their
``ctid`` and the page layout of ``bufpage.h``, page images saved by the server's own
``pg_waldump --save-fullpage``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")

from memkit.postgres import surfaces as surfaces_pg  # noqa: E402
from memkit.postgres.pages import DecodeError, pglz_decompress  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "lambda"]
TABLES = [*surfaces_pg.STORE_TABLES, *surfaces_pg.SAVER_TABLES]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _noise(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ") for _ in range(n))


def _files(top: Path) -> list[Path]:
    return [Path(d) / f for d, _, fs in os.walk(top, followlinks=True) for f in fs if (Path(d) / f).is_file()]


def _grep(paths: list[Path], needle: bytes) -> int:
    return sum(p.read_bytes().count(needle) for p in paths)


def _copies(scans: dict, surface: str, secret: str) -> int:
    return len(scans[surface].hits.get(secret, []))


def _datum(pgdata: Path, relpath: str, ctid: str) -> tuple[int, bytes]:
    """The first attribute of the tuple at ``ctid`` of a one-column table, read with
    the page layout of ``bufpage.h``/``htup_details.h``: (file offset, varlena bytes)."""
    block, lp = (int(x) for x in ctid.strip("()").split(","))
    data = (pgdata / relpath).read_bytes()
    page = block * 8192
    item = struct.unpack_from("<I", data, page + 24 + 4 * (lp - 1))[0]
    off, length = item & 0x7FFF, item >> 17
    tup = page + off
    hoff = data[tup + 22]
    return tup + hoff, data[tup + hoff: tup + length]


@pytest.fixture(scope="module")
def srv():
    """One PostgreSQL server for this module: ``(uri, pgdata)`` (autovacuum off)."""
    from evaluators.targets.matrix import temporary_postgres

    with temporary_postgres() as (server, root):
        yield server.get_uri(), Path(root)


@pytest.fixture(scope="module")
def srv_waldir():
    """A server whose ``pg_wal`` is a symbolic link to a directory outside its data
    directory (as ``initdb --waldir`` makes it), with ``wal_compression = pglz``."""
    import pgserver

    base = Path(tempfile.mkdtemp(prefix="memkit-pgwal-"))
    root, elsewhere = base / "data", base / "wal-disk"
    server = pgserver.get_server(root, cleanup_mode="stop")
    try:
        server.cleanup()  # stopped: move pg_wal away and link it
        shutil.move(str(root / "pg_wal"), str(elsewhere))
        (root / "pg_wal").symlink_to(elsewhere, target_is_directory=True)
        server = pgserver.get_server(root, cleanup_mode="stop")
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET autovacuum = off")
            conn.execute("ALTER SYSTEM SET wal_compression = pglz")
            conn.execute("SELECT pg_reload_conf()")
        yield server.get_uri(), root, elsewhere
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def _db(uri: str, name: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return _uri(make_conninfo(**{**conninfo_to_dict(uri), "dbname": name}))


def _store(uri: str, **kw):
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row

    conn = psycopg.connect(uri, autocommit=True, prepare_threshold=0, row_factory=dict_row, **kw)
    store = PostgresStore(conn)
    store.setup()
    return conn, store


@pytest.mark.timeout(120)
def test_pglz_decoder_matches_values_postgres_compressed(srv):
    uri, pgdata = srv
    rng = random.Random(7)
    values = [
        _words(rng, 1500),                                          # back-references of every length
        "z" * 5000 + _words(rng, 300),                              # long runs (length extension byte)
        "".join(f"{i:06d}," for i in range(1200)),                  # short, overlapping matches
        _noise(rng, 700) * 5 + "tail",                              # matches 700 bytes back
        "ß€字🙂 " * 800,                                            # multi-byte UTF-8
    ]
    dsn = _db(uri, "pglz_unit")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (v text)")
        for v in values:
            conn.execute("INSERT INTO t VALUES (%s)", (v,))
        conn.execute("CHECKPOINT")
        rel = conn.execute("SELECT pg_relation_filepath('t')").fetchone()[0]
        rows = conn.execute("SELECT ctid::text, v, pg_column_compression(v), pg_column_size(v), octet_length(v) "
                            "FROM t").fetchall()
        toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 't'").fetchone()[0]
        assert len(rows) == len(values)
        kinds = set()
        for ctid, v, method, size, raw in rows:
            assert method == "pglz", (ctid, method)
            _, datum = _datum(pgdata, rel, ctid)
            if datum[0] == 0x01 and datum[1] == 18:  # an on-disk TOAST pointer (varatt_external)
                rawsize, extinfo, value_id = struct.unpack_from("<iII", datum, 2)
                assert rawsize - 4 == raw and extinfo >> 30 == 0
                chunks = conn.execute(f"SELECT chunk_data FROM {toast} WHERE chunk_id = %s ORDER BY chunk_seq",
                                      (value_id,)).fetchall()
                stored = b"".join(bytes(c) for (c,) in chunks)  # va_tcinfo, then the compressed bytes
                assert len(stored) == extinfo & 0x3FFFFFFF
                assert struct.unpack_from("<I", stored)[0] & 0x3FFFFFFF == raw
                assert pglz_decompress(stored[4:], raw) == v.encode()
                kinds.add("external")
                continue
            header, tcinfo = struct.unpack_from("<II", datum)
            assert header & 3 == 2 and header >> 2 == size  # a 4-byte compressed varlena of pg_column_size
            assert tcinfo & 0x3FFFFFFF == raw and tcinfo >> 30 == 0
            assert pglz_decompress(datum[8:size], raw) == v.encode()
            with pytest.raises(DecodeError):
                pglz_decompress(datum[8:size - 1], raw)  # input cut short
            with pytest.raises(DecodeError):
                pglz_decompress(datum[8:size], raw + 1)  # claims one byte more
            assert v.encode().startswith(pglz_decompress(datum[8: 8 + (size - 8) // 2], raw, complete=False))
            kinds.add("inline")
        assert kinds == {"inline", "external"}
    with pytest.raises(DecodeError):
        pglz_decompress(b"\x01\x00\x05", 10)  # a match before any output


@pytest.mark.timeout(180)
def test_compressed_value_after_store_delete_and_vacuum_full(srv):
    """A pglz-compressed memory written and deleted through LangGraph's PostgresStore:
    found in the heap (live, then as a deleted tuple) and in the WAL, also after
    VACUUM FULL + CHECKPOINT + pg_switch_wal; never in the raw bytes grep reads."""
    uri, pgdata = srv
    secret, outside = "PGLZ-MAUVE-88231", "PGLZ-UMBER-11902"
    rng = random.Random(1)
    text = f"{_words(rng, 900)} my token is {secret} {_words(rng, 300)}"
    dsn = _db(uri, "compressed")
    conn, store = _store(dsn)
    audit = psycopg.connect(dsn, autocommit=True)
    try:
        store.put(("memories", "u1"), "k1", {"content": text})
        # large enough that even compressed it goes to the TOAST table: compressed chunks
        store.put(("memories", "u1"), "k2", {"content": f"{_words(rng, 6000)} {outside} {_words(rng, 6000)}"})
        audit.execute("CHECKPOINT")
        toast = audit.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'store'").fetchone()
        assert audit.execute("SELECT pg_column_compression(value) FROM store WHERE key = 'k2'").fetchone()[0] == "pglz"
        assert audit.execute(f"SELECT count(*) FROM {toast[0]}").fetchone()[0] >= 2  # out of line, in chunks
        assert _grep(_files(pgdata), outside.encode()) == 0
        scans = surfaces_pg.scan_disk(audit, pgdata, TABLES, [outside])
        assert _copies(scans, "disk_pg_toast", outside) == 1 and "pglz]" in scans["disk_pg_toast"].hits[outside][0]
        assert _copies(scans, "disk_pg_wal", outside) >= 1 and scans["disk_pg_toast"].complete
        ctid, method, size = audit.execute(
            "SELECT ctid::text, pg_column_compression(value), pg_column_size(value) FROM store WHERE key = 'k1'"
        ).fetchone()
        rel = audit.execute("SELECT pg_relation_filepath('store')").fetchone()[0]
        assert method == "pglz"
        assert _grep(_files(pgdata), secret.encode()) == 0  # only compressed bytes on disk
        # the value column's datum in the tuple: the 4-aligned compressed header of its size
        _, tup = _datum(pgdata, rel, ctid)
        body = next(tup[i + 8: i + 72] for i in range(0, len(tup) - 8, 4)
                    if struct.unpack_from("<I", tup, i)[0] == size << 2 | 2)
        assert _copies(surfaces_pg.scan_disk(audit, pgdata, TABLES, [secret]), "disk_pg_heap", secret) == 1

        store.delete(("memories", "u1"), "k1")
        store.delete(("memories", "u1"), "k2")
        audit.execute("CHECKPOINT")
        assert audit.execute("SELECT count(*) FROM store").fetchone()[0] == 0
        dead = surfaces_pg.scan_disk(audit, pgdata, TABLES, [outside])  # the dead chunks, decompressed
        assert _copies(dead, "disk_pg_toast", outside) == 1 and "deleted" in dead["disk_pg_toast"].hits[outside][0]
        assert body in (pgdata / rel).read_bytes()  # the dead tuple keeps the compressed bytes
        scans = surfaces_pg.scan_disk(audit, pgdata, TABLES, [secret])
        assert _copies(scans, "disk_pg_heap", secret) == 1
        assert "deleted tuple" in scans["disk_pg_heap"].hits[secret][0]
        assert "pglz value" in scans["disk_pg_heap"].hits[secret][0]
        wal_before = _copies(scans, "disk_pg_wal", secret)
        assert wal_before >= 1 and any(body in p.read_bytes() for p in _files(pgdata / "pg_wal"))
        assert surfaces_pg.scan_rows(audit, TABLES, [secret]).hits == {}

        for sql_text in ("VACUUM FULL store", "CHECKPOINT", "SELECT pg_switch_wal()", "CHECKPOINT"):
            audit.execute(sql_text)
        scans = surfaces_pg.scan_disk(audit, pgdata, TABLES, [secret])
        assert _copies(scans, "disk_pg_heap", secret) == 0 and scans["disk_pg_heap"].complete
        assert body not in (pgdata / audit.execute("SELECT pg_relation_filepath('store')").fetchone()[0]).read_bytes()
        wal = scans["disk_pg_wal"]
        assert any(body in p.read_bytes() for p in _files(pgdata / "pg_wal"))  # still in the WAL ...
        assert len(wal.hits.get(secret, [])) >= 1 and wal.decoded["WAL records"] > 0  # ... and memkit says so
        assert all("pglz value" in loc for loc in wal.hits[secret])
        after = surfaces_pg.scan_disk(audit, pgdata, TABLES, [outside])
        assert _copies(after, "disk_pg_toast", outside) == 0 and after["disk_pg_toast"].complete
        assert _copies(after, "disk_pg_wal", outside) >= 1  # the chunk inserts, reassembled and decompressed
    finally:
        audit.close()
        conn.close()


@pytest.mark.timeout(180)
def test_secret_across_toast_chunks_in_toast_and_wal(srv):
    """An incompressible memory stored out of line, with the secret across the boundary
    of its first two TOAST chunks: in no chunk whole (SQL on the TOAST table), in no
    file's raw bytes, yet memkit finds it in the TOAST file and the WAL, before and
    after the delete."""
    uri, pgdata = srv
    secret = "STRADDLE-OCHRE-5521"
    rng = random.Random(3)
    dsn = _db(uri, "straddle")
    conn, store = _store(dsn)
    audit = psycopg.connect(dsn, autocommit=True)
    try:
        audit.execute("ALTER TABLE store ALTER COLUMN value SET STORAGE EXTERNAL")
        # jsonb {"content": s}: 4-byte header, 2 entries, "content", then s: the secret
        # starts 1988 bytes into the value and crosses the 1996-byte chunk boundary
        noise = _noise(rng, 6000)
        store.put(("memories", "u1"), "big", {"content": noise[:1969] + secret + noise[1969:]})
        toast = audit.execute("SELECT reltoastrelid::regclass::text, pg_relation_filepath(reltoastrelid) "
                              "FROM pg_class WHERE relname = 'store'").fetchone()
        chunks = audit.execute(f"SELECT chunk_seq, chunk_data FROM {toast[0]} ORDER BY chunk_id, chunk_seq").fetchall()
        joined = b"".join(bytes(c) for _, c in chunks)
        at = joined.find(secret.encode())
        assert at < 1996 < at + len(secret)  # across the boundary of chunks 0 and 1 ...
        assert not any(secret.encode() in bytes(c) for _, c in chunks)  # ... in neither whole
        audit.execute("CHECKPOINT")
        assert _grep(_files(pgdata), secret.encode()) == 0
        tail = bytes(chunks[0][1])[-200:]

        for phase in ("live", "deleted"):
            if phase == "deleted":
                store.delete(("memories", "u1"), "big")
                audit.execute("CHECKPOINT")
                assert audit.execute(f"SELECT count(*) FROM {toast[0]}").fetchone()[0] == 0  # no live chunk
            assert tail in (pgdata / toast[1]).read_bytes()  # the chunk's bytes, live or dead
            assert any(tail in p.read_bytes() for p in _files(pgdata / "pg_wal"))
            scans = surfaces_pg.scan_disk(audit, pgdata, TABLES, [secret])
            assert _copies(scans, "disk_pg_toast", secret) == 1, (phase, scans["disk_pg_toast"])
            assert "chunks 0|1" in scans["disk_pg_toast"].hits[secret][0]
            assert ("deleted" if phase == "deleted" else "live") in scans["disk_pg_toast"].hits[secret][0]
            assert _copies(scans, "disk_pg_wal", secret) >= 1, (phase, scans["disk_pg_wal"])
            assert scans["disk_pg_toast"].complete, scans["disk_pg_toast"].partial
    finally:
        audit.close()
        conn.close()


@pytest.mark.timeout(180)
def test_compressed_full_page_image_in_the_wal_and_a_symlinked_pg_wal(srv_waldir):
    """``wal_compression = pglz`` and ``pg_wal`` a link to another disk: the first change
    to a page after a checkpoint writes the page compressed into the WAL. pg_waldump
    --save-fullpage recovers the secret from it; grep finds nothing in pg_wal; memkit
    finds it in ``disk_pg_wal`` (and nothing of pg_wal lands on another surface)."""
    uri, root, elsewhere = srv_waldir
    secret, plain = "FPI-VERMILION-4242", "RAW-CELADON-5150"
    with psycopg.connect(uri, autocommit=True) as conn:
        assert conn.execute("SHOW wal_compression").fetchone()[0] == "pglz"
        conn.execute("CREATE TABLE w (id int, v text)")
        for i in range(60):
            conn.execute("INSERT INTO w VALUES (%s, %s)", (i, f"filler row {i} " * 6))
        conn.execute("CHECKPOINT")
        lsn0 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        conn.execute("INSERT INTO w VALUES (999, %s)", (f"the token {secret} is here",))
        lsn1 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        conn.execute("INSERT INTO w VALUES (1000, %s)", (f"and {plain} after it",))  # same page: no image
        conn.execute("CHECKPOINT")
        bindir = Path(__import__("pgserver").__file__).parent / "pginstall" / "bin"
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([str(bindir / "pg_waldump"), "-p", str(elsewhere), "-s", lsn0, "-e", lsn1,
                            "--save-fullpage", out], check=True, capture_output=True, timeout=60)
            saved = _grep(list(Path(out).iterdir()), secret.encode())
        assert saved >= 1  # the server's own tool recovers it from a page image
        wal_files = _files(elsewhere)
        assert _grep(wal_files, secret.encode()) == 0  # ... which is compressed in the files
        assert (root / "pg_wal").is_symlink()
        scans = surfaces_pg.scan_disk(conn, root, ["w"], [secret, plain])
    wal = scans["disk_pg_wal"]
    assert len(wal.hits[plain]) >= _grep(wal_files, plain.encode()) >= 1  # the insert record, as it is
    assert wal.readable and wal.decoded["files"] == len(wal_files)
    images = [loc for loc in wal.hits.get(secret, []) if "full-page image" in loc and "pglz" in loc]
    assert len(images) >= saved, wal.hits
    with psycopg.connect(uri) as conn:
        heap = root / conn.execute("SELECT pg_relation_filepath('w')").fetchone()[0]
    assert _copies(scans, "disk_pg_heap", secret) == 1 == _grep([heap], secret.encode())
    assert not any("pg_wal" in loc for s in scans.values() if s.surface != "disk_pg_wal"
                   for locs in s.hits.values() for loc in locs)


@pytest.mark.timeout(180)
def test_tables_in_another_schema_and_tablespace(srv):
    """A PostgresStore whose connection's search_path is ``agent`` and whose table lives in
    another tablespace (a directory outside the data directory, linked from
    pg_tblspc): found in live rows and in the heap file."""
    uri, pgdata = srv
    secret = "SCHEMA-TEAL-7731"
    dsn = _db(uri, "other_schema")
    space = Path(tempfile.mkdtemp(prefix="memkit-tblspc-"))
    try:
        os.chown(space, pgdata.stat().st_uid, pgdata.stat().st_gid)
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("CREATE SCHEMA agent")
            admin.execute(f"CREATE TABLESPACE memkit_ts LOCATION '{space}'")
        conn, store = _store(dsn, options="-csearch_path=agent")
        audit = psycopg.connect(dsn, autocommit=True, options="-csearch_path=agent")
        try:
            audit.execute("ALTER TABLE store SET TABLESPACE memkit_ts")
            store.put(("memories", "u1"), "k1", {"content": f"my token is {secret}"})
            assert audit.execute("SELECT count(*) FROM agent.store WHERE value::text LIKE %s",
                                 (f"%{secret}%",)).fetchone()[0] == 1
            assert audit.execute("SELECT to_regclass('public.store')").fetchone()[0] is None
            rows = surfaces_pg.scan_rows(audit, TABLES, [secret])
            assert rows.hits[secret] == ["agent.store:row 0:value.content"]
            scans = surfaces_pg.scan_disk(audit, pgdata, TABLES, [secret])
            heap = scans["disk_pg_heap"].hits[secret]
            assert len(heap) == 1 == _grep(_files(space), secret.encode())
            assert heap[0].startswith("pg_tblspc/")
            assert _copies(scans, "disk_pg_other", secret) == 0  # the tablespace's file counted once
        finally:
            audit.close()
            conn.close()
    finally:
        with psycopg.connect(uri, autocommit=True) as admin:
            admin.execute('DROP DATABASE IF EXISTS "other_schema" WITH (FORCE)')
            admin.execute("DROP TABLESPACE IF EXISTS memkit_ts")
        shutil.rmtree(space, ignore_errors=True)


def _uri(conninfo: str) -> str:
    """A ``key=value`` connection string as a ``postgresql://`` URI."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(conninfo)
    user, db = d.pop("user", ""), d.pop("dbname", "")
    d.pop("password", None)
    return f"postgresql://{quote(user)}@/{quote(db)}?{urlencode(d)}"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m evaluators.cli residue ARGS`` in a new interpreter."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "evaluators.cli", "residue", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env)


@pytest.mark.timeout(300)
def test_cli_residue_on_a_postgres_database(srv, tmp_path):
    """``memkit residue postgresql://...`` after a user deleted two memories with
    PostgresStore.delete (one small, one large and out of line): no live row, but copies
    in the heap, TOAST and WAL files; exit 1. A database never given the secret is
    clean (exit 0), and bad URIs are one line and exit 2, creating nothing."""
    uri, pgdata = srv
    secret = "CLI-SAFFRON-6067"
    rng = random.Random(5)
    dsn = _db(uri, "cli_target")
    conn, store = _store(dsn)
    try:
        store.put(("memories", "u1"), "small", {"content": f"remember {secret}"})
        store.put(("memories", "u1"), "large", {"content": _noise(rng, 3000) + f" {secret} " + _noise(rng, 3000)})
        store.delete(("memories", "u1"), "small")
        store.delete(("memories", "u1"), "large")
    finally:
        conn.close()
    res = _cli(dsn, secret, "--pgdata", str(pgdata), "--checkpoint", "--json", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    out = json.loads(res.stdout)
    with psycopg.connect(dsn) as c:
        heap, toast = c.execute("SELECT pg_relation_filepath('store'), pg_relation_filepath(reltoastrelid) "
                                "FROM pg_class WHERE relname = 'store'").fetchone()
        assert c.execute("SELECT count(*) FROM store").fetchone()[0] == 0
    counts = out["counts"]
    assert counts["pg_rows"] == 0
    assert counts["disk_pg_heap"] == _grep([pgdata / heap], secret.encode()) >= 1
    assert counts["disk_pg_toast"] == _grep([pgdata / toast], secret.encode()) >= 1
    assert counts["disk_pg_wal"] >= _grep(_files(pgdata / "pg_wal"), secret.encode()) >= 2
    assert secret not in res.stdout  # locations and snippets are masked
    assert "public.store" in " ".join(out["notes"]) or "store" in " ".join(out["notes"])

    res = _cli("postgresql://nobody@/nodb?host=/nonexistent-socket-dir", secret, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("memkit residue: error: cannot connect to PostgreSQL")

    # the rest in-process (the same command, without a new interpreter each time)
    import typer
    from typer.testing import CliRunner

    from evaluators.cli.residue import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    clean = _db(uri, "cli_clean")
    with psycopg.connect(clean, autocommit=True) as c:
        c.execute("CREATE TABLE notes (v text)")
        c.execute("INSERT INTO notes VALUES ('nothing to see')")
    res = CliRunner().invoke(app, ["residue", clean, "NEVER-WRITTEN-0000", "--pgdata", str(pgdata), "--table",
                                   "notes", "--checkpoint", "--json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 0, (out["unchecked"], res.stderr)
    assert out["verdict"] == "clean" and out["total"] == 0
    res = CliRunner().invoke(app, ["residue", dsn, secret, "--pgdata", str(pgdata)])  # the table report
    assert res.exit_code == 1 and "disk_pg_toast" in res.stdout and secret not in res.stdout

    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    missing = _uri(make_conninfo(**{**conninfo_to_dict(uri), "dbname": "no_such_database"}))
    for args, says in (
        (["postgresql://localhost:notaport/db", secret], "port 'notaport' is not a number"),
        (["postgresql://[::1", secret], "malformed PostgreSQL URI"),
        ([missing, secret], "no_such_database"),
        ([dsn, secret, "--pgdata", str(tmp_path)], "PG_VERSION"),
        ([dsn, secret, "--table", "no_such_table"], "no such table: no_such_table"),
        ([dsn, secret, "--schema", "nowhere"], "no such schema: nowhere"),
        ([dsn, secret, "--cache", str(tmp_path / "c.sqlite")], "--cache cannot be used"),
        ([str(tmp_path), secret, "--pgdata", str(pgdata)], "--pgdata only with a postgresql:// URI"),
    ):
        res = CliRunner().invoke(app, ["residue", *args])
        assert res.exit_code == 2, (args, res.output)
        assert isinstance(res.exception, SystemExit), res.exception  # no traceback
        assert res.stderr.count("\n") == 1 and says in res.stderr, (args, res.stderr)
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.timeout(120)
def test_wal_records_and_page_images_as_pg_waldump_reads_them(srv_waldir):
    """memkit's WAL reader decodes as many records as pg_waldump reads from the first
    segment, and as many full-page images as it saves (a WAL with no recycled
    segment, so both read the same records)."""
    from memkit.postgres.wal import read_wal

    uri, _, elsewhere = srv_waldir
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS w (id int, v text)")
        conn.execute("CHECKPOINT")
        conn.execute("INSERT INTO w SELECT i, repeat('x', i % 50) FROM generate_series(1, 500) i")
        conn.execute("CHECKPOINT")
    segments = sorted(p for p in elsewhere.iterdir() if p.is_file() and len(p.name) == 24)
    bindir = Path(__import__("pgserver").__file__).parent / "pginstall" / "bin"

    def waldump() -> tuple[int, int]:
        stats = subprocess.run([str(bindir / "pg_waldump"), "-p", str(elsewhere), "--stats", segments[0].name],
                               capture_output=True, text=True, timeout=60)
        total = next(int(line.split()[1]) for line in stats.stdout.splitlines() if line.startswith("Total"))
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([str(bindir / "pg_waldump"), "-p", str(elsewhere), "--save-fullpage", out,
                            segments[0].name], capture_output=True, timeout=60)
            return total, len(os.listdir(out))

    for _ in range(5):  # the server logs on its own (running-xacts records): count between two equal reads
        before = waldump()
        wal = read_wal([(p, p.name) for p in segments])
        if waldump() == before:
            break
        wal.close()
    total, saved = before
    try:
        assert wal.records == total > 0
        assert wal.images_plain + len(wal.images) == saved > 0
        assert all(im.page is not None and len(im.page) == 8192 for im in wal.images)
        assert wal.fragment_bytes == 0 and wal.cut_images == 0 and wal.unknown == []
    finally:
        wal.close()


@pytest.mark.timeout(120)
def test_wal_of_a_version_memkit_does_not_know_is_partly_read(srv_waldir, tmp_path):
    """A WAL file whose pages carry a magic memkit does not know: its bytes are matched
    raw, its records are not decoded, and ``disk_pg_wal`` says so."""
    from memkit.postgres.decode import DiskDecoder
    from memkit.postgres.surfaces import DISK_SURFACES, _wal_sources
    from memkit.postgres.wal import read_wal

    _, _, elsewhere = srv_waldir
    seg = sorted(p for p in elsewhere.iterdir() if p.is_file() and len(p.name) == 24)[0]
    data = bytearray(seg.read_bytes())
    for off in range(0, len(data), 8192):
        if data[off: off + 2] == struct.pack("<H", 0xD113):  # PostgreSQL 16's XLOG_PAGE_MAGIC
            data[off: off + 2] = struct.pack("<H", 0xD1F0)
    (tmp_path / seg.name).write_bytes(bytes(data))
    wal = read_wal([(tmp_path / seg.name, "pg_wal/" + seg.name)])
    try:
        assert wal.unknown == ["pg_wal/" + seg.name] and wal.records == 0
        dec = DiskDecoder(["ANY-SECRET-1"], DISK_SURFACES)
        _wal_sources(dec, wal, "off")
        scan = dec.finish()["disk_pg_wal"]
    finally:
        wal.close()
    assert not scan.complete and any("memkit does not decode" in line for line in scan.partial)


@pytest.mark.timeout(60)
def test_lz4_values_decode_with_the_lz4_package_and_are_partly_read_without_it():
    """A varlena compressed with lz4 (method 1 in va_tcinfo), as a server built with
    lz4 writes it: decoded by PyPI's lz4; without it, reported as not decoded."""
    import lz4.block

    from memkit.postgres.decode import DiskDecoder
    from memkit.postgres.pages import compressed_datums

    secret = "LZ4-CERISE-3003"
    value = (f"note {secret} " + "the same words again " * 300).encode()
    body = lz4.block.compress(value, store_size=False)
    datum = struct.pack("<II", (len(body) + 8) << 2 | 2, len(value) | 1 << 30) + body
    page = bytes(1000) + datum + bytes(8192 - 1000 - len(datum))
    found = list(compressed_datums(page))
    assert [(d.offset, d.method, d.value) for d in found] == [(1000, "lz4", value)]
    assert [d.error for d in compressed_datums(page, lz4=False)] == ["the lz4 package is not installed"]
    # lz4 keeps literals together: the secret is also in the compressed bytes as they are;
    # decoded, that raw copy is the decoded one (counted once); undecoded, it is all
    # memkit can count, and the surface is partly read
    for lz4_ok, where in ((True, "page@1000 [lz4 value]"), (False, "page@1015")):
        dec = DiskDecoder([secret], ["disk_pg_heap"])
        dec.lz4 = lz4_ok
        dec.read("disk_pg_heap", page, dec.source(lambda o: f"page@{o}", lambda s, n: page[s: s + n]))
        scan = dec.finish()["disk_pg_heap"]
        assert scan.hits == {secret: [where]} and scan.complete is lz4_ok, scan.partial


def _chunk_record(chunk_id: int, seq: int, data: bytes) -> bytes:
    """A TOAST chunk tuple as an XLOG_HEAP_INSERT record carries it: xl_heap_header
    (t_infomask2 = 3 attributes, t_infomask = HEAP_HASVARWIDTH | HEAP_XMAX_INVALID,
    t_hoff = 24), the tuple from offset 23 (one pad byte), chunk_id, chunk_seq, bytea."""
    return (struct.pack("<HHB", 3, 0x0802, 24) + b"\x00" + struct.pack("<IiI", chunk_id, seq, (len(data) + 4) << 2)
            + data)


@pytest.mark.timeout(60)
def test_toast_chunks_whose_first_chunk_is_gone_are_partly_read():
    """Chunks of a value whose first chunk and pointer are gone cannot say whether the
    value was compressed: read at their boundaries, and reported as partly read. With
    the first chunk (uncompressed text) present, the value is read in full."""
    from memkit.postgres.decode import DiskDecoder

    secret = "CHUNK-SEPIA-2718"
    rng = random.Random(11)
    text = (_noise(rng, 1990) + secret + _noise(rng, 3000)).encode()
    parts = [text[i: i + 1996] for i in range(0, len(text), 1996)]
    for first in (True, False):
        stream = b"".join(b"\xff" * 40 + _chunk_record(77001, k, p) for k, p in enumerate(parts) if first or k)
        dec = DiskDecoder([secret], ["disk_pg_wal"])
        dec.read("disk_pg_wal", stream, dec.source(lambda o: f"wal@{o}", lambda s, n, b=stream: b[s: s + n]),
                 pages=False)
        scan = dec.finish()["disk_pg_wal"]
        assert len(scan.hits.get(secret, [])) == (1 if first else 0)
        assert scan.complete is first, scan.partial
        if not first:
            assert "first chunk and pointer are gone" in scan.partial[0]
