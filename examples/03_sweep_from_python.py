"""Example 3: run the LongMemEval sweep from Python and read metrics.json.

``evaluators.sweep.run_sweep`` is what ``memkit sweep`` runs: for each instance and
summary level S it writes the memory, answers the question and the probes at every
k, then for each deletion mode forgets the canary on a copy of the memory, scans the
residue and probes again. The output directory holds ``results.jsonl`` (one record
per call), ``metrics.json`` (the study's metrics with 95% bootstrap CIs),
``report.md`` and figures.

    python examples/03_sweep_from_python.py --n 2 --out runs/example3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evaluators.sweep import SweepConfig, run_sweep


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run a small sweep, print the frontier per S and the FRS per deletion mode."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2, help="synthetic instances")
    parser.add_argument("--data", default="synthetic", help="'synthetic' or a LongMemEval JSON file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="output directory (default: a temporary one)")
    parser.add_argument("--n-resamples", type=int, default=200, help="bootstrap resamples")
    parser.add_argument("--json", type=Path, help="also copy metrics.json here")
    args = parser.parse_args(argv)

    config = SweepConfig(
        data=args.data, n=args.n, seed=args.seed, model="extractive",
        summary_levels=[0, 1], ks=[1, 3], deletion_modes=["none", "full_purge"],
        synthetic_sessions=[2, 3], synthetic_turns=[6, 8], n_resamples=args.n_resamples,
    )
    out = args.out or Path(tempfile.mkdtemp(prefix="memkit-example3-"))
    t0 = time.perf_counter()
    run_sweep(config, out, progress=False)
    metrics = json.loads((out / "metrics.json").read_text())  # what the sweep wrote
    seconds = time.perf_counter() - t0

    print(f"sweep of {metrics['n_instances']} instances in {seconds:.1f} s -> {out}")
    print("\nfrontier per summary level (averaged over k):")
    for row in metrics["by_S"]:
        print(f"  S={row['S']}: PR={row['PR']:.2f}  AER_max={row['AER_max']:.2f}  PUA={row['PUA']:.2f}")
    print("\nforgetting residue (AER_max after forget, per tier):")
    for row in metrics["frs"]:
        # None: the design has no such tier at this S (nothing to measure), printed n/a.
        frs = ", ".join(f"{k}=" + ("n/a" if row[k] is None else f"{row[k]:.2f}")
                        for k in ("FRS_raw", "FRS_summary", "FRS_worst"))
        print(f"  S={row['S']} mode={row['mode']}: {frs}; PR_after={row['PR_after']:.2f}; "
              f"forensic copies of the canary left: {row['forensic_total']}")
    print(f"\nfiles: {sorted(p.name for p in out.iterdir())}")
    if args.json:
        args.json.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
