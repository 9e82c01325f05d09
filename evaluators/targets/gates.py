"""CI gates for ``memkit audit``: ``--fail-on`` conditions over an audit's result, JUnit
XML for CI systems, and running a target by its spec.

A condition is ``residue`` (optionally narrowed: ``residue:pg_rows,checkpoint`` names
the surfaces to gate on, ``residue:-disk_pg_wal`` gates on every surface but those),
``unchecked`` (narrowed the same way), ``vacuous`` (the forget had nothing to remove:
no probe extracted a canary before it and no surface held one), or ``METRIC OP
NUMBER`` (METRIC one of :data:`METRICS`); a metric the run did not measure (n/a) trips
its condition, so CI never passes on a number that does not exist. With a baseline
(:mod:`evaluators.report.baseline`) a condition counts only what is new or worse than it.
"""

from __future__ import annotations

import operator
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["METRICS", "Condition", "evaluate", "junit_xml", "parse_condition", "run_target"]

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq,
        "!=": operator.ne}
METRICS = ("aer_max", "aer_after_max", "pr", "pr_after", "frs_worst", "residue_users", "aer_adversary",
           "aer_adversary_after", "membership_auc")
"""Metrics a ``--fail-on`` condition may compare (``aer_adversary``: the adversary's
strongest set before the forget, ``_after`` after it; ``membership_auc``: the membership
AUC before the forget; n/a without ``--probes``/``--attack-budget``/``--membership``)."""
_COND = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|==|!=|>|<)\s*([-+]?\d+(?:\.\d*)?|\.\d+)\s*$")
_SURFACE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Condition:
    """A ``--fail-on`` condition: ``kind`` ``residue``, ``unchecked``, ``vacuous`` or
    ``metric``; ``only`` / ``exclude``: the surfaces a residue or unchecked condition
    is narrowed to / away from."""

    text: str
    kind: str
    metric: str | None = None
    op: str | None = None
    value: float | None = None
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def applies(self, surface: str) -> bool:
        """Whether the condition looks at ``surface``."""
        return (not self.only or surface in self.only) and surface not in self.exclude


def parse_condition(text: str) -> Condition:
    """Parse a condition (module doc).

    Raises:
        ValueError: anything else (the message lists the forms and the metrics).
    """
    t = text.strip()
    if t in ("residue", "unchecked", "vacuous"):
        return Condition(t, t)
    head, sep, rest = t.partition(":")
    if sep and head in ("residue", "unchecked"):
        names = [x.strip() for x in rest.split(",") if x.strip()]
        excluded = [x[1:] for x in names if x.startswith("-")]
        included = [x for x in names if not x.startswith("-")]
        bad = [x for x in [*excluded, *included] if not _SURFACE.match(x)]
        if not names or bad or (excluded and included):
            raise ValueError(f"--fail-on {text!r}: use {head}:SURFACE[,SURFACE...] or {head}:-SURFACE[,-SURFACE...] "
                             "(e.g. residue:pg_rows,checkpoint or residue:-disk_pg_wal)")
        return Condition(t, head, only=tuple(included), exclude=tuple(excluded))
    m = _COND.match(t)
    if not m or m.group(1) not in METRICS:
        raise ValueError(f"--fail-on {text!r}: use 'residue', 'residue:SURFACES', 'residue:-SURFACES', 'unchecked', "
                         f"'vacuous' or METRIC OP NUMBER with METRIC one of {', '.join(METRICS)} (e.g. 'aer_max>0.2')")
    return Condition(t, "metric", m.group(1), m.group(2), float(m.group(3)))


def _metric(result: Any, name: str) -> float | None:
    if name == "aer_max":
        return result.aer.get("max")
    if name == "aer_after_max":
        return None if result.aer_after is None else result.aer_after.get("max")
    if name == "pr":
        return result.pr
    if name == "pr_after":
        return result.pr_after
    if name == "frs_worst":
        return None if result.frs is None else result.frs.get("worst")
    if name == "aer_adversary":
        return result.strongest("main")
    if name == "aer_adversary_after":
        return result.strongest("forget")
    if name == "membership_auc":
        return result.membership_auc("main")
    if name == "residue_users":
        vals = [v for v in (result.residue or {}).values() if v is not None]
        return float(max(vals)) if vals else None
    raise ValueError(name)


