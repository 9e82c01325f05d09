"""The study's findings, checked on a run: a value with its 95% CI and a verdict each.

The findings and their reference values live in one data file,
``evaluators/data/study_findings.json`` (source: arXiv 2606.10062, its reported
results). Each finding names the ``metrics.json`` statistic that measures it (a ``by_S`` or ``frs`` row and key; the CIs are the aggregate's paired
bootstrap CIs, :mod:`evaluators.aggregate`) and a test on it:

* ``">" t``: *reproduced* when the CI lies above ``t``, *not reproduced* when it lies
  at or below ``t``, else *inconclusive* (the CI is too wide for the instance count);
* ``"<=" t``: *reproduced* when the CI lies at or below ``t``, *not reproduced* when
  it lies above ``t``, else *inconclusive*;
* ``"within" m``: *reproduced* when the CI lies in ``[-m, m]``, *not reproduced* when
  it lies wholly outside it, else *inconclusive*;
* ``"==" 0``: *reproduced* when the value is 0 (no instance shows it), else *not
  reproduced* (one recovered secret contradicts "drives to 0").

* ``"reduces" 0``: two halves, both tested: residue remains (the value's CI lies above
  0) AND it is lower than after the baseline mode (the paired per-instance reduction
  ``baseline − value`` has a bootstrap CI above 0); *not reproduced* when the reduction's
  CI lies at or below 0 or no residue remains.

A CI whose bound equals the threshold is said to be *at the threshold*; when the
statistic is already near its maximum at the smallest k (``ceiling``), an inconclusive
verdict says so instead (a k effect cannot grow from a ceiling).

A finding is *not testable* when the run lacks what it needs (the S level, the
deletion mode, a second k, per-instance values: the value is ``None``), or when a
backend property decides the claim (``requires``, each entry with its own reason:
e.g. the extractive summarizer keeps first-person sentences verbatim, so what S=1
does to leakage is a property of that summarizer). A property of this run's backend
that does not decide the claim (the PR cost of summarizing) is a ``note`` beside a
verdict. The value is always computed and shown.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from evaluators.report.tables import number_text

__all__ = [
    "VERDICTS",
    "evaluate_findings",
    "number_text",
    "study_findings",
    "verdict",
    "reading",
    "test_text",
    "magnitude_text",
    "MIN_INSTANCES",
]

VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not testable")
"""The verdicts a finding can get, in the report's order of strength."""

_BACKEND_FIELD = {"generative_summarizer": "summarizer_model", "generative_responder": "model"}
"""The config / metrics field that names the backend a ``requires`` entry is about."""


@lru_cache(maxsize=1)
def study_findings() -> dict[str, Any]:
    """The study's findings from the package data file ``evaluators/data/study_findings.json``.

    Returns:
        ``{"source": str, "findings": [{"id", "claim", "reference", "reference_text",
        "statistic", "definition", "test", "requires"}, ...]}``.
    """
    text = resources.files("evaluators").joinpath("data/study_findings.json").read_text("utf-8")
    return json.loads(text)




def _threshold_text(lo: float, hi: float, t: float, ceiling: str | None) -> str:
    """Why a CI that touches or spans threshold ``t`` is inconclusive, in words."""
    if ceiling:
        return ceiling
    if lo == t or hi == t:
        return f"CI [{number_text(lo)}, {number_text(hi)}] is at the threshold {t:g}: too wide for this instance count"
    return f"CI [{number_text(lo)}, {number_text(hi)}] straddles {t:g}: too wide for this instance count"


