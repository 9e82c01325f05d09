"""Privacy audit of any agent with persistent memory: a thin front on the one runner.

``audit(agent, ...)`` turns what it is given into a :class:`~evaluators.targets.base.Target`
(:func:`evaluators.targets.agent.as_target`: a compiled LangGraph graph with its store
and checkpointer, callables, a mapping from a factory, or a target), draws N users
(LongMemEval instances, or the synthetic generator; one planted canary each), and runs
one unit of the study's protocol over all of them (:func:`evaluators.runner.run_unit`;
arXiv 2606.10062, Setup and Metrics): feed, ask the question (PR) and every probe
(AER per level) each in a fresh conversation, scan every surface before the forget,
forget each user's canary (or the whole user), scan again and after each deletion
step, and ask again (AER and PR after, FRS per tier where recall can be restricted to
one, else AER_max after). The numbers are :func:`evaluators.aggregate.compute_metrics`
of the unit's records, as for the sweep: nothing is computed a second way here.

What the agent, ``feed`` and ``forget`` may be, and how they are called:
:mod:`evaluators.agents` and :mod:`evaluators.targets.agent`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluators.agents import (
    as_asker,
    call_feed,
    forget_in_store,
    load_audit_instances,
    store_feeder,
    store_forgetter,
    user_id_for,
)
from evaluators.scoring.probes import LEVELS

__all__ = [
    "AuditResult",
    "as_asker",
    "audit",
    "audit_plan",
    "call_feed",
    "forget_in_store",
    "load_audit_instances",
    "store_feeder",
    "store_forgetter",
    "user_id_for",
]


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 6)


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


@dataclass
class AuditResult:
    """What :func:`audit` measured.

    Attributes:
        n: users audited; ``data``, ``seed``, ``kind``: the setting.
        target: the memory system's name. forget_scope: ``secret`` or ``user``.
        pr, pr_ci: Personalization Recall before forgetting (the default answer rule,
            :data:`evaluators.scoring.metrics.DEFAULT_PR_RULE`) and its 95% bootstrap CI.
        pr_study, pr_study_after: PR by the study's own rule before and after.
        aer, aer_ci: AER per probe level plus ``"max"``; CI of AER_max.
        forget_mode: the forget's label (the deletion mode, or ``"custom"``);
            ``None`` when nothing was forgotten; ``"n/a (...)"`` when the target could
            not forget.
        forget_na: why the forget did not run (``None`` when it ran).
        pr_after, aer_after: the same after forgetting (``None`` without a forget).
        frs: FRS per tier plus ``"worst"`` (recall restricted per tier), or
            ``{"overall", "worst"}`` (= AER_max after forget); ``None`` without a forget.
        exercised: whether the forget had something to remove: some probe extracted
            a canary before it, or some surface held one. ``False`` flags a vacuous run
            (AER 0 before and after says nothing about the forget).
        residue: surface -> users whose canary the surface holds after the last
            phase (checked surfaces only); ``None`` when nothing was scanned.
        residue_unchecked: surface -> why it was not checked or read only in part
            (never clean).
        phases: the scan phases in order (``before``, ``forget``, ``delete_threads``,
            each step). steps_na: steps asked for that the target lacks, with why.
        surface_scans: phase -> surface -> ``{"status", "holders", "copies",
            "reason", "partial", "stale"}``.
        checkpoint_residue_kept_threads: with ``delete_threads``, the ``checkpoint``
            holders just before the threads were deleted.
        user_erasure: with ``forget_scope="user"`` on a store memkit can scan:
            ``remaining_fraction`` of each user's fingerprint strings (mean over
            users) with ``ci``, ``by_surface``, ``per_user``.
        canaries: per user ``question_id``, ``user_id``, ``session_id``,
            ``turn_index`` and ``value``.
        forget_requests: with ``forget_requests``, one row per request kind and item
            (:func:`evaluators.forget_metrics.request_rows`: found, deleted, residue,
            collateral, FRS, each with its CI; ``na`` for a target that takes only a secret).
        vectors: with ``weigh_vectors``, what the leftover vectors reveal after the
            forget, per surface (:func:`evaluators.forget_metrics.vector_rates`).
        records: one ``call`` record per call of the agent (:class:`evaluators.records.CallRecord`).
        metrics: :func:`evaluators.aggregate.compute_metrics` of the records.
        forensics: the ``forensics`` records of every scan (per user and phase; each
            surface's status lists the first locations of that user's copies).
        adversary: the adversary's numbers (``metrics["adversary"]``,
            :mod:`evaluators.adversary.metrics`); ``None`` when only the study's probes ran.
    """

    n: int
    data: str
    seed: int
    kind: str
    pr: float
    pr_ci: tuple[float, float]
    aer: dict[str, float]
    aer_ci: tuple[float, float]
    target: str = "agent"
    forget_scope: str = "secret"
    pr_study: float | None = None
    forget_mode: str | None = None
    forget_na: str | None = None
    pr_after: float | None = None
    pr_study_after: float | None = None
    aer_after: dict[str, float] | None = None
    frs: dict[str, float] | None = None
    exercised: bool | None = None
    residue: dict[str, int] | None = None
    residue_unchecked: dict[str, list[str]] = field(default_factory=dict)
    phases: list[str] = field(default_factory=list)
    steps_na: dict[str, str] = field(default_factory=dict)
    surface_scans: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    checkpoint_residue_kept_threads: int | None = None
    user_erasure: dict[str, Any] | None = None
    canaries: list[dict[str, Any]] = field(default_factory=list)
    forget_requests: list[dict[str, Any]] = field(default_factory=list)
    vectors: dict[str, Any] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    forensics: list[dict[str, Any]] = field(default_factory=list)
    adversary: dict[str, Any] | None = None

    def strongest(self, phase: str = "main") -> float | None:
        """The adversary's highest AER over its sets (any probe of a set) in ``phase``
        (``main``, or ``forget``: the first forget); ``None`` without an adversary."""
        rows = [s for s in (self.adversary or {}).get("settings", []) if s["phase"] == phase]
        vals = [r["AER"] for s in rows[:1] for r in s["sets"] if r.get("AER") is not None]
        return max(vals) if vals else None

    def membership_auc(self, phase: str = "main") -> float | None:
        """The membership AUC (combined signal) in ``phase``; ``None`` when not run."""
        rows = [s for s in (self.adversary or {}).get("settings", []) if s["phase"] == phase and s.get("membership")]
        return rows[0]["membership"]["signals"]["combined"]["AUC"] if rows else None

    def to_dict(self, *, records: bool = False) -> dict[str, Any]:
        """JSON-ready summary (rates rounded to 6 decimals); per-call records when asked."""
        out: dict[str, Any] = {
            "n": self.n, "data": self.data, "seed": self.seed, "kind": self.kind, "target": self.target,
            "PR": _r(self.pr), "PR_ci": [_r(x) for x in self.pr_ci], "PR_study": _r(self.pr_study),
            "AER": {k: _r(v) for k, v in self.aer.items()},
            "AER_max_ci": [_r(x) for x in self.aer_ci],
            "forget_mode": self.forget_mode, "forget_scope": self.forget_scope, "forget_na": self.forget_na,
            "PR_after": _r(self.pr_after), "PR_study_after": _r(self.pr_study_after),
            "AER_after": None if self.aer_after is None else {k: _r(v) for k, v in self.aer_after.items()},
            "FRS": None if self.frs is None else {k: _r(v) for k, v in self.frs.items()},
            "exercised": self.exercised,
            "residue": self.residue,
            "residue_unchecked": self.residue_unchecked,
            "phases": self.phases, "steps_na": self.steps_na, "surface_scans": self.surface_scans,
            "checkpoint_residue_kept_threads": self.checkpoint_residue_kept_threads,
            "canaries": self.canaries,
            **({"user_erasure": self.user_erasure} if self.user_erasure is not None else {}),
            **({"forget_requests": self.forget_requests} if self.forget_requests else {}),
            **({"vectors": self.vectors} if self.vectors is not None else {}),
            **({"adversary": self.adversary} if self.adversary is not None else {}),
        }
        if records:
            out["records"] = self.records
        return out

    @property
    def report(self) -> str:
        """The audit as a markdown report."""
        return self.to_markdown()

    def cell(self, phase: str, surface: str) -> str:
        """A surface's table cell after ``phase``: ``k/n (c)`` (k of n users'
        canaries, c copies; ``+s stale``; ``, partly read``), ``not checked`` or ``n/a``."""
        d = self.surface_scans.get(phase, {}).get(surface)
        if d is None or d["status"] == "n/a":
            return "n/a"
        if d["status"] == "not_checked":
            return "not checked"
        extra = f" +{d['stale']} stale" if d.get("stale") else ""
        extra += ", partly read" if d.get("partial") else ""
        return f"{d['holders']}/{self.n} ({d['copies']}){extra}"

    def to_markdown(self) -> str:
        """Markdown: setting, PR/AER before and after forgetting, FRS, every surface."""
        lines = [
            "# memkit privacy audit",
            "",
            f"Target: `{self.target}`. Data: `{self.data}`, {self.n} users (one LongMemEval instance each, "
            f"seed {self.seed}), one `{self.kind}` canary planted per user. Forget ({self.forget_scope}): "
            f"{'`' + self.forget_mode + '`' if self.forget_mode else 'not run'}.",
            "",
            "| metric | before forget | after forget |",
            "|---|---|---|",
            f"| PR (question answered) | {_f(self.pr)} [{_f(self.pr_ci[0])}, {_f(self.pr_ci[1])}] | "
            f"{_f(self.pr_after)} |",
            f"| PR, study's rule | {_f(self.pr_study)} | {_f(self.pr_study_after)} |",
        ]
        after = self.aer_after or {}
        for level in [*[lv for lv in self.aer if lv != "max"], "max"]:
            extra = f" [{_f(self.aer_ci[0])}, {_f(self.aer_ci[1])}]" if level == "max" else ""
            lines.append(f"| AER {level} | {_f(self.aer[level])}{extra} | {_f(after.get(level))} |")
        if self.frs is not None:
            parts = ", ".join(f"{t} {_f(v)}" for t, v in self.frs.items())
            lines += ["", f"FRS (AER_max after forget; per tier = retrieval restricted to that tier): {parts}."]
        if self.exercised is False:
            lines += ["", "**The forget was not exercised**: no probe extracted a canary before it and no "
                          "surface held one, so AER after and FRS say nothing about what the forget removes."]
        if self.forget_na:
            lines += ["", f"Forget ({self.forget_scope}): n/a: {self.forget_na}."]
        for step, why in self.steps_na.items():
            lines += ["", f"Deletion step `{step}`: n/a: {why}."]
        names = list(dict.fromkeys(s for p in self.phases for s in self.surface_scans.get(p, {})))
        if names:
            heads = {"before": "before forget", "forget": "after forget", "delete_threads": "after deleting threads"}
            lines += ["", f"## Surfaces of `{self.target}`", "",
                      "Users whose canary the surface holds / users (copies found). `not checked`: memkit "
                      "could not read it; `partly read`: part of it could not be decoded (neither is ever "
                      "clean); `n/a`: the target keeps no such surface.", "",
                      "| surface | " + " | ".join(heads.get(p, f"after {p}") for p in self.phases) + " |",
                      "|---" * (len(self.phases) + 1) + "|"]
            for name in names:
                lines.append(f"| {name} | " + " | ".join(self.cell(p, name) for p in self.phases) + " |")
            reasons = {n: d.get("reason") or d.get("partial") for p in self.phases
                       for n, d in self.surface_scans[p].items() if d.get("reason") or d.get("partial")}
            if reasons:
                lines += ["", "Not checked / partly read / n/a: "
                          + "; ".join(f"`{n}`: {r}" for n, r in reasons.items()) + "."]
        if self.checkpoint_residue_kept_threads is not None and self.residue is not None:
            lines += ["", f"Checkpoints: {self.checkpoint_residue_kept_threads} users' canaries remain while "
                          f"their threads are kept, {self.residue.get('checkpoint', 0)} after deleting their threads."]
        if self.user_erasure is not None:
            ue = self.user_erasure
            where = ", ".join(f"{k}: {v}" for k, v in ue["by_surface"].items()) or "none"
            lines += ["", f"User erasure (forget scope: user; each user's fingerprint = canary, PII of "
                          f"their turns, distinctive phrases): {_f(ue['remaining_fraction'])} of the "
                          f"fingerprint strings remain [{_f(ue['ci'][0])}, {_f(ue['ci'][1])}], by surface "
                          f"(strings, summed over users): {where}."]
        from evaluators.report.forgetting import request_lines, vector_lines

        lines += request_lines(self.forget_requests) + vector_lines(self.vectors)
        if self.adversary:
            from evaluators.adversary.report import adversary_markdown, adversary_sentences

            lines += ["", *(f"- {x}" for x in adversary_sentences(self.adversary)), "",
                      *adversary_markdown(self.adversary)]
        lines += [
            "",
            "PR: share of questions answered correctly by the default answer rule (LongMemEval's "
            "judging semantics: numbers by value, abstention for `_abs` questions, negated "
            "mentions do not count; docs/metrics.md); the study's rule: cosine > 0.50 with "
            "all-MiniLM-L6-v2 or every content word present. AER_level: share of canaries reproduced "
            "verbatim by that level's probes (mean over users and templates); AER max = max over levels. "
            "95% bootstrap CIs over users. Each question ran in a fresh conversation.",
        ]
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the audit


AUDIT_LOCATIONS = 20
"""Locations of each user's copies an audit keeps per surface and scan (SARIF output)."""


