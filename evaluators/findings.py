"""The study's findings, checked on a run: a value with its 95% CI and a verdict each.

The findings and their reference values live in one data file,
``evaluators/data/study_findings.json`` (source: arXiv 2606.10062, Reported results,
as transcribed in paper-notes). Each finding names the ``metrics.json`` statistic that
measures it (a ``by_S`` or ``frs`` row and key; the CIs are the aggregate's paired
bootstrap CIs, :mod:`evaluators.aggregate`) and a test on it:

* ``">" t``: *reproduced* when the CI lies above ``t``, *not reproduced* when it lies
  at or below ``t``, else *inconclusive* (the CI is too wide for the instance count);
* ``"<=" t``: *reproduced* when the CI lies at or below ``t``, *not reproduced* when
  it lies above ``t``, else *inconclusive*;
* ``"within" m``: *reproduced* when the CI lies in ``[-m, m]``, *not reproduced* when
  it lies wholly outside it, else *inconclusive*;
* ``"==" 0``: *reproduced* when the value is 0 (no instance shows it), else *not
  reproduced* (one recovered secret contradicts "drives to 0").

A finding is *not testable* when the run lacks what it needs (the S level, the
deletion mode, a second k: the value is ``None``), or when the backend cannot show it
(``requires``): ``generative_summarizer`` fails for the ``extractive`` summarizer,
which keeps every first-person sentence verbatim at S=1 and cannot scrub a secret
abstractively, so what S=1 does to leakage is a property of that summarizer, not of
summarization; ``generative_responder`` fails for the ``extractive`` responder, which
never refuses. The value is still computed and shown.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = [
    "VERDICTS",
    "evaluate_findings",
    "study_findings",
    "verdict",
]

VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not testable")
"""The verdicts a finding can get, in the report's order of strength."""

_REQUIREMENTS = {
    "generative_summarizer": (
        "summarizer_model",
        "the extractive summarizer keeps first-person sentences verbatim and cannot scrub "
        "a secret abstractively, so this is a property of that summarizer",
    ),
    "generative_responder": (
        "model",
        "the extractive responder is retrieval-only and never refuses, so this is a "
        "property of that responder",
    ),
}


@lru_cache(maxsize=1)
def study_findings() -> dict[str, Any]:
    """The study's findings from the package data file ``evaluators/data/study_findings.json``.

    Returns:
        ``{"source": str, "findings": [{"id", "claim", "reference", "reference_text",
        "statistic", "definition", "test", "requires"}, ...]}``.
    """
    text = resources.files("evaluators").joinpath("data/study_findings.json").read_text("utf-8")
    return json.loads(text)


def verdict(value: float | None, ci: Any, test: dict[str, Any]) -> tuple[str, str]:
    """The verdict of one finding from its value, 95% CI and test (module doc).

    Args:
        value: the run's value, or ``None`` if the run did not measure it.
        ci: ``[low, high]`` (either may be ``None`` when undefined on some resample).
        test: ``{"op": ">" | "<=" | "within" | "==", "value": float}``.

    Returns:
        ``(verdict, reason)``: one of :data:`VERDICTS` (never ``"not testable"`` for a
        measured value with a defined CI) and a one-line reason.

    Raises:
        ValueError: an unknown ``op``.
    """
    op, t = test["op"], float(test["value"])
    if value is None:
        return "not testable", "this run does not measure it (S level, deletion mode or second k missing)"
    if op == "==":
        if value == t:
            return "reproduced", f"= {t:g} in every instance"
        return "not reproduced", f"{value:.2f} ≠ {t:g}: some instance shows it"
    lo, hi = (ci or [None, None])[:2]
    if lo is None or hi is None:
        return "inconclusive", "the CI is undefined (a ratio whose base is 0 on some resample)"
    if op == ">":
        if lo > t:
            return "reproduced", f"CI above {t:g}"
        if hi <= t:
            return "not reproduced", f"CI at or below {t:g}"
        return "inconclusive", f"CI [{lo:.2f}, {hi:.2f}] straddles {t:g}: too wide for this instance count"
    if op == "<=":
        if hi <= t:
            return "reproduced", f"CI at or below {t:g}"
        if lo > t:
            return "not reproduced", f"CI above {t:g}"
        return "inconclusive", f"CI [{lo:.2f}, {hi:.2f}] straddles {t:g}: too wide for this instance count"
    if op == "within":
        if -t <= lo and hi <= t:
            return "reproduced", f"CI within ±{t:g}"
        if lo > t or hi < -t:
            return "not reproduced", f"CI outside ±{t:g}"
        return "inconclusive", f"CI [{lo:.2f}, {hi:.2f}] crosses ±{t:g}: too wide for this instance count"
    raise ValueError(f"study findings: unknown test op {op!r} (use >, <=, within, ==)")


def _statistic(metrics: dict[str, Any], stat: dict[str, Any]) -> tuple[float | None, list[Any]]:
    """The value and CI that ``stat`` (a finding's ``statistic``) names in ``metrics``."""
    key = stat["key"]
    rows = metrics.get(stat["table"]) or []
    if stat["table"] == "by_S":
        rows = [r for r in rows if r.get("S") == stat["S"]]
    else:
        modes = stat.get("modes") or [stat["mode"]]
        rows = [r for r in rows if r.get("mode") in modes and ("S" not in stat or r.get("S") == stat["S"])]
    rows = [r for r in rows if r.get(key) is not None]
    if not rows:
        return None, [None, None]
    # One row, or the row with the largest value ("reduce": "max").
    row = max(rows, key=lambda r: r[key])
    return row[key], list(row.get(f"{key}_ci") or [None, None])


def _backend(metrics: dict[str, Any], config: dict[str, Any], field: str) -> str:
    if field == "summarizer_model":
        return str(
            metrics.get("summarizer_model") or config.get("summarizer_model")
            or metrics.get("model") or config.get("model") or "?"
        )
    return str(metrics.get("model") or config.get("model") or "?")


def evaluate_findings(metrics: dict[str, Any], config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Check every study finding on a run's metrics.

    Args:
        metrics: the content of ``metrics.json`` (:func:`evaluators.aggregate.compute_metrics`;
            ``model`` / ``summarizer_model`` name the backend).
        config: the content of ``config.json``, used for the backend when ``metrics``
            does not name it.

    Returns:
        One dict per finding, in the data file's order: ``id``, ``claim``,
        ``reference``, ``reference_text``, ``definition``, ``format`` (``rate``, or
        ``percent_change`` for a relative change shown as −76%), ``value``, ``ci``
        (``[low, high]``), ``verdict`` (one of :data:`VERDICTS`), ``reason``, ``source``.
    """
    config = config or {}
    data = study_findings()
    out = []
    for f in data["findings"]:
        value, ci = _statistic(metrics, f["statistic"])
        v, reason = verdict(value, ci, f["test"])
        for req in f.get("requires", []):
            field, why = _REQUIREMENTS[req]
            if _backend(metrics, config, field) == "extractive":
                v, reason = "not testable", f"with this backend: {why}"
                break
        out.append(
            {
                "id": f["id"],
                "claim": f["claim"],
                "reference": f["reference"],
                "reference_text": f["reference_text"],
                "definition": f["definition"],
                "format": f.get("format", "rate"),
                "value": value,
                "ci": ci,
                "verdict": v,
                "reason": reason,
                "source": data["source"],
            }
        )
    return out
