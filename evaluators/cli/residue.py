"""``memkit residue PATH SECRET``: where does a secret still live? (the scan itself is
:func:`memkit.residue.chroma.scan`; for ``memkit residue postgresql://... SECRET``,
:func:`memkit.postgres.database.scan_database`)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import typer

from memkit.residue.chroma import NotAChromaDirectory, ResidueReport, scan
from memkit.residue.containers import Limits
from memkit.residue.coverage import coverage_summary
from memkit.residue.pool import WorkerDied


def _print_report(report: ResidueReport, limit: int, lines: list[int] | None = None) -> None:
    """Print ``report`` as tables; ``lines``: the file line number of each secret (the
    "#" column; else its position in the list)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    summary = Table(title=f"memkit residue: {report.target}", title_justify="left")
    summary.add_column("surface")
    summary.add_column("copies", justify="right")
    for s, n in report.counts().items():
        if n:
            shown = f"[bold red]{n}[/]"
        else:
            shown = "not given" if s in report.not_given else "not checked" if s in report.unchecked else "0"
        summary.add_row(s, shown)
    console.print(summary)
    if report.secret_labels:
        left = [r for r in report.per_secret() if r["total"]]
        t = Table(title=f"secrets that remain ({len(left)} of {len(report.secret_labels)})",
                  title_justify="left")
        t.add_column("#", justify="right")
        t.add_column("secret (masked)")
        t.add_column("copies", justify="right")
        t.add_column("surfaces", overflow="fold")
        for r in left[:limit]:
            number = lines[r["index"]] if lines else r["index"] + 1
            t.add_row(str(number), r["secret"], str(r["total"]),
                      ", ".join(f"{k} {v}" for k, v in r["counts"].items()))
        if len(left) > limit:
            t.add_row("", f"... {len(left) - limit} more", "", "")
        console.print(t)
    for s in report.names:
        hits = report.surfaces.get(s, [])
        if not hits:
            continue
        t = Table(title=f"{s} ({len(hits)})")
        t.add_column("location", overflow="fold")
        t.add_column("kind")
        t.add_column("snippet", overflow="fold")
        for h in hits[:limit]:
            t.add_row(h.location, h.kind, h.snippet)
        if len(hits) > limit:
            t.add_row(f"... {len(hits) - limit} more", "", "")
        console.print(t)
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    if report.coverage:
        console.print(coverage_summary(report.coverage), markup=False, highlight=False)
    if report.not_given:
        given = {"cache": "LLM caches (--cache FILE)", "side_sqlite": "side files (--also FILE)",
                 "checkpoint": "LangGraph checkpoints (audit(checkpointer=) / scan(checkpointer=))"}
        console.print("not given, so not scanned: "
                      + "; ".join(v for k, v in given.items() if k in report.not_given))
    if report.verdict == "clean":
        console.print("[green]clean: every surface scanned was checked, no copy found[/]")
    elif report.verdict == "incomplete":
        console.print(f"[bold yellow]incomplete: no copy found on the checked surfaces, but "
                      f"{', '.join(sorted(report.unchecked))} not checked[/]")
    else:
        console.print(f"[bold red]{report.total} copies remain[/]")


def _finish(report: ResidueReport, secrets: list[str], as_json: bool, limit: int, sarif: Path | None,
            baseline: Path | None, root: Path | None, lines: list[int] | None = None) -> None:
    """Print the report (``lines``: each secret's line in --secrets-file), write
    ``--sarif``, and exit 0/1/3; with ``--baseline`` only what is new or worse than
    that run counts (1), then surfaces no longer read (3)."""
    from evaluators.report.baseline import compare, load_baseline, residue_snapshot
    from evaluators.report.sarif import residue_sarif, write_sarif

    delta = None
    if baseline is not None:
        try:
            delta = compare(load_baseline(baseline), residue_snapshot(report))
        except ValueError as exc:
            typer.echo(f"memkit residue: error: {exc}", err=True)
            raise typer.Exit(2) from exc
    if as_json:
        payload = report.to_dict()
        for row in payload.get("per_secret", []) if lines else []:
            row["line"] = lines[row["index"]]
        if delta is not None:
            payload["baseline"] = delta.to_dict()
        typer.echo(json.dumps(payload, indent=2))
    else:
        _print_report(report, limit, lines)
        if delta is not None:
            typer.echo("\n".join(delta.lines("secrets")))
    if sarif is not None:
        write_sarif(residue_sarif(report, secrets, root=root, baseline=delta), sarif)
    if delta is None:
        raise typer.Exit({"clean": 0, "copies remain": 1, "incomplete": 3}[report.verdict])
    raise typer.Exit(1 if delta.regressed else 3 if delta.new_unchecked else 0)


