"""``memkit audit --matrix``: every built-in target x every deletion API, one table.

For each built-in target (:data:`evaluators.targets.base.BUILTIN`; the ``langgraph``
target on each of its backends) and each forget scope (``secret``: the target's
``forget_secret``; ``user``: its ``forget_user``), one audit
(:func:`evaluators.audit.audit`, through the one runner) runs on a fresh instance with every
deletion step the target has, in order. Each phase after the forget is one row:

* **PR** and **AER_max** before the forget and after it (the after values are
  measured once the steps are done; the steps change no API answer);
* per surface, the users whose canary the surface still holds after that phase,
  out of ``n``, with the number of copies: ``k/n (c)``; ``not checked`` where memkit
  could not read the surface; ``n/a`` where the target keeps no such surface or has
  no such forget (never 0).

The Postgres backend runs on ``pg_uri`` (a fresh database per run, dropped after it;
``pgdata`` when the server's data directory is local; the WAL is shared by the
server's databases), else on a fresh temporary PostgreSQL 16 + pgvector server per
run, started with ``pgserver`` (the ``postgres`` extra; autovacuum off so that only
the steps prune) and removed after it. A target whose extra is not installed gets
one row saying so.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["run_matrix", "temporary_postgres"]


@contextmanager
def temporary_postgres() -> Iterator[tuple[Any, Path]]:
    """A temporary PostgreSQL 16 + pgvector server (pgserver) on a Unix socket:
    yields ``(server, pgdata)``; stopped and removed at the end.

    Raises:
        ImportError: pgserver is not installed (the ``postgres`` extra).
    """
    try:
        import pgserver
        import psycopg
    except ImportError as exc:
        raise ImportError(f"a temporary PostgreSQL needs {exc.name} (pip install -e '.[postgres]'), "
                          "or give --pg-uri of a running server") from exc

    root = Path(tempfile.mkdtemp(prefix="memkit-pg-"))
    server = pgserver.get_server(root, cleanup_mode="stop")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET autovacuum = off")
            conn.execute("SELECT pg_reload_conf()")
        yield server, root
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def _fresh_db(uri: str) -> str:
    """Create a fresh database on the server of ``uri``; its connection string."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = "memkit_matrix_" + uuid.uuid4().hex[:8]
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_conninfo(**{**conninfo_to_dict(uri), "dbname": name})


