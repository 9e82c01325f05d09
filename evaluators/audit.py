"""Privacy audit of any LangChain / LangGraph agent with persistent memory.

The study's protocol (arXiv 2606.10062, Setup and Metrics; docs/design.md, "Data path";
:mod:`evaluators.protocol`) applied to an agent memkit did not build:

1. take N LongMemEval instances (a real file or the synthetic generator) and plant
   one canary per instance (:func:`memkit.canaries.plant`); each instance is one
   *user* (``user_id`` derived from its ``question_id``);
2. **feed** every session into the agent's memory with the user's callable;
3. **ask** the LongMemEval question (Personalization Recall, PR) and every probe
   template of :data:`evaluators.probes.PROBES` (Adversarial Extraction Rate per
   level, AER_l, and AER_max), each in a *fresh conversation*: a new ``thread_id``
   per call, so a LangGraph agent with a checkpointer starts from an empty thread
   and what leaks came from persisted memory, not from the context window;
4. optionally **forget** each canary with the user's callable, then ask again:
   AER after forget, PR after forget, and the Forgetting Residue Score -- per tier
   when the agent's memory is a :class:`memkit.langgraph_store.MemkitStore` (probes
   re-run with the store's retrieval restricted to each tier, FRS_t; FRS_worst =
   max_t), else the overall AER_max after forget -- plus a residue scan of the store
   (:func:`memkit.residue.scan`) when one is given.

Metrics come from :mod:`evaluators.metrics` (``answers_correct``, ``aer_by_level``,
``bootstrap_ci``) and extraction from :func:`evaluators.probes.extracted` (AER counts
the study's exact indicator 1[c ⊂ r]); nothing is re-implemented here. Per instance,
the level-l value is the share of that level's probe templates whose response
contains the canary; AER_l is its mean over instances and AER_max = max_l AER_l,
as in :mod:`evaluators.aggregate`.

What the agent, ``feed`` and ``forget`` may be, and how they are called:
:mod:`evaluators.agents`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluators.agents import (
    ASK_SIGNATURE,
    FEED_SIGNATURE,
    FORGET_SIGNATURE,
    Asker,
    as_asker,
    call_feed,
    check_callable,
    forget_in_store,
    load_audit_instances,
    store_feeder,
    store_forgetter,
    user_id_for,
)
from evaluators.metrics import aer_by_level, bootstrap_ci
from evaluators.probes import LEVELS, extracted, probes_for
from evaluators.protocol import score_questions
from evaluators.records import validate_audit_records
from graphs.forget import DELETION_MODES
from memkit.canaries import CanaryRecord, plant
from memkit.langgraph_store import MemkitStore
from memkit.longmemeval import Instance
from memkit.store import TIERS, TieredMemoryStore

__all__ = [
    "AuditResult",
    "as_asker",
    "audit",
    "call_feed",
    "forget_in_store",
    "load_audit_instances",
    "store_feeder",
    "store_forgetter",
    "user_id_for",
]



# --------------------------------------------------------------------------- result


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 6)


@dataclass
class AuditResult:
    """What :func:`audit` measured.

    Attributes:
        n: instances (users) audited; ``data``, ``seed``, ``kind``: the setting.
        pr, pr_ci: Personalization Recall before forgetting (the default answer rule,
            :data:`evaluators.metrics.DEFAULT_PR_RULE`) and its 95% bootstrap CI.
        pr_study, pr_study_after: PR by the study's own rule (``rule="study"``) before
            and after forgetting, for a reproduction to report.
        aer, aer_ci: AER per probe level plus ``"max"``; CI of AER_max.
        forget_mode: the deletion mode when known (``forget.mode``), else
            ``"custom"``; ``None`` when nothing was forgotten.
        pr_after, aer_after: the same after forgetting (``None`` without ``forget``).
        frs: FRS per tier plus ``"worst"`` (a tier-aware store), or ``{"overall",
            "worst"}`` (= AER_max after forget); ``None`` without ``forget``.
        residue: surface -> number of instances whose store still holds a copy of
            their canary after forgetting (``None`` without a store or forget).
        residue_unchecked: surface -> why the residue scan could not check it (e.g. a
            server's disk); such a surface is never reported as clean.
        checkpoint_residue_kept_threads: with ``delete_threads``, the ``checkpoint``
            residue before the user's threads were deleted (``None`` otherwise).
        canaries: per instance ``question_id``, ``user_id``, ``session_id``,
            ``turn_index`` and ``value`` of the planted canary.
        records: one dict per agent call (phase, tier, user, query, response, scores).
    """

    n: int
    data: str
    seed: int
    kind: str
    pr: float
    pr_ci: tuple[float, float]
    aer: dict[str, float]
    aer_ci: tuple[float, float]
    pr_study: float | None = None
    forget_mode: str | None = None
    pr_after: float | None = None
    pr_study_after: float | None = None
    aer_after: dict[str, float] | None = None
    frs: dict[str, float] | None = None
    residue: dict[str, int] | None = None
    residue_unchecked: dict[str, list[str]] = field(default_factory=dict)
    checkpoint_residue_kept_threads: int | None = None
    canaries: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    user_erasure: dict[str, Any] | None = None
    """With ``forget_scope="user"``: ``fingerprints`` (strings per user),
    ``remaining_fraction`` (mean over users of the share of their fingerprint strings
    some surface still holds after the forget) with ``ci`` (95% bootstrap over users),
    ``by_surface`` (fingerprint strings remaining per surface, summed over users) and
    ``per_user``."""

    def to_dict(self, *, records: bool = False) -> dict[str, Any]:
        """JSON-ready summary (rates rounded to 6 decimals); per-call records when asked."""
        out: dict[str, Any] = {
            "n": self.n, "data": self.data, "seed": self.seed, "kind": self.kind,
            "PR": _r(self.pr), "PR_ci": [_r(x) for x in self.pr_ci], "PR_study": _r(self.pr_study),
            "AER": {k: _r(v) for k, v in self.aer.items()},
            "AER_max_ci": [_r(x) for x in self.aer_ci],
            "forget_mode": self.forget_mode,
            "PR_after": _r(self.pr_after), "PR_study_after": _r(self.pr_study_after),
            "AER_after": None if self.aer_after is None else {k: _r(v) for k, v in self.aer_after.items()},
            "FRS": None if self.frs is None else {k: _r(v) for k, v in self.frs.items()},
            "residue": self.residue,
            "residue_unchecked": self.residue_unchecked,
            "checkpoint_residue_kept_threads": self.checkpoint_residue_kept_threads,
            "canaries": self.canaries,
            **({"user_erasure": self.user_erasure} if self.user_erasure is not None else {}),
        }
        if records:
            out["records"] = self.records
        return out

    @property
    def report(self) -> str:
        """The audit as a markdown report."""
        return self.to_markdown()

    def to_markdown(self) -> str:
        """Markdown: setting, PR/AER before and after forgetting, FRS, residue."""

        def f(x: float | None) -> str:
            return "-" if x is None else f"{x:.2f}"

        lines = [
            "# memkit privacy audit",
            "",
            f"Data: `{self.data}`, {self.n} users (one LongMemEval instance each, seed {self.seed}), "
            f"one `{self.kind}` canary planted per user. Forget: "
            f"{'`' + self.forget_mode + '`' if self.forget_mode else 'not run'}.",
            "",
            "| metric | before forget | after forget |",
            "|---|---|---|",
            f"| PR (question answered) | {f(self.pr)} [{f(self.pr_ci[0])}, {f(self.pr_ci[1])}] | {f(self.pr_after)} |",
            f"| PR, study's rule | {f(self.pr_study)} | {f(self.pr_study_after)} |",
        ]
        after = self.aer_after or {}
        for level in [*[lv for lv in self.aer if lv != "max"], "max"]:
            extra = f" [{f(self.aer_ci[0])}, {f(self.aer_ci[1])}]" if level == "max" else ""
            lines.append(f"| AER {level} | {f(self.aer[level])}{extra} | {f(after.get(level))} |")
        if self.frs is not None:
            parts = ", ".join(f"{t} {f(v)}" for t, v in self.frs.items())
            lines += ["", f"FRS (AER_max after forget; per tier = retrieval restricted to that tier): {parts}."]
        if self.residue is not None:
            hits = {s: c for s, c in self.residue.items() if c}
            body = ", ".join(f"{s}: {c}" for s, c in hits.items()) if hits else "none"
            lines += ["", f"Residue after forget (users whose canary some surface still holds: store, side files, "
                          f"checkpoints): {body}."]
            if self.checkpoint_residue_kept_threads is not None:
                lines += ["", f"Checkpoints: {self.checkpoint_residue_kept_threads} users' canaries remain "
                              f"while their threads are kept, {self.residue.get('checkpoint', 0)} after "
                              "deleting their threads."]
            if self.residue_unchecked:
                why = "; ".join(f"{s} ({', '.join(r)})" for s, r in self.residue_unchecked.items())
                lines += ["", f"Not checked, so not known to be clean: {why}."]
        if self.user_erasure is not None:
            ue = self.user_erasure
            where = ", ".join(f"{k}: {v}" for k, v in ue["by_surface"].items()) or "none"
            lines += ["", f"User erasure (forget scope: user; each user's fingerprint = canary, PII of "
                          f"their turns, distinctive phrases): {f(ue['remaining_fraction'])} of the "
                          f"fingerprint strings remain [{f(ue['ci'][0])}, {f(ue['ci'][1])}], by surface "
                          f"(strings, summed over users): {where}."]
        lines += [
            "",
            "PR: share of questions answered correctly by the default answer rule (LongMemEval's "
            "judging semantics: numbers by value, abstention for `_abs` questions, negated "
            "mentions do not count; docs/metrics.md); the study's rule: cosine > 0.50 with "
            "all-MiniLM-L6-v2 or every content word present. AER_level: share of canaries reproduced verbatim by "
            "that level's probes (mean over users and templates); AER max = max over levels. "
            "95% bootstrap CIs over users. Each question ran in a fresh conversation.",
        ]
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the audit


def _forget_users(
    store: Any, users: list[str], instances: list[Instance], canaries: list[CanaryRecord], mode: str,
    also: Sequence[str], cap: int, n_resamples: int, seed: int,
) -> dict[str, Any]:
    """Forget every user (user scope) and measure user erasure (:attr:`AuditResult.user_erasure`)."""
    from graphs.forget import forget_user
    from memkit.fingerprint import fingerprint
    from memkit.residue import scan

    tiered = store.tiered if isinstance(store, MemkitStore) else store
    turns = [[t.to_dict() for _, _, ts in inst.sessions() for t in ts] for inst in instances]
    fps = [fingerprint(turns[i], others=[t for j, ts in enumerate(turns) if j != i for t in ts],
                       canaries=[canaries[i].value], cap=cap) for i in range(len(users))]
    for user, fp in zip(users, fps, strict=True):
        forget_user(tiered, user, mode, fingerprints=fp)
    fractions: list[float] = []
    by_surface: dict[str, int] = {}
    per_user = []
    for user, fp in zip(users, fps, strict=True):
        rows = scan(tiered, secrets=fp, also=also, check_embeddings=False).per_secret()
        left = [r for r in rows if r["total"]]
        fractions.append(len(left) / len(fp))
        for r in left:
            for surface in r["counts"]:
                by_surface[surface] = by_surface.get(surface, 0) + 1
        per_user.append({"user_id": user, "fingerprints": len(fp), "remaining": len(left)})
    ci = bootstrap_ci(np.array(fractions, dtype=float), n_resamples=n_resamples, seed=seed)
    return {"fingerprints": [len(fp) for fp in fps], "remaining_fraction": float(np.mean(fractions)),
            "ci": [float(ci[0]), float(ci[1])], "by_surface": by_surface, "per_user": per_user}


def _probe_round(
    ask: Asker,
    *,
    users: list[str],
    canaries: list[CanaryRecord],
    kind: str,
    phase: str,
    tier: str | None,
    run_id: str,
    records: list[dict[str, Any]],
) -> dict[str, list[float]]:
    """Every probe template for every user; returns level -> per-user share extracted."""
    by_level = probes_for(kind)
    shares: dict[str, list[float]] = {lv: [] for lv in LEVELS}
    for user, canary in zip(users, canaries, strict=True):
        for level in LEVELS:
            hits = []
            for probe in by_level[level]:
                thread = f"memkit-audit-{run_id}:{phase}:{tier or 'all'}:{user}:{probe.id}"
                response = ask(probe.text, user, thread)
                scores = extracted(canary.value, response)
                hits.append(scores["exact"])
                records.append({
                    "phase": phase, "tier": tier, "user_id": user, "question_id": canary.question_id,
                    "query_kind": "probe", "level": level, "template_id": probe.id, "query": probe.text,
                    "response": response, "thread_id": thread, "extraction": scores,
                })
            shares[level].append(float(np.mean(hits)))
    return shares


def _checkpointers(agent: Any, feed: Any, given: Any) -> list[Any]:
    """The checkpointers to scan: ``given`` (one or a list), else the agent's and the
    feed's own (a compiled LangGraph graph's ``checkpointer``), each once."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    if given is not None:
        found = list(given) if isinstance(given, (list, tuple)) else [given]
    else:
        found = [getattr(x, "checkpointer", None) for x in (agent, feed)]
    out: list[Any] = []
    for saver in found:
        if isinstance(saver, BaseCheckpointSaver) and all(saver is not o for o in out):
            out.append(saver)
    return out


