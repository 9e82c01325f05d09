"""PostgreSQL read the way PostgreSQL writes it: heap and TOAST pages
(:mod:`memkit.postgres.pages`), the WAL (:mod:`memkit.postgres.wal`), every layer
decoded (:mod:`memkit.postgres.decode`); a LangGraph agent's tables and data
directory as surfaces (:mod:`memkit.postgres.surfaces`); a whole database for
``memkit residue postgresql://`` (:mod:`memkit.postgres.database`)."""

from typing import Any

__all__ = ["PG_SURFACES", "PgConnectError", "data_directory", "is_postgres_uri", "scan_database"]


def __getattr__(name: str) -> Any:
    """The readers are imported on first use: ``memkit residue`` asks
    :mod:`memkit.postgres.uri` whether a path is a database before it forks its workers."""
    if name in __all__:
        from memkit.postgres import database

        return getattr(database, name)
    raise AttributeError(f"module 'memkit.postgres' has no attribute {name!r}")
