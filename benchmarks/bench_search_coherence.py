"""Benchmark: what the search-cache coherence check costs on a 10,000-chunk namespace.

:meth:`memkit.store.tiered.TieredMemoryStore.search` keeps the namespace's vectors as a
matrix and checks, before each search, that chroma's state has not changed since
(the SQLite file's inode and ``PRAGMA data_version``, which change on every commit by
any handle or process). This benchmark builds a persistent store of ``--n`` chunks in
one namespace and times ``--queries`` searches twice in the same run: with the check
(memkit as shipped) and with the check replaced by a constant (the baseline: what
search cost before the check existed). It prints the ratio.

Vectors are seeded random unit vectors (a stand-in for MiniLM, named as such; search
cost does not depend on where vectors come from), and queries reuse the memoised
embeddings of a fixed query set, so the time measured is the search itself.

Run: ``python benchmarks/bench_search_coherence.py [--n 10000] [--queries 300]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from memkit.store.tiered import Chunk, TieredMemoryStore


class _RandomEmbedder:
    """Seeded random unit vectors per text (a stand-in for MiniLM), memoised."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.memo: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            if t not in self.memo:
                rng = np.random.default_rng(abs(hash(t)) % (2**32))
                v = rng.standard_normal(self.dim).astype(np.float32)
                self.memo[t] = v / np.linalg.norm(v)
            out.append(self.memo[t])
        return np.stack(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = TieredMemoryStore(Path(tmp) / "chroma", embedder=_RandomEmbedder())
        chunks = [Chunk(id=f"raw-{i:06d}", text=f"user turn number {i}", tier="raw", namespace="u1",
                        session_id=f"s{i // 10}", turn_index=i % 10) for i in range(args.n)]
        for s in range(0, len(chunks), 2000):
            store.add(chunks[s : s + 2000])
        queries = [f"query {i}" for i in range(50)]
        store.search_many(queries, args.k, namespace="u1")  # warm: matrix and query vectors

        def run() -> float:
            t0 = time.perf_counter()
            for i in range(args.queries):
                store.search(queries[i % len(queries)], args.k, namespace="u1")
            return (time.perf_counter() - t0) / args.queries

        checked = [run() for _ in range(3)]
        real_token = store._state_token
        store._state_token = lambda: ("baseline",)  # type: ignore[method-assign]
        store._matrix_cache.clear()
        store.search_many(queries, args.k, namespace="u1")
        baseline = [run() for _ in range(3)]
        store._state_token = real_token  # type: ignore[method-assign]
        store.close()
    c, b = min(checked), min(baseline)
    print(f"namespace of {args.n} chunks, {args.queries} searches (k={args.k}), best of 3")
    print(f"  search without the coherence check (baseline): {b * 1e3:.3f} ms")
    print(f"  search with the coherence check:               {c * 1e3:.3f} ms")
    print(f"  ratio checked / baseline: {c / b:.3f}  (target <= 1.05)")


if __name__ == "__main__":
    main()
