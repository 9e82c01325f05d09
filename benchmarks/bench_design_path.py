"""Benchmark: the sweep's graph path (designs) against the direct path, same units, one process.

The graph path is what ``memkit sweep`` runs: every query and k passes through the
design's compiled LangGraph read graph (:class:`evaluators.sweep.ReadPath`). The
direct path is the sweep before designs: the same retrieval memo and response memo
called as plain functions, no graph. Both run the same units (extractive backend,
real Chroma and MiniLM, residue phase included) in alternating order, and their
main-phase records are checked to be identical (latencies aside). (Repeating the
same path in one process can change a few residue-phase rankings after
``full_purge``, so those are counted, not required equal; the test
``test_study_design_reproduces_the_sweep_before_designs`` checks every record in a
fresh process.)

Target: the graph path costs <= 10% over the direct path on the
extractive sweep.

Run: ``python benchmarks/bench_design_path.py [--n 2] [--repeats 2]``. Prints the CPU
and wall time of each path and their ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import evaluators.sweep.unit as sweep_unit
from evaluators.sweep import SweepConfig, load_instances, run_sweep_unit
from evaluators.sweep.read_path import ReadPath


class _DirectPath(ReadPath):
    """The direct path: the read graph's two steps as plain calls (no LangGraph)."""

    def read(self, query: str, k: int, tiers: Any, namespace: str) -> tuple[list, str, float]:
        chunks = self.retrievals(query, k, tuple(tiers), namespace)
        text = self.respond.text(query, chunks)
        return chunks, text, self.respond.last_latency


def _run(config: SweepConfig, instances: list, path_cls: type) -> tuple[float, float, list]:
    sweep_unit.ReadPath, saved = path_cls, sweep_unit.ReadPath
    try:
        c0, w0 = time.process_time(), time.perf_counter()
        recs = []
        for inst in instances:
            for S in config.summary_levels:
                r, _ = run_sweep_unit(config, inst, S, cache_path=None)
                recs += r
        return time.process_time() - c0, time.perf_counter() - w0, recs
    finally:
        sweep_unit.ReadPath = saved


def _strip(recs: list, main_only: bool = False) -> list:
    return [{k: v for k, v in r.items() if k not in ("latency_s", "counts", "changed")} for r in recs
            if not main_only or r.get("phase") == "main"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    data = str(Path(__file__).resolve().parents[1] / "tests" / "data" / "longmemeval_oracle_sample.json")
    config = SweepConfig(data=data, n=args.n, seed=1)
    instances = load_instances(config)
    graph_path = ReadPath
    with tempfile.TemporaryDirectory() as tmp:
        tempfile.tempdir = tmp
        _run(config, instances[:1], _DirectPath)  # warm up MiniLM and Chroma
        totals = {"direct": [0.0, 0.0], "graph": [0.0, 0.0]}
        for _ in range(args.repeats):
            for name, cls in (("direct", _DirectPath), ("graph", graph_path)):
                cpu, wall, recs = _run(config, instances, cls)
                totals[name][0] += cpu
                totals[name][1] += wall
                if name == "direct":
                    direct_recs = recs
                else:
                    if _strip(recs, True) != _strip(direct_recs, True):
                        raise SystemExit("graph path and direct path main-phase records differ")
                    differing = sum(a != b for a, b in zip(_strip(recs), _strip(direct_recs), strict=True))
        tempfile.tempdir = None
    d, g = totals["direct"], totals["graph"]
    units = len(instances) * len(config.summary_levels)
    print(f"units: {units} x {args.repeats} repeats (extractive, residue phase with {len(config.deletion_modes)} modes)")
    print(f"direct path: cpu {d[0]:.2f} s, wall {d[1]:.2f} s")
    print(f"graph path:  cpu {g[0]:.2f} s, wall {g[1]:.2f} s")
    print(f"records differing (residue phase only): {differing}")
    print(f"graph/direct: cpu {g[0] / d[0]:.3f}, wall {g[1] / d[1]:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