def verdict(value: float | None, ci: Any, test: dict[str, Any], *, ceiling: str | None = None,
            diff: float | None = None, diff_ci: Any = None) -> tuple[str, str]:
    """The verdict of one finding from its value, 95% CI and test (module doc).

    Args:
        value: the run's value, or ``None`` if the run did not measure it.
        ci: ``[low, high]`` (either may be ``None`` when undefined on some resample).
        test: ``{"op": ">" | "<=" | "within" | "==" | "reduces", "value": float}``.
        ceiling: a sentence saying the statistic is already near its maximum at the
            smallest k; when given, a ``">"`` test that is not reproduced is
            *inconclusive* with it as the reason (a k effect cannot grow from a ceiling).
        diff, diff_ci: for ``"reduces"``, the paired reduction (baseline − value) and
            its 95% CI; ``None`` when the run lacks per-instance values.

    Returns:
        ``(verdict, reason)``: one of :data:`VERDICTS` and a one-line reason.

    Raises:
        ValueError: an unknown ``op``.
    """
    op, t = test["op"], float(test["value"])
    if value is None:
        return "not testable", "this run does not measure it (S level, deletion mode or second k missing)"
    if op == "==":
        if value == t:
            return "reproduced", f"= {t:g} in every instance"
        return "not reproduced", f"{number_text(value)} ≠ {t:g}: some instance shows it"
    lo, hi = (ci or [None, None])[:2]
    if op == "reduces":
        # Two halves: residue remains (value > t) AND it is lower than the baseline's.
        if value <= t:
            return "not reproduced", f"no residue remains ({number_text(value)}): removed, not just reduced"
        if diff is None:
            return "not testable", "this run has no per-instance residue for the paired reduction"
        dlo, dhi = (diff_ci or [None, None])[:2]
        if dlo is None or dhi is None:
            return "inconclusive", "the reduction's CI is undefined"
        remains = lo is not None and lo > t
        if dhi <= 0:
            return "not reproduced", (
                f"does not reduce: reduction {number_text(diff)} CI [{number_text(dlo)}, {number_text(dhi)}] not above 0")
        if dlo > 0 and remains:
            return "reproduced", f"reduction CI [{number_text(dlo)}, {number_text(dhi)}] above 0 and residue CI above 0"
        return "inconclusive", (
            f"reduction CI [{number_text(dlo)}, {number_text(dhi)}], residue CI [{number_text(lo)}, {number_text(hi)}]: too wide "
            "for this instance count")
    if lo is None or hi is None:
        return "inconclusive", "the CI is undefined (a ratio whose base is 0 on some resample)"
    if op == ">":
        if lo > t:
            return "reproduced", f"CI above {t:g}"
        if ceiling:  # no room to rise: not evidence against the claim
            return "inconclusive", ceiling
        if hi <= t:
            return "not reproduced", f"CI at or below {t:g}"
        return "inconclusive", _threshold_text(lo, hi, t, ceiling)
    if op == "<=":
        if hi <= t:
            return "reproduced", f"CI at or below {t:g}"
        if lo > t:
            return "not reproduced", f"CI above {t:g}"
        return "inconclusive", _threshold_text(lo, hi, t, ceiling)
    if op == "within":
        if -t <= lo and hi <= t:
            return "reproduced", f"CI within ±{t:g}"
        if lo > t or hi < -t:
            return "not reproduced", f"CI outside ±{t:g}"
        return "inconclusive", f"CI [{number_text(lo)}, {number_text(hi)}] crosses ±{t:g}: too wide for this instance count"
    raise ValueError(f"study findings: unknown test op {op!r} (use >, <=, within, ==, reduces)")


def _statistic(metrics: dict[str, Any], stat: dict[str, Any], mode: str | None = None
               ) -> tuple[float | None, list[Any], dict[str, Any] | None]:
    """The value, CI and row that ``stat`` (a finding's ``statistic``) names in ``metrics``
    (``mode`` overrides the statistic's deletion mode)."""
    key = stat["key"]
    rows = metrics.get(stat["table"]) or []
    if stat["table"] == "by_S":
        rows = [r for r in rows if r.get("S") == stat["S"]]
    else:
        modes = [mode] if mode else (stat.get("modes") or [stat["mode"]])
        rows = [r for r in rows if r.get("mode") in modes and ("S" not in stat or r.get("S") == stat["S"])]
    rows = [r for r in rows if r.get(key) is not None]
    if not rows:
        return None, [None, None], None
    # One row, or the row with the largest value ("reduce": "max").
    row = max(rows, key=lambda r: r[key])
    return row[key], list(row.get(f"{key}_ci") or [None, None]), row


