"""Report files for a sweep: ``report.md``, ``report.html`` and the study's figures.

Layout follows the study's Table 2 (arXiv 2606.10062): per
model and summary level S, PR, AER, PUA and ΔS with 95% CIs; FRS per deletion mode
and tier. Figures: ``frontier.png`` (PR vs AER_max per S, one line over k),
``probes.png`` (AER per probe level per S) and ``frs.png`` (FRS per mode and tier).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from evaluators.aggregate import surface_measured, surfaces_with_copies
from evaluators.report.figures import write_figures
from evaluators.report.hypotheses import HypothesesCounts, canary_sentence, hypotheses_with_canaries
from evaluators.report.tables import html_inline, html_table, md_table, value_text

__all__ = [
    "HypothesesCounts",
    "canary_sentence",
    "hypotheses_with_canaries",
    "residue_sentences",
    "tables",
    "write_report",
]





def _knob(x: int | None) -> str:
    """A summary level or k in a table: ``–`` where the target has no such knob."""
    return "–" if x is None else str(x)

def _pct(x: Any, ci: Any = None) -> str:
    """A relative cut as a change in percent: 0.76 -> "−76%" (with its CI)."""
    if x is None:
        return "–"

    def p(v: float) -> str:
        r = round(-100 * v)
        return "0%" if r == 0 else f"{r:+d}%".replace("-", "−")

    s = p(x)
    if ci and ci[0] is not None and ci[1] is not None:
        lo, hi = sorted((ci[0], ci[1]), reverse=True)
        s += f" [{p(lo)}, {p(hi)}]"
    return s


LEGENDS = {
    "findings": (
        "`claim`: the study's finding in one line; `study`: its reference value (Gemma 3 12B "
        "unless noted); `quantity`: which statistic `this run` is, at which S, deletion mode "
        "and k; `this run`: the value measured here with its 95% bootstrap CI over "
        "instances; `verdict`: reproduced (the CI is on the claim's side of its threshold), "
        "not reproduced (on the other side), inconclusive (the CI spans the threshold: too "
        "wide for this instance count, or at the threshold, or at a ceiling) or not testable "
        "(this run lacks the S level, mode or k, or a backend property decides the claim)."
    ),
    "table2": (
        "`PR`: share of questions answered correctly; `AER_max`: share of canaries fully "
        "present in a probe response, max over probe levels; `PUA`: area under the best "
        "achievable PR over AER ∈ [0, 1] (k sweep); `ΔS`: AER_max(S=0) − AER_max(S); "
        "`ΔS rel.`: ΔS / AER_max(S=0) as a change of AER (−76% = S cuts AER by 76%); "
        "`ΔDI`: |AER_direct − AER_indirect|. Rows average over k; brackets: 95% CIs."
    ),
    "levels": "AER per probe level (direct, indirect, jailbreak), mean over k, with 95% CIs.",
    "frs": (
        "`FRS_raw` / `FRS_summary`: AER_max after the forget with retrieval restricted to "
        "that tier (n/a: the design has no such tier at this S, so nothing is measured); "
        "`FRS_worst`: max over measured tiers; `PR_after`: PR after the forget; "
        "`recoverable`: instances whose secret a probe still extracts from some tier; "
        "`forensic copies`: copies of the secret found on every scanned surface (store "
        "text, metadata, stale embeddings, chroma's files, caches), summed over instances."
    ),
    "forensic": (
        "Instances (of the count scanned) with at least one copy of the secret on each "
        "surface after the forget: `text_*` and `metadata`: the store's live values; "
        "`stale_embedding`: vectors of deleted text; `disk_*`: chroma's files (SQLite "
        "pages, the embeddings_queue log, FTS tables, HNSW files, WAL); `cache*`: LLM "
        "caches; `side_*`: side files a memory layer keeps."
    ),
    "frontier": (
        "Per S and k: `PR` and `AER_max` with 95% CIs; `context exposure`: share of probe "
        "calls whose retrieved context held the canary (what the pipeline exposes); "
        "`extraction`: share of probe calls whose response held it (what the model "
        "repeats). Extraction ≤ exposure for a model that only copies from its context."
    ),
    "rules": (
        "`PR (lme)`: the default answer rule (LongMemEval's judging semantics: numbers by "
        "value, abstention for `_abs` questions, negated mentions do not count); `PR "
        "(study)`: the study's rule (cosine > 0.50 or every content word present); `AER_max "
        "exact`: the study's verbatim substring; `normalized`: the canary in any spelling "
        "(case, separators, Unicode forms, encodings; memkit.scan.matching). 95% CIs."
    ),
    "frs_normalized": (
        "FRS as above, counting a probe response that holds the secret in any spelling "
        "(memkit.scan.matching); n/a: the design has no such tier at this S."
    ),
    "judge": (
        "Agreement of each PR rule with the LLM judge (`memkit judge`) over distinct "
        "answers: `accuracy`, Cohen's kappa, and the two kinds of disagreement."
    ),
}


_BACKEND = "with this backend: "


def _verdict_cell(f: dict[str, Any]) -> str:
    """The verdict with its reason, the deciding test and, for a reproduced direction,
    the magnitude against the study's, reported apart."""
    reason = f.get("reason") or ""
    if reason.startswith(_BACKEND):
        return f"{f['verdict']} with this backend (see below)"
    verdict = f["verdict"]
    if f.get("magnitude"):
        verdict = f"direction {verdict}; magnitude {f['magnitude']}"
    cell = f"{verdict} ({reason})" if reason else verdict
    if f.get("test") and f["verdict"] != "not testable":
        cell += f"; test: {f['test']}"
    return f"{cell}; note: {f['note']}" if f.get("note") else cell


