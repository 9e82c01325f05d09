"""A real PostgreSQL 16 server with pgvector for the tests (pytest plugin, loaded by
conftest.py).

PyPI's ``pgserver`` (the ``postgres`` extra) bundles PostgreSQL 16 and pgvector in a
wheel; ``pg_server`` starts one server per test session on a Unix socket in its data
directory (about 2-4 s) and stops it at the end; ``pg_db`` gives each test a fresh
database on it. Autovacuum is off on this server so that what a test finds in the
files changes only by what the test does (a background VACUUM would prune dead
tuples at an unpredictable moment).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class PgServer:
    """A running server: ``uri(database)`` connection strings and its ``pgdata``."""

    pgdata: Path
    server: object

    def uri(self, database: str = "postgres") -> str:
        """Connection string of ``database`` (Unix socket)."""
        return self.server.get_uri(database)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL 16 + pgvector server (pgserver) for the whole session."""
    try:
        import pgserver  # noqa: F401
        import psycopg  # noqa: F401
    except ModuleNotFoundError as exc:  # part of the dev extra: a missing install is a failure
        pytest.fail(f"{exc.name} is not installed: pip install -e '.[postgres]' (bash scripts/setup.sh dev)",
                    pytrace=False)
    from evaluators.targets.matrix import temporary_postgres

    with temporary_postgres() as (server, root):  # the library's own server (autovacuum off)
        yield PgServer(pgdata=root, server=server)


@pytest.fixture()
def pg_db(pg_server):
    """A fresh database on :func:`pg_server`: yields its connection string; dropped after."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server.uri(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.uri(name)
    with psycopg.connect(pg_server.uri(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
