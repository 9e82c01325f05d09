"""The ``langgraph`` target on its real backends: InMemoryStore/InMemorySaver,
SqliteStore/SqliteSaver, PostgresStore (pgvector)/PostgresSaver on a real PostgreSQL
16 server (tests/pg_fixtures.py).

Copies are planted through the backend's own API (the target's LangGraph writer graph
puts items with ``BaseStore.batch`` and checkpoints each session's thread). Every
expected count is computed here without memkit: ``bytes.count`` over the files, and
Python ``str.count`` over rows read with psycopg / sqlite3. Embeddings are
LangChain's ``DeterministicFakeEmbedding`` (a stand-in: no semantics are needed to
count copies).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from evaluators.targets.base import NotApplicable, Target, load_target, scan_all

S1, S2 = "QZ7-VIOLET-3829", "K4P-AMBER-1047"
U1, U2 = "user-a", "user-b"


def _session(secret: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"my private session token is {secret}, keep it"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "I adopted a cat named Biscuit last spring"},
    ]


def _plant(target: Target) -> None:
    target.feed(_session(S1), "s1", "2024/01/01", U1)
    target.feed(_session(S2), "s2", "2024/01/02", U2)


def _build(backend: str, **kw):
    return load_target("langgraph", backend=backend, embed=DeterministicFakeEmbedding(size=8), dims=8, **kw)


def _copies(scans, surface: str, secret: str) -> int | None:
    return scans[surface].copies(secret)


# --------------------------------------------------------------------------- memory


def test_memory_backend_surfaces_and_forget():
    with _build("memory") as target:
        _plant(target)
        before = scan_all(target.surfaces(), [S1, S2])
        # independent: the values InMemoryStore holds (its own search API, plain count)
        items = target.store.search(("memories", U1), limit=100)
        assert _copies(before, "store_api", S1) == sum(json.dumps(i.value).count(S1) for i in items) == 1
        assert _copies(before, "checkpoint", S1) >= 1
        assert target.forget_secret(S1, U1) == 1
        target.forget_user(U2)
        after = scan_all(target.surfaces(), [S1, S2])
        assert _copies(after, "store_api", S1) == _copies(after, "store_api", S2) == 0
        # the writer's thread of user 1 still holds the session; user 2's threads are gone
        assert _copies(after, "checkpoint", S1) == _copies(before, "checkpoint", S1)
        assert _copies(after, "checkpoint", S2) == 0
        assert after["store_vectors"].status == "checked" and not after["store_vectors"].unattributed
        assert target.deletion_steps() == {}


# --------------------------------------------------------------------------- sqlite


def _sqlite_rows_count(path: Path, secret: str) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n = 0
    try:
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            for row in con.execute(f'SELECT * FROM "{t}"'):
                for v in row:
                    if isinstance(v, bytes):
                        n += v.count(secret.encode())
                    elif isinstance(v, str):
                        n += v.count(secret)
    finally:
        con.close()
    return n


def _file_count(paths, secret: str) -> int:
    return sum(p.read_bytes().count(secret.encode()) for p in paths if p.exists())


def test_sqlite_backend_each_step_matches_sql_and_bytes(tmp_path):
    with _build("sqlite", workdir=tmp_path) as target:
        _plant(target)
        dbs = [tmp_path / "store.sqlite", tmp_path / "checkpoints.sqlite"]
        files = [p for db in dbs for p in (db, Path(f"{db}-wal"), Path(f"{db}-journal"))]
        phases = {"before": None, "forget": lambda: (target.forget_secret(S1, U1), target.forget_user(U2)),
                  **target.deletion_steps()}
        for phase, act in phases.items():
            if act is not None:
                act()
            scans = scan_all(target.surfaces(), [S1, S2])
            for s in (S1, S2):
                assert _copies(scans, "sqlite_rows", s) == sum(_sqlite_rows_count(db, s) for db in dbs), (phase, s)
                assert _copies(scans, "disk_sqlite", s) == _file_count(files, s), (phase, s)
            if phase == "before":
                assert all(_copies(scans, x, s) > 0 for x in ("store_api", "sqlite_rows", "disk_sqlite", "checkpoint")
                           for s in (S1, S2))
            else:
                assert _copies(scans, "store_api", S1) == 0
                assert _copies(scans, "checkpoint", S2) == 0


# --------------------------------------------------------------------------- postgres


def _pg_rows_count(uri: str, secret: str) -> int:
    import psycopg

    tables = ["store", "store_vectors", "checkpoints", "checkpoint_blobs", "checkpoint_writes"]
    n = 0
    with psycopg.connect(uri) as conn:
        # in whatever schema the tables live (the target keeps them in a schema of its own)
        found = conn.execute("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
                             "c.relnamespace WHERE c.relkind = 'r' AND c.relname = ANY(%s)", (tables,)).fetchall()
        for schema, t in found:
            for row in conn.execute(f'SELECT * FROM "{schema}"."{t}"'):
                for v in row:
                    if isinstance(v, bytes):
                        n += v.count(secret.encode())
                    elif isinstance(v, (dict, list)):
                        n += json.dumps(v, ensure_ascii=False).count(secret)
                    elif isinstance(v, str):
                        n += v.count(secret)
    return n


def _pg_grep(uri: str, pgdata: Path, secrets: list[str]) -> dict[str, dict[str, int]]:
    """Copies of each secret in the data directory by area, found with a plain byte
    count after a CHECKPOINT: the store's and saver's table files (paths from the
    server), pg_wal, and all files."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        heap = {str(pgdata / r[0]) for r in conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relname = ANY(%s)",
            (["store", "store_vectors", "checkpoints", "checkpoint_blobs", "checkpoint_writes"],)).fetchall()}
    out = {s: {"heap": 0, "wal": 0, "all": 0} for s in secrets}
    for d, _, fs in os.walk(pgdata):
        for f in fs:
            p = Path(d) / f
            if not p.is_file():  # the server's Unix socket lives here
                continue
            data = p.read_bytes()
            for s in secrets:
                n = data.count(s.encode())
                out[s]["all"] += n
                out[s]["wal"] += n if "pg_wal" in p.parts else 0
                out[s]["heap"] += n if str(p) in heap else 0
    return out


