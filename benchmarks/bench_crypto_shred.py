"""Benchmark: what encryption at rest and ``crypto_shred`` cost, against ``full_purge``
and against no encryption, in one run.

Builds two persistent :class:`memkit.store.TieredMemoryStore` directories with the
same ``--users`` x ``--turns`` raw chunks (one planted secret per user): one plain,
one sealing every text and its metadata under its user's data key
(:mod:`memkit.store.keystore`, AES-256-GCM). Vectors come from a stand-in embedder (seeded
unit vectors from a SHA-256 of the text, named as such): neither sealing nor either
deletion mode re-embeds, so the embedder's cost would only hide theirs. Then, each
timed as the best of ``--repeats``:

1. **write**: ``add`` of every chunk (sealing included);
2. **read path**: ``chunks(namespace=user)`` (get and open every record) and
   ``search(query, k=5, namespace=user)`` for every user;
3. **forget one secret**: ``forget(..., "full_purge")`` on a copy of the plain
   directory (delete, cascade, cache purge, compaction) against
   ``forget(..., "crypto_shred")`` on a copy of the sealed one (delete, cascade, and the
   user's remaining chunks re-sealed under a new key, the old key destroyed);
4. **forget a user**: ``forget_user`` with each mode (``crypto_shred`` destroys the
   key and deletes the records, no compaction).

Also reported: re-sealing cost per 500 vectors (the rotation's share of step 3).

Run: ``python benchmarks/bench_crypto_shred.py [--users 20] [--turns 25] [--repeats 3] [--json]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from timing import best_of  # benchmarks/timing.py (run from any directory)

from graphs.forget import forget, forget_user
from memkit.store import TieredMemoryStore
from memkit.store.chunks import Chunk, chunk_id
from memkit.store.keystore import KeyStore, open_record, rotate_namespace, seal_chunk


class StandInEmbedder:
    """A stand-in for MiniLM: a seeded unit vector per text (SHA-256), 384 dimensions."""

    def encode(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big")
            v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


def _chunks(users: int, turns: int) -> tuple[list[Chunk], list[str]]:
    chunks, secrets = [], []
    for u in range(users):
        ns = f"user-{u:03d}"
        secret = f"K{u:02d}-VIOLET-{1000 + u}"
        secrets.append(secret)
        for t in range(turns):
            text = (f"By the way, my private session token is {secret}." if t == turns // 2
                    else f"Turn {t} of {ns}: I spent the afternoon sorting photos and planning a trip to Porto.")
            chunks.append(Chunk(id=chunk_id(ns, "s1", "raw", t, text), text=text, tier="raw", namespace=ns,
                                session_id="s1", turn_index=t, date="2024/01/01 (Mon) 10:00"))
    return chunks, secrets


def _interleaved(fns: dict[str, Any], repeats: int) -> dict[str, float]:
    """Best wall time of each function, the functions alternated each round after one
    warm-up call each (a shared machine's drift hits them alike)."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def _copy(src: Path, root: Path, name: str) -> Path:
    dst = root / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--turns", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    emb = StandInEmbedder()
    chunks, secrets = _chunks(args.users, args.turns)
    out: dict[str, Any] = {"users": args.users, "turns": args.turns, "chunks": len(chunks)}
    with tempfile.TemporaryDirectory(prefix="memkit-bench-shred-") as tmp:
        root = Path(tmp)
        def build(name: str) -> None:
            shutil.rmtree(root / name, ignore_errors=True)
            shutil.rmtree(root / f"{name}-keys", ignore_errors=True)
            s = TieredMemoryStore(root / name / "chroma", embedder=emb,
                                  keystore=KeyStore(root / f"{name}-keys") if name == "sealed" else None)
            s.add(chunks)
            s.close()

        write = _interleaved({n: (lambda n=n: build(n)) for n in ("plain", "sealed")}, args.repeats)
        out["write_s"] = write
        stores = {"plain": TieredMemoryStore(root / "plain" / "chroma", embedder=emb),
                  "sealed": TieredMemoryStore(root / "sealed" / "chroma", embedder=emb,
                                              keystore=KeyStore(root / "sealed-keys"))}
        users = [f"user-{u:03d}" for u in range(args.users)]
        gets = _interleaved({n: (lambda s=s: [s.chunks(namespace=u) for u in users]) for n, s in stores.items()},
                            args.repeats)
        finds = _interleaved({n: (lambda s=s: [s.search("my session token", 5, namespace=u) for u in users])
                              for n, s in stores.items()}, args.repeats)
        read = {n: {"chunks_s": gets[n], "search_s": finds[n]} for n in stores}
        for s in stores.values():
            s.close()
        out["read"] = read
        ks = KeyStore()
        out["aes_only_s"] = {"seal_all": best_of(lambda: [seal_chunk(ks, c) for c in chunks], args.repeats)}
        sealed = [(c.id, *seal_chunk(ks, c)) for c in chunks]
        out["aes_only_s"]["open_all"] = best_of(lambda: [open_record(ks, i, d, m) for i, d, m in sealed],
                                                args.repeats)

        def forget_once(mode: str, user_scope: bool) -> float:
            src = root / ("sealed" if mode == "crypto_shred" else "plain")
            best = float("inf")
            for r in range(args.repeats):
                d = _copy(src, root, f"copy-{mode}-{r}")
                keys = _copy(root / "sealed-keys", root, f"keys-{mode}-{r}") if mode == "crypto_shred" else None
                s = TieredMemoryStore(d / "chroma", embedder=emb, keystore=KeyStore(keys) if keys else None)
                t0 = time.perf_counter()
                if user_scope:  # the fingerprint is the secret: the modes' own cost, not the fingerprinting
                    forget_user(s, users[0], mode, namespaces=[users[0]], fingerprints=[secrets[0]])
                else:
                    forget(s, secrets[0], mode, namespace=users[0])
                best = min(best, time.perf_counter() - t0)
                s.close()
                shutil.rmtree(d, ignore_errors=True)
            return best

        out["forget_secret_s"] = {m: forget_once(m, False) for m in ("full_purge", "crypto_shred")}
        out["forget_user_s"] = {m: forget_once(m, True) for m in ("full_purge", "crypto_shred")}
        d = _copy(root / "sealed", root, "rotate")
        keys = _copy(root / "sealed-keys", root, "rotate-keys")
        s = TieredMemoryStore(d / "chroma", embedder=emb, keystore=KeyStore(keys))
        rotate_namespace(s, users[1])  # warm-up: the first write of a client pays its start
        per_rotation = best_of(lambda: rotate_namespace(s, users[0]), args.repeats)
        s.close()
        out["reseal_ms_per_500_vectors"] = round(1000 * per_rotation * 500 / args.turns, 2)
    out["ratios"] = {
        "write_sealed_over_plain": round(write["sealed"] / write["plain"], 2),
        "chunks_sealed_over_plain": round(read["sealed"]["chunks_s"] / read["plain"]["chunks_s"], 2),
        "search_sealed_over_plain": round(read["sealed"]["search_s"] / read["plain"]["search_s"], 2),
        "forget_secret_crypto_shred_over_full_purge": round(
            out["forget_secret_s"]["crypto_shred"] / out["forget_secret_s"]["full_purge"], 3),
        "forget_user_crypto_shred_over_full_purge": round(
            out["forget_user_s"]["crypto_shred"] / out["forget_user_s"]["full_purge"], 3),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{out['chunks']} chunks ({args.users} users x {args.turns} turns), best of {args.repeats}")
    print(f"write: plain {write['plain']:.3f} s, sealed {write['sealed']:.3f} s "
          f"({out['ratios']['write_sealed_over_plain']}x)")
    for what in ("chunks_s", "search_s"):
        print(f"read {what[:-2]} (all users): plain {read['plain'][what]:.3f} s, sealed {read['sealed'][what]:.3f} s")
    for scope in ("forget_secret_s", "forget_user_s"):
        f = out[scope]
        print(f"{scope[:-2]}: full_purge {f['full_purge']:.3f} s, crypto_shred {f['crypto_shred']:.3f} s")
    print(f"re-sealing: {out['reseal_ms_per_500_vectors']} ms per 500 vectors; AES-GCM alone: seal "
          f"{out['aes_only_s']['seal_all'] * 1000:.1f} ms, open {out['aes_only_s']['open_all'] * 1000:.1f} ms "
          f"for all {out['chunks']} chunks")
    print("ratios:", out["ratios"])


if __name__ == "__main__":
    main()
