"""Benchmark: the sweep on S-shaped data: time per instance, peak memory,
and user-turn ingest throughput against batched MiniLM encoding.

LongMemEval's S split has ~50 sessions (~115k tokens) per instance. This benchmark
generates a synthetic set of that shape (``--sessions`` 50 sessions of ``--turns``
10 turns per instance, :func:`memkit.dataset.longmemeval.synthetic`) and runs the sweep
with the ``extractive`` backend for each N in ``--sizes`` (the issue's 50, 100, 200,
500 by default; pass e.g. ``--sizes 5,10,20`` for a quick run). Each N runs in a
fresh process, so its peak RSS (``ru_maxrss``) is its own. By default the sweep runs
S=0 and the main phase only (``--summary-levels``, ``--deletion-modes`` widen it).

Per N it prints:

* seconds per instance (target: flat from the smallest to the largest N);
* peak RSS of the process (target: < 4 GiB at N = 500);
* ingest throughput: the user turns of the first ``--ingest-instances`` instances
  written the way the sweep writes them (a fresh in-memory store per instance,
  :func:`graphs.memory.write_sessions`: one invocation of the write graph, S=0:
  chunking, one batched MiniLM embedding, one Chroma upsert; the store's creation and
  closing are the unit's set-up, not timed) in user turns per second, as a fraction of the rate at which
  all-MiniLM-L6-v2 encodes the same texts in one batched call (batch 64) in the
  same process (target: >= 0.80), and of a stricter baseline that encodes each
  distinct text once (memkit's memo embeds a repeated text once; the synthetic data
  repeats texts). The embedder's memo is cleared before the ingest, so every distinct
  text is embedded there too.

Run: ``python benchmarks/bench_scale.py [--sizes 50,100,200,500] [--sessions 50] [--turns 10]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _ingest_rate(instances: list) -> dict:
    from graphs.memory import build_write_graph, write_sessions
    from memkit.models.chat import embeddings
    from memkit.store.tiered import TieredMemoryStore

    emb = embeddings()
    texts = [t.content for inst in instances for _, _, turns in inst.sessions()
             for t in turns if t.role == "user" and t.content.strip()]
    distinct = list(dict.fromkeys(texts))
    emb.model.encode(texts[:64], batch_size=64, show_progress_bar=False)  # warm-up
    # baseline: every user turn encoded in one batched call (batch 64)
    t0 = time.perf_counter()
    emb.model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    encode_rate = len(texts) / (time.perf_counter() - t0)
    # stricter baseline: each distinct turn once (the synthetic data repeats turns, and
    # memkit's memo embeds a repeat once, which the first baseline does not)
    t0 = time.perf_counter()
    emb.model.encode(distinct, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    distinct_rate = len(texts) / (time.perf_counter() - t0)
    with emb._lock:
        emb._memo.clear()
    seconds = 0.0
    for inst in instances:  # what the sweep does per unit at S=0: a fresh store per unit
        with TieredMemoryStore(collection="ingest") as store:
            write = build_write_graph(store)
            t0 = time.perf_counter()
            write_sessions(write, inst.question_id, list(inst.sessions()), 0)
            seconds += time.perf_counter() - t0
    ingest_rate = len(texts) / seconds
    return {"user_turns": len(texts), "distinct": len(set(texts)), "encode_per_s": encode_rate,
            "ingest_per_s": ingest_rate, "fraction": ingest_rate / encode_rate,
            "distinct_encode_per_s": distinct_rate, "fraction_distinct": ingest_rate / distinct_rate}


def one(args: argparse.Namespace) -> None:
    """Run the sweep for one N in this process and print a JSON line."""
    from evaluators.sweep import SweepConfig, load_instances, run_sweep

    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    config = SweepConfig(
        data="synthetic", n=args.one, seed=args.seed, synthetic_sessions=args.sessions,
        synthetic_turns=args.turns, summary_levels=[int(s) for s in args.summary_levels.split(",")],
        ks=[int(k) for k in args.k.split(",")],
        deletion_modes=[m for m in args.deletion_modes.split(",") if m], n_resamples=200,
    )
    instances = load_instances(config)
    ingest = _ingest_rate(instances[: args.ingest_instances])
    with tempfile.TemporaryDirectory(prefix="memkit-bench-scale-") as tmp:
        t0 = time.perf_counter()
        run_sweep(config, Path(tmp) / "out", progress=False)
        seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(json.dumps({"n": args.one, "seconds": seconds, "per_instance": seconds / args.one,
                      "peak_rss": rss, "ingest": ingest}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,100,200,500", help="instance counts N, comma-separated")
    ap.add_argument("--sessions", type=int, default=50, help="sessions per instance")
    ap.add_argument("--turns", type=int, default=10, help="turns per session")
    ap.add_argument("--summary-levels", default="0")
    ap.add_argument("--k", default="1,3,6,10,25")
    ap.add_argument("--deletion-modes", default="", help="deletion modes ('' = main phase only)")
    ap.add_argument("--ingest-instances", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch intra-op threads (0: torch's default; 1 avoids oversubscription "
                         "on a busy machine, where small batches otherwise slow down many-fold)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args)
        return
    print(f"synthetic S-shaped data: {args.sessions} sessions x {args.turns} turns per instance, "
          f"extractive backend, S={args.summary_levels}, k={args.k}, modes={args.deletion_modes or 'none'}, "
          f"torch threads {args.torch_threads or 'default'}")
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        cmd = [sys.executable, __file__, "--one", str(n)] + [
            f"--{name}={getattr(args, name.replace('-', '_'))}"
            for name in ("sessions", "turns", "summary-levels", "k", "deletion-modes", "ingest-instances", "seed",
                         "torch-threads")]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"N={n} failed:\n{proc.stderr[-3000:]}")
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        ing = row["ingest"]
        print(f"  N={n:4d}: {row['per_instance']:6.2f} s/instance ({row['seconds']:.0f} s), "
              f"peak RSS {row['peak_rss'] / 2**30:.2f} GiB (target < 4 GiB at N=500), "
              f"ingest {ing['ingest_per_s']:.0f} user turns/s = {ing['fraction']:.2f} of batched "
              f"MiniLM encoding ({ing['encode_per_s']:.0f}/s; target >= 0.80), "
              f"{ing['fraction_distinct']:.2f} of encoding each distinct turn once "
              f"({ing['user_turns']} turns, {ing['distinct']} distinct)", flush=True)
    if len(rows) > 1:
        print(f"  time per instance, N={rows[-1]['n']} vs N={rows[0]['n']}: "
              f"{rows[-1]['per_instance'] / rows[0]['per_instance']:.2f}x (target: flat, 1.00x)")


if __name__ == "__main__":
    main()