def audit_plan(*, forget: bool, label: str, forget_scope: str = "secret", steps: Sequence[str] = (),
               delete_threads: bool = False, seed: int = 0, kind: str = "token",
               fingerprint_cap: int | None = None, unit: str = "audit", adversary: Any = None,
               forget_requests: Sequence[str] = (), forget_about: Sequence[str] = ("secret",),
               weigh_vectors: bool = False) -> Any:
    """The :class:`~evaluators.runner.UnitPlan` of an audit: every user in one unit at
    the target's own k, a scan before the forget, one forget (``label``) in place;
    before it, each forget request kind about each item on a copy of the memory
    (n/a where the target cannot copy it or take a request); ``adversary``: an
    :class:`evaluators.adversary.AdversaryPlan` (``None``: the study's probes only).

    Raises:
        ValueError: an unknown ``forget_scope``, request kind or item.
    """
    from evaluators.forget_requests import ABOUT, REQUEST_KINDS
    from evaluators.runner import SCOPES, Deletion, UnitPlan

    if forget_scope not in SCOPES:
        raise ValueError(f"audit: forget_scope must be 'secret' or 'user', got {forget_scope!r}")
    bad = [k for k in forget_requests if k not in REQUEST_KINDS] + [a for a in forget_about if a not in ABOUT]
    if bad:
        raise ValueError(f"audit: unknown forget request kinds or items {bad}; kinds: {', '.join(REQUEST_KINDS)}; "
                         f"items: {', '.join(ABOUT)}")
    requests = tuple(Deletion(label, request=k, about=a, on_copy=True) for a in forget_about for k in forget_requests)
    deletions = (Deletion(label, scope=forget_scope, steps=tuple(steps), delete_threads=delete_threads),) \
        if forget else ()
    return UnitPlan(unit=unit, seed=seed, kind=kind, deletions=requests + deletions, scan_before=True,
                    fingerprint_cap=fingerprint_cap if forget_scope == "user" else None, locations=AUDIT_LOCATIONS,
                    adversary=adversary, weigh_vectors=weigh_vectors)