DISK = ("disk_pg_heap", "disk_pg_index", "disk_pg_toast", "disk_pg_wal", "disk_pg_other")


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_postgres_backend_each_deletion_step_matches_sql_and_grep(pg_server, pg_db):
    with _build("postgres", pg_uri=pg_db, pgdata=pg_server.pgdata) as target:
        _plant(target)
        seen = {}
        phases = {"before": None, "forget": lambda: (target.forget_secret(S1, U1), target.forget_user(U2)),
                  **target.deletion_steps()}
        assert list(phases)[2:] == ["vacuum", "vacuum_full", "checkpoint_wal"]
        for phase, act in phases.items():
            if act is not None:
                act()
            scans = scan_all(target.surfaces(), [S1, S2])
            greps = _pg_grep(pg_db, pg_server.pgdata, [S1, S2])
            for s in (S1, S2):
                grep = greps[s]
                got = {x: _copies(scans, x, s) for x in ("store_api", "pg_rows", "checkpoint", *DISK)}
                seen[(phase, s)] = got
                assert got["pg_rows"] == _pg_rows_count(pg_db, s), (phase, s, got)
                assert got["disk_pg_heap"] == grep["heap"], (phase, s, got, grep)
                assert got["disk_pg_wal"] == grep["wal"], (phase, s, got, grep)
                assert sum(got[x] for x in DISK) == grep["all"], (phase, s, got, grep)
        for s in (S1, S2):  # every surface shows the planted copies before the forget
            b = seen[("before", s)]
            assert all(b[x] > 0 for x in ("store_api", "pg_rows", "checkpoint", "disk_pg_heap", "disk_pg_wal")), b
        for phase in ("forget", "vacuum", "vacuum_full", "checkpoint_wal"):
            assert seen[(phase, S1)]["store_api"] == seen[(phase, S2)]["store_api"] == 0
            assert seen[(phase, S2)]["pg_rows"] == 0  # forget_user deleted the threads too
            assert seen[(phase, S1)]["pg_rows"] > 0  # user 1's conversation is kept by the saver
        # what the issue reports, checked here: the API delete leaves dead tuples in the
        # heap file, and the WAL keeps the secret after VACUUM FULL
        assert seen[("forget", S2)]["disk_pg_heap"] > 0
        assert seen[("vacuum_full", S2)]["disk_pg_wal"] > 0


