"""Your agent, evaluated as fully as memkit's own: an agent written as LangGraph's
how-to writes it (tests/howto_agent.py), on its real stores and checkpointers, passed
to ``audit`` and to ``memkit audit module:factory`` as ``{"agent", "store",
"checkpointer"}`` only. Every surface of that store and saver is scanned before and
after the forget; counts are checked against the backends' own APIs, plain SQL and a
plain byte count of the files (not memkit)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import howto_agent
import pytest

from evaluators.audit import audit
from evaluators.targets.agent import as_target
from evaluators.targets.base import scan_all

TESTS = Path(__file__).resolve().parent

SURFACES = {
    "memory": {"store_api", "store_vectors", "checkpoint"},
    "sqlite": {"store_api", "store_vectors", "sqlite_rows", "disk_sqlite", "checkpoint"},
    "postgres": {"store_api", "store_vectors", "pg_rows", "disk_pg_heap", "disk_pg_index", "disk_pg_toast",
                 "disk_pg_wal", "disk_pg_other", "checkpoint"},
}


def _made(backend: str, tmp_path: Path, pg_db: str | None = None) -> dict:
    return howto_agent.build(backend, pg_uri=pg_db, workdir=str(tmp_path / "sqlite"))


def _wal_grep(pgdata: Path, secret: str) -> set[str]:
    """``pg_wal/<file>@<offset>`` of every plain byte copy (what ``grep -a -b`` finds)."""
    out = set()
    for p in (pgdata / "pg_wal").rglob("*"):
        if p.is_file():
            data, at = p.read_bytes(), -1
            while (at := data.find(secret.encode(), at + 1)) >= 0:
                out.add(f"{p.relative_to(pgdata)}@{at}")
    return out


@pytest.mark.timeout(600)
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_a_howto_agent_on_its_own_store_and_saver(backend, tmp_path, request):
    pg = request.getfixturevalue("pg_server") if backend == "postgres" else None
    pg_db = request.getfixturevalue("pg_db") if backend == "postgres" else None
    made = _made(backend, tmp_path, pg_db)
    res = audit({**made, "cleanup": False}, forget=True, n=2, seed=0, n_resamples=50)
    # the agent was fed by talking to it, recalled its memories, and forgot through BaseStore.delete
    assert res.forget_mode == "BaseStore.delete" and res.exercised
    assert res.aer["max"] > 0 and res.aer_after["max"] == 0.0
    assert res.phases == ["before", "forget"]
    assert set(res.surface_scans["before"]) == SURFACES[backend]
    before, after = res.surface_scans["before"], res.surface_scans["forget"]
    for name in ("store_api", "checkpoint"):
        assert before[name]["holders"] == 2, (name, before[name])
    assert after["store_api"]["holders"] == 0 and after["checkpoint"]["holders"] == 2  # threads are kept
    store, saver = made["store"], made["checkpointer"]
    secrets = [c["value"] for c in res.canaries]
    # independent: the store's own API holds none of the canaries after the forget
    for c in res.canaries:
        items = store.search(("memories", c["user_id"]), limit=1000)
        assert not any(c["value"] in json.dumps(i.value) for i in items)
    if backend == "sqlite":  # plain SQL over the files the backends wrote
        con = sqlite3.connect(tmp_path / "sqlite" / "threads.sqlite")
        rows = [v for t in ("checkpoints", "writes") for r in con.execute(f"SELECT * FROM {t}") for v in r]
        con.close()
        in_rows = sum(any(s.encode() in v for v in rows if isinstance(v, bytes)) for s in secrets)
        assert after["sqlite_rows"]["holders"] == in_rows == 2
    if backend == "postgres":
        import psycopg

        # the WAL keeps every canary after the forget: memkit's scan equals a byte count
        target = as_target({**made, "cleanup": False})
        with psycopg.connect(pg_db, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        scans = scan_all(target.surfaces(), secrets)
        for s in secrets:
            grep = _wal_grep(pg.pgdata, s)
            found = {loc.split(" ")[0] for loc in scans["disk_pg_wal"].hits[s]}
            # every copy grep finds, at its offset; memkit may find more (decoded records)
            assert grep and grep <= found, (sorted(grep - found)[:3], sorted(found)[:3])
        assert after["disk_pg_wal"]["holders"] == 2
        target.close()
        store.conn.close()
        saver.conn.close()


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_cli_audit_of_a_users_factory_goes_green_on_postgres_after_deleting_threads_and_vacuum_full(
        pg_server, pg_db, monkeypatch):
    """`memkit audit howto_agent:build --backend postgres`: the user's own tables; the
    gate that excludes the WAL passes once the threads are deleted and VACUUM FULL has
    rewritten the tables; the WAL still holds the canaries (reported, not gated); no
    synthetic user is left in the database (plain SQL)."""
    import psycopg
    import typer
    from typer.testing import CliRunner

    from evaluators.cli.audit import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    monkeypatch.chdir(TESTS)  # the user's project: the factory imports from the current directory
    common = ["audit", "howto_agent:build", "--backend", "postgres", "--pg-uri", pg_db, "--pgdata",
              str(pg_server.pgdata), "--n", "2", "--n-resamples", "20", "--json"]
    res = CliRunner().invoke(app, [*common, "--delete-threads", "--step", "vacuum_full",
                                   "--fail-on", "residue:-disk_pg_wal", "--fail-on", "unchecked:-disk_pg_wal",
                                   "--fail-on", "vacuous"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["phases"] == ["before", "forget", "delete_threads", "vacuum_full"]
    assert out["residue"]["disk_pg_wal"] == 2 and out["residue"]["pg_rows"] == 0
    assert all(v == 0 for k, v in out["residue"].items() if k != "disk_pg_wal")
    assert "memkit audit: scanning" in res.stderr  # progress on stderr
    with psycopg.connect(pg_db) as conn:  # nothing of memkit's synthetic users is left
        for table in ("store", "checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    # the same gate without the exclusion fails on the WAL
    res = CliRunner().invoke(app, [*common, "--delete-threads", "--step", "vacuum_full", "--fail-on", "residue"])
    assert res.exit_code == 1 and "disk_pg_wal" in json.loads(res.stdout)["fail_on"][0]["detail"]


@pytest.mark.timeout(300)
def test_cli_audit_of_a_users_factory_on_memory_and_bad_inputs(monkeypatch, tmp_path):
    import typer
    from typer.testing import CliRunner

    from evaluators.cli.audit import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    monkeypatch.chdir(TESTS)
    res = CliRunner().invoke(app, ["audit", "howto_agent:build", "--n", "2", "--n-resamples", "20", "--json",
                                   "--fail-on", "residue:store_api"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out["surface_scans"]["before"]) == SURFACES["memory"] and out["residue"]["store_api"] == 0
    # every bad input is one line, exit 2, before any work (no "feeding" on stderr)
    for args, msg in ((["--junit", str(tmp_path / "no" / "x.xml")], "does not exist"),
                      (["--forget-scope", "all"], "--forget-scope"),
                      (["--n", "0"], "--n"),
                      (["--mode", "shred"], "--mode"),
                      (["--pg-uri", "postgresql://nobody@127.0.0.1:1/x"], "cannot connect"),
                      (["--pg-uri", "not a uri = = ="], "--pg-uri"),
                      (["--fail-on", "residue:"], "--fail-on")):
        res = CliRunner().invoke(app, ["audit", "howto_agent:build", *args])
        assert res.exit_code == 2 and msg in res.output, (args, res.output)
        assert "feeding" not in res.output
    res = CliRunner().invoke(app, ["audit", "langgraph", "--mode", "raw_only"])
    assert res.exit_code == 2 and "--mode" in res.output


def test_a_vacuous_agent_is_flagged():
    """An agent that never recalls anything: AER 0 before and after; the result says
    the forget was not exercised and `--fail-on vacuous` trips."""
    from evaluators.targets.gates import evaluate, parse_condition

    seen: dict[str, list[str]] = {}
    res = audit(lambda q, u: "I do not remember anything.",
                feed=lambda turns, sid, date, user: seen.setdefault(user, []).append(sid),
                forget=lambda secret, user: None, n=2, n_resamples=20)
    assert res.aer["max"] == 0.0 and res.exercised is False
    assert "not exercised" in res.report
    [(cond, hit, msg)] = evaluate(res, [parse_condition("vacuous")])
    assert hit and "not exercised" in msg