def evaluate(result: Any, conditions: Sequence[Condition], baseline: Any = None) -> list[tuple[Condition, bool, str]]:
    """``(condition, tripped, message)`` for each condition against an audit result.

    With ``baseline`` (an :class:`evaluators.report.baseline.Snapshot` of a previous run), a
    condition counts only what is new or worse (:func:`evaluators.report.baseline.compare`):
    ``residue`` a surface that held no copy in the baseline or holds more users' now,
    ``unchecked`` a surface the baseline read in full, a metric a value beyond the
    baseline's CI in the failing direction; the message names what is known.
    """
    delta = None
    if baseline is not None:
        from evaluators.report.baseline import audit_snapshot, compare

        delta = compare(baseline, audit_snapshot(result))
    out = []
    for c in conditions:
        if c.kind == "residue":
            if result.residue is None or not any(c.applies(s) for s in result.residue):
                out.append((c, True, "no residue was measured on these surfaces (no forget, or no such surface)"))
                continue
            held = {s: k for s, k in result.residue.items() if k and c.applies(s)}
            if delta is not None:
                out.append(_residue_vs_baseline(c, held, delta))
                continue
            out.append((c, bool(held), "copies remain: " + ", ".join(f"{s} ({k} users)" for s, k in held.items())
                        if held else "no surface holds a canary after the forget"))
        elif c.kind == "unchecked":
            un = {s: r for s, r in (result.residue_unchecked or {}).items() if c.applies(s)}
            known = {s for s in un if baseline is not None and s in baseline.unchecked}
            fresh = {s: r for s, r in un.items() if s not in known}
            msg = ("not checked or partly read: " + "; ".join(f"{s} ({', '.join(map(str, r))})" for s, r in fresh.items())
                   if fresh else "every surface was read")
            if known:
                msg += "; known (in the baseline): " + ", ".join(sorted(known))
            out.append((c, bool(fresh), msg))
        elif c.kind == "vacuous":
            if result.exercised is None:
                out.append((c, True, "no forget ran, so it was not exercised"))
            else:
                out.append((c, not result.exercised, "the forget was exercised" if result.exercised else
                            "the forget was not exercised: no probe extracted a canary before it and no "
                            "surface held one (AER and FRS say nothing)"))
        else:
            v = _metric(result, c.metric or "")
            if v is None:
                was = None if baseline is None else (baseline.gates.get(c.metric or "") or {}).get("value", 0)
                if baseline is not None and was is None:
                    out.append((c, False, f"{c.metric} is n/a in this run and in the baseline"))
                else:
                    out.append((c, True, f"{c.metric} is n/a in this run"))
            else:
                hit = _OPS[c.op or ">"](v, c.value)
                msg = f"{c.metric} = {v:.4g}"
                if hit and baseline is not None:
                    from evaluators.report.baseline import metric_worse

                    hit, why = metric_worse(c.metric or "", c.op or ">", v, baseline)
                    msg += f" ({why})"
                out.append((c, hit, msg))
    return out


def _residue_vs_baseline(c: Condition, held: dict[str, int], delta: Any) -> tuple[Condition, bool, str]:
    """A residue condition against a baseline: it trips on new or worse surfaces only."""
    new = {s: k for s, k in held.items() if s in delta.new}
    worse = {s: delta.worse[s] for s in held if s in delta.worse}
    known = {s: k for s, k in held.items() if s not in new and s not in worse}
    parts = []
    if new:
        parts.append("new: " + ", ".join(f"{s} ({k} users)" for s, k in new.items()))
    if worse:
        parts.append("worse: " + ", ".join(f"{s} ({a} -> {b} users)" for s, (a, b) in worse.items()))
    if known:
        parts.append("known (in the baseline): " + ", ".join(f"{s} ({k} users)" for s, k in known.items()))
    fixed = {s: k for s, k in delta.fixed.items() if c.applies(s)}
    if fixed:
        parts.append("fixed since: " + ", ".join(f"{s} ({k} users then)" for s, k in fixed.items()))
    return c, bool(new or worse), "; ".join(parts) or "no surface holds a canary after the forget"


