"""Example 6: compare the built-in memory designs ``study``, ``redacting`` and ``mmr`` in one sweep.

* ``study`` -- the source study's pipeline (top-k cosine retrieval, summaries at S);
* ``redacting`` -- summaries scrubbed of PII and credentials (scrubadub detectors);
* ``mmr`` -- maximal-marginal-relevance retrieval (LangChain's MMR) instead of top-k.

One ``run_sweep(config, out, designs=[...])`` runs the three through their compiled
graphs on the same instances and canaries and writes ``OUT/compare.md``: Table 2 per
(model, design, S), the FRS table, a frontier figure with a line per design and S,
and for each pair of designs the paired difference in PR, AER_max and PUA with a
bootstrap CI over the shared instances. The same from the shell:

    memkit sweep --design study --design redacting --design mmr --out runs/designs

Run: ``python examples/06_compare_designs.py [--data FILE] [--n 8] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evaluators.sweep import SweepConfig, run_sweep


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the three-design sweep; print the differences and return ``compare.json``'s content."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="synthetic", help="LongMemEval JSON file, or 'synthetic'")
    parser.add_argument("--n", type=int, default=8, help="instances")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--summary-levels", default="0,1,2")
    parser.add_argument("--ks", default="1,3,6,10,25")
    parser.add_argument("--deletion-modes", default="none,raw_only,full_purge")
    parser.add_argument("--n-resamples", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("runs/designs"))
    args = parser.parse_args(argv)
    config = SweepConfig(
        data=args.data, n=args.n, seed=args.seed,
        summary_levels=[int(x) for x in args.summary_levels.split(",")],
        ks=[int(x) for x in args.ks.split(",")],
        deletion_modes=[m for m in args.deletion_modes.split(",") if m],
        n_resamples=args.n_resamples,
    )
    res = run_sweep(config, args.out, designs=["study", "redacting", "mmr"], progress=False)
    cmp = res["compare"]
    print(f"three designs, {config.n} instances -> {args.out / 'compare.md'}")
    for d in cmp["differences"]:
        print(f"  {d['A']} - {d['B']}, S={d['S']}: " + ", ".join(
            f"Δ{m} {d[m + '_diff']:+.2f} [{d[m + '_diff_ci'][0]:+.2f}, {d[m + '_diff_ci'][1]:+.2f}]"
            for m in ("PR", "AER_max", "PUA")))
    return cmp


if __name__ == "__main__":
    main(sys.argv[1:])
