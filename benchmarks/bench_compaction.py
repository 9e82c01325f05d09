"""Benchmark: what a full purge costs on a 10,000-chunk persistent store, and whether it works.

Builds a persistent :class:`memkit.store.tiered.TieredMemoryStore` of ``--n`` synthetic user
turns (100 users; real all-MiniLM-L6-v2 embeddings, batched), plants a secret in
``--fraction`` of them, then:

1. deletes every chunk holding the secret (``find_containing`` + ``derived_from``
   cascade + ``delete``) and scans for residue (bytes and SQL only; the
   stale-embedding check is left for the final scan to save re-embedding time);
2. for comparison, on copies of that directory: SQLite ``VACUUM`` alone, and chroma's
   own ``chroma vacuum`` (log purge + VACUUM), each followed by a scan;
3. ``compact()`` (rebuild into a fresh directory, swap, shred), timed, with the
   directory size before and after;
4. a full scan (every surface, the stale-embedding check included, with a fresh
   embedder so every text is really re-embedded) of the compacted store;
5. the cost of coordinating with other processes (:mod:`memkit.store.dirlock`),
   in the same run: ``--repeats`` compactions of copies of the deleted-from directory
   with the coordination (:func:`memkit.store.tiered.compact_directory`: exclusive lock,
   ``/proc`` scan for holders that are not memkit, fsync, journal, generation,
   atomic exchange) and as many without it (uncoordinated compaction),
   interleaved, medians compared (target: <= 10% more); and the per-operation cost
   of the shared lock and generation check on ``count``, ``get`` and ``search`` of
   the compacted store, against the same calls with the lock switched off.

``--fake-vectors`` replaces MiniLM with seeded random unit vectors (a stand-in,
named as such, that saves ~40 s of embedding per 10,000 texts; compaction never
re-embeds, so its cost does not depend on the embedder); the final scan then skips
the stale-embedding check, which would flag every random vector.

Run: ``python benchmarks/bench_compaction.py [--n 10000] [--fraction 0.01] [--repeats 3] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from memkit.residue.chroma import scan
from memkit.store.compaction import _compact_locked
from memkit.store.tiered import Chunk, TieredMemoryStore, chunk_id, compact_directory

SECRET = "XQ7-VIOLET-3829"
SUBJECTS = ["I", "My sister", "Our team", "The landlord", "My doctor", "A colleague", "My son", "We"]
VERBS = ["mentioned", "booked", "cancelled", "asked about", "forgot", "rescheduled", "paid for", "enjoyed"]
OBJECTS = ["the trip to Lisbon", "a yoga class", "the quarterly report", "a new laptop",
           "the dentist appointment", "dinner with friends", "the car repair", "a cooking course",
           "the concert tickets", "a weekend hike"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class RandomUnitVectors:
    """A stand-in embedder (NOT a model): seeded random 384-d unit vectors per call."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def encode(self, texts: list[str]) -> np.ndarray:
        v = self.rng.normal(size=(len(texts), 384)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def synthetic_chunks(n: int, fraction: float, seed: int) -> tuple[list[Chunk], int]:
    """``n`` raw chunks over 100 users; ``round(n * fraction)`` of them hold the secret."""
    rng = np.random.default_rng(seed)
    planted = set(rng.choice(n, size=round(n * fraction), replace=False).tolist())
    users = 100
    chunks = []
    for i in range(n):
        ns, turn = f"user-{i % users:03d}", i // users
        text = (f"{SUBJECTS[rng.integers(len(SUBJECTS))]} {VERBS[rng.integers(len(VERBS))]} "
                f"{OBJECTS[rng.integers(len(OBJECTS))]} on {DAYS[rng.integers(7)]} at "
                f"{rng.integers(7, 22)}:{rng.integers(0, 60):02d}.")
        if i in planted:
            text += f" By the way, my private session token is {SECRET}."
        session = f"{ns}-s{turn // 10}"
        chunks.append(Chunk(chunk_id(ns, session, "raw", turn, text), text, "raw", ns, session, turn,
                            f"2023/05/{1 + turn // 10:02d}"))
    return chunks, len(planted)


def _copy_and(src: Path, dst: Path, how: str) -> float:
    shutil.copytree(src, dst)
    t0 = time.perf_counter()
    if how == "sqlite_vacuum":
        con = sqlite3.connect(dst / "chroma.sqlite3")
        con.execute("VACUUM")
        con.close()
    else:
        exe = Path(sys.executable).with_name("chroma")
        subprocess.run([str(exe), "vacuum", "--path", str(dst), "--force"], check=True,
                       capture_output=True)
    return time.perf_counter() - t0


def _residue(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def coordination_cost(dirty: Path, workdir: Path, repeats: int) -> dict[str, Any]:
    """Median seconds of ``repeats`` compactions of copies of ``dirty`` with and without
    the inter-process coordination, interleaved (so load drifts hit both alike)."""
    times: dict[str, list[float]] = {"coordinated": [], "uncoordinated": []}
    for r in range(repeats):
        for how in (("coordinated", "uncoordinated") if r % 2 == 0 else ("uncoordinated", "coordinated")):
            dst = workdir / f"{how}-{r}" / "chroma"
            shutil.copytree(dirty, dst)
            t0 = time.perf_counter()
            if how == "coordinated":
                compact_directory(dst)
            else:
                _compact_locked(dst, None, coordinated=False)
            times[how].append(time.perf_counter() - t0)
            shutil.rmtree(dst.parent)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"repeats": repeats, "seconds": times, "median_coordinated": med["coordinated"],
            "median_uncoordinated": med["uncoordinated"],
            "overhead": med["coordinated"] / med["uncoordinated"] - 1.0}


def op_cost(store: TieredMemoryStore, rounds: int = 300, pairs: int = 5) -> dict[str, Any]:
    """Per-call seconds of count / get / search with the directory lock and the
    generation check, and with the lock switched off (``store._lock = None``), best of
    ``pairs`` alternations; and the lock's own cost per operation (an empty
    ``store._op()``: flock on the gate and the lock, a pread of the generation, a stat
    of the directory)."""
    ids = [c.id for c in store.chunks()[:10]]

    def empty() -> None:
        with store._op():
            pass

    calls = {"lock_only": empty, "count": lambda: store.count(), "get": lambda: store.get(ids),
             "search": lambda: store.search("the trip to Lisbon", 10)}
    lock = store._lock
    out: dict[str, Any] = {}
    for name, call in calls.items():
        call()  # warm the search cache and the embedder
        best: dict[str, float] = {}
        for how in ("locked", "unlocked") * pairs:
            store._lock = lock if how == "locked" else None
            t0 = time.perf_counter()
            for _ in range(rounds):
                call()
            per = (time.perf_counter() - t0) / rounds
            best[how] = min(best.get(how, per), per)
        store._lock = lock
        out[name] = {"locked_us": best["locked"] * 1e6, "unlocked_us": best["unlocked"] * 1e6,
                     "overhead": best["locked"] / best["unlocked"] - 1.0 if name != "lock_only" else None}
    return out


def run(n: int, fraction: float, fake_vectors: bool, seed: int, workdir: Path,
        repeats: int = 3) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n, "fraction": fraction, "embedder": "random-unit-vectors (fake)"
                           if fake_vectors else "all-MiniLM-L6-v2"}
    chunks, planted = synthetic_chunks(n, fraction, seed)
    out["planted"] = planted
    embedder = RandomUnitVectors(seed) if fake_vectors else None
    path = workdir / "store"
    store = TieredMemoryStore(path, embedder=embedder)
    _ = store.embedder  # load the model outside the timed region
    t0 = time.perf_counter()
    store.add(chunks)
    out["build_seconds"] = time.perf_counter() - t0
    out["bytes_built"] = _dir_bytes(path)

    t0 = time.perf_counter()
    hits = store.find_containing(SECRET, normalized=True)
    derived = store.derived_from([c.id for c in hits])
    deleted = store.delete([c.id for c in hits] + [c.id for c in derived])
    out["delete_seconds"] = time.perf_counter() - t0
    out["deleted"] = len(deleted)
    out["bytes_after_delete"] = _dir_bytes(path)
    t0 = time.perf_counter()
    rep = scan(store, SECRET, check_embeddings=False)
    out["scan_after_delete"] = {"seconds": time.perf_counter() - t0, "residue": _residue(rep.counts())}

    for how in ("sqlite_vacuum", "chroma_vacuum"):
        dst = workdir / how
        secs = _copy_and(path, dst, how)
        r = scan(dst, SECRET, check_embeddings=False)
        out[how] = {"seconds": secs, "bytes_after": _dir_bytes(dst), "residue": _residue(r.counts())}
        shutil.rmtree(dst)

    store.close()  # a closed copy of the deleted-from directory for the coordination runs
    dirty = workdir / "dirty" / "chroma"
    shutil.copytree(path, dirty)
    out["coordination"] = coordination_cost(dirty, workdir, repeats)
    shutil.rmtree(dirty.parent)
    store = TieredMemoryStore(path, embedder=embedder)

    report = store.compact()
    out["compact"] = {"seconds": report.seconds, "bytes_before": report.bytes_before,
                      "bytes_after": report.bytes_after, "records": report.records}
    # A fresh MiniLM instance, so the stale-embedding check really re-embeds every text
    # (the shared instance memoises the vectors it computed while building).
    checker = None
    if not fake_vectors:
        from memkit.models.chat import MiniLMEmbeddings

        checker = MiniLMEmbeddings()
    t0 = time.perf_counter()
    final = scan(store, SECRET, embedder=checker, check_embeddings=not fake_vectors)
    out["scan_after_compact"] = {"seconds": time.perf_counter() - t0, "clean": final.clean,
                                 "residue": _residue(final.counts()), "notes": final.notes}
    out["remaining_chunks"] = store.count()
    out["op_cost"] = op_cost(store)
    store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="chunks in the store")
    ap.add_argument("--fraction", type=float, default=0.01, help="share of chunks holding the secret")
    ap.add_argument("--fake-vectors", action="store_true", help="random unit vectors instead of MiniLM")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="compactions with and without coordination")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memkit-bench-") as tmp:
        res = run(args.n, args.fraction, args.fake_vectors, args.seed, Path(tmp), args.repeats)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0 if res["scan_after_compact"]["clean"] else 1
    mib = 1 / 2**20
    print(f"store: {res['n']} chunks ({res['embedder']}), secret in {res['planted']}")
    print(f"build (embed + write): {res['build_seconds']:.1f} s, {res['bytes_built'] * mib:.1f} MiB")
    print(f"delete {res['deleted']} chunks: {res['delete_seconds']:.2f} s; "
          f"residue after delete: {res['scan_after_delete']['residue']}")
    for how in ("sqlite_vacuum", "chroma_vacuum"):
        r = res[how]
        print(f"{how} (on a copy): {r['seconds']:.2f} s, {r['bytes_after'] * mib:.1f} MiB, residue: {r['residue']}")
    c = res["compact"]
    print(f"compact: {c['seconds']:.2f} s, {c['bytes_before'] * mib:.1f} MiB -> "
          f"{c['bytes_after'] * mib:.1f} MiB ({c['records']} records rebuilt)")
    co = res["coordination"]
    print(f"compaction with inter-process coordination: median {co['median_coordinated']:.2f} s, "
          f"without: {co['median_uncoordinated']:.2f} s ({co['repeats']} each, interleaved): "
          f"{co['overhead'] * 100:+.1f}% (target <= +10%)")
    for name, o in res["op_cost"].items():
        if o["overhead"] is None:
            print(f"shared lock + generation check per operation: {o['locked_us'] - o['unlocked_us']:.1f} us")
            continue
        print(f"{name}: {o['locked_us']:.0f} us with the shared lock, {o['unlocked_us']:.0f} us without "
              f"({o['overhead'] * 100:+.1f}%)")
    s = res["scan_after_compact"]
    stale = "skipped: fake vectors" if res["embedder"].startswith("random") else "included"
    print(f"scan after compact (all surfaces, stale check {stale}): {s['seconds']:.1f} s, "
          f"clean={s['clean']} {s['residue'] or ''}")
    return 0 if s["clean"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
