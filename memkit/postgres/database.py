"""Where does a secret still live in a PostgreSQL database? ``memkit residue
postgresql://...`` (:func:`scan_database`).

For a database an application (a LangGraph ``PostgresStore``, your own tables) deleted
from: every table of every schema the role can read (or those named), their live
rows through SQL (``pg_rows``), and, with the server's data directory on this
machine, the bytes of their heap, index and TOAST files, of the WAL and of every
other file, decoded as PostgreSQL wrote them (:mod:`memkit.postgres.surfaces`). The result
is a :class:`memkit.residue.chroma.ResidueReport` over :data:`PG_SURFACES`: ``clean`` only
when every surface was read and decoded in full and holds no copy.

Read-only: SQL is ``SELECT``/``SHOW`` only, in a session set
``default_transaction_read_only``; ``CHECKPOINT`` runs only with ``flush=True``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memkit.postgres.surfaces import DISK_SURFACES, PgScan, readable_tables, scan_disk, scan_rows
from memkit.postgres.uri import is_postgres_uri
from memkit.residue.report import Hit, ResidueReport
from memkit.scan.matching import matcher

__all__ = ["PG_SURFACES", "PgConnectError", "data_directory", "is_postgres_uri", "scan_database"]

PG_SURFACES: tuple[str, ...] = ("pg_rows", *DISK_SURFACES)
"""The surfaces of a PostgreSQL report: live rows, then the data directory's files."""


class PgConnectError(ValueError):
    """The URI is malformed, the server cannot be reached, or the database or role
    does not exist (one line: what and why)."""


