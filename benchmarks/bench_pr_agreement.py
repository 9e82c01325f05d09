"""Benchmark: agreement of PR's answer rules with LongMemEval's judging semantics.

Scores every response of the labelled agreement set (``tests/data/pr_agreement.csv``,
labels decided by LongMemEval's official judge semantics) with each PR rule (``lme``,
the default, and ``study``, the source study's rule; real all-MiniLM-L6-v2) and prints
accuracy and Cohen's kappa (scikit-learn) against the labels, per rule and per
question type, and lists every disagreement. Target for the default rule: accuracy
>= 0.95 and kappa >= 0.9.

Run: ``python benchmarks/bench_pr_agreement.py [--csv tests/data/pr_agreement.csv]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluators.scoring.metrics import PR_RULES
from evaluators.scoring.pr_agreement import load_agreement_set, rule_agreement
from memkit.models.chat import embeddings

DEFAULT_CSV = Path(__file__).resolve().parent.parent / "tests" / "data" / "pr_agreement.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    args = ap.parse_args()
    rows = load_agreement_set(args.csv)
    emb = embeddings()
    types = sorted({r.question_type for r in rows})
    print(f"{args.csv.name}: {len(rows)} labelled answers, {len(types)} question types")
    print(f"{'rule':<6} {'accuracy':>8} {'kappa':>6} {'rule yes/label no':>18} {'rule no/label yes':>18}")
    results = {}
    for rule in PR_RULES:
        res = rule_agreement(rows, rule=rule, embeddings=emb)
        results[rule] = res
        print(f"{rule:<6} {res['accuracy']:>8.3f} {res['kappa']:>6.3f} "
              f"{res['rule_yes_judge_no']:>18} {res['rule_no_judge_yes']:>18}")
    print("\naccuracy per question type")
    print(f"{'question type':<27} {'n':>3} " + " ".join(f"{r:>6}" for r in PR_RULES))
    for qt in types:
        sub = [r for r in rows if r.question_type == qt]
        accs = []
        for rule in PR_RULES:
            wrong = sum(1 for d in results[rule]["disagreements"] if d["question_type"] == qt)
            accs.append(1 - wrong / len(sub))
        print(f"{qt:<27} {len(sub):>3} " + " ".join(f"{a:>6.3f}" for a in accs))
    for rule in PR_RULES:
        dis = results[rule]["disagreements"]
        print(f"\ndisagreements of rule {rule!r} ({len(dis)}):")
        for d in dis:
            print(f"  [{d['question_type']}] label={'yes' if d['label'] else 'no'} "
                  f"rule={'yes' if d['rule_verdict'] else 'no'} cos={d['cosine']:.2f} ({d['reason']})\n"
                  f"     ref: {d['reference'][:70]!r}\n     response: {d['response']!r}")


if __name__ == "__main__":
    main()