@pytest.mark.timeout(120)
def test_postgres_data_directory_comes_from_the_server_or_is_not_checked(pg_server, pg_db):
    """Without pgdata, a role that may read the server's settings finds the data
    directory (the same files a grep finds); a role that may not leaves every disk
    surface not checked, with the reason, never 0."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with _build("postgres", pg_uri=pg_db) as target:
        _plant(target)
        scans = scan_all(target.surfaces(), [S1])
        grep = _pg_grep(pg_db, pg_server.pgdata, [S1])[S1]
        assert scans["disk_pg_wal"].status == "checked" and scans["disk_pg_wal"].copies(S1) == grep["wal"] > 0
        assert scans["pg_rows"].copies(S1) == _pg_rows_count(pg_db, S1) > 0
    role = "memkit_plain_" + os.urandom(4).hex()
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # needs a superuser, as in production
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT ALL ON DATABASE "{conninfo_to_dict(pg_db)["dbname"]}" TO "{role}"')
        conn.execute(f'GRANT ALL ON SCHEMA public TO "{role}"')
    plain = make_conninfo(**{**conninfo_to_dict(pg_db), "user": role})
    with _build("postgres", pg_uri=plain) as target:
        _plant(target)
        scans = scan_all(target.surfaces(), [S1])
        for x in DISK:
            assert scans[x].status == "not_checked" and scans[x].copies(S1) is None
            assert "data directory" in scans[x].reason
        assert scans["pg_rows"].copies(S1) == _pg_rows_count(pg_db, S1) > 0


def test_target_defaults_are_not_applicable(embedder):  # PR's study rule embeds with MiniLM
    class Bare(Target):
        name = "bare"

        def feed(self, turns, session_id, date, user_id):
            pass

        def ask(self, text, user_id, thread_id):
            return ""

    t = Bare()
    assert not t.supports("forget_secret") and not t.supports("forget_user")
    with pytest.raises(NotApplicable):
        t.forget_secret("x", "u")
    from evaluators.audit import audit

    res = audit(t, forget=True, n=1, n_resamples=10)
    # a forget the target has not is n/a: no after-forget numbers, not zeros
    assert res.forget_mode.startswith("n/a") and res.aer_after is None and res.pr_after is None
    assert "n/a: bare has no forget_secret" in res.report and res.residue is None  # nothing to scan
    with pytest.raises(ValueError, match="module:factory"):
        load_target("nonsense")


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_cli_audits_langgraph_on_postgres_end_to_end(pg_server, pg_db, embedder):
    """`memkit audit langgraph --backend postgres` with every step: the store and the
    deleted threads are clean in SQL, the WAL is not, so `--fail-on residue` fails."""
    import typer
    from typer.testing import CliRunner

    from evaluators.cli.audit import register as register_cli

    app = typer.Typer()
    register_cli(app)
    app.command("noop")(lambda: None)
    res = CliRunner().invoke(app, [
        "audit", "langgraph", "--backend", "postgres", "--pg-uri", pg_db, "--pgdata", str(pg_server.pgdata),
        "--n", "1", "--n-resamples", "10", "--delete-threads", "--step", "vacuum", "--step", "vacuum_full",
        "--step", "checkpoint_wal", "--fail-on", "residue", "--json"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    assert out["phases"] == ["before", "forget", "delete_threads", "vacuum", "vacuum_full", "checkpoint_wal"]
    before = out["surface_scans"]["before"]
    assert all(before[s]["holders"] == 1 for s in ("store_api", "pg_rows", "disk_pg_heap", "disk_pg_wal", "checkpoint"))
    assert out["residue"]["store_api"] == out["residue"]["pg_rows"] == out["residue"]["checkpoint"] == 0
    assert out["residue"]["disk_pg_heap"] == 0 and out["residue"]["disk_pg_wal"] == 1
    assert out["AER"]["max"] == 1.0 and out["AER_after"]["max"] == 0.0
    assert [f["failed"] for f in out["fail_on"]] == [True]
    # independently: no live row of the store's or saver's tables holds the canary
    assert _pg_rows_count(pg_db, out["canaries"][0]["value"]) == 0


@pytest.mark.timeout(120)
def test_users_postgres_store_in_the_schema_of_its_search_path(pg_server, pg_db):
    """A deployment whose URI sets ``search_path=agent``: the user's own PostgresStore and
    PostgresSaver create their tables there, and memkit, given only the objects, reads
    the live rows and heap files there (not in ``public``)."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row

    from evaluators.targets.agent import as_target
    from evaluators.targets.langgraph import build_graphs

    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA agent")
    sep = "&" if "?" in pg_db else "?"
    uri = f"{pg_db}{sep}options=-csearch_path%3Dagent"
    opts = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with psycopg.connect(uri, **opts) as sconn, psycopg.connect(uri, **opts) as cconn:
        store = PostgresStore(sconn, index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8),
                                            "fields": ["content"]})
        store.setup()
        saver = PostgresSaver(cconn)
        saver.setup()
        agent, writer = build_graphs(store, saver)
        with as_target({"agent": agent, "store": store, "checkpointer": saver, "cleanup": False,
                        "feed": lambda t, s, d, u: writer.invoke(
                            {"turns": t, "session_id": s, "date": d, "user_id": u},
                            config={"configurable": {"thread_id": f"{u}:{s}", "user_id": u}})}) as target:
            _plant(target)
            scans = scan_all(target.surfaces(), [S1])
        with psycopg.connect(pg_db) as conn:
            assert conn.execute("SELECT to_regclass('public.store')").fetchone()[0] is None
            assert conn.execute("SELECT count(*) FROM agent.store WHERE value::text LIKE %s",
                                (f"%{S1}%",)).fetchone()[0] >= 1
            conn.execute("CHECKPOINT")
            heap = conn.execute("SELECT pg_relation_filepath('agent.store')").fetchone()[0]
        assert scans["pg_rows"].copies(S1) >= 1
        assert any(loc.startswith("agent.store:") for loc in scans["pg_rows"].hits[S1])
        grep = (pg_server.pgdata / heap).read_bytes().count(S1.encode())
        assert grep >= 1 and sum(heap in loc for loc in scans["disk_pg_heap"].hits[S1]) == grep


