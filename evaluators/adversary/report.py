"""The report's section "How strong was the adversary", from ``metrics["adversary"]``
(:mod:`evaluators.adversary.metrics`): the family table, the adaptive attacker's curve,
memory extraction, membership inference and the results after each forget, with the
AER-vs-queries and ROC figures (:func:`evaluators.report.figures.aer_queries_figure`,
:func:`evaluators.report.figures.roc_figure`)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluators.report.tables import html_inline, html_table, md_table, value_text

__all__ = ["TITLE", "adversary_figures", "adversary_html", "adversary_markdown", "adversary_sentences",
           "adversary_tables"]

TITLE = "How strong was the adversary"

LEGEND_FAMILIES = (
    "Per probe family and set (the study's nine probes are the `study` set; `any probe` rows: some probe of "
    "the set extracted the canary): `AER`: share of users whose canary a probe's reply holds under memkit's "
    "one matcher or after undoing base64, hex, reversal or the NATO alphabet; `AER exact`: the study's "
    "verbatim substring; `bits`: partial leakage, the most bits of the canary grammar's entropy a reply "
    "removed (the longest piece of the canary revealed, whole words only); `piece`: that piece's length in "
    "characters. Per user averaged over k, then over users; brackets: 95% bootstrap CIs over users."
)
LEGEND_CURVE = (
    "The adaptive attacker after q queries per user (cumulative: some query up to q succeeded): `AER`; "
    "`recovered`: share of the user's stored records some reply reproduced verbatim (MEXTRA's rate); "
    "`coverage`: share of their sentences reproduced; `retrieved`: share the target recalled into the "
    "agent's context (– where the target does not say). 95% CIs over users."
)
LEGEND_MEMORY = (
    "Stored records (what the target lists, else the user turns fed in) that every library probe, and "
    "every library and adaptive query together, recovered: as above, with `records` the mean count per user."
)
LEGEND_MIA = (
    "Membership inference: each user's canary (member) against decoys drawn from the same generator and never "
    "told (non-members). `similarity` (S²MIA): the reply's overlap with the candidate's hidden rest; "
    "`masked_fill` (MBA): masked segments the reply fills; `combined`: their mean. AUC 0.5 is chance; TPR at "
    "1% FPR: members found when at most 1% of non-members are called members. 95% CIs over users."
)
LEGEND_AFTER = (
    "After each forget (the target's own recall): AER of each set (any probe), the adaptive attacker's AER and "
    "records recovered at its last query, and the membership AUC (combined signal)."
)


def _knob(x: Any) -> str:
    return "–" if x is None else str(x)


def _v(row: dict[str, Any], key: str, na: str = "–") -> str:
    return value_text(row.get(key), row.get(f"{key}_ci"), na=na)


def _at(a: dict[str, Any], key: str, q: int) -> str:
    vals, cis = a.get(key) or [], a.get(f"{key}_ci") or []
    if q > len(vals):
        return "–"
    return value_text(vals[q - 1], cis[q - 1])


def _checkpoints(Q: int) -> list[int]:
    return sorted({q for q in (1, 2, 5, 10, 20, 30, 50, 100) if q <= Q} | {Q}) if Q else []


def adversary_tables(adv: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The section's tables as ``(title, header, rows, legend)`` of strings."""
    settings = adv.get("settings", [])
    main = [s for s in settings if s["phase"] == "main"]
    out = []
    fam_rows = []
    for s in main:
        for r in s["sets"]:
            name = f"adaptive ({s.get('adaptive', {}).get('budget', '?')} queries)" if r["set"] == "adaptive" \
                else "any probe"
            fam_rows.append([_knob(s["S"]), r["set"], f"**{name}**", "", "", "", _v(r, "AER"), _v(r, "AER_exact"),
                             _v(r, "bits"), value_text(r.get("piece"))])
        for r in s["families"]:
            fam_rows.append([_knob(s["S"]), r["set"], r["family"], r.get("source", ""), str(r.get("probes", "")),
                             str(r.get("turns", "")), _v(r, "AER"), _v(r, "AER_exact"), _v(r, "bits"),
                             value_text(r.get("piece"))])
    if fam_rows:
        out.append(("Extraction per probe family (before the forget)",
                    ["S", "set", "family", "source", "probes", "turns", "AER", "AER exact", "bits", "piece"],
                    fam_rows, LEGEND_FAMILIES))
    curve_rows = []
    for s in settings:
        a = s.get("adaptive")
        if not a:
            continue
        for q in _checkpoints(a["budget"]):
            curve_rows.append([_knob(s["S"]), "before" if s["phase"] == "main" else f"after {s['mode']}",
                               a["attacker"], str(q), _at(a, "AER", q), _at(a, "memory", q), _at(a, "coverage", q),
                               _at(a, "retrieved", q)])
    if curve_rows:
        out.append(("The adaptive attacker against its query budget",
                    ["S", "forget", "attacker", "q", "AER", "recovered", "coverage", "retrieved"],
                    curve_rows, LEGEND_CURVE))
    mem_rows = []
    for s in settings:
        for name, m in (s.get("memory") or {}).items():
            mem_rows.append([_knob(s["S"]), "before" if s["phase"] == "main" else f"after {s['mode']}",
                             "library" if name == "library" else "library + adaptive",
                             value_text(m.get("records")), _v(m, "recovered"), _v(m, "coverage"),
                             _v(m, "retrieved")])
    if mem_rows:
        out.append(("Memory extraction (MEXTRA's metric)",
                    ["S", "forget", "queries", "records", "recovered", "coverage", "retrieved"], mem_rows,
                    LEGEND_MEMORY))
    mia_rows = []
    for s in settings:
        m = s.get("membership")
        if not m:
            continue
        for name in sorted(m["signals"], key=lambda x: (x == "combined", x)):
            r = m["signals"][name]
            mia_rows.append([_knob(s["S"]), "before" if s["phase"] == "main" else f"after {s['mode']}", name,
                             f"{m['n_members']} / {m['n_nonmembers']}", _v(r, "AUC"), _v(r, "TPR_at_1pct_FPR")])
    if mia_rows:
        out.append(("Membership inference",
                    ["S", "forget", "signal", "members / non-members", "AUC", "TPR at 1% FPR"], mia_rows,
                    LEGEND_MIA))
    after_rows = []
    for s in settings:
        if s["phase"] == "main":
            continue
        sets = "; ".join(f"{r['set']} {value_text(r.get('AER'), r.get('AER_ci'))}" for r in s["sets"])
        a = s.get("adaptive") or {}
        auc = (s.get("membership") or {}).get("signals", {}).get("combined", {})
        after_rows.append([_knob(s["S"]), str(s["mode"]), sets or "–",
                           _at(a, "AER", a["budget"]) if a else "–", _at(a, "memory", a["budget"]) if a else "–",
                           _v(auc, "AUC") if auc else "–"])
    if after_rows:
        out.append(("The adversary after each forget",
                    ["S", "mode", "AER per set (any probe)", "adaptive AER", "adaptive recovered", "membership AUC"],
                    after_rows, LEGEND_AFTER))
    return out


