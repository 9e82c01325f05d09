"""Inputs a command checks before any work: each bad value is one line naming the
option, so a run that cannot succeed stops before it starts anything."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["InputError", "check_audit_inputs", "check_output_file", "check_pg_uri"]


class InputError(ValueError):
    """A command-line value that cannot work (the message names the option)."""


def check_pg_uri(uri: str, option: str = "--pg-uri", pgdata: Path | None = None) -> None:
    """Parse ``uri`` and connect to it once (5 s), closing at once; with ``pgdata``,
    check that it is that server's data directory (its system identifier).

    Raises:
        InputError: a malformed string, a server that does not answer, a database that
            does not exist, refused credentials (the server's first line), a data
            directory of another server, or psycopg missing (the extra to install).
    """
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:
        raise InputError(f"{option} needs psycopg: pip install -e '.[postgres]'") from exc
    try:
        conninfo_to_dict(uri)
    except psycopg.ProgrammingError as exc:
        raise InputError(f"{option}: not a PostgreSQL connection string ({str(exc).splitlines()[0]})") from exc
    try:
        with psycopg.connect(uri, connect_timeout=5, autocommit=True) as conn:
            if pgdata is not None:
                from memkit.postgres.database import data_directory

                try:
                    data_directory(conn, pgdata)
                except ValueError as exc:
                    raise InputError(str(exc)) from exc
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{option}: cannot connect: {first}") from exc


def check_output_file(path: Path, option: str) -> None:
    """A file a command will write (``--junit``, ``--sarif``): not a directory, in a
    directory that exists and is writable.

    Raises:
        InputError: naming the option and what is wrong.
    """
    parent = path.expanduser().resolve().parent
    if path.is_dir():
        raise InputError(f"{option} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise InputError(f"{option} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{option} {path}: the directory {parent} is not writable")


def check_audit_inputs(*, forget_scope: str, mode: str | None, junit: Path | None, pg_uri: str | None,
                       pgdata: Path | None, data: str, target: str | None, matrix: bool,
                       out: Path | None, sarif: Path | None = None) -> None:
    """Every input of ``memkit audit`` that can be checked without running it.

    Raises:
        InputError: naming the option and what is wrong.
    """
    from evaluators.targets.base import BUILTIN
    from graphs.forget import DELETION_MODES

    if not matrix and not target:
        raise InputError("give a TARGET (or --matrix)")
    if forget_scope not in ("secret", "user"):
        raise InputError(f"--forget-scope {forget_scope!r}: use 'secret' or 'user'")
    if mode is not None and mode != "none" and mode not in DELETION_MODES:
        raise InputError(f"--mode {mode!r}: use 'none' or a deletion mode ({', '.join(DELETION_MODES)})")
    if mode not in (None, "none") and target in BUILTIN and target != "memkit":
        raise InputError(f"--mode {mode}: target {target} forgets through its own API; --mode chooses a deletion "
                         "mode of memkit's stores (target memkit, or your factory's MemkitStore)")
    for path, option in ((junit, "--junit"), (sarif, "--sarif")):
        if path is not None:
            check_output_file(path, option)
    if data != "synthetic" and not Path(data).expanduser().is_file():
        raise InputError(f"--data {data}: no such file (give a LongMemEval JSON file or 'synthetic')")
    if pgdata is not None and not (pgdata.expanduser() / "PG_VERSION").is_file():
        raise InputError(f"--pgdata {pgdata}: not a PostgreSQL data directory (no PG_VERSION)")
    if out is not None and not matrix:
        raise InputError("--out applies to --matrix")
    if pg_uri:
        check_pg_uri(pg_uri, pgdata=pgdata)