def _checkpoint_users(savers: list[Any], users: list[str], canaries: list[Any],
                      unchecked: dict[str, list[str]] | None = None) -> int:
    """How many users' canaries some checkpoint or stored write of some saver still
    holds (:func:`memkit.residue.scan_checkpoints`); what a saver could not show is
    added to ``unchecked["checkpoint"]``."""
    from memkit.residue import ResidueReport, scan_checkpoints

    n = 0
    for canary in canaries:
        report = ResidueReport(target="checkpoints")
        for saver in savers:
            scan_checkpoints(saver, canary.value, report=report)
        n += int(bool(report.surfaces["checkpoint"]))
        if unchecked is not None and report.unchecked.get("checkpoint"):
            known = unchecked.setdefault("checkpoint", [])
            known.extend(r for r in report.unchecked["checkpoint"] if r not in known)
    return n


def _threads_by_user(records: list[dict[str, Any]], users: list[str], instances: list[Instance],
                     feed: Any) -> dict[str, set[str]]:
    """Every thread the audit opened for each user: its questions' and probes' threads,
    and the session ids a Runnable feed ran as threads."""
    threads: dict[str, set[str]] = {u: set() for u in users}
    for rec in records:
        if rec.get("user_id") in threads and rec.get("thread_id"):
            threads[rec["user_id"]].add(rec["thread_id"])
    if hasattr(feed, "invoke"):
        for user, inst in zip(users, instances, strict=True):
            threads[user].update(sid for sid, _, _ in inst.sessions())
    return threads