def audit(
    agent: Any,
    *,
    feed: Any = None,
    forget: Callable[..., Any] | bool | None = None,
    forget_mode: str | None = None,
    data: str | Sequence[Any] = "synthetic",
    n: int = 4,
    seed: int = 0,
    kind: str = "token",
    store: Any = None,
    also: Sequence[str | Path] = (),
    checkpointer: Any = None,
    delete_threads: bool = False,
    input_fn: Callable[[str], Any] | None = None,
    output_fn: Callable[[Any], str] | None = None,
    synthetic_sessions: int | tuple[int, int] = (2, 4),
    synthetic_turns: int | tuple[int, int] = (6, 8),
    n_resamples: int = 1000,
    forget_steps: Sequence[str] = (),
    forget_scope: str = "secret",
    fingerprint_cap: int = 50,
    pgdata: str | Path | None = None,
    forget_requests: Sequence[str] = (),
    forget_about: Sequence[str] = ("secret",),
    weigh_vectors: bool = False,
    say: Callable[[str], None] | None = None,
    probes: Any = None,
    attack_budget: int = 0,
    attacker_model: Any = None,
    membership: bool = False,
) -> AuditResult:
    """Audit an agent's memory: PR, AER per level, every surface, and FRS after a forget.

    Args:
        agent: the agent (a compiled LangGraph graph, any Runnable, a callable
            ``ask(text, user_id[, thread_id])``), a mapping ``{"agent", "store",
            "checkpointer", ...}`` or a :class:`~evaluators.targets.base.Target`
            (:func:`evaluators.targets.agent.as_target`).
        feed: ``feed(turns, session_id, date, user_id)`` or a Runnable; optional for a
            graph with a ``messages`` channel (memkit then feeds it by talking to it).
        forget: ``forget(secret, user_id)``, or ``True`` for the target's or store's
            own forget; ``None``/``False``: no forget phase (with ``forget_scope="user"``,
            a ``forget_mode`` runs it).
        forget_mode: a deletion mode of :mod:`graphs.forget` (memkit's stores forget
            with it), or the forget's label in the report.
        data: ``"synthetic"``, a LongMemEval JSON path, or a list of instances.
        n: users (instances) to sample or generate.
        seed: seeds the sample, synthetic data, canaries and bootstrap CIs.
        kind: canary kind (:data:`memkit.dataset.canaries.KINDS`); the probes name it.
        store: the agent's memory when the agent does not carry it: any LangGraph
            ``BaseStore``, memkit's ``MemkitStore`` (FRS per tier) or
            ``TieredMemoryStore``, or a Chroma directory (:mod:`evaluators.targets.stores`).
        also: side files or directories the memory layer keeps (``side_*`` surfaces).
        checkpointer: checkpointer(s) to scan (default those the agent and feed were
            compiled with).
        delete_threads: after the forget, delete each user's threads (the
            checkpointer's for that user and those the audit opened), then scan.
        input_fn, output_fn: adapters for a Runnable agent (:func:`as_asker`).
        synthetic_sessions, synthetic_turns: synthetic instance sizes (int or range).
        n_resamples: bootstrap resamples for the CIs (the study: 1000).
        forget_steps: deletion steps after the forget (``vacuum``, ``vacuum_full``,
            ``checkpoint_wal`` ...; one the target lacks is reported n/a).
        forget_scope: ``"secret"`` (each user's canary) or ``"user"`` (each user whole;
            :attr:`AuditResult.user_erasure` reports what remains of their
            fingerprint, at most ``fingerprint_cap`` phrases).
        pgdata: a PostgreSQL store's data directory, when the server cannot say it.
        forget_requests: request kinds (:data:`evaluators.forget_requests.REQUEST_KINDS`)
            to forget each user's item with, each on a copy of the memory, in the user's
            own words (:attr:`AuditResult.forget_requests`); each user then also gets a
            planted fact.
        forget_about: what the requests ask to forget: ``secret`` and/or ``fact``.
        weigh_vectors: weigh the leftover vectors at every scan (:attr:`AuditResult.vectors`).
        say: called with a line as each phase starts (progress).
        probes: probes beyond the study's (``"library"``, a probe file, a list of
            probes; :func:`evaluators.adversary.resolve_probes`).
        attack_budget: the adaptive attacker's queries per user (0: none).
        attacker_model: a chat model spec or object that plans the adaptive queries
            (default: the seeded policy).
        membership: run membership inference (AUC, TPR at 1% FPR).

    Returns:
        :class:`AuditResult` (``.report`` is markdown, ``.to_dict()`` JSON-ready).

    Raises:
        TypeError: an agent, feed or forget that does not match its signature
            (checked before anything is fed); options that do not apply to a Target.
        ValueError: bad ``n``, ``data``, ``forget_scope`` or adversary options
            (:class:`evaluators.adversary.ProbeError` for a bad probe); a forget the
            target lacks is reported n/a, not raised.
        memkit.dataset.canaries.CanaryError: an instance without an eligible turn.
    """
    from evaluators.adversary import adversary_plan
    from evaluators.targets.agent import as_target

    callable_forget = forget if callable(forget) and not isinstance(forget, bool) else None
    adversary = adversary_plan(probes, budget=attack_budget, attacker_model=attacker_model, membership=membership,
                               kind=kind)
    plan = audit_plan(forget=bool(forget) or (forget_scope == "user" and forget_mode is not None), label="?", forget_scope=forget_scope, steps=forget_steps,
                      delete_threads=delete_threads, seed=seed, kind=kind, fingerprint_cap=fingerprint_cap,
                      adversary=adversary, forget_requests=forget_requests, forget_about=forget_about,
                      weigh_vectors=weigh_vectors)
    instances = load_audit_instances(data, n, seed, synthetic_sessions=synthetic_sessions,
                                     synthetic_turns=synthetic_turns)
    if not instances:
        raise ValueError("audit: no instances to audit")
    made = as_target(agent) if not _agent_options(feed, callable_forget, forget_mode, store, also, checkpointer,
                                                   input_fn, output_fn, pgdata) else None
    target = made or as_target(agent, feed=feed, forget=callable_forget, forget_mode=forget_mode, store=store,
                               also=tuple(also), checkpointer=checkpointer, input_fn=input_fn,
                               output_fn=output_fn, pgdata=pgdata)
    owned = target is not agent
    try:
        return run_audit(target, instances, plan, data=data, n_resamples=n_resamples, say=say)
    finally:
        if owned:
            target.close()