def _check_outputs(sarif: Path | None, baseline: Path | None) -> None:
    """``--sarif`` writable and ``--baseline`` readable before any scan (exit 2)."""
    try:
        if sarif is not None:
            from evaluators.cli.checks import check_output_file

            check_output_file(sarif, "--sarif")
        if baseline is not None:
            from evaluators.report.baseline import load_baseline

            load_baseline(baseline)
    except ValueError as exc:
        typer.echo(f"memkit residue: error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _is_pg(path: str) -> bool:
    from memkit.postgres.uri import is_postgres_uri

    return is_postgres_uri(path)


def _secrets(secret: str | None, secrets_file: Path | None, user_turns: Path | None,
             user: str | None) -> tuple[list[str], list[int] | None]:
    """The secrets given as SECRET, --secrets-file or --user-turns, and for a file each
    secret's line number in it (lines end at "\n" only, as ``grep -n`` counts them;
    blank lines are counted, not secrets).

    Raises:
        ValueError: none or several of them, or an empty file.
    """
    if (secret is not None) + (secrets_file is not None) + (user_turns is not None) != 1:
        raise ValueError("give exactly one of SECRET, --secrets-file, --user-turns")
    if secrets_file is not None:
        text = Path(secrets_file).read_bytes().decode("utf-8")
        numbered = [(n, x.removesuffix("\r")) for n, x in enumerate(text.split("\n"), start=1) if x.strip()]
        if not numbered:
            raise ValueError(f"{secrets_file}: no secrets (one per line)")
        return [x for _, x in numbered], [n for n, _ in numbered]
    if user_turns is not None:
        from memkit.residue.fingerprint import fingerprint, load_turns

        mine, theirs, canaries = load_turns(user_turns, user)
        many = fingerprint(mine, others=theirs, canaries=canaries)
        if not many:
            raise ValueError(f"{user_turns}: the user's turns yield no fingerprint")
        return many, None
    assert secret is not None
    return [secret], None


def _residue_pg(uri: str, secret: str | None, secrets_file: Path | None, user_turns: Path | None,
                user: str | None, pgdata: Path | None, table: list[str], schema: list[str], checkpoint: bool,
                other: dict[str, bool], as_json: bool, limit: int, sarif: Path | None = None,
                baseline: Path | None = None) -> None:
    """``memkit residue postgresql://...``: the report, and exit 0/1/3 (2 on bad input)."""
    from memkit.postgres.database import PgConnectError, scan_database

    try:
        given = [k for k, v in other.items() if v]
        if given:
            raise ValueError(f"{', '.join(given)} cannot be used with a postgresql:// URI")
        secrets, _ = _secrets(secret, secrets_file, user_turns, user)
        report = scan_database(uri, secrets, pgdata=pgdata, tables=table or None, schemas=schema or None,
                               flush=checkpoint)
    except (PgConnectError, FileNotFoundError, ValueError) as exc:
        typer.echo(f"memkit residue: error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except OSError as exc:
        typer.echo(f"memkit residue: error: cannot read the data directory: {exc}", err=True)
        raise typer.Exit(2) from exc
    _finish(report, secrets, as_json, limit, sarif, baseline, pgdata)


def register(app: typer.Typer) -> None:
    """Register ``memkit residue PATH SECRET [--json] [--cache FILE ...]`` (and
    ``memkit residue postgresql://... SECRET [--pgdata DIR] [--table T] [--schema S]``)
    on ``app``.

    Exit status: 0 when every surface was checked and no copy remains, 1 when any
    copy remains, 2 for a path that is not a Chroma directory, a PostgreSQL URI that
    is malformed or cannot be reached, or another input error, 3 when no copy was
    found but some surface could not be checked or decoded in full (the report lists
    which and why). With ``--baseline``: 1 only for copies on a surface that held none
    in the baseline (or of more secrets), else 3 for a surface the baseline read in
    full and this run did not, else 0; the report lists what is new, fixed and known.
    ``--sarif FILE`` writes SARIF 2.1.0 (:mod:`evaluators.report.sarif`).
    """

    @app.command("residue")
    def residue(
        path: str = typer.Argument(None, help="Chroma persist directory to scan, or a PostgreSQL database "
                                              "(postgresql://user@host/db), or --run/--unit/--mode."),
        secret: str = typer.Argument(
            None, help="The string to look for; '-' reads it from stdin (keeps it out of shell "
                       "history). Omit it with --secrets-file or --user-turns."
        ),
        secrets_file: Path = typer.Option(
            None, "--secrets-file", help="Scan for every secret in FILE (one per line; blank "
                                         "lines skipped) in one pass; the table's # is the line."
        ),
        user_turns: Path = typer.Option(
            None, "--user-turns", help="Scan for a user's whole fingerprint (memkit.residue.fingerprint): "
                                       "JSONL of turns (keys content, role, user_id) and canaries "
                                       "(key canary, with user_id)."
        ),
        user: str = typer.Option(None, "--user", help="With --user-turns: whose fingerprint."),
        run: Path = typer.Option(None, "--run", help="A sweep run kept with --keep-stores (with --unit, --mode)."),
        unit: str = typer.Option(None, "--unit", help="--run: unit id QUESTION_ID::S<S> from results.jsonl."),
        mode: str = typer.Option(None, "--mode", help="--run: deletion mode, e.g. raw_only."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
        cache: list[Path] = typer.Option(
            [], "--cache", help="SQLite LLM cache file to scan too (repeatable)."
        ),
        also: list[Path] = typer.Option(
            [], "--also", help="Side file or directory a memory layer keeps beside the store "
                               "(history database, JSON/JSONL, pickle, any file; repeatable)."
        ),
        checkpoint_key_env: str = typer.Option(
            None, "--checkpoint-key-env", metavar="NAME",
            help="Decrypt LangGraph checkpoints (a checkpoint database given with --also) "
                 "written by EncryptedSerializer.from_pycryptodome_aes with the AES key held "
                 "by environment variable NAME (16, 24 or 32 bytes, as LANGGRAPH_AES_KEY; "
                 "never printed). Without it, encrypted values are not decoded: not clean."),
        no_embeddings: bool = typer.Option(
            False, "--no-embeddings", help="Skip the stale-embedding check (no re-embedding)."
        ),
        limit: int = typer.Option(20, "--limit", help="Hits shown per surface in the table."),
        max_member_mb: int = typer.Option(
            Limits.max_member_bytes >> 20, "--max-member-mb",
            help="Decompress at most this many MiB of one container member (larger: not checked)."),
        max_depth: int = typer.Option(
            Limits.max_depth, "--max-depth", help="Open containers nested at most this deep."),
        pgdata: Path = typer.Option(
            None, "--pgdata", help="postgresql://: the server's data directory on this machine, whose files "
                                   "(heap, index, TOAST, WAL, all others) are read and decoded; default: "
                                   "SHOW data_directory when it is readable here."),
        table: list[str] = typer.Option(
            [], "--table", help="postgresql://: scan only this table (NAME as search_path finds it, or "
                                "SCHEMA.NAME; repeatable). Default: every table the role can read."),
        schema: list[str] = typer.Option(
            [], "--schema", help="postgresql://: scan only the tables of this schema (repeatable)."),
        checkpoint: bool = typer.Option(
            False, "--checkpoint", help="postgresql://: run CHECKPOINT first, so that the files hold what the "
                                        "server's shared buffers hold (superuser or pg_checkpoint)."),
        sarif: Path = typer.Option(
            None, "--sarif", help="Write SARIF 2.1.0 here: one result per surface and secret, with locations."),
        baseline: Path = typer.Option(
            None, "--baseline", help="A previous run's --json or --sarif output: exit 1 only for copies on a "
                                     "surface that held none then (or of more secrets), and list what was fixed."),
        verbose: bool = typer.Option(False, "--verbose", help="Let other libraries' warnings and log lines through."),
    ) -> None:
        """Find every copy of SECRET left in a Chroma directory (and LLM caches).

        Exits 0 when every surface was checked, every byte of every file read in
        UTF-8, UTF-16 and UTF-32 (containers opened) and no copy remains; 1 when any
        copy remains; 2 on bad input; 3 when no copy was found but some surface or
        file was not (fully) checked (the report says which and why).

        With a PostgreSQL URI: every table's live rows (SQL), and with the data
        directory the heap, index, TOAST, WAL and other files, decoded as PostgreSQL
        wrote them (compressed values, TOAST chunks, WAL records and page images).
        """
        pg_only = {"--pgdata": pgdata is not None, "--table": bool(table), "--schema": bool(schema),
                   "--checkpoint": checkpoint}
        _check_outputs(sarif, baseline)
        if path is not None and _is_pg(path):
            if secret == "-":
                secret = sys.stdin.readline().rstrip("\n")
            _residue_pg(path, secret, secrets_file, user_turns, user, pgdata, table, schema, checkpoint,
                        {"--run": run is not None, "--cache": bool(cache), "--also": bool(also)}, as_json, limit,
                        sarif, baseline)
            return
        if any(pg_only.values()):
            typer.echo(f"memkit residue: error: {', '.join(k for k, v in pg_only.items() if v)} only with a "
                       "postgresql:// URI", err=True)
            raise typer.Exit(2)
        if run is not None:  # the kept store and its planted canary (evaluators/sweep/kept.py)
            from evaluators.sweep.kept import KeptStoreError, kept_store

            try:
                path, secret, kept_cache = kept_store(run, unit or "", mode or "")
            except KeptStoreError as exc:
                typer.echo(f"memkit residue: error: {exc}", err=True)
                raise typer.Exit(2) from exc
            cache = [*cache, *([kept_cache] if kept_cache else [])]
        elif path is None or (secret is None and secrets_file is None and user_turns is None):
            typer.echo("memkit residue: error: give PATH SECRET (or PATH --secrets-file FILE, PATH "
                       "--user-turns FILE --user ID), or --run RUN --unit ID --mode MODE", err=True)
            raise typer.Exit(2)
        if secret == "-":
            secret = sys.stdin.readline().rstrip("\n")
        lines: list[int] | None = None  # --secrets-file: each secret's line in the file
        try:
            given, lines = _secrets(secret, secrets_file, user_turns, user)
            many = given if secrets_file is not None or user_turns is not None else None
            limits = Limits(max_member_bytes=max_member_mb << 20, max_depth=max_depth)
            serde = None
            if checkpoint_key_env is not None:
                from memkit.residue.checkpoints import aes_serde, key_from_env

                serde = aes_serde(key_from_env(checkpoint_key_env))
            report = scan(Path(path), None if many else secret, secrets=many, cache_paths=cache, also=also,
                          check_embeddings=not no_embeddings, limits=limits, checkpoint_serde=serde)
        except (NotAChromaDirectory, FileNotFoundError, ValueError, ImportError) as exc:
            typer.echo(f"memkit residue: error: {exc}", err=True)
            raise typer.Exit(2) from exc
        except (sqlite3.Error, OSError, WorkerDied) as exc:
            typer.echo(f"memkit residue: error: cannot read {path}: {exc}", err=True)
            raise typer.Exit(2) from exc
        _finish(report, given, as_json, limit, sarif, baseline, Path(path), lines)