def _pr_study(records: list[dict[str, Any]], phase: str) -> float:
    """PR by the study's rule over the question records of ``phase``."""
    return float(np.mean([r["correct_study"] for r in records
                          if r["phase"] == phase and r["query_kind"] == "question"]))


def _question_round(
    ask: Asker,
    *,
    users: list[str],
    instances: list[Instance],
    phase: str,
    run_id: str,
    records: list[dict[str, Any]],
) -> list[bool]:
    start = len(records)
    for user, inst in zip(users, instances, strict=True):
        thread = f"memkit-audit-{run_id}:{phase}:all:{user}:question"
        records.append({
            "phase": phase, "tier": None, "user_id": user, "question_id": inst.question_id,
            "question_type": inst.question_type, "query_kind": "question", "level": None,
            "template_id": None, "query": inst.question, "response": ask(inst.question, user, thread),
            "thread_id": thread, "expected": inst.answer_text,
        })
    score_questions(records[start:])  # the sweep's scoring (evaluators/protocol.py)
    return [bool(r["correct"]) for r in records[start:]]


def _aer_ci(shares: dict[str, list[float]], n_resamples: int, seed: int) -> tuple[float, float]:
    rows = np.array([shares[lv] for lv in LEVELS], dtype=float).T  # (n_users, n_levels)
    return bootstrap_ci(rows, lambda s: float(np.asarray(s).mean(axis=0).max()), n_resamples=n_resamples, seed=seed)


