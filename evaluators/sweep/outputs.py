"""A finished run's outputs: metrics, hypotheses and the report."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluators.aggregate import compute_metrics
from evaluators.report.findings import evaluate_findings
from evaluators.rundir import run_settings
from evaluators.sweep.config import SweepConfig
from memkit.models.chat import add_usage


def sum_tokens(markers: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """Token usage of ``unit_done`` markers summed per phase and model:
    ``{phase: {model: {"calls", "input_tokens", "output_tokens", "total_tokens",
    "cached_calls"}}}`` (phases ``write``, ``main``, ``forget``; empty for backends
    that report no usage, such as ``extractive``)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for m in markers:
        for phase, by_model in (m.get("tokens") or {}).items():
            out[phase] = add_usage(out.get(phase, {}), by_model)
    return {phase: out[phase] for phase in sorted(out)}


def hypotheses_name(S: int | None, k: int | None) -> str:
    """The hypotheses file of one (S, k) cell: ``S{S}_k{k}.jsonl``; a knob the target
    lacks (``None``) is written ``-`` (``S-_k-.jsonl`` for a target's one point)."""
    return f"S{'-' if S is None else S}_k{'-' if k is None else k}.jsonl"


def write_outputs_for(out: Path, records: list[dict[str, Any]], config: SweepConfig) -> dict[str, Any]:
    """Write ``metrics.json``, the hypotheses files and the report from ``records``."""
    from evaluators.report.markdown import write_report

    metrics = compute_metrics(records, n_resamples=config.n_resamples, seed=config.seed)
    markers = [r for r in records if r["type"] == "unit_done"]
    metrics["model"] = config.model
    metrics["summarizer_model"] = config.summarizer_model or config.model
    metrics["design"] = next((r["design"] for r in records if r["type"] == "call" and "design" in r), config.design)
    if config.target is not None:
        metrics["target"] = config.target
    metrics["totals"] = {
        "units": len(markers),
        "llm_calls": sum(m.get("llm_calls", 0) for m in markers),
        "cache_hits": sum(m.get("cache_hits", 0) for m in markers),
        "scored_calls": sum(1 for r in records if r["type"] == "call"),
        "tokens": sum_tokens(markers),
    }
    metrics["findings"] = evaluate_findings(metrics, config.model_dump())
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")

    hyp_dir = out / "hypotheses"
    hyp_dir.mkdir(exist_ok=True)
    main_q = [r for r in records if r["type"] == "call" and r["phase"] == "main" and r["query_kind"] == "question"]
    levels, ks = metrics["summary_levels"], metrics["ks"]
    for S in levels:
        for k in ks:
            lines = [
                json.dumps({"question_id": r["question_id"], "hypothesis": r["response"]}, ensure_ascii=False)
                for r in main_q
                if r["S"] == S and r["k"] == k
            ]
            (hyp_dir / hypotheses_name(S, k)).write_text("\n".join(lines) + "\n")
    shutil.copyfile(hyp_dir / hypotheses_name(levels[0], ks[-1]), out / "hypotheses.jsonl")
    if ks != [None]:
        _note_k_beyond_stores(main_q, ks)
    redact = config.redact_hypotheses or bool(run_settings(out).get("redact_hypotheses"))
    write_report(out, redact_hypotheses=redact)
    return metrics


def _note_k_beyond_stores(main_q: list[dict[str, Any]], ks: Sequence[int]) -> None:
    """Warn when a k retrieved no more than a smaller k did in every unit (no store held
    more chunks): those k columns repeat the smaller k's."""
    most = max((len(r.get("retrieved_ids") or []) for r in main_q), default=0)
    beyond = [k for k in ks if k > most]
    if most > 0 and beyond:
        warnings.warn(
            f"--k {','.join(map(str, beyond))}: larger than any store in this run (the largest "
            f"held {most} chunks), so k={','.join(map(str, beyond))} retrieved every chunk of every "
            f"store, the same as k={most} would",
            stacklevel=2,
        )