def backend_notes(findings: list[dict[str, Any]]) -> list[str]:
    """The distinct reasons why findings are not testable with this run's backend, each
    once (the findings table refers to them with "see below")."""
    out: list[str] = []
    for f in findings:
        reason = f.get("reason") or ""
        if reason.startswith(_BACKEND):
            note = reason.removeprefix(_BACKEND)
            note = note[:1].upper() + note[1:] + "."
            if note not in out:
                out.append(note)
    return out


def tables(
    metrics: dict[str, Any], config: dict[str, Any]
) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The report's tables as ``(title, header, rows, legend)`` of strings.

    Args:
        metrics: the content of ``metrics.json``.
        config: the content of ``config.json`` (for the model name).

    Returns:
        The findings table first (:func:`evaluators.report.findings.evaluate_findings` on
        ``metrics``, recomputed rather than read from ``metrics["findings"]``, which an
        older memkit may have written), then Table 2, AER per level, FRS, forensic copies and
        the frontier with its decomposition; each legend defines the table's columns.
    """
    from evaluators.report.findings import evaluate_findings

    model = config.get("model", metrics.get("model", "?"))
    # Recomputed, not read from metrics["findings"]: a metrics.json written by an older
    # memkit keeps older verdicts (and their sources); the statistics are what count.
    findings = evaluate_findings(metrics, config)
    legend = LEGENDS["findings"]
    if notes := backend_notes(findings):
        legend += " Not testable with this backend: " + " ".join(notes)
    ftab = [
        [f["claim"], f["reference_text"], f.get("quantity", "–"),
         (_pct(f["value"], f["ci"]) if f.get("format") == "percent_change" else value_text(f["value"], f["ci"]))
         + (f"; reduction {value_text(f['reduction'], f.get('reduction_ci'))}" if f.get("reduction") is not None else "")
         + (f" ({f['reading']})" if f.get("reading") else ""),
         _verdict_cell(f)]
        for f in findings
    ]
    t2 = []
    for r in metrics["by_S"]:
        t2.append(
            [
                model,
                _knob(r["S"]),
                value_text(r["PR"], r.get("PR_ci")),
                value_text(r["AER_max"], r.get("AER_max_ci")),
                value_text(r["PUA"], r.get("PUA_ci")),
                value_text(r.get("delta_S"), r.get("delta_S_ci")),
                "–" if r["S"] in (0, None) else _pct(r.get("delta_S_relative"), r.get("delta_S_relative_ci")),
                value_text(r.get("delta_DI"), r.get("delta_DI_ci")),
            ]
        )
    levels = []
    for r in metrics["by_S"]:
        levels.append(
            [_knob(r["S"])]
            + [value_text(r[f"AER_{lv}"], r.get(f"AER_{lv}_ci")) for lv in ("direct", "indirect", "jailbreak")]
        )
    frs = []
    for r in metrics["frs"]:
        frs.append(
            [
                _knob(r["S"]),
                r["mode"],
                value_text(r["FRS_raw"], r.get("FRS_raw_ci"), na="n/a"),
                value_text(r["FRS_summary"], r.get("FRS_summary_ci"), na="n/a"),
                value_text(r["FRS_worst"], r.get("FRS_worst_ci")),
                value_text(r.get("PR_after"), r.get("PR_after_ci")),
                str(r.get("instances_recoverable", "–")),
                str(r.get("forensic_total", "–")),
            ]
        )
    surfaces = surfaces_with_copies(metrics)
    forensic = [
        [_knob(r["S"]), r["mode"]]
        + ["n/a" if not surface_measured(r, s) else
           f"{r.get('forensic_instances', {}).get(s, 0)}/{r.get('forensic_n', '?')}" for s in surfaces]
        for r in metrics["frs"]
    ]
    dropped = sorted({s for r in metrics["frs"] for s in r.get("forensic_instances", {})} - set(surfaces))
    frontier = [
        [_knob(r["S"]), _knob(r["k"]), value_text(r["PR"], r.get("PR_ci")), value_text(r["AER_max"], r.get("AER_max_ci"))]
        + [value_text(d["context_exposure"], d.get("context_exposure_ci")), value_text(d["extraction"], d.get("extraction_ci"))]
        for r, d in zip(metrics["frontier"], metrics["decomposition"], strict=True)
    ]
    out = [
        ("Findings of the study on this run", ["claim", "study", "quantity", "this run [95% CI]", "verdict"], ftab,
         legend),
        (
            "Table 2: utility and leakage per summary level (rows average over k)",
            ["model", "S", "PR", "AER_max", "PUA", "ΔS", "ΔS rel.", "ΔDI"],
            t2,
            LEGENDS["table2"] + "".join(
                f" `S` –: the target has no summary level. PUA –: {r['PUA_na']}." for r in metrics["by_S"][:1]
                if r.get("PUA_na")),
        ),
        ("AER per probe level", ["S", "direct", "indirect", "jailbreak"], levels, LEGENDS["levels"]),
        (
            "Forgetting residue per deletion mode and tier",
            ["S", "mode", "FRS_raw", "FRS_summary", "FRS_worst", "PR_after", "recoverable", "forensic copies"],
            frs,
            LEGENDS["frs"],
        ),
        ("Instances with a forensic copy, per surface", ["S", "mode", *surfaces], forensic,
         LEGENDS["forensic"] + " n/a: the design has no such tier at this S (as for FRS)."
         + (f" Surfaces with no copy in any mode are left out: {', '.join(dropped)}." if dropped else "")),
        (
            "Frontier and pipeline-vs-model decomposition per S and k",
            ["S", "k", "PR", "AER_max", "context exposure", "extraction"],
            frontier,
            LEGENDS["frontier"],
        ),
    ]
    out += _rule_tables(metrics)
    out += token_tables(metrics)
    return out


def _rule_tables(metrics: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    """Tables of both PR rules and both AER counts (exact substring vs the shared secret
    matcher), per S and, for FRS, per deletion mode; empty for a ``metrics.json``
    written before these columns existed."""
    if not any("PR_study" in r or "AER_max_normalized" in r for r in metrics["by_S"]):
        return []  # a metrics.json from before these columns (and before `memkit judge`)
    levels = ("direct", "indirect", "jailbreak")
    rows = [
        [_knob(r["S"]), value_text(r["PR"], r.get("PR_ci")), value_text(r.get("PR_study"), r.get("PR_study_ci")),
         value_text(r["AER_max"], r.get("AER_max_ci")),
         value_text(r.get("AER_max_normalized"), r.get("AER_max_normalized_ci"))]
        + [value_text(r.get(f"AER_{lv}_normalized"), r.get(f"AER_{lv}_normalized_ci")) for lv in levels]
        for r in metrics["by_S"]
    ]
    out = [(
        "PR under both rules (lme: default, agrees with LongMemEval's judge; study: the "
        "study's rule) and AER exact vs normalized (any spelling of the canary)",
        ["S", "PR (lme)", "PR (study)", "AER_max exact", "AER_max normalized",
         *(f"{lv} normalized" for lv in levels)],
        rows,
        LEGENDS["rules"],
    )]
    frs = [
        [_knob(r["S"]), r["mode"]]
        + [value_text(r.get(f"FRS_{t}_normalized"), r.get(f"FRS_{t}_normalized_ci"), na="n/a")
           for t in ("raw", "summary", "worst")]
        for r in metrics["frs"] if "FRS_worst_normalized" in r
    ]
    if frs:
        out.append((
            "Forgetting residue, normalized (a leak in any spelling counts)",
            ["S", "mode", "FRS_raw normalized", "FRS_summary normalized", "FRS_worst normalized"],
            frs,
            LEGENDS["frs_normalized"],
        ))
    judge = metrics.get("judge")
    if judge:
        out.append((
            f"PR rules vs the LLM judge ({judge['model']}, {judge['n_answers']} distinct answers, "
            f"judge accepts {judge['PR_judge']:.2f})",
            ["rule", "n", "accuracy", "Cohen's kappa", "rule yes / judge no", "rule no / judge yes"],
            [[rule, str(a["n"]), value_text(a["accuracy"]), value_text(a.get("kappa")), str(a["rule_yes_judge_no"]),
              str(a["rule_no_judge_yes"])] for rule, a in judge["agreement"].items()],
            LEGENDS["judge"],
        ))
        yn = {True: "yes", False: "no", None: "–"}
        out.append((
            "Answers where a rule and the judge disagree",
            ["question_id", "reference", "response", "judge", "lme", "study"],
            [[d["question_id"], d["reference"][:60], d["response"][:100], yn[d["judge"]], yn[d["lme"]],
              yn[d["study"]]] for d in judge["disagreements"]],
            "Each answer a rule and the judge scored differently (reference and response "
            "truncated); `judge`, `lme`, `study`: each one's verdict.",
        ))
    return out






def residue_sentences(metrics: dict[str, Any], threshold: float = 0.5) -> list[str]:
    """Forensic residue in words: one sentence per deletion mode (pooled over S) that
    leaves a copy of the secret on chroma's on-disk surfaces (``disk_*``) in more than
    ``threshold`` of the instances scanned, with the share and the surfaces.

    Args:
        metrics: the content of ``metrics.json`` (``frs`` rows with
            ``forensic_instances``, ``forensic_instances_disk`` and ``forensic_n``).
        threshold: the share of instances above which a mode is called out.

    Returns:
        Markdown sentences, in the order the modes appear; the control mode ``none``
        is left out (it deletes nothing by design).
    """
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for r in metrics["frs"]:
        by_mode.setdefault(r["mode"], []).append(r)
    out = []
    for mode, rows in by_mode.items():
        n = sum(int(r.get("forensic_n", 0)) for r in rows)
        if mode == "none" or not n:
            continue
        hit = sum(int(r.get("forensic_instances_disk", 0)) for r in rows)
        if hit / n <= threshold:
            continue
        per: dict[str, int] = {}
        for r in rows:
            for s, c in r.get("forensic_instances", {}).items():
                if s.startswith("disk_") and c:
                    per[s] = per.get(s, 0) + int(c)
        surf = ", ".join(f"{s} {100 * c / n:.0f}%" for s, c in sorted(per.items(), key=lambda x: -x[1]))
        levels = ",".join(_knob(r["S"]) for r in rows)
        out.append(
            f"**`{mode}` leaves copies of the secret on disk in {100 * hit / n:.0f}% of instances** "
            f"({hit} of {n} over S={levels}): {surf}. A reader of the store's files recovers "
            "the secret although a probe may not."
        )
    return out






def token_tables(metrics: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The "Model calls and tokens" table: one row per phase and model from
    ``metrics["totals"]["tokens"]`` (providers' usage metadata; none for backends that
    report none, e.g. ``extractive``, in which case no table)."""
    tokens = (metrics.get("totals") or {}).get("tokens") or {}
    rows = [
        [phase, model, str(r.get("calls", 0)), str(r.get("cached_calls", 0)), str(r.get("input_tokens", 0)),
         str(r.get("output_tokens", 0)), str(r.get("total_tokens", 0))]
        for phase, by_model in tokens.items()
        for model, r in sorted(by_model.items())
    ]
    if not rows:
        return []
    header = ["phase", "model", "calls sent", "cache hits", "prompt tokens", "completion tokens", "total tokens"]
    legend = ("`calls sent`: model calls that reached the provider; `cache hits`: answers "
              "served from memkit's LLM cache; tokens: the providers' usage metadata summed.")
    return [("Model calls and tokens per phase (providers' usage metadata)", header, rows, legend)]


