def _paired_reduction(metrics: dict[str, Any], stat: dict[str, Any], row: dict[str, Any] | None
                      ) -> tuple[float | None, list[Any]]:
    """Mean per-instance ``baseline − value`` of ``stat["per_instance"]`` with its 95%
    paired bootstrap CI (:func:`evaluators.scoring.metrics.bootstrap_ci`, seed 0); ``None`` when
    either row lacks per-instance values or their instance counts differ."""
    import numpy as np

    from evaluators.scoring.metrics import bootstrap_ci

    _, _, base = _statistic(metrics, stat, mode=stat["baseline_mode"])
    key = stat["per_instance"]
    if row is None or base is None or not row.get(key) or not base.get(key) or len(row[key]) != len(base[key]):
        return None, [None, None]
    d = np.asarray(base[key], float) - np.asarray(row[key], float)
    lo, hi = bootstrap_ci(d, "mean", n_resamples=1000, seed=0)
    return round(float(d.mean()), 4), [round(float(lo), 4), round(float(hi), 4)]


_NAMES = {"k_effect_PR": "PR", "k_effect_AER_max": "AER_max", "delta_S_relative": "ΔS rel.",
          "PR_cost_relative": "PR cost rel.", "delta_DI": "ΔDI"}


_RELATIVE = {
    "delta_S_relative": "cut ΔS / AER_max(S=0) at S={S}, mean over k; shown as the change of AER_max",
    "PR_cost_relative": "cost (PR(S=0) − PR(S={S})) / PR(S=0), mean over k; shown as the change of PR",
}


def quantity(metrics: dict[str, Any], stat: dict[str, Any]) -> str:
    """What a finding's "this run" value is, in words: the statistic, its S, mode and k
    (e.g. ``"FRS_summary at S=1, raw_only"``, ``"AER_max(k=25) − AER_max(k=1) at S=0"``)."""
    key = stat["key"]
    ks = metrics.get("ks") or []
    if key.startswith("k_effect_"):
        name = _NAMES[key]
        kk = (f"(k={max(ks)}) − {name}(k={min(ks)})" if len(ks) >= 2 else "(k_max) − " + name + "(k_min)")
        return f"{name}{kk} at S={stat['S']}"
    name = _NAMES.get(key, key)
    if key in _RELATIVE:
        # Shown as a change in percent (−76%); the test's threshold is on the cut.
        return _RELATIVE[key].format(S=stat["S"])
    if stat["table"] == "by_S":
        return f"{name} at S={stat['S']}, mean over k"
    modes = stat.get("modes") or [stat["mode"]]
    where = f"at S={stat['S']}" if "S" in stat else "(largest over every S)"
    s = f"{name} {where}, {' / '.join(modes)}"
    if stat.get("baseline_mode"):
        s += f"; reduction vs {stat['baseline_mode']} (paired)"
    return s


def _ceiling(metrics: dict[str, Any], spec: dict[str, Any] | None) -> str | None:
    """The ceiling sentence when ``spec``'s statistic is already near its maximum at the
    smallest k (``spec``: ``{"table": "frontier", "S", "key", "near"}``), else ``None``."""
    if not spec:
        return None
    rows = [r for r in metrics.get(spec["table"]) or [] if r.get("S") == spec["S"] and r.get(spec["key"]) is not None]
    if not rows:
        return None
    first = min(rows, key=lambda r: r["k"])
    if first[spec["key"]] >= spec["near"]:
        return (f"ceiling: {spec['key']} is already {number_text(first[spec['key']])} at the smallest k "
                f"(k={first['k']}), near its maximum 1, so a larger k cannot raise it much")
    return None


MIN_INSTANCES = 3
"""Fewer instances than this give a degenerate bootstrap CI (every resample draws the
same one or two values), so a finding gets a small-sample warning, not a verdict."""