def _connect(uri: str) -> Any:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(uri)
    except psycopg.ProgrammingError as exc:
        raise PgConnectError(f"malformed PostgreSQL URI: {str(exc).splitlines()[0]}") from exc
    port = str(info.get("port") or "")
    if port and not all(p.strip().isdigit() for p in port.split(",")):
        raise PgConnectError(f"malformed PostgreSQL URI: port {port!r} is not a number")
    try:
        return psycopg.connect(uri, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
        raise PgConnectError(f"cannot connect to PostgreSQL: {lines[-1] if lines else type(exc).__name__}") from exc


def _system_identifier(conn: Any) -> int | None:
    try:
        return int(conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()[0])
    except Exception:  # noqa: BLE001 - needs privileges the role may lack
        return None


def _local_identifier(pgdata: Path) -> int | None:
    try:
        with open(pgdata / "global" / "pg_control", "rb") as fh:
            return struct.unpack("<Q", fh.read(8))[0]
    except OSError:
        return None


def data_directory(conn: Any, pgdata: str | Path | None) -> tuple[Path | None, str | None]:
    """The server's data directory on this machine (``pgdata`` checked against the
    server's system identifier, else ``SHOW data_directory`` when it is readable here
    and is this server's), or ``None`` and why not.

    Raises:
        ValueError: ``pgdata`` is given but is not this server's data directory.
    """
    server_id = _system_identifier(conn)
    if pgdata is not None:
        root = Path(pgdata).expanduser()
        if not (root / "PG_VERSION").is_file():
            raise ValueError(f"--pgdata {root}: not a PostgreSQL data directory (no PG_VERSION)")
        local = _local_identifier(root)
        if server_id is not None and local is not None and local != server_id:
            raise ValueError(f"--pgdata {root}: the data directory of another cluster (system identifier "
                             f"{local}, the server's is {server_id})")
        return root, None
    try:
        shown = str(conn.execute("SHOW data_directory").fetchone()[0])
    except Exception:  # noqa: BLE001 - needs superuser or pg_read_all_settings
        return None, "the server's data directory is not known here (pass --pgdata DIR on the server's machine)"
    root = Path(shown)
    local = _local_identifier(root) if (root / "PG_VERSION").is_file() and os.access(root, os.R_OK) else None
    if local is None:
        return None, (f"the server's data directory {shown} is not readable on this machine (pass --pgdata DIR "
                      "on the server's machine)")
    if server_id is None or local != server_id:
        return None, (f"{shown} on this machine cannot be shown to be this server's data directory (pass "
                      "--pgdata DIR to vouch for it)")
    return root, None


def _add(report: ResidueReport, scan: PgScan, index: dict[str, int], many: bool, secrets: Sequence[str]) -> None:
    masks = [matcher(s) for s in dict.fromkeys(secrets)]
    for hit in scan.found:
        loc = hit.location
        for m in masks:
            loc = m.text.sub("[SECRET]", loc)
        report.add(Hit(scan.surface, loc, hit.kind, hit.snippet, index[hit.secret] if many else None))
    if not scan.readable:
        report.skip(scan.surface, scan.reason or "not readable")
    for line in scan.partial:
        report.skip(scan.surface, line)
    for note in scan.notes:
        report.notes.append(f"{scan.surface}: {note}")
    if scan.decoded:
        report.notes.append(f"{scan.surface} read: " + ", ".join(f"{v} {k}" for k, v in scan.decoded.items()))


def scan_database(
    uri: str,
    secrets: Sequence[str],
    *,
    pgdata: str | Path | None = None,
    tables: Sequence[str] | None = None,
    schemas: Sequence[str] | None = None,
    flush: bool = False,
) -> ResidueReport:
    """Find every copy of ``secrets`` in a PostgreSQL database (module doc).

    Args:
        uri: ``postgresql://user@host/db`` (options such as ``search_path`` included).
        secrets: the strings to look for (one or many; :mod:`memkit.scan.matching`).
        pgdata: the server's data directory on this machine; None: found with ``SHOW
            data_directory`` when the role may read it, the directory is readable
            here and its ``pg_control`` has the server's system identifier; else the
            disk surfaces are not checked (with the reason).
        tables: only these tables (``name`` as ``search_path`` finds it, or
            ``schema.name``); default every table.
        schemas: only the tables of these schemas.
        flush: run ``CHECKPOINT`` first so that the files hold what shared buffers
            hold (needs superuser or ``pg_checkpoint``).

    Returns:
        :class:`~memkit.residue.chroma.ResidueReport` over :data:`PG_SURFACES`; with several
        secrets each hit has its ``secret_index``.

    Raises:
        PgConnectError: a malformed URI, an unreachable server, a missing database.
        ValueError: no secret, a table or schema that does not exist, a ``pgdata``
            that is not this server's data directory.
    """
    secrets = list(secrets)
    if not secrets or not all(isinstance(s, str) and s.strip() for s in secrets):
        raise ValueError("no secret to look for (an empty string matches everywhere)")
    conn = _connect(uri)
    try:
        root, why = data_directory(conn, pgdata)
        conn.execute("SET default_transaction_read_only = on")
        found, refused = readable_tables(conn, schemas=schemas, tables=tables)
        info = conn.info
        report = ResidueReport(target=f"postgresql://{info.user}@{info.host or 'localhost'}/{info.dbname}",
                               names=PG_SURFACES)
        many = len(secrets) > 1
        index: dict[str, int] = {}
        for i, s in enumerate(secrets):
            index.setdefault(s, i)
        _add(report, scan_rows(conn, found, secrets), index, many, secrets)
        for t in refused:
            report.skip("pg_rows", f"{t}: this role may not SELECT from it")
        for surface, scan in scan_disk(conn, root, found, secrets, flush=flush).items():
            if scan.readable is False and root is None:
                report.skip(surface, why or "the data directory is not readable here")
                continue
            _add(report, scan, index, many, secrets)
        if root is not None and not flush:
            report.notes.append("no CHECKPOINT was run (--checkpoint): table files may lag the server's shared "
                                "buffers; the WAL holds every committed change")
        report.notes.append(f"tables: {', '.join(t.label for t in found) or 'none'}")
    finally:
        conn.close()
    if many:
        from memkit.scan.multi import mask_secret

        report.secret_labels = [mask_secret(s) for s in secrets]
    return report