@pytest.mark.timeout(120)
def test_postgres_toast_and_compressed_values(pg_server, pg_db):
    """A large value PostgreSQL cannot compress goes to the TOAST table as it is
    (found there byte by byte); one it compresses is in no file as bytes (grep), and
    the disk surfaces decompress it (pg_column_compression says pglz)."""
    import random

    import psycopg

    big, squeezed = "T0A-SAFFRON-7310", "C0M-MAUVE-2207"  # secrets no other test plants on this server
    rng = random.Random(0)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ") for _ in range(6000))
    with _build("postgres", pg_uri=pg_db, pgdata=pg_server.pgdata) as target:
        target.store.put(("memories", U1), "big", {"content": noise[:3000] + f" token {big} " + noise[3000:]})
        scans = scan_all(target.surfaces(), [big])
        with psycopg.connect(pg_db, autocommit=True) as conn:
            toast = [r[0] for r in conn.execute(
                "SELECT pg_relation_filepath(reltoastrelid) FROM pg_class WHERE relname = 'store' "
                "AND relkind = 'r'").fetchall()]
        grep = sum((pg_server.pgdata / t).read_bytes().count(big.encode()) for t in toast)
        assert scans["disk_pg_toast"].copies(big) == grep == 1
        assert scans["pg_rows"].copies(big) == 1
        target.store.put(("memories", U1), "squeezed", {"content": f"token {squeezed} " + "the same words again " * 400})
        scans = scan_all(target.surfaces(), [squeezed])
        assert scans["pg_rows"].copies(squeezed) == 1
        with psycopg.connect(pg_db, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            schema = conn.execute("SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                  "WHERE c.relname = 'store' AND c.relkind = 'r'").fetchone()[0]
            assert conn.execute(f"SELECT pg_column_compression(value) FROM \"{schema}\".store "
                                "WHERE key = 'squeezed'").fetchone()[0] == "pglz"
        files = [p for p in pg_server.pgdata.rglob("*") if p.is_file()]
        assert sum(p.read_bytes().count(squeezed.encode()) for p in files) == 0  # compressed: no bytes to grep ...
        assert scans["disk_pg_heap"].copies(squeezed) == 1  # ... memkit decompresses the value in the heap
        assert scans["disk_pg_wal"].copies(squeezed) >= 1  # and in the WAL record that inserted it
        assert scans["disk_pg_heap"].partial is None


@pytest.mark.timeout(120)
def test_langmem_on_postgres_writes_and_deletes_rows(pg_db):
    with load_target("langmem", backend="postgres", pg_uri=pg_db, embed=DeterministicFakeEmbedding(size=8),
                     dims=8) as target:
        _plant(target)
        assert _copies(scan_all(target.surfaces(), [S1]), "pg_rows", S1) == _pg_rows_count(pg_db, S1) > 0
        target.forget_user(U1)
        after = scan_all(target.surfaces(), [S1])
        assert _copies(after, "store_api", S1) == _copies(after, "pg_rows", S1) == _pg_rows_count(pg_db, S1) == 0
        assert after["disk_pg_heap"].status == "checked"  # no pgdata given: the server says where it is


@pytest.mark.timeout(120)
def test_a_wrong_pgdata_or_uri_is_refused_before_anything_is_created(pg_server, pg_db, tmp_path):
    """`--pgdata` of another cluster (PG_VERSION and a pg_control with another system
    identifier) and bad URIs: one line, exit 2, and no schema or table appears in the
    database (plain SQL)."""
    import psycopg
    import typer
    from typer.testing import CliRunner

    from evaluators.cli.audit import register

    other = tmp_path / "other"
    (other / "global").mkdir(parents=True)
    (other / "PG_VERSION").write_text((pg_server.pgdata / "PG_VERSION").read_text())
    control = bytearray((pg_server.pgdata / "global" / "pg_control").read_bytes())
    control[0] ^= 0xFF  # the system identifier is the first 8 bytes
    (other / "global" / "pg_control").write_bytes(bytes(control))
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    for args, msg in ((["--pg-uri", pg_db, "--pgdata", str(other)], "another cluster"),
                      (["--pg-uri", pg_db + "_missing"], "cannot connect"),
                      (["--pg-uri", "postgresql://u@127.0.0.1:notaport/x"], "--pg-uri")):
        res = CliRunner().invoke(app, ["audit", "langgraph", "--backend", "postgres", *args])
        assert res.exit_code == 2 and msg in res.output and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1
    with psycopg.connect(pg_db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'memkit_%'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'store'").fetchone()[0] == 0