def _drop_db(uri: str) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    info = conninfo_to_dict(uri)
    name = info.get("dbname")
    with psycopg.connect(make_conninfo(**{**info, "dbname": "postgres"}), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _postgres_target(pg_uri: str | None, pgdata: Path | None) -> Any:
    """The langgraph target on a fresh database of ``pg_uri`` (dropped on close), or
    on a fresh temporary server (stopped and removed on close): runs never see each
    other's files, and on a temporary server not each other's WAL either."""
    from evaluators.targets.base import load_target

    if pg_uri:
        uri = _fresh_db(pg_uri)
        target = load_target("langgraph", backend="postgres", pg_uri=uri, pgdata=pgdata)
        target.attached.closers.append(lambda: _drop_db(uri))
        return target
    ctx = temporary_postgres()
    server, root = ctx.__enter__()
    try:
        target = load_target("langgraph", backend="postgres", pg_uri=server.get_uri(), pgdata=root)
    except BaseException:
        ctx.__exit__(None, None, None)
        raise
    target.attached.closers.append(lambda: ctx.__exit__(None, None, None))
    return target


def _factories(pg_uri: str | None, pgdata: Path | None) -> list[tuple[str, Callable[[], Any]]]:
    from evaluators.targets.base import load_target

    out: list[tuple[str, Callable[[], Any]]] = [
        ("langgraph[memory]", lambda: load_target("langgraph", backend="memory")),
        ("langgraph[sqlite]", lambda: load_target("langgraph", backend="sqlite")),
        ("langgraph[postgres]", lambda: _postgres_target(pg_uri, pgdata)),
    ]
    for name in ("langmem", "mem0", "memkit"):
        out.append((name, lambda name=name: load_target(name)))
    return out


def run_matrix(*, n: int = 2, seed: int = 0, pg_uri: str | None = None, pgdata: Path | None = None,
               n_resamples: int = 200, out: Path | None = None) -> dict[str, Any]:
    """Run the matrix (module doc).

    Args:
        n: users per audit. seed: seeds data, canaries and CIs.
        pg_uri, pgdata: a PostgreSQL server to use (else a temporary one, if pgserver
            is installed; else the Postgres row says why it did not run).
        n_resamples: bootstrap resamples per audit.
        out: directory to write ``matrix.md`` and ``matrix.json`` into (new, empty or an
            earlier matrix output: :func:`evaluators.rundir.check_out_dir`).

    Returns:
        ``{"rows": [...], "surfaces": [...], "markdown": str (the compact table),
        "wide": str (one column per surface), "seconds": float}``.
    """
    from evaluators.audit import audit

    if out is not None:  # refuse a mistaken --out before the (long) matrix runs
        from evaluators.rundir import check_out_dir

        check_out_dir(out, "audit")
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for label, make in _factories(pg_uri, pgdata):
        for scope in ("secret", "user"):
            try:
                target = make()
            except (ImportError, ValueError) as exc:
                rows.append({"target": label, "deletion": "-", "error": str(exc)})
                break
            try:
                name = target.name
                steps = list(target.deletion_steps())
                res = audit(target, forget=True, forget_scope=scope, forget_steps=steps, n=n, seed=seed,
                            n_resamples=n_resamples)
            finally:
                target.close()
            if res.forget_na:
                rows.append({"target": name, "deletion": f"forget {scope}: n/a", "error": res.forget_na,
                             "pr": res.pr, "aer": res.aer["max"]})
                continue
            done: list[str] = []
            for phase in res.phases[1:]:
                done.append(f"forget {scope}" if phase == "forget" else phase)
                rows.append({
                    "target": name, "deletion": " + ".join(done), "pr": res.pr, "pr_after": res.pr_after,
                    "aer": res.aer["max"], "aer_after": res.aer_after["max"] if res.aer_after else None,
                    "cells": {s: res.cell(phase, s) for s in res.surface_scans[phase]},
                    "reasons": {s: d["reason"] or d["partial"] for s, d in res.surface_scans[phase].items()
                                if d.get("reason") or d.get("partial")},
                })
    surfaces = list(dict.fromkeys(s for r in rows for s in r.get("cells", {})))
    md = _markdown(rows, surfaces, n)
    wide = _wide(rows, surfaces)
    result = {"rows": rows, "surfaces": surfaces, "markdown": md, "wide": wide,
              "seconds": round(time.perf_counter() - t0, 1)}
    if out is not None:
        from evaluators.rundir import claim_out_dir

        claim_out_dir(out, "audit")
        (out / "matrix.md").write_text(md + "\n" + wide)
        (out / "matrix.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _markdown(rows: list[dict[str, Any]], surfaces: list[str], n: int) -> str:
    """The compact table: per row the surfaces that still hold copies, the checked
    surfaces that hold none, and those not checked."""
    head = ["target", "deletion", "PR before→after", "AER_max before→after", "copies remain (users/n, copies)",
            "checked, no copy", "not checked / n/a"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "cells" not in r:
            pr = _f(r.get("pr")) + "→n/a" if "pr" in r else "n/a"
            aer = _f(r.get("aer")) + "→n/a" if "aer" in r else "n/a"
            lines.append(f"| {r['target']} | {r['deletion']} | {pr} | {aer} | n/a | n/a | n/a |")
            continue
        cells = r["cells"]
        held = [f"{s} {c}" for s, c in cells.items() if c[0].isdigit() and not c.startswith("0/")]
        clean = [s for s, c in cells.items() if c.startswith("0/") and "stale" not in c and "partly" not in c]
        unchecked = [s if c == "not checked" else f"{s} (n/a)" for s, c in cells.items() if not c[0].isdigit()]
        unchecked += [f"{s} (partly read, none found)" for s, c in cells.items()
                      if c.startswith("0/") and "partly" in c]
        held += [f"{s} {c}" for s, c in cells.items() if c.startswith("0/") and "stale" in c]
        lines.append(f"| {r['target']} | {r['deletion']} | {_f(r['pr'])}→{_f(r['pr_after'])} | "
                     f"{_f(r['aer'])}→{_f(r['aer_after'])} | {'; '.join(held) or 'none'} | "
                     f"{', '.join(clean) or '-'} | {', '.join(unchecked) or '-'} |")
    notes = [f"- {r['target']}: {r['error']}" for r in rows if "error" in r]
    reasons = dict.fromkeys(f"- `{s}` ({r['target']}): {why}" for r in rows for s, why in r.get("reasons", {}).items())
    legend = (f"\nCells: `k/{n} (c)`: k of the {n} users' canaries are still on the surface, c copies in all; "
              "`+k stale`: vectors that encode a text their item no longer has. A surface a target does not "
              "keep is not listed (n/a); `not checked`: memkit could not read it, so it is never called clean. "
              "PR and AER after are measured once every step of the run is done.\n")
    out = "\n".join(lines) + "\n" + legend
    if notes:
        out += "\nNot run:\n" + "\n".join(notes) + "\n"
    if reasons:
        out += "\nWhy not checked / n/a:\n" + "\n".join(reasons) + "\n"
    return out


def _wide(rows: list[dict[str, Any]], surfaces: list[str]) -> str:
    """The full table: one column per surface, ``n/a`` where a target lacks it."""
    head = ["target", "deletion", *surfaces]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = r.get("cells", {})
        lines.append(f"| {r['target']} | {r['deletion']} | " + " | ".join(cells.get(s, "n/a") for s in surfaces) + " |")
    return "\n".join(lines) + "\n"