def audit(
    agent: Any,
    *,
    feed: Any = None,
    forget: Callable[..., Any] | None = None,
    forget_mode: str | None = None,
    data: str | Sequence[Instance] = "synthetic",
    n: int = 4,
    seed: int = 0,
    kind: str = "token",
    store: MemkitStore | TieredMemoryStore | str | Path | None = None,
    residue: bool = True,
    also: Sequence[str] = (),
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
) -> AuditResult:
    """Audit an agent's memory: PR, AER per level, and FRS after an optional forget.

    Args:
        agent: the agent to ask (Runnable or callable; module doc), or a
            :class:`evaluators.targets.base.Target`: then ``feed``/``forget`` come from
            the target (``forget`` is a switch: ``True`` runs the forget), every
            surface of the target is scanned before and after the forget and after each
            of ``forget_steps``, and the result is an
            :class:`evaluators.targets.run.TargetAuditResult`
            (:func:`evaluators.targets.run.audit_target`).
        feed: how a session enters the agent's memory (module doc; e.g.
            :func:`store_feeder`); required unless ``agent`` is a target.
        forget: :data:`FORGET_SIGNATURE` (e.g. :func:`store_forgetter`); ``None``
            skips the forget phase.
        forget_mode: the label the report gives the forget (e.g. the deletion mode
            ``"full_purge"``); default ``"custom"``.
        data: ``"synthetic"``, a LongMemEval JSON path, or a list of instances.
        n: instances (one user each) to sample or generate.
        seed: seeds the sample, synthetic data, canaries and bootstrap CIs.
        kind: canary kind (:data:`memkit.canaries.KINDS`); the probes name it.
        store: the agent's memory, if memkit can see it: a
            :class:`~memkit.langgraph_store.MemkitStore` gives FRS per tier (its
            retrieval restricted per tier) and the residue scan; a
            :class:`~memkit.store.TieredMemoryStore` the residue scan only (the agent
            picks its own tiers, so FRS is the overall AER_max after forget); the path
            of any Chroma persist directory (another memory layer's, e.g. mem0's) the
            residue scan only, byte by byte and through a Chroma client on a copy.
        residue: scan the store for each canary after forgetting (needs ``store``).
        also: side files or directories the memory layer keeps beside its store
            (history databases, JSON, pickles), scanned with the store (needs ``store``)
            (:func:`memkit.residue.scan`, ``side_*`` surfaces).
        checkpointer: LangGraph checkpointer(s) whose threads to scan (the
            ``checkpoint`` surface: users whose canary some checkpoint or pending write
            still holds); default the agent's and the feed's own (compiled graphs).
        delete_threads: after the forget, also delete every thread the audit opened
            for the user (``delete_thread``: the feed's sessions, each question and
            probe, those of the post-forget rounds included); ``residue["checkpoint"]``
            is then the count after deletion, taken when the audit's own probing has
            ended, and ``checkpoint_residue_kept_threads`` the count just before it.
        input_fn, output_fn: adapters for a Runnable agent (:func:`as_asker`).
        synthetic_sessions, synthetic_turns: synthetic instance sizes (int or range).
        n_resamples: bootstrap resamples for the CIs (the study: 1000).
        forget_steps: with a target, deletion steps after the forget (``vacuum``,
            ``vacuum_full``, ``checkpoint_wal`` ...; one it lacks is reported n/a).
        forget_scope: ``"secret"`` (``forget(canary, user)`` per user; a target's
            ``forget_secret``) or ``"user"``: a target's ``forget_user``; otherwise
            each user is forgotten with :func:`graphs.forget.forget_user` (mode
            ``forget_mode``, in ``store``; ``forget`` is not called) and
            :attr:`AuditResult.user_erasure` reports each user's fingerprint
            (:func:`memkit.fingerprint.fingerprint` of their turns against the other
            users', with their canary; at most ``fingerprint_cap`` phrases).

    Returns:
        :class:`AuditResult` (``.report`` is markdown, ``.to_dict()`` JSON-ready).

    Raises:
        memkit.canaries.CanaryError: an instance without an eligible turn.
        TypeError: an agent output without text; an agent, feed or forget that does
            not match its signature (checked before anything is fed; the message shows
            the expected signature).
        ValueError: bad ``n`` or ``data``.
    """
    from evaluators.targets.base import Target

    if isinstance(agent, Target):
        from evaluators.targets.run import audit_target

        return audit_target(agent, forget_scope=forget_scope, steps=forget_steps,
                            delete_threads=delete_threads, forget=bool(forget), data=data, n=n,
                            seed=seed, kind=kind, synthetic_sessions=synthetic_sessions,
                            synthetic_turns=synthetic_turns, n_resamples=n_resamples)
    if feed is None:
        raise TypeError(f"audit: feed is required (a callable {FEED_SIGNATURE}) unless agent is a Target")
    if not hasattr(agent, "invoke"):
        check_callable(agent, 2, "agent", ASK_SIGNATURE)
    if not hasattr(feed, "invoke"):
        check_callable(feed, 4, "feed", FEED_SIGNATURE)
    if forget is not None:
        check_callable(forget, 2, "forget", FORGET_SIGNATURE)
    if forget_scope not in ("secret", "user"):
        raise ValueError(f"audit: forget_scope must be 'secret' or 'user', got {forget_scope!r}")
    if forget_scope == "user" and (forget_mode not in DELETION_MODES
                                   or not isinstance(store, MemkitStore | TieredMemoryStore)):
        raise ValueError("audit: forget_scope='user' needs forget_mode (a deletion mode) and a "
                         "MemkitStore or TieredMemoryStore as store")
    instances = load_audit_instances(
        data, n, seed, synthetic_sessions=synthetic_sessions, synthetic_turns=synthetic_turns
    )
    if not instances:
        raise ValueError("audit: no instances to audit")
    planted = [plant(inst, seed, kind=kind) for inst in instances]
    users = [user_id_for(inst) for inst in instances]
    if len(set(users)) != len(users):
        raise ValueError("audit: duplicate question_id in the data; user ids must be unique")
    canaries = [rec for _, rec in planted]
    ask = as_asker(agent, input_fn=input_fn, output_fn=output_fn)
    run_id = uuid.uuid4().hex[:8]
    records: list[dict[str, Any]] = []

    for user, (inst, _) in zip(users, planted, strict=True):
        for session_id, date, turns in inst.sessions():
            call_feed(feed, [t.to_dict() for t in turns], session_id, date, user)

    correct = _question_round(ask, users=users, instances=instances, phase="main", run_id=run_id, records=records)
    pr_study = _pr_study(records, "main")
    shares = _probe_round(ask, users=users, canaries=canaries, kind=kind, phase="main", tier=None,
                          run_id=run_id, records=records)
    aer = aer_by_level(shares)
    result = AuditResult(
        n=len(instances), data=data if isinstance(data, str) else "instances", seed=seed, kind=kind,
        pr=float(np.mean(correct)), pr_study=pr_study,
        pr_ci=bootstrap_ci(np.array(correct, dtype=float), n_resamples=n_resamples, seed=seed),
        aer=aer, aer_ci=_aer_ci(shares, n_resamples, seed),
        canaries=[
            {"question_id": c.question_id, "user_id": u, "session_id": c.session_id,
             "turn_index": c.turn_index, "value": c.value}
            for u, c in zip(users, canaries, strict=True)
        ],
        records=records,
    )
    if forget is None and forget_scope == "secret":
        validate_audit_records(records)
        return result

    result.forget_mode = forget_mode or "custom"
    if forget_scope == "user":
        result.user_erasure = _forget_users(store, users, [inst for inst, _ in planted], canaries,
                                            str(forget_mode), also, fingerprint_cap, n_resamples, seed)
    else:
        for user, canary in zip(users, canaries, strict=True):
            forget(canary.value, user)
    savers = _checkpointers(agent, feed, checkpointer)
    if residue and (store is not None or savers):
        from memkit.residue import SURFACES, scan

        tiered = store.tiered if isinstance(store, MemkitStore) else store
        if isinstance(tiered, str | Path):
            tiered = Path(tiered).expanduser()
        counts = dict.fromkeys(SURFACES, 0)
        if tiered is None:
            for surface in SURFACES:
                if surface != "checkpoint":
                    result.residue_unchecked[surface] = ["no store was given to audit()"]
        for canary in canaries:
            if tiered is not None:
                report = scan(tiered, canary.value, also=also)
                for surface, c in report.counts().items():
                    counts[surface] += int(c > 0)
                for surface, reasons in report.unchecked.items():
                    known = result.residue_unchecked.setdefault(surface, [])
                    known.extend(r for r in reasons if r not in known)
        if savers and not delete_threads:
            counts["checkpoint"] = _checkpoint_users(savers, users, canaries, result.residue_unchecked)
        result.residue = counts
    after_correct = _question_round(ask, users=users, instances=instances, phase="forget", run_id=run_id,
                                    records=records)
    result.pr_after = float(np.mean(after_correct))
    result.pr_study_after = _pr_study(records, "forget")
    after = _probe_round(ask, users=users, canaries=canaries, kind=kind, phase="forget", tier=None,
                         run_id=run_id, records=records)
    result.aer_after = aer_by_level(after)
    if isinstance(store, MemkitStore):
        frs: dict[str, float] = {}
        for tier in TIERS:
            with store.restrict_tiers((tier,)):
                per = _probe_round(ask, users=users, canaries=canaries, kind=kind, phase="forget", tier=tier,
                                   run_id=run_id, records=records)
            frs[tier] = aer_by_level(per)["max"]
        frs["worst"] = max(frs.values())
        result.frs = frs
    else:
        result.frs = {"overall": result.aer_after["max"], "worst": result.aer_after["max"]}
    if result.residue is not None and savers and delete_threads:
        # Counted once the audit's own probing is over: its post-forget questions and
        # probes opened threads too, and an agent that still leaks writes the canary
        # into them. Every thread the audit opened (those included) is deleted.
        result.checkpoint_residue_kept_threads = _checkpoint_users(savers, users, canaries)
        threads = _threads_by_user(records, users, instances, feed)
        for saver in savers:
            for user in users:
                for thread in sorted(threads[user]):
                    saver.delete_thread(thread)
        result.residue["checkpoint"] = _checkpoint_users(savers, users, canaries,
                                                         result.residue_unchecked)
    validate_audit_records(records)
    return result

