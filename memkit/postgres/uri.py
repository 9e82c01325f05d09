"""What names a PostgreSQL database on a command line, answered without importing the
readers (:mod:`memkit.postgres.database`)."""

from __future__ import annotations

__all__ = ["is_postgres_uri"]


def is_postgres_uri(text: str) -> bool:
    """Whether ``text`` is a PostgreSQL connection URI (``postgresql://``, ``postgres://``)."""
    return text.startswith(("postgresql://", "postgres://"))