_TESTED = {"k_effect_PR": "the k effect on PR", "k_effect_AER_max": "the k effect on AER_max",
           "delta_S_relative": "the relative cut of AER_max", "PR_cost_relative": "the relative PR cost",
           "delta_DI": "ΔDI", "FRS_summary": "FRS_summary", "FRS_worst": "FRS_worst"}
_OPS = {">": ">", "<=": "≤", "within": "within ±", "==": "="}


def test_text(stat: dict[str, Any], test: dict[str, Any], ci: Any) -> str:
    """The test that decides a finding, in words, with the CI it is applied to, e.g.
    ``"the relative PR cost ≤ 0.1, applied to its 95% CI [−0.68, −0.02]"``."""
    name = _TESTED.get(stat["key"], stat["key"])
    op, t = test["op"], float(test["value"])
    if op == "reduces":
        return (f"{name} > 0 after {stat['mode']} and lower than after {stat['baseline_mode']} "
                "(paired reduction's 95% CI above 0)")
    head = f"{name} {_OPS.get(op, op)}{'' if op == 'within' else ' '}{t:g}"
    lo, hi = (ci or [None, None])[:2]
    if op == "==" or lo is None or hi is None:
        return head
    return f"{head}, applied to its 95% CI [{number_text(lo)}, {number_text(hi)}]"


def reading(metrics: dict[str, Any], stat: dict[str, Any], value: float | None) -> str | None:
    """The value in words with its sign: a cost or a gain, a cut or a rise (``None`` when
    the run did not measure it), e.g. ``"PR rose 25% from S=0 to S=1: a gain, no cost"``."""
    if value is None:
        return None
    key, S = stat["key"], stat.get("S")
    ks = metrics.get("ks") or []
    pct = f"{abs(value) * 100:.0f}%"
    if key == "PR_cost_relative":
        if value > 0:
            return f"PR fell {pct} from S=0 to S={S}: a cost"
        return f"PR rose {pct} from S=0 to S={S}: a gain, no cost" if value < 0 else "PR unchanged: no cost"
    if key == "delta_S_relative":
        if value > 0:
            return f"AER_max fell {pct} from S=0 to S={S}: a cut"
        return f"AER_max rose {pct} from S=0 to S={S}: no cut" if value < 0 else "AER_max unchanged: no cut"
    if key.startswith("k_effect_"):
        name = _NAMES[key]
        span = f"from k={min(ks)} to k={max(ks)}" if len(ks) >= 2 else "over k"
        if value == 0:
            return f"{name} unchanged {span}"
        return f"{name} {'rose' if value > 0 else 'fell'} by {number_text(abs(value))} {span} at S={S}"
    if key.startswith("FRS"):
        return f"{value * 100:.0f}% of instances keep a recoverable copy"
    return None


def magnitude_text(value: float | None, reference: Any, test: dict[str, Any]) -> str | None:
    """For a finding whose test is about direction (``>`` 0), how this run's size compares
    with the study's (``"5.0× the study's 0.2"``), reported apart from the verdict; ``None``
    when either is missing or the study's value is 0."""
    if value is None or not isinstance(reference, (int, float)) or reference == 0 or test["op"] != ">":
        return None
    if value * reference < 0:
        return f"opposite sign to the study's {reference:g}"
    return f"{value / reference:.1f}× the study's {reference:g}"


