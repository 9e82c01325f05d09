"""Baselines: gate CI on what is new or worse since a previous run, not on what is known.

A *snapshot* is what a run left (:class:`Snapshot`): per surface, how many holders it
still holds copies of (users of an audit, secrets of a residue scan), the surfaces
that were not checked or read only in part, and, for an audit, the gate metrics
(:data:`evaluators.targets.gates.METRICS`) with their 95% bootstrap CIs. A snapshot
is read from a run's ``--json`` or ``--sarif`` output (:func:`load_baseline`) or
taken from a result (:func:`audit_snapshot`, :func:`residue_snapshot`).

:func:`compare` says, per surface, what is **new** (copies on a surface that held
none), **worse** (more holders than the baseline), **known** (as many or fewer), and
what was **fixed** (held copies in the baseline, checked and clean now); the same
for surfaces not checked. A metric is worse when it lies beyond the baseline's CI
in the direction its gate fails (:func:`metric_worse`). Identity is the surface, not
the byte offset: a rerun moves bytes (Chroma's page layout, WAL positions) but not
the surfaces that keep them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BaselineError", "Delta", "Snapshot", "audit_snapshot", "compare", "gate_values", "load_baseline",
           "metric_worse", "residue_snapshot"]


class BaselineError(ValueError):
    """A baseline file that cannot be read as a memkit output (the message names it)."""


@dataclass
class Snapshot:
    """What one run left (module doc).

    Attributes:
        kind: ``audit`` or ``residue``.
        residue: surface -> holders (users or secrets) with copies, checked surfaces.
        unchecked: surface -> why it was not checked or read only in part.
        gates: metric -> ``{"value", "ci"}`` (audits; ``value`` ``None`` = n/a).
        source: where it was read from.
    """

    kind: str
    residue: dict[str, int] = field(default_factory=dict)
    unchecked: dict[str, list[str]] = field(default_factory=dict)
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``{"residue", "unchecked", "gates"}`` (the SARIF property bag's fields)."""
        return {"residue": dict(self.residue), "unchecked": {k: list(v) for k, v in self.unchecked.items()},
                "gates": {k: dict(v) for k, v in self.gates.items()}}


def gate_values(result: Any) -> dict[str, dict[str, Any]]:
    """The gate metrics of an :class:`~evaluators.audit.AuditResult` with their 95%
    bootstrap CIs (``None`` where the run has none): ``{metric: {"value", "ci"}}``."""
    rows = result.metrics.get("frs", []) if result.metrics else []
    row = next((r for r in rows if r.get("mode") == result.forget_mode), rows[0] if rows else {})
    held = [v for v in (result.residue or {}).values() if v is not None]

    def ci(pair: Any) -> list[float | None] | None:
        return None if pair is None else [pair[0], pair[1]]

    return {
        "aer_max": {"value": result.aer.get("max"), "ci": ci(result.aer_ci)},
        "aer_after_max": {"value": None if result.aer_after is None else result.aer_after.get("max"),
                          "ci": ci(row.get("AER_after_max_ci"))},
        "pr": {"value": result.pr, "ci": ci(result.pr_ci)},
        "pr_after": {"value": result.pr_after, "ci": ci(row.get("PR_after_ci"))},
        "frs_worst": {"value": None if result.frs is None else result.frs.get("worst"),
                      "ci": ci(row.get("FRS_worst_ci"))},
        "residue_users": {"value": float(max(held)) if held else None, "ci": None},
    }


def audit_snapshot(result: Any) -> Snapshot:
    """The snapshot of an :class:`~evaluators.audit.AuditResult` (holders = users)."""
    return Snapshot("audit", residue={s: int(k) for s, k in (result.residue or {}).items() if k is not None},
                    unchecked={s: [str(x) for x in r] for s, r in result.residue_unchecked.items()},
                    gates=gate_values(result))


def residue_snapshot(report: Any) -> Snapshot:
    """The snapshot of a :class:`memkit.residue.chroma.ResidueReport` (holders = secrets with
    a copy; copies tied to no one secret count as one holder)."""
    residue = {}
    for s in report.names:
        if s in report.not_given:
            continue
        holders = {h.secret_index for h in report.surfaces.get(s, [])}
        if holders or s not in report.unchecked:
            residue[s] = len(holders)
    return Snapshot("residue", residue=residue, unchecked={s: list(r) for s, r in report.unchecked.items()})


