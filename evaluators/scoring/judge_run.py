"""``memkit judge RUN_DIR --model SPEC``: re-score a finished sweep's answers with the
LLM judge and record how often each PR rule agrees with it.

Reads the main-phase question records of ``RUN_DIR/results.jsonl`` (complete units
only, :func:`evaluators.records.load_records`), asks the judge
(:func:`evaluators.scoring.judge.judge_verdict`, one prompt per LongMemEval question type;
structured output where the model supports it, else the one-word prompt read by
:func:`evaluators.scoring.judge_parse.parse_verdict`) once per distinct answer
``(question_id, question, reference, response)``, and compares its verdicts with the
records' rule verdicts: ``correct`` (the default rule, ``lme``) and ``correct_study``
(the study's rule) through :func:`evaluators.scoring.judge.agreement` (accuracy, Cohen's
kappa). A judge reply with no clear verdict is *unparsed*: it is counted apart, never
read as yes or no, and left out of ``PR_judge`` and the agreement. Writes:

- ``RUN_DIR/judge.jsonl``: one line per distinct answer with the three verdicts
  (``judge``: ``true``/``false``, ``null`` when unparsed), the judge's reply text
  (``judge_reply``), how it was read (``judge_method``: ``structured`` or ``text``)
  and the structured ``judge_reason``;
- ``metrics.json["judge"]``: ``{"model", "n_answers", "n_judged", "n_unparsed",
  "method", "PR_judge", "agreement": {rule: {n, accuracy, kappa, rule_yes_judge_no,
  rule_no_judge_yes}}, "disagreements": [...], "unparsed": [...]}``, where ``PR_judge``
  is the share of the judged (parsed) answers the judge accepts, every answer on which
  a rule and the judge differ is listed, and so is every unparsed answer with the
  judge's reply; ``method`` counts the verdicts read each way;
- the report again (``report.md``/``report.html`` gain a rule–judge table).

Structured output is tried first; once an answer had to be asked with the one-word
prompt (a model without structured output, or a structured call that failed with no
verdict to read: :func:`evaluators.scoring.judge.judge_verdict`), the rest of the run uses the
one-word prompt only.

``hypotheses.jsonl`` is not touched.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from evaluators.scoring.judge import agreement, judge_verdict

__all__ = ["judge_run"]


def _answers(run_dir: Path) -> list[dict[str, Any]]:
    """Distinct main-phase answers of a run, in first-seen order."""
    from evaluators.records import read_run

    path = run_dir / "results.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: run `memkit sweep --out {run_dir}` first")
    run = read_run(run_dir, need=("results.jsonl",))
    if run.bad_lines:
        warnings.warn(run.damage_note(), stacklevel=2)
    records = run.records
    seen: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for n, r in enumerate(records, start=1):
        if r.get("type") != "call" or r.get("query_kind") != "question" or r.get("phase") != "main":
            continue
        for field in ("question_id", "query", "expected", "response", "correct"):
            if r.get(field) is None:
                raise ValueError(f"{path}: question record {n} has no field {field!r}")
        key = (r["question_id"], r["query"], str(r["expected"]), r["response"])
        if key not in seen:
            seen[key] = {
                "question_id": r["question_id"],
                "question_type": r.get("question_type") or "multi-session",
                "question": r["query"],
                "reference": str(r["expected"]),
                "response": r["response"],
                "lme": bool(r["correct"]),
                "study": None if r.get("correct_study") is None else bool(r["correct_study"]),
            }
    if not seen:
        raise ValueError(f"{path}: no main-phase question records")
    return list(seen.values())


def judge_run(run_dir: str | Path, model: BaseChatModel, *, model_spec: str) -> dict[str, Any]:
    """Judge every distinct answer of a finished run; write ``judge.jsonl``, the
    ``judge`` block of ``metrics.json`` and the report (module doc).

    Args:
        run_dir: a sweep output directory (``results.jsonl`` and ``metrics.json``).
        model: the judge, any LangChain chat model.
        model_spec: the judge's spec string, recorded in ``metrics.json``.

    Returns:
        The ``judge`` block written into ``metrics.json``.

    Raises:
        FileNotFoundError: ``results.jsonl`` or ``metrics.json`` is missing.
        ValueError: no question records, a record lacks a field (file and record named),
            or no judge reply had a clear verdict (``judge.jsonl`` is written,
            ``metrics.json`` is not changed).
    """
    run_dir = Path(run_dir)
    mpath = run_dir / "metrics.json"
    if not mpath.exists():
        raise FileNotFoundError(f"{mpath} not found: the sweep in {run_dir} has not finished")
    answers = _answers(run_dir)
    structured: bool | None = None  # try structured output until one such call fails
    for a in answers:
        v = judge_verdict(model, a["question"], a["response"], a["reference"], a["question_type"],
                          a["question_id"], structured=structured)
        if v.method == "text":
            structured = False  # no structured output, or it failed: the one-word prompt from now on
        a.update(judge=v.correct, judge_method=v.method, judge_reply=v.reply, judge_reason=v.reason)
    with (run_dir / "judge.jsonl").open("w", encoding="utf-8") as fh:
        for a in answers:
            fh.write(json.dumps(a, ensure_ascii=False) + "\n")
    judged = [a for a in answers if a["judge"] is not None]
    unparsed = [a for a in answers if a["judge"] is None]
    if not judged:
        raise ValueError(
            f"the judge gave no clear verdict for any of the {len(answers)} answers (replies in "
            f"{run_dir / 'judge.jsonl'}; first: {unparsed[0]['judge_reply'][:120]!r}); metrics.json is unchanged"
        )
    block: dict[str, Any] = {
        "model": model_spec,
        "n_answers": len(answers),
        "n_judged": len(judged),
        "n_unparsed": len(unparsed),
        "method": {m: sum(a["judge_method"] == m for a in judged) for m in ("structured", "text")},
        "PR_judge": sum(a["judge"] for a in judged) / len(judged),
        "agreement": {},
        "disagreements": [],
        "unparsed": unparsed,
    }
    for rule in ("lme", "study"):
        have = [a for a in judged if a[rule] is not None]
        if have:
            agr = agreement([a[rule] for a in have], [a["judge"] for a in have])
            # kappa is nan when both raters give one constant label: JSON null
            block["agreement"][rule] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                                        for k, v in agr.items()}
    block["disagreements"] = [a for a in judged if a["lme"] != a["judge"]
                              or (a["study"] is not None and a["study"] != a["judge"])]
    metrics = json.loads(mpath.read_text())
    metrics["judge"] = block
    mpath.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    from evaluators.report.markdown import write_report

    write_report(run_dir)
    return block