def _why_missing(metrics: dict[str, Any], stat: dict[str, Any]) -> str:
    """Why a finding's statistic is ``None`` on this run, naming the real cause."""
    levels = {r.get("S") for r in metrics.get("by_S") or []}
    ks = metrics.get("ks") or []
    if "S" in stat and stat["S"] not in levels and stat["table"] == "by_S":
        return f"this run has no S={stat['S']} (--summary-levels)"
    if stat["key"].startswith("k_effect_") and len(ks) < 2:
        return f"this run has one k ({ks[0] if ks else '?'}); a k effect needs two (--k)"
    if stat["table"] == "frs":
        modes = stat.get("modes") or [stat["mode"]]
        ran = {r.get("mode") for r in metrics.get("frs") or []}
        if not ran & set(modes):
            return f"this run ran no {' / '.join(modes)} (--deletion-modes)"
        if "S" in stat and not any(r.get("S") == stat["S"] for r in metrics.get("frs") or []):
            return f"this run has no S={stat['S']} (--summary-levels)"
        return f"the design has no such tier at S={stat.get('S')}"
    s0 = next((r for r in metrics.get("by_S") or [] if r.get("S") == 0), None)
    if stat["key"] == "PR_cost_relative" and s0 is not None and not s0.get("PR"):
        return "PR at S=0 is 0, so a cost relative to it is undefined"
    if stat["key"] == "delta_S_relative" and s0 is not None and not s0.get("AER_max"):
        return "AER_max at S=0 is 0, so a cut relative to it is undefined"
    if stat["key"] == "PR_cost_relative" or stat["key"] == "delta_S_relative":
        return "this run has no S=0 to compare with (--summary-levels)"
    return "this run does not measure it"


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
        ``reference``, ``reference_text``, ``definition``, ``quantity`` (what ``value``
        is: statistic, S, mode, k), ``format`` (``rate``, or ``percent_change`` for a
        relative change shown as −76%), ``value``, ``ci`` (``[low, high]``),
        ``verdict`` (one of :data:`VERDICTS`), ``reason`` (for *not testable*, the real
        cause: a missing S, k or mode, or a base of 0; fewer than :data:`MIN_INSTANCES`
        instances turn a verdict into *inconclusive* with a small-sample warning),
        ``test`` (the deciding test in words, :func:`test_text`), ``reading`` (the value
        with its sign in words, :func:`reading`), ``magnitude`` (for a reproduced
        direction, the size against the study's, :func:`magnitude_text`), ``note`` (a backend remark
        that does not change the verdict, or ``None``), ``source``; a finding tested
        by ``"reduces"`` also has ``reduction`` and ``reduction_ci``.
    """
    config = config or {}
    data = study_findings()
    out = []
    for f in data["findings"]:
        stat = f["statistic"]
        value, ci, row = _statistic(metrics, stat)
        extra: dict[str, Any] = {}
        diff, diff_ci = None, None
        if f["test"]["op"] == "reduces":
            diff, diff_ci = _paired_reduction(metrics, stat, row)
            extra = {"reduction": diff, "reduction_ci": diff_ci}
        v, reason = verdict(value, ci, f["test"], ceiling=_ceiling(metrics, f.get("ceiling")),
                            diff=diff, diff_ci=diff_ci)
        if value is None:
            v, reason = "not testable", _why_missing(metrics, stat)
        n = metrics.get("n_instances")
        if isinstance(n, int) and n < MIN_INSTANCES and v in ("reproduced", "not reproduced", "inconclusive") \
                and f["test"]["op"] != "==":
            v, reason = "inconclusive", (
                f"small sample: {n} instance{'s' if n != 1 else ''}; a bootstrap CI from fewer than "
                f"{MIN_INSTANCES} is degenerate, so no verdict (run --n {MIN_INSTANCES} or more; the study used 50)")
        for req in f.get("requires", []) if value is not None else []:  # a missing S/k/mode comes first
            field = _BACKEND_FIELD[req["backend"]]
            if _backend(metrics, config, field) == "extractive":
                v, reason = "not testable", f"with this backend: {req['reason']}"
                break
        note = None
        if (bn := f.get("backend_note")) and _backend(metrics, config, _BACKEND_FIELD[bn["backend"]]) == "extractive":
            note = bn["note"]
        out.append(
            {
                "id": f["id"],
                "claim": f["claim"],
                "reference": f["reference"],
                "reference_text": f["reference_text"],
                "definition": f["definition"],
                "quantity": quantity(metrics, stat),
                "format": f.get("format", "rate"),
                "value": value,
                "ci": ci,
                "verdict": v,
                "reason": reason,
                "test": test_text(stat, f["test"], ci),
                "reading": reading(metrics, stat, value),
                "magnitude": magnitude_text(value, f.get("reference"), f["test"]) if v == "reproduced" else None,
                "note": note,
                "source": data["source"],
                **extra,
            }
        )
    return out
