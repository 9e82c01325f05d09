"""CI gates for ``memkit audit``: ``--fail-on`` conditions over an audit's result, JUnit
XML for CI systems, and running a target by its spec.

A condition is ``residue``, ``unchecked``, or ``METRIC OP NUMBER`` (METRIC one of
:data:`METRICS`); a metric the run did not measure (n/a) trips its condition, so CI
never passes on a number that does not exist.
"""

from __future__ import annotations

import operator
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["METRICS", "Condition", "evaluate", "junit_xml", "parse_condition", "run_target"]

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq,
        "!=": operator.ne}
METRICS = ("aer_max", "aer_after_max", "pr", "pr_after", "frs_worst", "residue_users")
_COND = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|==|!=|>|<)\s*([-+]?\d+(?:\.\d*)?|\.\d+)\s*$")


@dataclass(frozen=True)
class Condition:
    """A ``--fail-on`` condition: ``kind`` ``residue``, ``unchecked`` or ``metric``."""

    text: str
    kind: str
    metric: str | None = None
    op: str | None = None
    value: float | None = None


def parse_condition(text: str) -> Condition:
    """Parse ``residue``, ``unchecked`` or ``METRIC OP NUMBER`` (module doc).

    Raises:
        ValueError: anything else (the message lists the metrics).
    """
    t = text.strip()
    if t in ("residue", "unchecked"):
        return Condition(t, t)
    m = _COND.match(t)
    if not m or m.group(1) not in METRICS:
        raise ValueError(f"--fail-on {text!r}: use 'residue', 'unchecked' or METRIC OP NUMBER with METRIC one of "
                         f"{', '.join(METRICS)} (e.g. 'aer_max>0.2')")
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
    if name == "residue_users":
        vals = [v for v in (result.residue or {}).values() if v is not None]
        return float(max(vals)) if vals else None
    raise ValueError(name)


def evaluate(result: Any, conditions: Sequence[Condition]) -> list[tuple[Condition, bool, str]]:
    """``(condition, tripped, message)`` for each condition against an audit result."""
    out = []
    for c in conditions:
        if c.kind == "residue":
            if result.residue is None:
                out.append((c, True, "no residue was measured (no forget, or no surface to scan)"))
                continue
            held = {s: k for s, k in result.residue.items() if k}
            out.append((c, bool(held), "copies remain: " + ", ".join(f"{s} ({k} users)" for s, k in held.items())
                        if held else "no surface holds a canary after the forget"))
        elif c.kind == "unchecked":
            un = result.residue_unchecked or {}
            out.append((c, bool(un), "not checked: " + "; ".join(f"{s} ({', '.join(r)})" for s, r in un.items())
                        if un else "every surface was checked"))
        else:
            v = _metric(result, c.metric or "")
            if v is None:
                out.append((c, True, f"{c.metric} is n/a in this run"))
            else:
                hit = _OPS[c.op or ">"](v, c.value)
                out.append((c, hit, f"{c.metric} = {v:.4g}"))
    return out


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
               delete_threads: bool, n: int, seed: int, data: str, kind: str, n_resamples: int) -> Any:
    """Load ``spec`` (:func:`evaluators.targets.base.load_target`) and audit it.

    Returns:
        The :class:`~evaluators.audit.AuditResult` (a ``TargetAuditResult`` for a target).

    Raises:
        TypeError: the factory returned something that is not a target, mapping or tuple.
    """
    from evaluators.audit import audit
    from evaluators.targets.base import Target, load_target

    if ":" in spec and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `examples.my_agent:build` from the repository root
    if spec in ("langgraph", "langmem") and options.get("backend") == "postgres" and not options.get("pg_uri"):
        # no server given: a temporary PostgreSQL 16 + pgvector (pgserver), removed after the run
        from evaluators.targets.matrix import temporary_postgres

        with temporary_postgres() as (server, root):
            return run_target(spec, options={**options, "pg_uri": server.get_uri(), "pgdata": root}, mode=mode,
                              forget_scope=forget_scope, steps=steps, delete_threads=delete_threads, n=n,
                              seed=seed, data=data, kind=kind, n_resamples=n_resamples)
    made = load_target(spec, mode=mode, **options)
    common = {"n": n, "seed": seed, "data": data, "kind": kind, "n_resamples": n_resamples,
              "delete_threads": delete_threads}
    if isinstance(made, Target):
        try:
            return audit(made, forget=mode != "none", forget_steps=steps, forget_scope=forget_scope, **common)
        finally:
            made.close()
    if isinstance(made, tuple):
        made = dict(zip(("agent", "feed", "forget", "store"), made, strict=False))
    if not isinstance(made, Mapping) or "agent" not in made or "feed" not in made:
        raise TypeError(f"target {spec!r}: the factory must return a Target, a mapping with 'agent' and 'feed', "
                        f"or a tuple (agent, feed[, forget[, store]]); got {type(made).__name__}")
    kwargs = {k: made[k] for k in ("forget", "store", "checkpointer", "also") if made.get(k) is not None}
    return audit(made["agent"], feed=made["feed"], forget_mode=made.get("forget_mode", mode), **kwargs, **common)
