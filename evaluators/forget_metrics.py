"""Metrics of forget requests in words and of what leftover vectors reveal.

Called by :func:`evaluators.aggregate.compute_metrics` (the one aggregation); every
rate has a 95% percentile-bootstrap CI over users, like every other memkit metric.

``forget_requests`` (:func:`request_rows`): one row per (S, deletion mode, request
kind, what it was about), from the records of a :class:`evaluators.runner.Deletion`
with ``request`` set:

* ``found``: share of users whose request resolved to a memory holding the value;
* ``items``: memories resolved per request (mean);
* ``deleted``: share of users whose value is on no live surface after the forget
  (:data:`evaluators.planted.LIVE_SURFACES`);
* ``residue``: share of users whose value some checked surface still holds after the
  last phase, and per surface (``residue_surfaces``);
* ``collateral``: share of users whose *other* planted item was on a live surface
  before the forget and is on none after (wrongly deleted);
* ``FRS_worst`` and ``PR_after``: as the ``frs`` rows of the same deletion;
* ``na``: the reason, for a target that takes only a secret (never 0).

``vectors`` (:func:`vector_rates`, in each ``frs`` and ``forget_requests`` row whose
scans weighed vectors): per surface, leftover vectors, those of a planted item
(``attributed``), the re-identification rate (the true value ranked first among
>= 100 decoys) and the attribute accuracy, from the last scan phase.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evaluators.planted import LIVE_SURFACES
from evaluators.scoring.metrics import bootstrap_ci

__all__ = ["request_rows", "vector_rates"]


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 6)


def _rate(flags: Sequence[bool | None], n_resamples: int, seed: int) -> tuple[float | None, list[float | None]]:
    vals = np.array([float(f) for f in flags if f is not None])
    if not len(vals):
        return None, [None, None]
    lo, hi = bootstrap_ci(vals, n_resamples=n_resamples, seed=seed)
    return _r(vals.mean()), [_r(lo), _r(hi)]


def _ratio(rows: np.ndarray, n_resamples: int, seed: int) -> tuple[float | None, list[float | None]]:
    """Sum of column 0 over sum of column 1, with a bootstrap CI over the rows (users)."""
    if not len(rows) or rows[:, 1].sum() == 0:
        return None, [None, None]

    def stat(x: np.ndarray) -> float:
        d = x[:, 1].sum()
        return float(x[:, 0].sum() / d) if d else float("nan")

    lo, hi = bootstrap_ci(rows, stat, n_resamples=n_resamples, seed=seed)
    return _r(stat(rows)), [_r(lo), _r(hi)]


def vector_rates(forensics: Sequence[dict[str, Any]], n_resamples: int = 1000, seed: int = 0
                 ) -> dict[str, Any] | None:
    """What the leftover vectors reveal after the last scan phase of one deletion
    (module doc): per surface ``vectors``, ``attributed``, ``reidentified`` (rate),
    ``reidentified_ci``, ``attribute_accuracy``, ``attribute_accuracy_ci``; ``na`` or
    ``unread`` where memkit could not read them. ``None`` when nothing was weighed."""
    fr = [f for f in forensics if f.get("vectors") is not None]
    if not fr:
        return None
    last = [f for f in fr if f.get("phase") == fr[-1].get("phase")]
    na = [f["vectors"]["na"] for f in last if "na" in f["vectors"]]
    if na:
        return {"na": na[0]}
    surfaces = list(dict.fromkeys(s for f in last for s in f["vectors"]["surfaces"]))
    out: dict[str, Any] = {"phase": last[0].get("phase"), "surfaces": {}}
    unread: dict[str, str] = {}
    for f in last:
        unread.update(f["vectors"].get("unread") or {})
    for s in surfaces:
        rows = [f["vectors"]["surfaces"].get(s, {}) for f in last]
        reid = np.array([[r.get("reidentified", 0), r.get("attributed", 0)] for r in rows], dtype=float)
        attr = np.array([[r.get("attribute_correct", 0), r.get("attributed", 0)] for r in rows], dtype=float)
        rate, ci = _ratio(reid, n_resamples, seed)
        acc, acc_ci = _ratio(attr, n_resamples, seed)
        out["surfaces"][s] = {"vectors": max((int(r.get("vectors", 0)) for r in rows), default=0),
                              "attributed": int(reid[:, 1].sum()), "reidentified": rate, "reidentified_ci": ci,
                              "attribute_accuracy": acc, "attribute_accuracy_ci": acc_ci}
    if unread:
        out["unread"] = unread
    return out


def _live(counts: dict[str, Any] | None) -> int | None:
    if not counts:
        return None
    live = [int(v) for s, v in counts.items() if s in LIVE_SURFACES and v is not None]
    return sum(live) if live else None


def request_rows(records: Sequence[dict[str, Any]], n_resamples: int = 1000, seed: int = 0, *,
                 frs: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """The ``forget_requests`` rows (module doc) of a run's records.

    Args:
        records: the main-phase calls and the request deletions' records.
        n_resamples, seed: the bootstrap's.
        frs: the ``frs`` rows of records (:func:`evaluators.aggregate.compute_metrics`'s,
            passed by it); ``None``: the rows carry no FRS.
    """
    req = [r for r in records if r.get("request") and r.get("type") in ("call", "forensics")]
    if not req:
        return []
    keys = list(dict.fromkeys((r["S"], r["mode"], r["request"], r.get("about") or "secret") for r in req))
    label = {k: f"{k[1]}|{k[2]}|{k[3]}" for k in keys}
    main = [r for r in records if r.get("type") == "call" and r.get("phase") == "main"]
    relabeled = [{**{k: v for k, v in r.items() if k not in ("request", "about")},
                  "mode": label[(r["S"], r["mode"], r["request"], r.get("about") or "secret")]}
                 for r in req if "na" not in r]
    frs_rows = {}
    if frs is not None and main and any(r["type"] == "call" for r in relabeled):
        frs_rows = {(row["S"], row["mode"]): row for row in frs([*main, *relabeled])}
    out = []
    for k in keys:
        S, mode, kind, about = k
        fr = [r for r in req if r["type"] == "forensics" and (r["S"], r["mode"], r["request"],
                                                             r.get("about") or "secret") == k]
        row: dict[str, Any] = {"S": S, "mode": mode, "request": kind, "about": about}
        na = [f["na"] for f in fr if f.get("na")]
        if na:
            row["na"] = na[0]
            out.append(row)
            continue
        phases = list(dict.fromkeys(f.get("phase") for f in fr))
        before = {f["question_id"]: f for f in fr if f.get("phase") == "before"}
        forget = [f for f in fr if f.get("phase") == "forget"]
        last = [f for f in fr if f.get("phase") == phases[-1]]
        row["n"] = len(forget)
        reqs = [(f.get("changed") or {}).get("request") or {} for f in forget]
        row["found"], row["found_ci"] = _rate([q.get("found") for q in reqs], n_resamples, seed)
        row["items"] = _r(float(np.mean([q.get("items", 0) for q in reqs]))) if reqs else None
        live_after = [_live(f.get("counts")) for f in forget]
        row["deleted"], row["deleted_ci"] = _rate([None if v is None else v == 0 for v in live_after],
                                                  n_resamples, seed)
        held = [any(int(c or 0) > 0 for c in f.get("counts", {}).values()) for f in last]
        row["residue"], row["residue_ci"] = _rate(held, n_resamples, seed)
        row["residue_surfaces"] = {s: sum(1 for f in last if int(f["counts"].get(s) or 0) > 0)
                                   for s in dict.fromkeys(s for f in last for s in f.get("counts", {}))}
        lost = []
        for f in forget:
            b = before.get(f["question_id"])
            had, has = _live((b or {}).get("other_counts")), _live(f.get("other_counts"))
            lost.append(None if had is None or has is None or had == 0 else has == 0)
        row["collateral"], row["collateral_ci"] = _rate(lost, n_resamples, seed)
        f_row = frs_rows.get((S, label[k]), {})
        for key in ("FRS_worst", "FRS_worst_ci", "FRS_worst_normalized", "PR_after", "PR_after_ci"):
            if key in f_row:
                row[key] = f_row[key]
        vec = vector_rates(fr, n_resamples, seed)
        if vec is not None:
            row["vectors"] = vec
        out.append(row)
    return out
