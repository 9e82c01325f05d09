"""Report files for a sweep: ``report.md``, ``report.html`` and the study's figures.

Layout follows the study's Table 2 (arXiv 2606.10062): per
model and summary level S, PR, AER, PUA and ΔS with 95% CIs; FRS per deletion mode
and tier. Figures: ``frontier.png`` (PR vs AER_max per S, one line over k),
``probes.png`` (AER per probe level per S) and ``frs.png`` (FRS per mode and tier).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from evaluators.findings import number_text as _num

__all__ = [
    "HypothesesCounts",
    "canary_sentence",
    "hypotheses_with_canaries",
    "residue_sentences",
    "tables",
    "write_report",
]


def _fmt(x: Any, ci: Any = None, na: str = "–") -> str:
    if x is None:
        return na
    s = _num(x)
    if ci and ci[0] is not None and ci[1] is not None:
        s += f" [{_num(ci[0])}, {_num(ci[1])}]"
    return s


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
        "(case, separators, Unicode forms, encodings; memkit.matching). 95% CIs."
    ),
    "frs_normalized": (
        "FRS as above, counting a probe response that holds the secret in any spelling "
        "(memkit.matching); n/a: the design has no such tier at this S."
    ),
    "judge": (
        "Agreement of each PR rule with the LLM judge (`memkit judge`) over distinct "
        "answers: `accuracy`, Cohen's kappa, and the two kinds of disagreement."
    ),
}


_BACKEND = "with this backend: "


def _verdict_cell(f: dict[str, Any]) -> str:
    reason = f.get("reason") or ""
    if reason.startswith(_BACKEND):
        return f"{f['verdict']} with this backend (see below)"
    cell = f"{f['verdict']} ({reason})" if reason else f["verdict"]
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
        The findings table first (:func:`evaluators.findings.evaluate_findings` on
        ``metrics``, recomputed rather than read from ``metrics["findings"]``, which an
        older memkit may have written), then Table 2, AER per level, FRS, forensic copies and
        the frontier with its decomposition; each legend defines the table's columns.
    """
    from evaluators.findings import evaluate_findings

    model = config.get("model", metrics.get("model", "?"))
    # Recomputed, not read from metrics["findings"]: a metrics.json written by an older
    # memkit keeps older verdicts (and their sources); the statistics are what count.
    findings = evaluate_findings(metrics, config)
    legend = LEGENDS["findings"]
    if notes := backend_notes(findings):
        legend += " Not testable with this backend: " + " ".join(notes)
    ftab = [
        [f["claim"], f["reference_text"], f.get("quantity", "–"),
         (_pct(f["value"], f["ci"]) if f.get("format") == "percent_change" else _fmt(f["value"], f["ci"]))
         + (f"; reduction {_fmt(f['reduction'], f.get('reduction_ci'))}" if f.get("reduction") is not None else ""),
         _verdict_cell(f)]
        for f in findings
    ]
    t2 = []
    for r in metrics["by_S"]:
        t2.append(
            [
                model,
                str(r["S"]),
                _fmt(r["PR"], r.get("PR_ci")),
                _fmt(r["AER_max"], r.get("AER_max_ci")),
                _fmt(r["PUA"], r.get("PUA_ci")),
                _fmt(r.get("delta_S"), r.get("delta_S_ci")),
                "–" if r["S"] == 0 else _pct(r.get("delta_S_relative"), r.get("delta_S_relative_ci")),
                _fmt(r.get("delta_DI"), r.get("delta_DI_ci")),
            ]
        )
    levels = []
    for r in metrics["by_S"]:
        levels.append(
            [str(r["S"])]
            + [_fmt(r[f"AER_{lv}"], r.get(f"AER_{lv}_ci")) for lv in ("direct", "indirect", "jailbreak")]
        )
    frs = []
    for r in metrics["frs"]:
        frs.append(
            [
                str(r["S"]),
                r["mode"],
                _fmt(r["FRS_raw"], r.get("FRS_raw_ci"), na="n/a"),
                _fmt(r["FRS_summary"], r.get("FRS_summary_ci"), na="n/a"),
                _fmt(r["FRS_worst"], r.get("FRS_worst_ci")),
                _fmt(r.get("PR_after"), r.get("PR_after_ci")),
                str(r.get("instances_recoverable", "–")),
                str(r.get("forensic_total", "–")),
            ]
        )
    surfaces = _surfaces(metrics)
    forensic = [
        [str(r["S"]), r["mode"]]
        + ["n/a" if not _surface_measured(r, s) else
           f"{r.get('forensic_instances', {}).get(s, 0)}/{r.get('forensic_n', '?')}" for s in surfaces]
        for r in metrics["frs"]
    ]
    dropped = sorted({s for r in metrics["frs"] for s in r.get("forensic_instances", {})} - set(surfaces))
    frontier = [
        [str(r["S"]), str(r["k"]), _fmt(r["PR"], r.get("PR_ci")), _fmt(r["AER_max"], r.get("AER_max_ci"))]
        + [_fmt(d["context_exposure"], d.get("context_exposure_ci")), _fmt(d["extraction"], d.get("extraction_ci"))]
        for r, d in zip(metrics["frontier"], metrics["decomposition"], strict=True)
    ]
    out = [
        ("Findings of the study on this run", ["claim", "study", "quantity", "this run [95% CI]", "verdict"], ftab,
         legend),
        (
            "Table 2: utility and leakage per summary level (rows average over k)",
            ["model", "S", "PR", "AER_max", "PUA", "ΔS", "ΔS rel.", "ΔDI"],
            t2,
            LEGENDS["table2"],
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
        [str(r["S"]), _fmt(r["PR"], r.get("PR_ci")), _fmt(r.get("PR_study"), r.get("PR_study_ci")),
         _fmt(r["AER_max"], r.get("AER_max_ci")),
         _fmt(r.get("AER_max_normalized"), r.get("AER_max_normalized_ci"))]
        + [_fmt(r.get(f"AER_{lv}_normalized"), r.get(f"AER_{lv}_normalized_ci")) for lv in levels]
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
        [str(r["S"]), r["mode"]]
        + [_fmt(r.get(f"FRS_{t}_normalized"), r.get(f"FRS_{t}_normalized_ci"), na="n/a")
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
            [[rule, str(a["n"]), _fmt(a["accuracy"]), _fmt(a.get("kappa")), str(a["rule_yes_judge_no"]),
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


def _surface_measured(row: dict[str, Any], surface: str) -> bool:
    """Whether ``surface`` exists for an ``frs`` row: a tier's live values (``text_raw``,
    ``text_summary``) exist only where the design has that tier at this S (the row's
    ``tiers_measured``, the rule FRS uses); every other surface always exists."""
    tier = surface.removeprefix("text_") if surface in ("text_raw", "text_summary") else None
    return tier is None or "tiers_measured" not in row or tier in row["tiers_measured"]


def _surfaces(metrics: dict[str, Any]) -> list[str]:
    """Surfaces where some mode left a copy (the others add only zero columns)."""
    return sorted(
        {s for r in metrics["frs"] for s, c in r.get("forensic_instances", {}).items() if c > 0}
    )


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
        levels = ",".join(str(r["S"]) for r in rows)
        out.append(
            f"**`{mode}` leaves copies of the secret on disk in {100 * hit / n:.0f}% of instances** "
            f"({hit} of {n} over S={levels}): {surf}. A reader of the store's files recovers "
            "the secret although a probe may not."
        )
    return out


def _err(vals: list[float | None], cis: list[Any]) -> list[list[float]]:
    """Matplotlib's asymmetric error bars ``[[below], [above]]`` from values and CIs (0
    where a value or bound is missing)."""
    lo, hi = [], []
    for v, ci in zip(vals, cis, strict=True):
        ci = ci or [None, None]
        ok = v is not None and ci[0] is not None and ci[1] is not None
        lo.append(max(0.0, v - ci[0]) if ok else 0.0)
        hi.append(max(0.0, ci[1] - v) if ok else 0.0)
    return [lo, hi]


def _bars(ax: Any, xs: list[float], vals: list[float | None], cis: list[Any], width: float, **kw: Any) -> None:
    """Bars with 95% CI error bars; a zero-height bar gets a visible marker ("0") and a
    value that was not measured gets "n/a" instead of a bar."""
    heights = [0.0 if v is None else v for v in vals]
    bars = ax.bar(xs, heights, width=width, yerr=_err(vals, cis), capsize=3, **kw)
    color = bars.patches[0].get_facecolor() if bars.patches else None
    for x, v in zip(xs, vals, strict=True):
        if v is None:
            ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="0.4")
        elif v == 0:
            ax.plot([x - width / 2, x + width / 2], [0, 0], color=color, lw=3, solid_capstyle="butt")
            ax.text(x, 0.04, "0", ha="center", va="bottom", fontsize=8, fontweight="bold", color=color,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})


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


def _figures(metrics: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from adjustText import adjust_text

    names = []
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    # One label per distinct point, listing every S and k that lands there, so lines
    # that share a point print one label; adjustText moves labels off each other.
    at: dict[tuple[float, float], list[str]] = {}
    for S in metrics["summary_levels"]:
        pts = [r for r in metrics["frontier"] if r["S"] == S]
        xs = [p["AER_max"] for p in pts]
        ys = [p["PR"] for p in pts]
        xerr = _err(xs, [p.get("AER_max_ci") for p in pts])
        yerr = _err(ys, [p.get("PR_ci") for p in pts])
        ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, marker="o", capsize=2, elinewidth=0.8, label=f"S={S}")
        by_pt: dict[tuple[float, float], list[int]] = {}
        for p in pts:
            by_pt.setdefault((round(p["AER_max"], 3), round(p["PR"], 3)), []).append(p["k"])
        for xy, ks in by_pt.items():
            at.setdefault(xy, []).append(f"S={S}: k=" + ",".join(map(str, ks)))
    texts = [
        ax.text(x, y, "\n".join(lab), fontsize=6.5, zorder=5,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
        for (x, y), lab in at.items()
    ]
    ax.set_xlabel("AER_max (adversarial extraction rate)")
    ax.set_ylabel("PR (personalization recall)")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Privacy–utility frontier (line over k; bars: 95% CIs)")
    ax.legend(loc="upper left", fontsize=8)
    if texts:
        px = [p["AER_max"] for p in metrics["frontier"]]
        py = [p["PR"] for p in metrics["frontier"]]
        adjust_text(texts, x=px, y=py, ax=ax, expand=(1.4, 1.8), force_text=(0.4, 0.6),
                    arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5})
    fig.tight_layout()
    fig.savefig(out / "frontier.png", dpi=120)
    plt.close(fig)
    names.append("frontier.png")

    fig, ax = plt.subplots(figsize=(6, 4.4))
    levels = ("direct", "indirect", "jailbreak")
    rows = metrics["by_S"]
    width = 0.8 / max(1, len(rows))
    for i, r in enumerate(rows):
        xs = [j + i * width for j in range(len(levels))]
        _bars(ax, xs, [r[f"AER_{lv}"] for lv in levels], [r.get(f"AER_{lv}_ci") for lv in levels],
              width, label=f"S={r['S']}")
        norm = [r.get(f"AER_{lv}_normalized") for lv in levels]
        if all(v is not None for v in norm):  # the leak in any spelling, beside the exact bar
            cis = [r.get(f"AER_{lv}_normalized_ci") for lv in levels]
            ax.errorbar(xs, norm, yerr=_err(norm, cis), fmt="D", mfc="none", color="black", ms=5,
                        capsize=2, label="normalized (any spelling)" if i == 0 else None)
    ax.set_xticks([j + width * (len(rows) - 1) / 2 for j in range(len(levels))], levels)
    ax.set_xlabel("probe level")
    ax.set_ylabel("AER (mean over k; bars exact)")
    ax.set_ylim(0, 1.1)
    ax.set_title("Extraction per probe level (bars: 95% CIs)")
    # Legend below the axes (never over a bar), S=0, S=1, ... then the normalized marker.
    handles, labs = ax.get_legend_handles_labels()
    order = sorted(range(len(labs)), key=lambda i: (not labs[i].startswith("S="), labs[i]))
    ax.legend([handles[i] for i in order], [labs[i] for i in order], fontsize=8,
              loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(4, len(labs)), frameon=False)
    fig.tight_layout()
    fig.savefig(out / "probes.png", dpi=120)
    plt.close(fig)
    names.append("probes.png")

    frs = metrics["frs"]
    if frs:
        fig, ax = plt.subplots(figsize=(9, 4.8))
        labels = [f"S={r['S']}\n{r['mode']}" for r in frs]
        xs = list(range(len(frs)))
        for off, tier in ((-0.2, "raw"), (0.2, "summary")):
            _bars(ax, [x + off for x in xs], [r[f"FRS_{tier}"] for r in frs],
                  [r.get(f"FRS_{tier}_ci") for r in frs], 0.4, label=f"{tier} tier")
        ax.set_xticks(xs, labels, fontsize=7, rotation=90)
        ax.set_xlabel("summary level and deletion mode")
        ax.set_ylabel("FRS (AER after forget)")
        ax.set_ylim(0, 1.1)
        ax.set_title("Forgetting residue per deletion mode and tier (bars: 95% CIs; n/a: no such tier)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "frs.png", dpi=120)
        plt.close(fig)
        names.append("frs.png")

        surfaces = _surfaces(metrics)
        if surfaces:
            import numpy as np

            # One row per (S, mode): pooling over S would hide a tier that exists only at
            # some S (no summary tier at S=0); such cells are n/a (grey), not 0%.
            share = np.ma.masked_all((len(frs), len(surfaces)))
            copies = np.zeros((len(frs), len(surfaces)))
            for i, r in enumerate(frs):
                n = int(r.get("forensic_n", 0)) or 1
                for j, s_ in enumerate(surfaces):
                    if _surface_measured(r, s_):
                        share[i, j] = r.get("forensic_instances", {}).get(s_, 0) / n
                        copies[i, j] = r.get("forensic_copies", {}).get(s_, 0) / n
            cmap = matplotlib.colormaps["Reds"].with_extremes(bad="0.85")
            fig, ax = plt.subplots(figsize=(2.4 + 0.9 * len(surfaces), 1.4 + 0.32 * len(frs)))
            im = ax.imshow(share, vmin=0, vmax=1, cmap=cmap, aspect="auto")
            for i in range(len(frs)):
                for j in range(len(surfaces)):
                    if share.mask[i, j]:
                        txt, dark = "n/a", False
                    else:
                        txt, dark = f"{100 * share[i, j]:.0f}% ({copies[i, j]:.1f})", share[i, j] > 0.6
                    ax.text(j, i, txt, ha="center", va="center", fontsize=6.5, color="white" if dark else "black")
            ax.set_xticks(range(len(surfaces)), surfaces, rotation=45, ha="right", fontsize=8)
            ax.set_yticks(range(len(frs)), [f"S={r['S']} {r['mode']}" for r in frs], fontsize=7)
            ax.set_title("Forensic copies after forget: share of instances (mean copies per instance)\n"
                         "per S and mode; n/a: no such tier at this S", fontsize=9)
            fig.colorbar(im, ax=ax, label="share of instances")
            fig.tight_layout()
            fig.savefig(out / "forensic.png", dpi=120)
            plt.close(fig)
            names.append("forensic.png")
    return names


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _html_inline(text: str) -> str:
    """Escaped HTML of a line with the report's inline markdown (`code`, **bold**)."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _planted_canaries(out: Path) -> dict[str, set[str]]:
    """The canary planted in each instance, from the ``canary`` records of ``results.jsonl``."""
    path = out / "results.jsonl"
    found: dict[str, set[str]] = {}
    if not path.exists():
        return found
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if '"canary"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a damaged line; `memkit sweep --resume` repairs it
            if rec.get("type") == "canary":
                if not isinstance(rec.get("value"), str) or "question_id" not in rec:
                    raise ValueError(f"{path}:{lineno}: canary record lacks question_id or value")
                found.setdefault(str(rec["question_id"]), set()).add(rec["value"])
    return found


class HypothesesCounts(dict):
    """``{relative path: (answers with a canary, answers)}`` per hypotheses file, with
    ``copy_of``: the file ``hypotheses.jsonl`` is a byte-for-byte copy of (the sweep
    writes it from ``hypotheses/S{S0}_k{k_max}.jsonl``), or ``None``."""

    copy_of: str | None = None


def hypotheses_with_canaries(out_dir: str | Path, *, redact: bool = False) -> HypothesesCounts:
    """Count (and optionally mask) answers in ``hypotheses*.jsonl`` holding a planted canary.

    A hypothesis holds a canary when :func:`memkit.matching.contains_secret` finds any
    canary planted in the run (the ``canary`` records of ``results.jsonl``) in it, in
    any spelling the matcher covers. Such a file sent to a scorer sends it the planted
    secrets.

    Args:
        out_dir: a sweep output directory (``results.jsonl``, ``hypotheses.jsonl``,
            ``hypotheses/S{S}_k{k}.jsonl``).
        redact: rewrite each file with every copy of the canary masked
            (:func:`memkit.matching.redact_text`); the counts are those before masking.

    Returns:
        ``{relative path: (answers with a canary, answers)}`` for every hypotheses file
        (a :class:`HypothesesCounts`, whose ``copy_of`` names the file that
        ``hypotheses.jsonl`` copies, so that totals count each distinct file once).

    Raises:
        ValueError: a hypotheses line that is not ``{"question_id", "hypothesis"}`` JSON
            (the message names the file and line).
    """
    from memkit.matching import matcher, redact_json

    out = Path(out_dir)
    # Every planted canary, not only the answer's own instance's: a planted secret sent
    # to a scorer is one too many, whichever instance it came from.
    planted = sorted({c for cs in _planted_canaries(out).values() for c in cs})
    # each matcher compiled once and held (matcher()'s cache keeps 256 secrets, fewer
    # than a large sweep's canaries); each distinct answer tested once (the k files
    # repeat answers)
    matchers = [(c, matcher(c)) for c in planted]
    found: dict[str, list[str]] = {}

    def secrets_in(hyp: Any) -> list[str]:
        key = hyp if isinstance(hyp, str) else json.dumps(hyp, sort_keys=True, ensure_ascii=False)
        if key not in found:
            found[key] = [c for c, m in matchers if m.contains(hyp)]
        return found[key]

    files = sorted(out.glob("hypotheses*.jsonl")) + sorted((out / "hypotheses").glob("*.jsonl"))
    counts = HypothesesCounts()
    main = out / "hypotheses.jsonl"
    if main.exists():
        body = main.read_bytes()
        counts.copy_of = next(
            (str(p.relative_to(out)) for p in sorted((out / "hypotheses").glob("*.jsonl")) if p.read_bytes() == body),
            None,
        )
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        hit = total = 0
        new_lines = []
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                rec["question_id"]  # noqa: B018 -- required field
                hyp = rec["hypothesis"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path}:{lineno}: not a hypothesis record {{question_id, hypothesis}} ({exc})"
                ) from exc
            total += 1
            secrets = secrets_in(hyp)
            if secrets:
                hit += 1
                if redact:
                    for c in secrets:
                        hyp = redact_json(hyp, c)
                    rec["hypothesis"] = hyp
            new_lines.append(json.dumps(rec, ensure_ascii=False))
        if redact and hit:
            path.write_text("\n".join(new_lines) + "\n", encoding="utf-8")
        counts[str(path.relative_to(out))] = (hit, total)
    return counts


def canary_sentence(counts: dict[str, tuple[int, int]], redacted: bool = False) -> str | None:
    """One sentence on hypotheses holding a planted canary (``None`` if there are no files)."""
    if not counts:
        return None
    copy_of = getattr(counts, "copy_of", None)
    # Each distinct answer file once: hypotheses.jsonl is a copy of ``copy_of``.
    distinct = {p: c for p, c in counts.items() if not (copy_of and p == "hypotheses.jsonl")}
    hit = sum(h for h, _ in distinct.values())
    total = sum(t for _, t in distinct.values())
    nfiles = f"{len(distinct)} distinct hypotheses file{'s' if len(distinct) != 1 else ''}"
    main = counts.get("hypotheses.jsonl")
    head = ""
    if main:
        head = f"{main[0]} of {main[1]} answers in `hypotheses.jsonl`"
        head += f" (a copy of `{copy_of}`, counted once), " if copy_of else ", "
    if hit == 0:
        return f"No answer in the {nfiles} ({total} answers) contains a planted canary."
    if redacted:
        return (f"{head}{hit} of {total} answers over the {nfiles} contained a planted canary; "
                "they have been masked (`--redact-hypotheses`).")
    return (f"**{head}{hit} of {total} answers over the {nfiles} contain a planted canary.** "
            "Sending them to a scorer sends it the planted secrets; mask them with "
            "`memkit report DIR --redact-hypotheses`.")


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
    (:func:`evaluators.findings.evaluate_findings`), says in words which deletion modes
    leave forensic copies on disk (:func:`residue_sentences`) and how many hypotheses
    hold a planted canary (:func:`hypotheses_with_canaries`), then gives the tables,
    each with a legend, the figures and the applicable configuration.

    Args:
        out_dir: a sweep output directory holding ``metrics.json`` and ``config.json``.
        redact_hypotheses: mask planted canaries in the hypotheses files first.

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
    metrics = json.loads(mpath.read_text())
    cpath = out / "config.json"
    config = json.loads(cpath.read_text()) if cpath.exists() else {}
    figures = _figures(metrics, out)
    tbls = tables(metrics, config)
    cfg_rows = _applicable_config(config)
    from evaluators.findings import VERDICTS, evaluate_findings

    verdicts = [f["verdict"] for f in evaluate_findings(metrics, config)]
    tally = ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if verdicts.count(v))
    notes = residue_sentences(metrics)
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
        md += [_md_table(header, rows), "", legend, ""]
        if i == 0 and (notes or canary):
            md += ["## What to know before citing this run", ""]
            md += [f"- {x}" for x in notes + ([canary] if canary else [])] + [""]
        if title.startswith("Instances with a forensic copy") and "disk_hnsw" in header:
            md += [_HNSW_NOTE, ""]
    md += ["## Figures", ""] + [f"![{f}]({f})" for f in figures] + [""]
    md += [_FIGURES_NOTE, ""]
    md += ["## Configuration", "", _md_table(["option", "value"], cfg_rows), "",
           "Only options that apply to this run are listed (unset options and, for real data, "
           "the synthetic generator's options are left out).", ""]
    (out / "report.md").write_text("\n".join(md))

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>memkit sweep report</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
        "font-size:13px}th{background:#eee}.legend{font-size:12px;color:#444}</style></head><body>",
        "<h1>memkit sweep report</h1>",
        f"<p>{_html_inline(intro)}</p>",
    ]
    for i, (title, header, rows, legend) in enumerate(tbls):
        parts += [f"<h2>{html.escape(title)}</h2>"]
        if i == 0:
            parts += [f"<p>{html.escape(tally)}</p>"]
        parts += [_html_table(header, rows), f"<p class='legend'>{_html_inline(legend)}</p>"]
        if title.startswith("Instances with a forensic copy") and "disk_hnsw" in header:
            parts += [f"<p class='legend'>{_html_inline(_HNSW_NOTE)}</p>"]
        if i == 0 and (notes or canary):
            parts += ["<h2>What to know before citing this run</h2><ul>"]
            parts += [f"<li>{_html_inline(x)}</li>" for x in notes + ([canary] if canary else [])]
            parts += ["</ul>"]
    parts += ["<h2>Figures</h2>"] + [f"<img src='{f}' alt='{f}'>" for f in figures]
    parts += [f"<p class='legend'>{_html_inline(_FIGURES_NOTE)}</p>"]
    parts += ["<h2>Configuration</h2>", _html_table(["option", "value"], cfg_rows), "</body></html>"]
    (out / "report.html").write_text("\n".join(parts))
    return out / "report.md"