def _applicable_config(config: dict[str, Any]) -> list[list[str]]:
    """Configuration rows for the options that apply to this run: unset options and the
    synthetic generator's options for real data are left out."""
    rows = []
    for k, v in sorted(config.items()):
        if v is None or (k.startswith("synthetic_") and config.get("data") != "synthetic"):
            continue
        rows.append([k, json.dumps(v)])
    return rows


_HNSW_NOTE = (
    "`disk_hnsw` counts bytes that chroma's HNSW writer copied from uninitialised heap "
    "memory into index-file slack; they vary from run to run of the same seed."
)
_FIGURES_NOTE = (
    "Frontier: PR against AER_max per S, one point per k, bars are 95% CIs on both axes. "
    "Probes and FRS: bars are 95% CIs; a zero-height bar is marked 0, an unmeasured tier n/a. "
    "Forensic: share of instances with a copy per S, deletion mode and surface (mean copies "
    "per instance in brackets); n/a (grey): the design has no such tier at this S."
)


def write_report(out_dir: str | Path, *, redact_hypotheses: bool = False) -> Path:
    """Write ``report.md``, ``report.html`` and the figures for the sweep in ``out_dir``.

    The report opens with the study's findings checked on this run
    (:func:`evaluators.report.findings.evaluate_findings`), says in words which deletion modes
    leave forensic copies on disk (:func:`residue_sentences`) and how many hypotheses
    hold a planted canary (:func:`hypotheses_with_canaries`), then gives the tables,
    each with a legend, the figures and the applicable configuration.

    Args:
        out_dir: a sweep output directory holding ``metrics.json`` and ``config.json``.
        redact_hypotheses: mask planted canaries in the hypotheses files first, and
            record the choice in the run (:func:`evaluators.rundir.record_setting`) so
            every later sweep, ``--resume`` and report on it masks them too; a run that
            recorded it is masked whatever this argument says.

    Returns:
        The path of ``report.md``.

    Raises:
        FileNotFoundError: ``metrics.json`` is missing (the sweep has not finished).
        ValueError: a damaged hypotheses or canary record (named by file and line).
    """
    out = Path(out_dir)
    mpath = out / "metrics.json"
    if not mpath.exists():
        raise FileNotFoundError(f"{mpath} not found: run `memkit sweep --out {out}` first")
    from evaluators.rundir import record_setting, run_settings

    if redact_hypotheses:  # kept: later sweeps, --resume and reports on this run mask too
        record_setting(out, "redact_hypotheses", True)
    redact_hypotheses = redact_hypotheses or bool(run_settings(out).get("redact_hypotheses"))
    from evaluators.records import read_run

    run = read_run(out, need=("metrics.json",), metrics=True)  # the one reader of a run directory
    metrics, config = run.metrics, run.config
    figures = write_figures(metrics, out)
    from evaluators.report.forgetting import report_tables

    tbls = tables(metrics, config) + report_tables(metrics)
    cfg_rows = _applicable_config(config)
    from evaluators.report.findings import VERDICTS, evaluate_findings

    verdicts = [f["verdict"] for f in evaluate_findings(metrics, config)]
    tally = ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if verdicts.count(v))
    notes = residue_sentences(metrics)
    if run.bad_lines:
        notes.append(run.damage_note())
    if metrics.get("adversary"):
        from evaluators.adversary.report import adversary_sentences

        notes += adversary_sentences(metrics["adversary"])
    canary = canary_sentence(hypotheses_with_canaries(out, redact=redact_hypotheses), redact_hypotheses)
    synthetic = config.get("data") == "synthetic"
    on_data = " on synthetic data" if synthetic else ""
    tally = f"Of {len(verdicts)} findings{on_data}: {tally}."
    intro = (
        ("**Synthetic data**: the instances are generated, not LongMemEval questions. " if synthetic else "")
        + f"{metrics['n_instances']} instances; k ∈ {metrics['ks']}; S ∈ {metrics['summary_levels']}; "
        f"model {config.get('model', metrics.get('model', '?'))}; "
        f"memory design `{config.get('design', metrics.get('design', 'study'))}`. "
        "Values are means with 95% bootstrap CIs over instances."
    )

    md = ["# memkit sweep report", "", intro, ""]
    for i, (title, header, rows, legend) in enumerate(tbls):
        md += [f"## {title}", ""]
        if i == 0:
            md += [tally, ""]
        md += [md_table(header, rows), "", legend, ""]
        if i == 0 and (notes or canary):
            md += ["## What to know before citing this run", ""]
            md += [f"- {x}" for x in notes + ([canary] if canary else [])] + [""]
        if title.startswith("Instances with a forensic copy") and "disk_hnsw" in header:
            md += [_HNSW_NOTE, ""]
    adversary = metrics.get("adversary")
    if adversary:
        from evaluators.adversary.report import (
            adversary_figures,
            adversary_html,
            adversary_markdown,
        )

        adv_figures = adversary_figures(metrics, out)
        md += adversary_markdown(adversary, adv_figures)
    md += ["## Figures", ""] + [f"![{f}]({f})" for f in figures] + [""]
    md += [_FIGURES_NOTE, ""]
    md += ["## Configuration", "", md_table(["option", "value"], cfg_rows), "",
           "Only options that apply to this run are listed (unset options and, for real data, "
           "the synthetic generator's options are left out).", ""]
    (out / "report.md").write_text("\n".join(md))

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>memkit sweep report</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
        "font-size:13px}th{background:#eee}.legend{font-size:12px;color:#444}</style></head><body>",
        "<h1>memkit sweep report</h1>",
        f"<p>{html_inline(intro)}</p>",
    ]
    for i, (title, header, rows, legend) in enumerate(tbls):
        parts += [f"<h2>{html.escape(title)}</h2>"]
        if i == 0:
            parts += [f"<p>{html.escape(tally)}</p>"]
        parts += [html_table(header, rows), f"<p class='legend'>{html_inline(legend)}</p>"]
        if title.startswith("Instances with a forensic copy") and "disk_hnsw" in header:
            parts += [f"<p class='legend'>{html_inline(_HNSW_NOTE)}</p>"]
        if i == 0 and (notes or canary):
            parts += ["<h2>What to know before citing this run</h2><ul>"]
            parts += [f"<li>{html_inline(x)}</li>" for x in notes + ([canary] if canary else [])]
            parts += ["</ul>"]
    if adversary:
        parts += adversary_html(adversary, adv_figures)
    parts += ["<h2>Figures</h2>"] + [f"<img src='{f}' alt='{f}'>" for f in figures]
    parts += [f"<p class='legend'>{html_inline(_FIGURES_NOTE)}</p>"]
    parts += ["<h2>Configuration</h2>", html_table(["option", "value"], cfg_rows), "</body></html>"]
    (out / "report.html").write_text("\n".join(parts))
    return out / "report.md"