def _from_sarif(doc: Mapping[str, Any], where: str) -> Snapshot:
    runs = doc.get("runs")
    if not isinstance(runs, list) or not runs or not isinstance(runs[0], Mapping):
        raise BaselineError(f"{where}: a SARIF file without runs")
    run = runs[0]
    bag = (run.get("properties") or {}).get("memkit")
    if not isinstance(bag, Mapping) or bag.get("kind") not in ("audit", "residue"):
        raise BaselineError(f"{where}: not a memkit SARIF file (no runs[0].properties.memkit)")
    holders: dict[str, set[str]] = {}
    for r in run.get("results") or []:
        if not isinstance(r, Mapping) or not isinstance(r.get("ruleId"), str):
            raise BaselineError(f"{where}: a result without a ruleId")
        if r.get("baselineState") == "absent":
            continue
        fp = (r.get("partialFingerprints") or {}).get("memkitResidue/v1", str(len(holders)))
        holders.setdefault(r["ruleId"], set()).add(fp)
    residue = {s: 0 for s in (bag.get("residue") or {})}
    residue.update({s: len(v) for s, v in holders.items()})
    return Snapshot(bag["kind"], residue=residue, unchecked=_unchecked(bag.get("unchecked"), where),
                    gates=_gates(bag.get("gates"), where))