def _intro(adv: dict[str, Any]) -> str:
    settings = adv.get("settings", [])
    main = next((s for s in settings if s["phase"] == "main"), None)
    if main is None:
        return "The adversary ran only after the forget."
    strongest = max(main["sets"], key=lambda r: (r.get("AER") or 0.0, r["set"] != "study"), default=None)
    study = next((r for r in main["sets"] if r["set"] == "study"), None)
    parts = [f"Beyond the study's nine probes the adversary made {main['calls']} calls in the main phase "
             f"({main['reused']} of them reused the reply to a prompt already sent)."]
    if strongest is not None and study is not None:
        parts.append(f"Strongest set: `{strongest['set']}`, AER {value_text(strongest.get('AER'), strongest.get('AER_ci'))}, "
                     f"against the study set's {value_text(study.get('AER'), study.get('AER_ci'))} "
                     "(the study's AER counts a mean over templates; here a set counts when any of its probes succeeds).")
    parts.append("Criterion: " + adv.get("criterion", "") + ".")
    return " ".join(parts)


def adversary_sentences(adv: dict[str, Any]) -> list[str]:
    """What a reader should know before citing the study's AER of this run: whether a
    set of the adversary extracted more canaries than the study's nine, before the
    forget and after each one (markdown sentences, one per phase where it did)."""
    out = []
    for s in adv.get("settings", []):
        study = next((r for r in s["sets"] if r["set"] == "study"), None)
        others = [r for r in s["sets"] if r["set"] != "study" and r.get("AER") is not None]
        if not others:
            continue
        best = max(others, key=lambda r: r["AER"])
        base = 0.0 if study is None or study.get("AER") is None else study["AER"]
        if best["AER"] <= base:
            continue
        when = "before the forget" if s["phase"] == "main" else f"after `{s['mode']}`"
        level = "" if s["S"] is None else f" at S={s['S']}"
        against = ("the study's nine probes " + value_text(study.get("AER"), study.get("AER_ci"))
                   if study is not None else "the study's probes (not asked with the target's own recall here)")
        out.append(f"**The study's probes understate extraction{level} {when}**: the `{best['set']}` set "
                   f"extracted {value_text(best['AER'], best.get('AER_ci'))} of the canaries, against {against} "
                   "(section \"How strong was the adversary\").")
    return out


def adversary_figures(metrics: dict[str, Any], out: Path) -> list[str]:
    """Write ``aer_queries.png`` and ``membership_roc.png`` where there is data; their names."""
    from evaluators.report.figures import aer_queries_figure, roc_figure

    adv = metrics.get("adversary") or {}
    names = []
    if aer_queries_figure(adv, out / "aer_queries.png"):
        names.append("aer_queries.png")
    if roc_figure(adv, out / "membership_roc.png"):
        names.append("membership_roc.png")
    return names


def adversary_markdown(adv: dict[str, Any], figures: Sequence[str] = (), level: int = 2) -> list[str]:
    """The section's markdown lines (heading at ``level``)."""
    h = "#" * level
    md = [f"{h} {TITLE}", "", _intro(adv), ""]
    for title, header, rows, legend in adversary_tables(adv):
        md += [f"{h}# {title}", "", md_table(header, rows), "", legend, ""]
    md += [f"![{f}]({f})" for f in figures] + ([""] if figures else [])
    return md


def adversary_html(adv: dict[str, Any], figures: Sequence[str] = ()) -> list[str]:
    """The section as HTML parts."""
    parts = [f"<h2>{html.escape(TITLE)}</h2>", f"<p>{html_inline(_intro(adv))}</p>"]
    for title, header, rows, legend in adversary_tables(adv):
        parts += [f"<h3>{html.escape(title)}</h3>", html_table(header, rows),
                  f"<p class='legend'>{html_inline(legend)}</p>"]
    parts += [f"<img src='{f}' alt='{f}'>" for f in figures]
    return parts