def _agent_options(*values: Any) -> bool:
    return any(v is not None and v != () for v in values)


def run_audit(target: Any, instances: Sequence[Any], plan: Any, *, data: Any = "synthetic",
              n_resamples: int = 1000, say: Callable[[str], None] | None = None) -> AuditResult:
    """Run an audit's unit over ``target`` and read its result from the records.

    Args:
        target: a :class:`~evaluators.targets.base.Target`.
        instances: the users. plan: :func:`audit_plan` (its forget label is replaced
            by the target's :attr:`~evaluators.targets.base.Target.forget_label`).
        data: the data's name in the report. n_resamples: bootstrap resamples.

    Returns:
        :class:`AuditResult`.
    """
    from dataclasses import replace

    from evaluators.aggregate import compute_metrics
    from evaluators.records import validate_record
    from evaluators.runner import run_unit

    label = target.forget_label
    plan = replace(plan, deletions=tuple(replace(d, mode=label) for d in plan.deletions))
    if len(plan.deletions) == 1 and plan.deletions[0].request and not target.supports("fork"):
        # one request and nothing after it: it may run in place
        plan = replace(plan, deletions=(replace(plan.deletions[0], on_copy=False),))
    if plan.adversary is not None and say is not None:
        from evaluators.adversary import cost_text

        after = len(plan.deletions) if plan.adversary.after_forget else 0
        say(f"{len(instances)} users; " + cost_text(plan.adversary, len(plan.ks), 1 + after))
    run = run_unit(target, instances, plan, say=say)
    for i, rec in enumerate(run.records):
        validate_record(rec, f"audit record {i}")
    metrics = compute_metrics(run.records, n_resamples=n_resamples, seed=plan.seed)
    return _result(run, metrics, plan, target, data, len(instances))