def _unchecked(value: Any, where: str) -> dict[str, list[str]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BaselineError(f"{where}: 'unchecked' is not an object of surface -> reasons")
    return {str(s): [str(x) for x in (r if isinstance(r, list) else [r])] for s, r in value.items()}


def _gates(value: Any, where: str) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise BaselineError(f"{where}: 'gates' is not an object of metric -> {{value, ci}}")
    return {str(k): {"value": v.get("value"), "ci": v.get("ci")} for k, v in value.items()}


def _from_json(doc: Mapping[str, Any], where: str) -> Snapshot:
    if "residue" in doc and "AER" in doc:  # memkit audit --json
        residue = doc.get("residue") or {}
        if not isinstance(residue, Mapping):
            raise BaselineError(f"{where}: 'residue' is not an object of surface -> users")
        try:
            res = {str(s): int(k) for s, k in residue.items() if k is not None}
        except (TypeError, ValueError) as exc:
            raise BaselineError(f"{where}: 'residue' holds a value that is not a count ({exc})") from exc
        return Snapshot("audit", residue=res, unchecked=_unchecked(doc.get("residue_unchecked"), where),
                        gates=_gates(doc.get("gates"), where))
    if "surfaces" in doc and "verdict" in doc:  # memkit residue --json
        surfaces, unchecked = doc["surfaces"], _unchecked(doc.get("unchecked"), where)
        if not isinstance(surfaces, Mapping):
            raise BaselineError(f"{where}: 'surfaces' is not an object of surface -> hits")
        not_given = set(doc.get("not_given") or [])
        res = {}
        for s, hits in surfaces.items():
            if s in not_given:
                continue
            if not isinstance(hits, list):
                raise BaselineError(f"{where}: surfaces.{s} is not a list of hits")
            holders = {h.get("secret_index") for h in hits if isinstance(h, Mapping)}
            if holders or s not in unchecked:
                res[str(s)] = len(holders)
        return Snapshot("residue", residue=res, unchecked=unchecked)
    raise BaselineError(f"{where}: not the JSON of `memkit audit --json` or `memkit residue --json` "
                        "(no 'residue'/'AER' or 'surfaces'/'verdict')")


def load_baseline(path: str | Path) -> Snapshot:
    """Read a previous run's ``--json`` or ``--sarif`` output as a :class:`Snapshot`.

    Raises:
        BaselineError: the file is missing, not JSON, or not a memkit output (the
            message names the file and the field).
    """
    p = Path(path)
    where = f"--baseline {p}"
    if not p.is_file():
        raise BaselineError(f"{where}: no such file (give a previous run's --json or --sarif output)")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(doc, Mapping):
        raise BaselineError(f"{where}: not a JSON object")
    snap = _from_sarif(doc, where) if "runs" in doc and doc.get("version") == "2.1.0" else _from_json(doc, where)
    snap.source = str(p)
    return snap


@dataclass
class Delta:
    """A run against its baseline (:func:`compare`); surfaces map to holders.

    Attributes:
        new: surfaces holding copies where the baseline held none.
        worse: surface -> ``(baseline holders, holders now)``, more now.
        known: surfaces holding copies the baseline held as many or more of.
        fixed: surface -> baseline holders, for surfaces checked and clean now.
        new_unchecked: surfaces not (fully) checked now that were in the baseline.
        fixed_unchecked: surfaces not checked in the baseline, read in full now.
        source: the baseline's file.
    """

    new: dict[str, int] = field(default_factory=dict)
    worse: dict[str, tuple[int, int]] = field(default_factory=dict)
    known: dict[str, int] = field(default_factory=dict)
    fixed: dict[str, int] = field(default_factory=dict)
    new_unchecked: dict[str, list[str]] = field(default_factory=dict)
    fixed_unchecked: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def regressed(self) -> bool:
        """Copies on a new surface, or more holders on a known one."""
        return bool(self.new or self.worse)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for ``--json`` and the SARIF property bag."""
        return {"source": self.source, "new": self.new, "worse": {s: list(v) for s, v in self.worse.items()},
                "known": self.known, "fixed": self.fixed, "new_unchecked": self.new_unchecked,
                "fixed_unchecked": self.fixed_unchecked}

    def lines(self, holder: str = "users") -> list[str]:
        """The comparison as report lines (new, worse, fixed, known)."""
        def fmt(d: Mapping[str, Any]) -> str:
            return ", ".join(f"{s} ({v} {holder})" for s, v in d.items())

        out = [f"Since the baseline {self.source}:"]
        out.append(f"- new: {fmt(self.new)}" if self.new else "- new: none")
        if self.worse:
            out.append("- worse: " + ", ".join(f"{s} ({a} -> {b} {holder})" for s, (a, b) in self.worse.items()))
        out.append(f"- fixed: {fmt(self.fixed)}" if self.fixed else "- fixed: none")
        if self.known:
            out.append(f"- known (in the baseline): {fmt(self.known)}")
        if self.new_unchecked:
            out.append("- newly not checked: " + "; ".join(f"{s} ({', '.join(r)})"
                                                           for s, r in self.new_unchecked.items()))
        if self.fixed_unchecked:
            out.append("- read in full now: " + ", ".join(self.fixed_unchecked))
        return out


def compare(baseline: Snapshot, current: Snapshot) -> Delta:
    """What ``current`` holds that ``baseline`` did not, and what it no longer holds.

    Raises:
        BaselineError: the baseline is of the other kind (an audit's against a
            residue scan's: their holders are users and secrets).
    """
    if baseline.kind != current.kind:
        raise BaselineError(f"--baseline {baseline.source}: the output of a memkit {baseline.kind}; this is a "
                            f"memkit {current.kind} (give an output of the same command)")
    d = Delta(source=baseline.source)
    for s, k in current.residue.items():
        if not k:
            continue
        b = baseline.residue.get(s, 0)
        if b == 0:
            d.new[s] = k
        elif k > b:
            d.worse[s] = (b, k)
        else:
            d.known[s] = k
    for s, b in baseline.residue.items():
        if b and current.residue.get(s) == 0 and s not in current.unchecked:
            d.fixed[s] = b
    d.new_unchecked = {s: r for s, r in current.unchecked.items() if s not in baseline.unchecked}
    d.fixed_unchecked = [s for s in baseline.unchecked if s not in current.unchecked and s in current.residue]
    return d


def metric_worse(metric: str, op: str, value: float, baseline: Snapshot) -> tuple[bool, str]:
    """Whether ``value`` of ``metric`` is worse than the baseline's, for a gate
    ``metric OP ...``: beyond the baseline's CI (its value when it has none) in the
    direction the gate fails (up for ``>``/``>=``, down for ``<``/``<=``; ``==`` and
    ``!=`` have no direction: any change is worse).

    Returns:
        ``(worse, why)``; a metric the baseline lacks is worse (new).
    """
    g = baseline.gates.get(metric)
    if g is None or g.get("value") is None:
        return True, "not measured in the baseline"
    ci = g.get("ci") or [g["value"], g["value"]]
    lo = g["value"] if ci[0] is None else ci[0]
    hi = g["value"] if ci[1] is None else ci[1]
    base = f"baseline {g['value']:.4g} [{lo:.4g}, {hi:.4g}]"
    if op in (">", ">="):
        return value > hi, f"{base}: {'above' if value > hi else 'within or below'} its CI"
    if op in ("<", "<="):
        return value < lo, f"{base}: {'below' if value < lo else 'within or above'} its CI"
    return value != g["value"], f"{base}"
