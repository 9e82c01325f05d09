"""Benchmark: memkit's scan of a PostgreSQL data directory, as a ratio to GNU grep.

Starts a real PostgreSQL 16 + pgvector (pgserver, the ``postgres`` extra), writes
``--items`` memories through LangGraph's ``PostgresStore`` (one holds the secret),
deletes it through the API, and times, in the same run:

* memkit: :func:`memkit.postgres.surfaces.scan_disk` (every file of the data directory,
  every spelling of the secret, by surface, with what PostgreSQL encoded decoded:
  compressed values, TOAST chunks, WAL records and page images; after its
  ``CHECKPOINT``);
* baseline: ``grep -r -c -F SECRET DATADIR`` (GNU grep, one exact spelling) after a
  ``CHECKPOINT``.

Both must find the same number of copies of the secret as written (grep counts lines
with a copy, so the copies are compared with Python's ``bytes.count`` too). Prints
the megabytes read and the time ratio memkit / grep (best of ``--repeat``).

Run: ``python benchmarks/bench_pg_scan.py [--items 2000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

SECRET = "XQ7-VIOLET-3829"


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import psycopg
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row

    from evaluators.targets.matrix import temporary_postgres
    from memkit.postgres import surfaces as surfaces_pg

    with temporary_postgres() as (server, root):
        uri = server.get_uri()
        conn = psycopg.connect(uri, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        store = PostgresStore(conn, index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8),
                                           "fields": ["content"]})
        store.setup()
        for i in range(args.items):
            text = f"memory {i}: I walked the dog to the lake and back before breakfast"
            store.put(("memories", f"user-{i % 50}"), f"k{i}", {"content": text if i else f"my token is {SECRET}"})
        store.delete(("memories", "user-0"), "k0")
        audit = psycopg.connect(uri, autocommit=True)
        tables = [*surfaces_pg.STORE_TABLES, *surfaces_pg.SAVER_TABLES]
        mb = sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file()) / 1e6

        def memkit_scan() -> int:
            found = surfaces_pg.scan_disk(audit, root, tables, [SECRET])
            return sum(len(s.hits.get(SECRET, [])) for s in found.values())

        def grep_scan() -> int:
            audit.execute("CHECKPOINT")
            out = subprocess.run(["grep", "-r", "-c", "-a", "-F", SECRET, str(root)], capture_output=True, text=True)
            return sum(int(line.rsplit(":", 1)[1]) for line in out.stdout.splitlines())

        t_m, copies = _best(memkit_scan, args.repeat)
        t_g, lines = _best(grep_scan, args.repeat)
        exact = sum(p.read_bytes().count(SECRET.encode()) for p in Path(root).rglob("*") if p.is_file())
        print(f"data directory {mb:.1f} MB, {args.items} items; copies: memkit {copies}, bytes.count {exact}, "
              f"grep lines {lines}")
        print(f"memkit scan_disk {t_m:.3f} s, grep {t_g:.3f} s: {t_m / t_g:.2f}x grep "
              f"({mb / t_m:.0f} MB/s vs {mb / t_g:.0f} MB/s); cores {os.cpu_count()}")
        audit.close()
        conn.close()


if __name__ == "__main__":
    main()