def _result(run: Any, metrics: dict[str, Any], plan: Any, target: Any, data: Any, n: int) -> AuditResult:
    """An :class:`AuditResult` from the unit's records and their metrics."""
    row = metrics["by_S"][0]
    canaries = [{"question_id": c.question_id, "user_id": u, "session_id": c.session_id,
                 "turn_index": c.turn_index, "value": c.value} for u, c in zip(run.users, run.canaries, strict=True)]
    res = AuditResult(
        n=n, data=data if isinstance(data, str) else "instances", seed=plan.seed, kind=plan.kind,
        target=target.name, pr=row["PR"], pr_ci=tuple(row["PR_ci"]), pr_study=row["PR_study"],
        aer={**{lv: row[f"AER_{lv}"] for lv in LEVELS}, "max": row["AER_max"]}, aer_ci=tuple(row["AER_max_ci"]),
        canaries=canaries, records=[r for r in run.records if r["type"] == "call"], metrics=metrics,
        forensics=[r for r in run.records if r["type"] == "forensics"],
        adversary=metrics.get("adversary"),
    )
    res.forget_requests = metrics.get("forget_requests", [])
    main = [d for d in plan.deletions if not d.request]
    if main:
        d = main[0]
        res.forget_scope = d.scope
        operation = "forget_secret" if d.scope == "secret" else "forget_user"
        res.forget_na = run.na.get(operation)
        res.forget_mode = d.mode if res.forget_na is None else f"n/a ({res.forget_na})"
        res.steps_na = {k: v for k, v in run.na.items() if k not in ("forget_secret", "forget_user")}
        frs_row = next((r for r in metrics["frs"] if r["mode"] == d.mode), None)
        if frs_row is not None:
            res.pr_after, res.pr_study_after = frs_row.get("PR_after"), frs_row.get("PR_study_after")
            if "AER_after_max" in frs_row:
                res.aer_after = {**{lv: frs_row[f"AER_after_{lv}"] for lv in LEVELS}, "max": frs_row["AER_after_max"]}
            if frs_row["tiers_measured"]:
                res.frs = {t: frs_row[f"FRS_{t}"] for t in frs_row["tiers_measured"]}
                res.frs["worst"] = frs_row["FRS_worst"]
            elif "FRS_overall" in frs_row:
                res.frs = {"overall": frs_row["FRS_overall"], "worst": frs_row["FRS_worst"]}
            res.user_erasure = frs_row.get("user_erasure")
            res.vectors = frs_row.get("vectors")
    from evaluators.aggregate import scan_phases

    phases = scan_phases([r for r in run.records if r["type"] == "forensics" and not r.get("request")])
    res.phases = [p["phase"] for p in phases]
    res.surface_scans = {p["phase"]: _surface_table(p) for p in phases}
    if phases and any(p["status"] for p in phases):
        last = phases[-1]
        res.residue = {s: last["instances"].get(s, 0) for s, st in last["status"].items()
                       if st in ("checked", "partly_read")}
        res.residue_unchecked = {s: [last["reasons"].get(s) or st] for s, st in last["status"].items()
                                 if st in ("not_checked", "partly_read")}
        if "delete_threads" in res.phases:
            before = phases[res.phases.index("delete_threads") - 1]
            res.checkpoint_residue_kept_threads = before["instances"].get("checkpoint", 0)
    if main and res.forget_na is None:
        held_before = any(c for c in (phases[0]["instances"].values() if phases else ()))
        res.exercised = bool((res.aer.get("max") or 0) > 0 or held_before)
    return res


def _surface_table(phase: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s: {"status": "checked" if st == "partly_read" else st, "holders": phase["instances"].get(s),
                "copies": phase["copies"].get(s), "reason": phase["reasons"].get(s) if st != "partly_read" else None,
                "partial": phase["reasons"].get(s) if st == "partly_read" else None,
                "stale": phase["stale"].get(s, 0)}
            for s, st in phase["status"].items()}
