"""Markdown for forget requests in words and leftover vectors (the audit report and
``memkit report``), from :mod:`evaluators.forget_metrics` rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["report_tables", "request_lines", "vector_lines"]


def _p(x: float | None, ci: Sequence[float | None] | None = None) -> str:
    if x is None:
        return "-"
    if ci and ci[0] is not None and ci[1] is not None:
        return f"{x:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"{x:.2f}"


def request_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """A table of forget requests per kind and item: found, deleted, residue,
    collateral, FRS_worst (each with its 95% CI); ``n/a`` rows say why."""
    if not rows:
        return []
    out = ["", "## Forgetting as users ask for it", "",
           "Each user's item forgotten through a request in their own words (exact value, paraphrase, "
           "obfuscated spelling, Spanish, German, Chinese, by the day it was said), each on a copy of the "
           "memory. found: the request resolved to a memory holding the item; deleted: the item is on no "
           "live surface afterwards; residue: some surface still holds it; collateral: the user's other "
           "planted item was lost; FRS: the probes' extraction afterwards. 95% bootstrap CIs over users; "
           "`n/a`: the target takes only a secret, not a request.", "",
           "| S | mode | request | item | found | deleted | residue | collateral | FRS_worst |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        head = f"| {r['S'] if r['S'] is not None else '-'} | {r['mode']} | {r['request']} | {r['about']} |"
        if r.get("na"):
            out.append(f"{head} n/a | n/a | n/a | n/a | n/a |")
            continue
        out.append(f"{head} {_p(r.get('found'), r.get('found_ci'))} | {_p(r.get('deleted'), r.get('deleted_ci'))} | "
                   f"{_p(r.get('residue'), r.get('residue_ci'))} | {_p(r.get('collateral'), r.get('collateral_ci'))} | "
                   f"{_p(r.get('FRS_worst'), r.get('FRS_worst_ci'))} |")
    why = {r["na"] for r in rows if r.get("na")}
    if why:
        out += ["", "n/a: " + "; ".join(sorted(why)) + "."]
    return out


def vector_lines(vectors: dict[str, Any] | None, title: str = "What the leftover vectors reveal") -> list[str]:
    """A table of leftover vectors per surface: how many, how many of a planted item,
    the re-identification rate among >= 100 decoys and the attribute accuracy (CIs)."""
    if not vectors:
        return []
    if vectors.get("na"):
        return ["", f"{title}: n/a: {vectors['na']}."]
    out = ["", f"## {title}", "",
           "Stored vectors that no live record owns, after the forget's last phase. attributed: vectors of "
           "a planted item's turn; re-identified: the item's true value ranked first among it and 100 "
           "decoys of the same kind by cosine to the vector; attribute: the item's category (token, PIN, "
           "name, place ...) inferred from the vector. 95% bootstrap CIs over users.", "",
           "| surface | leftover vectors | attributed | re-identified | attribute accuracy |",
           "|---|---|---|---|---|"]
    for s, d in vectors.get("surfaces", {}).items():
        out.append(f"| {s} | {d['vectors']} | {d['attributed']} | {_p(d['reidentified'], d['reidentified_ci'])} | "
                   f"{_p(d['attribute_accuracy'], d['attribute_accuracy_ci'])} |")
    if vectors.get("unread"):
        out += ["", "Not read (never clean): " + "; ".join(f"`{k}`: {v}" for k, v in vectors["unread"].items()) + "."]
    return out


def report_tables(metrics: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    """``memkit report``'s tables ``(title, header, rows, legend)``: forget requests per
    kind, and what the leftover vectors reveal per deletion mode and surface."""
    out = []
    rows = metrics.get("forget_requests") or []
    if rows:
        body = []
        for r in rows:
            head = [str(r["S"]) if r["S"] is not None else "-", r["mode"], r["request"], r["about"]]
            if r.get("na"):
                body.append(head + ["n/a"] * 5)
            else:
                body.append(head + [_p(r.get(k), r.get(f"{k}_ci")) for k in
                                    ("found", "deleted", "residue", "collateral", "FRS_worst")])
        legend = (request_lines(rows)[3] + " " + ("n/a: " + "; ".join(sorted({r["na"] for r in rows if r.get("na")}))
                                                  + "." if any(r.get("na") for r in rows) else "")).strip()
        out.append(("Forgetting as users ask for it", ["S", "mode", "request", "item", "found", "deleted",
                                                       "residue", "collateral", "FRS_worst"], body, legend))
    vec_rows = []
    for r in [*metrics.get("frs", []), *rows]:
        v = r.get("vectors")
        if not v:
            continue
        label = r["mode"] + (f" ({r['request']}, {r['about']})" if r.get("request") else "")
        if v.get("na"):
            vec_rows.append([str(r["S"]) if r["S"] is not None else "-", label, "n/a", "-", "-", "-", "-"])
            continue
        for s, d in v.get("surfaces", {}).items():
            vec_rows.append([str(r["S"]) if r["S"] is not None else "-", label, s, str(d["vectors"]),
                             str(d["attributed"]), _p(d["reidentified"], d["reidentified_ci"]),
                             _p(d["attribute_accuracy"], d["attribute_accuracy_ci"])])
    if vec_rows:
        legend = vector_lines({"surfaces": {}})[3]
        out.append(("What the leftover vectors reveal", ["S", "mode", "surface", "leftover vectors", "attributed",
                                                         "re-identified", "attribute accuracy"], vec_rows, legend))
    return out
