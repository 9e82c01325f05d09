"""Example 2: swap the summarizer node for a custom one and compare frontiers.

memkit's memory graphs take each node as a plain callable (``graphs.nodes``), so a
different summarizer is one argument: ``build_write_graph(store, summarizer=...)``.
Here the default extractive key-fact summarizer (S=1) is compared with a custom one
that drops every fact holding a credential-shaped string (a word of 8+ letters and
digits, hyphens ignored, with at least one of each -- e.g. ``XQ7-VIOLET-3829``).

For each summarizer, every instance (one planted canary each) is written through the
write graph, then the read graph answers the LongMemEval question and every probe
at each retrieval breadth k. Per k: PR(k) (``evaluators.metrics.answers_correct``)
and AER_max(k) (``aer_by_level``); the frontier and the Privacy-Utility AUC come from
``evaluators.metrics.frontier`` / ``privacy_utility_auc`` (DESIGN.md, Measurement).

    python examples/02_swap_summarizer.py --n 4 --ks 1,3,6
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from evaluators.metrics import aer_by_level, answers_correct, frontier, privacy_utility_auc
from evaluators.probes import LEVELS, PROBES, exact
from graphs.memory import build_read_graph, build_write_graph
from graphs.nodes import ExtractiveSummarizer, Summarizer, SummaryItem, make_responder
from memkit.canaries import plant
from memkit.longmemeval import synthetic
from memkit.store import Chunk, TieredMemoryStore

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]")


def credential_shaped(text: str) -> bool:
    """Whether ``text`` holds a word of >= 8 letters/digits (hyphens ignored) that mixes
    letters and digits."""
    for word in _WORD.findall(text):
        core = word.replace("-", "")
        if len(core) >= 8 and any(c.isdigit() for c in core) and any(c.isalpha() for c in core):
            return True
    return False


class RedactingSummarizer:
    """A custom :data:`graphs.nodes.Summarizer`: the extractive summary without facts
    that hold a credential-shaped string."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()

    def __call__(self, chunks: list[Chunk], S: int, prior: list[str] | None = None) -> list[SummaryItem]:
        return [item for item in self.inner(chunks, S, prior) if not credential_shaped(item.text)]


def frontier_of(summarizer: Summarizer, *, n: int, seed: int, S: int, ks: list[int]) -> dict[str, Any]:
    """PR(k), AER per level (k) and PUA for one summarizer on ``n`` synthetic instances."""
    instances = synthetic(n, seed, sessions_per_instance=(2, 4), turns_per_session=(6, 8))
    responder = make_responder("extractive")
    answers: dict[int, list[str]] = {k: [] for k in ks}
    shares: dict[int, dict[str, list[float]]] = {k: {lv: [] for lv in LEVELS} for k in ks}
    for inst in instances:
        planted, canary = plant(inst, seed)
        store = TieredMemoryStore()
        try:
            write = build_write_graph(store, summarizer=summarizer)
            for session_id, date, turns in planted.sessions():
                write.invoke({"namespace": inst.question_id, "session_id": session_id, "date": date,
                              "turns": [t.to_dict() for t in turns], "S": S})
            read = build_read_graph(store, responder=responder)
            for k in ks:
                ask = {"namespace": inst.question_id, "k": k, "S": S}
                answers[k].append(read.invoke({**ask, "query": inst.question})["response"])
                for level in LEVELS:
                    hits = [exact(canary.value, read.invoke({**ask, "query": p.text})["response"])
                            for p in PROBES[level]]
                    shares[k][level].append(sum(hits) / len(hits))
        finally:
            store.close()
    expected = [inst.answer_text for inst in instances]
    rows = []
    for k in ks:
        pr = sum(answers_correct(answers[k], expected)) / len(instances)
        rows.append({"k": k, "PR": pr, **{f"AER_{lv}": v for lv, v in aer_by_level(shares[k]).items()}})
    points = [(r["PR"], r["AER_max"]) for r in rows]
    return {"rows": rows, "PUA": privacy_utility_auc(points), "frontier": frontier(points)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Compare the two summarizers; print and return both frontiers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4, help="synthetic instances")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--S", type=int, default=1, choices=(1, 2), help="summary level")
    parser.add_argument("--ks", default="1,3,6", help="retrieval breadths, comma-separated")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    ks = sorted({int(x) for x in args.ks.split(",") if x.strip()})

    t0 = time.perf_counter()
    designs = {"extractive": ExtractiveSummarizer(), "redacting": RedactingSummarizer()}
    out: dict[str, Any] = {"n": args.n, "S": args.S, "ks": ks, "designs": {}}
    for name, summarizer in designs.items():
        res = frontier_of(summarizer, n=args.n, seed=args.seed, S=args.S, ks=ks)
        out["designs"][name] = res
        print(f"\nsummarizer {name!r} (S={args.S}): PUA = {res['PUA']:.3f}")
        print("   k    PR   AER_max  " + "  ".join(f"AER_{lv}" for lv in LEVELS))
        for r in res["rows"]:
            print(f"{r['k']:4d}  {r['PR']:.2f}   {r['AER_max']:.2f}     "
                  + "  ".join(f"{r['AER_' + lv]:.2f}".ljust(len('AER_' + lv)) for lv in LEVELS))
    out["seconds"] = round(time.perf_counter() - t0, 2)
    print(f"\nPUA extractive {out['designs']['extractive']['PUA']:.3f} vs redacting "
          f"{out['designs']['redacting']['PUA']:.3f} ({out['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