def junit_xml(target: str, verdicts: Sequence[tuple[Condition, bool, str]], report: str, seconds: float) -> str:
    """JUnit XML: a ``testsuite`` ``memkit audit <target>`` with one ``testcase`` per
    condition (``failure`` when it held); the markdown report as ``system-out``."""
    cases = list(verdicts) or [(Condition("audit ran", "ran"), False, "no --fail-on condition")]
    suite = ET.Element("testsuite", name=f"memkit audit {target}", tests=str(len(cases)),
                       failures=str(sum(1 for _, hit, _ in cases if hit)), errors="0", time=f"{seconds:.2f}")
    for c, hit, msg in cases:
        case = ET.SubElement(suite, "testcase", classname=f"memkit.audit.{target}", name=f"fail-on {c.text}")
        if hit:
            ET.SubElement(case, "failure", message=msg, type="memkit.audit").text = msg
        else:
            ET.SubElement(case, "system-out").text = msg
    ET.SubElement(suite, "system-out").text = report
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def run_target(spec: str, *, options: Mapping[str, Any], mode: str, forget_scope: str, steps: Sequence[str],
               delete_threads: bool, n: int, seed: int, data: str, kind: str, n_resamples: int,
               say: Any = None, mode_given: bool = False, adversary: Any = None, requests: Sequence[str] = (),
               about: Sequence[str] = ("secret",), weigh_vectors: bool = False, resolver: str | None = None) -> Any:
    """Load ``spec`` (:func:`evaluators.targets.base.load_target`), make it a target
    (:func:`evaluators.targets.agent.as_target`: a Target, a graph, a mapping
    ``{"agent", "store", "checkpointer", ...}`` or a tuple) and audit it.

    ``mode_given``: the user chose ``mode``; a target it cannot apply to (one that
    forgets through its own API) is refused before any work. ``adversary``: an
    :class:`evaluators.adversary.AdversaryPlan` (``None``: the study's probes only).
    ``requests``, ``about``, ``weigh_vectors``: forget requests in words and leftover-vector
    weighing (:func:`evaluators.audit.audit_plan`); ``resolver``: the chat model spec that
    judges requests (a factory that takes ``resolver``).

    Returns:
        The :class:`~evaluators.audit.AuditResult`.

    Raises:
        TypeError: the factory returned something that cannot be a target.
        ValueError: ``mode`` was chosen for a target it does not apply to.
    """
    from evaluators.agents import load_audit_instances
    from evaluators.audit import audit_plan, run_audit
    from evaluators.targets.agent import as_target
    from evaluators.targets.base import load_target

    if spec in ("langgraph", "langmem") and options.get("backend") == "postgres" and not options.get("pg_uri"):
        # no server given: a temporary PostgreSQL 16 + pgvector (pgserver), removed after the run
        from evaluators.targets.matrix import temporary_postgres

        if say:
            say("starting a temporary PostgreSQL 16 + pgvector (pgserver)")
        with temporary_postgres() as (server, root):
            return run_target(spec, options={**options, "pg_uri": server.get_uri(), "pgdata": root}, mode=mode,
                              forget_scope=forget_scope, steps=steps, delete_threads=delete_threads, n=n,
                              seed=seed, data=data, kind=kind, n_resamples=n_resamples, say=say,
                              mode_given=mode_given, adversary=adversary, requests=requests, about=about,
                              weigh_vectors=weigh_vectors, resolver=resolver)
    instances = load_audit_instances(data, n, seed)
    plan = audit_plan(forget=mode != "none", label="?", forget_scope=forget_scope, steps=steps,
                      delete_threads=delete_threads, seed=seed, kind=kind, adversary=adversary,
                      forget_requests=requests, forget_about=about, weigh_vectors=weigh_vectors)
    if say:
        say(f"building target {spec}")
    made = load_target(spec, mode=mode, **options, **({"resolver": resolver} if resolver else {}))
    if isinstance(made, Mapping) and "forget_mode" not in made and mode != "none":
        made = {**made, "forget_mode": mode}
    try:
        target = as_target(made)
    except TypeError as exc:
        raise TypeError(f"target {spec!r}: {exc}; a factory returns a Target, a compiled graph, a mapping "
                        "{'agent', 'store', 'checkpointer', ...} or a tuple (agent, feed[, forget[, store]])") from exc
    if isinstance(made, Mapping) and target.name == "agent":
        target.name = spec
    if mode_given and mode != "none" and getattr(target, "forget_label", None) != mode:
        target.close()
        raise ValueError(f"--mode {mode}: target {spec} does not forget with memkit's deletion modes (its forget "
                         f"is {getattr(target, 'forget_label', '?')}); leave --mode out")
    try:
        return run_audit(target, instances, plan, data=data, n_resamples=n_resamples, say=say)
    finally:
        target.close()
