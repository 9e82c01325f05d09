"""The one unit runner: the study's protocol over one :class:`~evaluators.targets.base.Target`.

Every evaluation memkit runs -- the sweep, ``audit`` (callables, graphs and targets),
the target matrix and the isolation probe -- is units run here (arXiv 2606.10062,
Setup; docs/design.md, "Data path"). A unit is a set of users (LongMemEval instances,
one planted canary each) in one memory; :func:`run_unit` takes it through:

1. **plant** one canary per user (:func:`memkit.dataset.canaries.plant`, seeded);
2. **feed** every session of every user (:meth:`Target.feed_sessions`);
3. **ask** the question and every probe (:func:`evaluators.scoring.probes.probe_queries`) of
   every user, each in a fresh conversation, at each ``k`` of the plan;
4. for each :class:`Deletion` of the plan, on a copy of the memory or in place:
   **scan** every surface before the forget (when asked), **forget** each user's
   canary (or the whole user), scan again, run each deletion step (and the thread
   deletion) with a scan after each, and **ask again**: probes with recall restricted
   to each tier (FRS per tier), probes with the target's own recall (AER after), and
   the question (PR after);
5. score the questions (PR's rules, :func:`score_questions`).

With :attr:`UnitPlan.adversary` (:class:`evaluators.adversary.AdversaryPlan`), each
user's asks in the main phase and after each forget are followed by the adversary's
(:class:`evaluators.adversary.run.Adversary`): the probe library, the adaptive attacker
and membership inference, asked through :meth:`_Unit.converse` (conversations of one or
more turns, every turn of one in the same thread). Without it, the records are exactly
those of the study's protocol.

A :class:`Deletion` with ``request`` forgets through a request in the user's own words
(:meth:`Target.forget_request`; each user then also gets a planted fact,
:mod:`evaluators.planted`), its records tagged with the request's kind; with
:attr:`UnitPlan.weigh_vectors` every scan also weighs the target's leftover vectors
(:mod:`memkit.residue.weigh`). Neither changes a plan's records without them.

The records are those of :mod:`evaluators.records` (``canary``, ``call``,
``forensics``), whatever the target: one reader, one aggregation
(:func:`evaluators.aggregate.compute_metrics`). A scan is one ``forensics`` record
per user and phase (``before``, ``forget``, then each step), with every surface's
status (checked / not checked / n/a, partly read) and the copies of that user's
canary. An operation the target lacks is reported n/a, never 0.

Why this module is long: it is the one protocol loop every evaluation shares -- plant,
feed, ask, forget (a secret, a user, a request in words), scan -- and each phase's
records are built where the phase runs; what is planted or measured beyond the study
lives in :mod:`evaluators.planted` and :mod:`evaluators.adversary`.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluators.scoring.metrics import answers_correct
from evaluators.scoring.probes import LEVELS, extracted, probes_for
from evaluators.targets.base import NotApplicable, Query, Talk, Target, scan_all
from memkit.dataset.canaries import Canary, plant
from memkit.dataset.longmemeval import Instance
from memkit.models.chat import token_usage
from memkit.residue.report import SurfaceResult

if TYPE_CHECKING:
    from evaluators.adversary.run import AdversaryPlan

__all__ = ["SCOPES", "Deletion", "Talk", "UnitPlan", "UnitRun", "plant_units", "probe_queries", "run_unit", "score_questions"]

SCOPES = ("secret", "user")
"""What a forget deletes: one secret of a user, or the whole user."""


def plant_units(instances: Sequence[Instance], seed: int, kind: str = "token") -> list[tuple[Instance, Canary]]:
    """Each instance with its canary planted, and the canary, as :func:`run_unit`
    plants them (:func:`memkit.dataset.canaries.plant`, seeded by ``seed`` and the
    question id)."""
    return [plant(inst, seed, kind=kind) for inst in instances]


def probe_queries(kind: str = "token") -> list[tuple[str, str, str]]:
    """Every probe for canaries of ``kind``, as ``(level, template_id, text)`` in level
    order (direct, indirect, jailbreak) then template order."""
    by_level = probes_for(kind)
    return [(p.level, p.id, p.text) for lv in LEVELS for p in by_level[lv]]


def score_questions(records: Sequence[dict[str, Any]]) -> None:
    """Score the question records among ``records`` in place: ``correct`` by PR's
    default rule (``lme``: LongMemEval's judging semantics, docs/metrics.md) and
    ``correct_study`` by the study's rule, with one embedding batch per rule.

    A record needs ``query_kind``, ``response`` and ``expected``; ``question_id``,
    ``question_type`` and ``query`` (the question) are used when present.
    """
    qs = [r for r in records if r.get("query_kind") == "question"]
    if not qs:
        return
    args = ([r["response"] for r in qs], [r["expected"] for r in qs])
    meta = {
        "question_ids": [r.get("question_id") for r in qs],
        "question_types": [r.get("question_type") for r in qs],
        "questions": [r.get("query") for r in qs],
    }
    flags = answers_correct(*args, **meta)  # the default rule ("lme")
    study = answers_correct(*args, rule="study")
    for r, ok, ok_study in zip(qs, flags, study, strict=True):
        r["correct"] = bool(ok)
        r["correct_study"] = bool(ok_study)


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Deletion:
    """One forget of every user of a unit and what follows it.

    Attributes:
        mode: the label records give it (a deletion mode of :mod:`graphs.forget` for
            a copy, else the target's :attr:`~Target.forget_label`).
        scope: ``"secret"`` (:meth:`Target.forget_secret` of each canary) or
            ``"user"`` (:meth:`Target.forget_user`).
        steps: deletion steps to run after it, in order (:meth:`Target.deletion_steps`;
            one the target lacks is reported n/a).
        delete_threads: delete each user's conversations after the forget (a phase
            of its own, scanned, before the steps).
        on_copy: forget on :meth:`Target.fork` ``(workdir, mode)``, leaving the
            unit's memory as it was for the next deletion.
        request: forget through a request in words of this kind
            (:data:`evaluators.forget_requests.REQUEST_KINDS`; :meth:`Target.forget_request`)
            instead of the secret itself; a target that takes only a secret is n/a.
        about: what the request asks to forget: ``secret`` (the canary) or ``fact``
            (the user's planted fact, :mod:`evaluators.planted`).
    """

    mode: str
    scope: str = "secret"
    steps: tuple[str, ...] = ()
    delete_threads: bool = False
    on_copy: bool = False
    request: str | None = None
    about: str = "secret"


@dataclass(frozen=True)
class UnitPlan:
    """What :func:`run_unit` runs (module doc).

    Attributes:
        unit: the unit's id in records. seed: plants the canaries. kind: canary kind.
        S: the target's summary level, recorded (``None``: the target has none).
        ks: recall breadths to ask at (``(None,)``: the target's own).
        tiers: tiers the main phase and the after-forget question read (``None``:
            the target's own).
        deletions: the forgets to run, in order.
        tier_probes: after a forget, probe with recall restricted to each of the
            target's :attr:`~Target.tiers` (FRS per tier).
        overall_probes: after a forget, probe with the target's own recall (AER after).
        questions: ask each user's question (PR) in the main phase and after a forget.
        scan_before: scan every surface once before the first forget.
        fingerprint_cap: with a user-scope deletion, also scan for each user's
            fingerprint (:func:`memkit.residue.fingerprint.fingerprint`, at most this many
            phrases) and record how many of its strings remain.
        workdir: where copies of the memory are made (default the temporary directory).
        keep_dir: keep each copy under ``keep_dir/<mode>`` after its scan.
        weigh_vectors: with each scan, weigh the target's leftover vectors
            (re-identification and attribute inference per surface,
            :mod:`memkit.residue.weigh`).
        locations: with a positive cap, each ``forensics`` record's surface status
            also lists up to this many locations (masked) of that user's copies
            (SARIF output); 0 leaves the records as they were.
        adversary: the adversary beyond the study's probes (``None``: none; the records
            are then the study protocol's alone).
    """

    unit: str
    seed: int = 0
    kind: str = "token"
    S: int | None = None
    ks: tuple[int | None, ...] = (None,)
    tiers: tuple[str, ...] | None = None
    deletions: tuple[Deletion, ...] = ()
    tier_probes: bool = True
    overall_probes: bool = True
    questions: bool = True
    scan_before: bool = False
    fingerprint_cap: int | None = None
    workdir: Path | None = None
    keep_dir: Path | None = None
    weigh_vectors: bool = False
    locations: int = 0
    adversary: AdversaryPlan | None = None


@dataclass
class UnitRun:
    """What :func:`run_unit` returns.

    Attributes:
        records: the unit's records in canonical order (canaries, main calls, then per
            deletion its scans and after-forget calls).
        users: user ids, one per instance. canaries: the planted canaries.
        tokens: ``{phase: {model: usage}}`` for ``write``, ``main``, ``forget``.
        na: operation -> why the target could not run it (``forget_secret``,
            ``forget_user``, ``delete_threads``, a step name).
        phases: per deletion mode, the scan phases in order.
    """

    records: list[dict[str, Any]]
    users: list[str]
    canaries: list[Canary]
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    na: dict[str, str] = field(default_factory=dict)
    phases: dict[str, list[str]] = field(default_factory=dict)


# --------------------------------------------------------------------------- the runner


class _Unit:
    """State of one unit while it runs: its target, users, canaries and records."""

    def __init__(self, target: Target, instances: Sequence[Instance], plan: UnitPlan,
                 say: Callable[[str], None]) -> None:
        self.target, self.plan, self.say = target, plan, say
        self.instances = list(instances)
        self.users = [target.user_id_for(inst) for inst in self.instances]
        if len(set(self.users)) != len(self.users):
            raise ValueError("duplicate question_id in the data: user ids must be unique")
        planted = plant_units(self.instances, plan.seed, plan.kind)
        self.planted = [p for p, _ in planted]
        self.canaries = [c for _, c in planted]
        self.facts: list[Any] = []
        if plan.weigh_vectors or any(d.request for d in plan.deletions):
            from evaluators.planted import plant_facts

            self.planted, self.facts = plant_facts(self.planted, self.canaries, plan.seed)
        self.run_id = uuid.uuid4().hex[:8]
        self.records: list[dict[str, Any]] = []
        self.na: dict[str, str] = {}
        self.phases: dict[str, list[str]] = {}
        self.scanned_before = False
        probes = probe_queries(plan.kind)
        self.probes = [("probe", lv, tid, text) for lv, tid, text in probes]
        self.adversary = None
        if plan.adversary is not None:
            from evaluators.adversary.run import Adversary

            self.adversary = Adversary(self, plan.adversary)

    # records -------------------------------------------------------------

    def base(self, i: int) -> dict[str, Any]:
        inst, user = self.instances[i], self.users[i]
        out = {"type": "call", "design": self.target.name, "unit": self.plan.unit,
               "question_id": inst.question_id, "question_type": inst.question_type, "S": self.plan.S}
        if user != inst.question_id:
            out["user_id"] = user
        return out

    def canary_records(self) -> list[dict[str, Any]]:
        out = []
        for inst, user, c in zip(self.instances, self.users, self.canaries, strict=True):
            rec = {"type": "canary", "design": self.target.name, "unit": self.plan.unit,
                   "question_id": inst.question_id, "S": self.plan.S, "session_id": c.session_id,
                   "turn_index": c.turn_index, "value": c.value}
            if user != inst.question_id:
                rec["user_id"] = user
            if self.facts:
                f = self.facts[len(out)]
                rec["fact"] = {"category": f.category, "value": f.value, "session_id": f.session_id,
                               "turn_index": f.turn_index}
            out.append(rec)
        return out

    def value_of(self, i: int, d: Deletion | None) -> str:
        """The value a deletion forgets for user ``i``: the canary, or the planted fact."""
        return self.facts[i].value if d is not None and d.about == "fact" else self.canaries[i].value

    # asking --------------------------------------------------------------

    def ask(self, target: Target, i: int, queries: list[tuple[str, str | None, str | None, str]], *,
            phase: str, mode: str | None, tier: str | None, tiers: tuple[str, ...] | None,
            d: Deletion | None = None) -> list[dict[str, Any]]:
        """Each query at each k, as user ``i``, in one :meth:`Target.ask_many` batch
        (probes score the value deletion ``d`` forgets: the canary, or the fact)."""
        user, secret = self.users[i], self.value_of(i, d)
        label = f"{mode}@{d.request}:{d.about}" if d is not None and d.request else (mode or "-")
        expected = self.instances[i].answer_text
        asked = []
        for kind, level, template_id, text in queries:
            for k in self.plan.ks:
                thread = self.thread(phase, label, tier, user, template_id or "question", k)
                asked.append(((kind, level, template_id, text, k), Query(text, user, thread, k, tiers)))
        answers = target.ask_many([q for _, q in asked])
        out = []
        base = {**self.base(i), "phase": phase, "mode": mode, "tier": tier}
        for ((kind, level, template_id, text, k), q), ans in zip(asked, answers, strict=True):
            rec = {**base, "k": k, "query_kind": kind, "level": level, "template_id": template_id,
                   "query": text, "response": ans.response,
                   "expected": expected if kind == "question" else secret, "correct": None,
                   "extraction": extracted(secret, ans.response) if kind == "probe" else None}
            if ans.recalled is None:
                rec["context_exposed"] = None
            else:
                rec["context_exposed"] = any(secret in r.text for r in ans.recalled)
                rec["retrieved_ids"] = [r.id for r in ans.recalled]
                rec["retrieved_tiers"] = [r.tier for r in ans.recalled]
            rec["latency_s"] = round(ans.latency_s, 6)
            if target.uses_threads:
                rec["thread_id"] = q.thread_id
            out.append(rec)
        return out

    def converse(self, target: Target, i: int, talks: Sequence[Talk], *, phase: str, mode: str | None,
                 tier: str | None, tiers: tuple[str, ...] | None) -> list[dict[str, Any]]:
        """Conversations of one or more turns as user ``i``: every turn of a talk in one
        thread (its own fresh one, or the earlier thread it continues), one
        :meth:`Target.ask_many` batch per turn index. One ``call`` record per talk:
        ``query`` and ``response`` are its last turn's, ``turns`` and ``responses`` all
        of them (with more than one), ``latency_s`` their sum; ``extraction`` is left
        to the caller."""
        user, secret = self.users[i], self.canaries[i].value
        threads = [t.thread or self.thread(phase, mode, tier, user, t.key, t.k) for t in talks]
        answers: list[list[Any]] = [[] for _ in talks]
        for turn in range(max((len(t.turns) for t in talks), default=0)):
            batch = [j for j, t in enumerate(talks) if turn < len(t.turns)]
            got = target.ask_many([Query(talks[j].turns[turn], user, threads[j], talks[j].k, tiers) for j in batch])
            for j, ans in zip(batch, got, strict=True):
                answers[j].append(ans)
        out = []
        base = {**self.base(i), "phase": phase, "mode": mode, "tier": tier}
        for t, thread, got in zip(talks, threads, answers, strict=True):
            rec = {**base, "k": t.k, "query": t.turns[-1], "response": got[-1].response, "expected": secret,
                   "correct": None, "extraction": None, **t.fields}
            if len(t.turns) > 1:
                rec["turns"], rec["responses"] = list(t.turns), [a.response for a in got]
            recalled = [r for a in got if a.recalled is not None for r in a.recalled]
            if any(a.recalled is None for a in got):
                rec["context_exposed"] = None
            else:
                rec["context_exposed"] = any(secret in r.text for r in recalled)
                rec["retrieved_ids"] = list(dict.fromkeys(r.id for r in recalled))
                rec["retrieved_tiers"] = [r.tier for r in {r.id: r for r in recalled}.values()]
            rec["latency_s"] = round(sum(a.latency_s for a in got), 6)
            if target.uses_threads:
                rec["thread_id"] = thread
            out.append(rec)
        return out

    def thread(self, phase: str, mode: str | None, tier: str | None, user: str, key: str, k: int | None) -> str:
        """The fresh conversation of one ask (as :meth:`ask` names it)."""
        thread = f"memkit-{self.run_id}:{phase}:{mode or '-'}:{tier or 'all'}:{user}:{key}"
        return thread + (f":k{k}" if k is not None and len(self.plan.ks) > 1 else "")

    def main_phase(self) -> list[dict[str, Any]]:
        questions = self.questions()
        out = []
        for i in range(len(self.users)):
            asked = self.ask(self.target, i, questions(i) + self.probes, phase="main", mode=None, tier=None,
                             tiers=self.plan.tiers)
            out += asked
            if self.adversary is not None:
                out += self.adversary.run(self.target, i, phase="main", mode=None, tiers=self.plan.tiers,
                                          seen=asked)
        return out

    def questions(self) -> Callable[[int], list[tuple[str, str | None, str | None, str]]]:
        if not self.plan.questions:
            return lambda i: []
        return lambda i: [("question", None, None, self.instances[i].question)]

    def after_phase(self, target: Target, mode: str, d: Deletion | None = None) -> list[dict[str, Any]]:
        questions = self.questions()
        out = []
        for i in range(len(self.users)):
            probes = self.probes
            if d is not None and d.about == "fact":
                from evaluators.planted import fact_probes

                probes = fact_probes(self.facts[i].category)
            if self.plan.tier_probes:
                for tier in target.tiers:
                    out += self.ask(target, i, probes, phase="forget", mode=mode, tier=tier, tiers=(tier,), d=d)
            overall: list[dict[str, Any]] = []
            if self.plan.overall_probes:
                overall = self.ask(target, i, probes, phase="forget", mode=mode, tier=None,
                                   tiers=self.plan.tiers, d=d)
                out += overall
            if questions(i):
                out += self.ask(target, i, questions(i), phase="forget", mode=mode, tier=None,
                                tiers=self.plan.tiers, d=d)
            if self.adversary is not None and self.adversary.plan.after_forget and not (d is not None and d.request):
                out += self.adversary.run(target, i, phase="forget", mode=mode, tiers=self.plan.tiers, seen=overall)
        return out

    # scanning ------------------------------------------------------------

    def scan(self, target: Target, mode: str, phase: str, changed: list[dict[str, Any]] | None,
             fingerprints: list[list[str]] | None, d: Deletion | None = None) -> list[dict[str, Any]]:
        """One ``forensics`` record per user: every surface's status and that user's copies
        (of the value ``d`` forgets; with planted facts, ``other_counts`` of the other item;
        with ``weigh_vectors``, what the leftover vectors reveal)."""
        surfaces = target.surfaces()
        self.phases.setdefault(mode, []).append(phase)
        if not surfaces:  # a target that keeps no surface memkit can read: nothing to record
            return []
        self.say(f"scanning {len(surfaces)} surfaces ({mode}: {phase})")
        secrets = [c.value for c in self.canaries] + [f.value for f in self.facts]
        extra = [s for fp in fingerprints or [] for s in fp if s not in secrets]
        scans = scan_all(surfaces, list(dict.fromkeys(secrets + extra)), target.name).results()
        weighed, vectors_na = None, None
        if self.plan.weigh_vectors:
            from evaluators.planted import planted_items, weigh_users

            items = planted_items(self.users, self.planted, self.canaries, self.facts)
            weighed, vectors_na = weigh_users(target, items, self.users, self.plan.seed)
        out = []
        for i, (inst, user) in enumerate(zip(self.instances, self.users, strict=True)):
            value = self.value_of(i, d)
            rec: dict[str, Any] = {
                "type": "forensics", "design": target.name, "unit": self.plan.unit,
                "question_id": inst.question_id, "S": self.plan.S, "mode": mode, "phase": phase,
                "counts": {n: s.copies(value) for n, s in scans.items() if s.status == "checked"},
                "unchecked": sorted(n for n, s in scans.items() if s.status == "not_checked" or s.partial),
                "changed": (changed[i] if changed else {}),
                "surfaces": {n: _surface_status(s, value, self.plan.locations) for n, s in scans.items()},
            }
            if user != inst.question_id:
                rec["user_id"] = user
            if fingerprints is not None:
                rec["fingerprint"] = _fingerprint_left(scans, fingerprints[i])
            if self.facts:
                other = self.canaries[i].value if d is not None and d.about == "fact" else self.facts[i].value
                rec["other_counts"] = {n: s.copies(other) for n, s in scans.items() if s.status == "checked"}
            if self.plan.weigh_vectors:
                rec["vectors"] = weighed[i] if weighed is not None else {"na": vectors_na}
            out.append(rec)
        return out

    # forgetting ----------------------------------------------------------

    def forget(self, target: Target, d: Deletion) -> list[dict[str, Any]] | None:
        """Forget every user (``d.scope``, or a request in words); each forget's changes,
        or ``None`` (n/a)."""
        if d.request:
            return self.forget_requests(target, d)
        operation = "forget_secret" if d.scope == "secret" else "forget_user"
        if not target.supports(operation):
            self.na[operation] = f"{target.name} has no {operation}"
            return None
        changed = []
        self.say(f"forgetting {len(self.users)} users ({d.mode}, scope {d.scope})")
        for user, c in zip(self.users, self.canaries, strict=True):
            try:
                result = target.forget_secret(c.value, user) if d.scope == "secret" else target.forget_user(user)
            except NotApplicable as exc:
                self.na[operation] = str(exc)
                return None
            changes = getattr(result, "changes", None)
            changed.append(changes() if callable(changes) else {})
        return changed

    def forget_requests(self, target: Target, d: Deletion) -> list[dict[str, Any]] | None:
        """Each user's request of kind ``d.request`` about ``d.about``, through
        :meth:`Target.forget_request`; ``changed["request"]["found"]``: whether what it
        resolved to holds the value."""
        from evaluators.planted import found, request_for

        key = f"forget_request:{d.request}"
        if not target.supports("forget_request"):
            self.na[key] = f"{target.name} takes only a secret to forget, not a request in words"
            return None
        changed = []
        self.say(f"forgetting {len(self.users)} users by request ({d.request}, {d.about}, {d.mode})")
        for i, user in enumerate(self.users):
            text = request_for(d.request, d.about, self.canaries[i], self.facts[i], self.planted[i], self.plan.seed)
            try:
                result = target.forget_request(text, user)
            except NotApplicable as exc:
                self.na[key] = str(exc)
                return None
            changes = getattr(result, "changes", None)
            ch = changes() if callable(changes) else {}
            ch.setdefault("request", {})["found"] = found(result, self.value_of(i, d))
            changed.append(ch)
        return changed

    def deletion(self, d: Deletion) -> list[dict[str, Any]]:
        """One deletion (class doc of :class:`Deletion`): its scans and after-forget calls."""
        plan = self.plan
        target, tmp = self.target, None
        if d.request and not self.target.supports("forget_request"):
            self.na[f"forget_request:{d.request}"] = (f"{self.target.name} takes only a secret to forget, "
                                                      "not a request in words")
            return _tagged(self.na_records(self.target, d), d)
        if d.on_copy and not self.target.supports("fork"):
            self.na[f"forget_request:{d.request}" if d.request else "fork"] = f"{self.target.name} cannot copy its memory"
            return _tagged(self.na_records(self.target, d), d) if d.request else []
        if d.on_copy:
            tmp = Path(tempfile.mkdtemp(prefix=f"memkit-{d.mode}-", dir=plan.workdir))
            target = self.target.fork(tmp, d.mode)
        try:
            scans: list[dict[str, Any]] = []
            calls: list[dict[str, Any]] = []
            fps = self.fingerprints() if d.scope == "user" and plan.fingerprint_cap else None
            if (plan.scan_before and not self.scanned_before) or d.request:
                # a request's collateral is what it took of what was there before
                self.scanned_before = self.scanned_before or not d.request
                scans += self.scan(target, d.mode, "before", None, fps, d)
            changed = self.forget(target, d)
            if changed is None:
                return _tagged(scans + (self.na_records(target, d) if d.request else []), d)
            if target.reads_write:
                scans += self.scan(target, d.mode, "forget", changed, fps, d)
                scans += self.after_forget_steps(target, d, fps)
                calls += self.after_phase(target, d.mode, d)
            else:
                # Asking writes nothing: ask first, then close a copy so its files hold
                # everything it wrote, and scan them.
                calls += self.after_phase(target, d.mode, d)
                if d.on_copy:
                    target.close()
                scans += self.scan(target, d.mode, "forget", changed, fps, d)
                scans += self.after_forget_steps(target, d, fps)
            if d.delete_threads and target.supports("delete_threads") and "delete_threads" not in self.na:
                for user in self.users:  # the threads the after-forget questions opened: none is left
                    target.delete_threads(user)
            if d.on_copy and plan.keep_dir is not None:
                keep = plan.keep_dir / d.mode
                shutil.rmtree(keep, ignore_errors=True)
                keep.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(tmp, keep)
            return _tagged(scans + calls, d)
        finally:
            if d.on_copy:
                target.close()
                shutil.rmtree(tmp, ignore_errors=True)

    def after_forget_steps(self, target: Target, d: Deletion, fps: list[list[str]] | None) -> list[dict[str, Any]]:
        """The thread deletion and the deletion steps, each followed by a scan."""
        out = []
        if d.delete_threads:
            if target.supports("delete_threads"):
                try:
                    for user in self.users:
                        target.delete_threads(user)
                except NotApplicable as exc:
                    self.na["delete_threads"] = str(exc)
                else:
                    out += self.scan(target, d.mode, "delete_threads", None, fps, d)
            else:
                self.na["delete_threads"] = f"{target.name} keeps no conversations to delete"
        available = target.deletion_steps()
        for step in d.steps:
            if step not in available:
                self.na[step] = (f"{target.name} has no deletion step {step!r} "
                                 f"(it has: {', '.join(available) or 'none'})")
                continue
            self.say(f"deletion step {step}")
            available[step]()
            out += self.scan(target, d.mode, step, None, fps, d)
        return out

    def na_records(self, target: Target, d: Deletion) -> list[dict[str, Any]]:
        """One ``forensics`` record per user saying the request was n/a, and why."""
        why = self.na.get(f"forget_request:{d.request}") or self.na.get("fork", "n/a")
        return [{"type": "forensics", "design": target.name, "unit": self.plan.unit, "question_id": inst.question_id,
                 "S": self.plan.S, "mode": d.mode, "phase": "forget", "counts": {}, "na": why,
                 **({"user_id": u} if u != inst.question_id else {})}
                for inst, u in zip(self.instances, self.users, strict=True)]

    def fingerprints(self) -> list[list[str]]:
        """Each user's fingerprint against the other users' turns, with their canary."""
        from memkit.residue.fingerprint import fingerprint

        turns = [[t.to_dict() for _, _, ts in inst.sessions() for t in ts] for inst in self.instances]
        return [fingerprint(turns[i], others=[t for j, ts in enumerate(turns) if j != i for t in ts],
                            canaries=[self.canaries[i].value], cap=self.plan.fingerprint_cap)
                for i in range(len(turns))]


def _tagged(records: list[dict[str, Any]], d: Deletion) -> list[dict[str, Any]]:
    """A request deletion's records carry its ``request`` kind and what it is ``about``."""
    if d.request:
        for r in records:
            r["request"], r["about"] = d.request, d.about
    return records


def _surface_status(s: SurfaceResult, secret: str | None = None, cap: int = 0) -> dict[str, Any]:
    """A surface's status in a forensics record: ``status`` (``checked``,
    ``not_checked``, ``n/a``), ``reason``, ``partial`` (why it was read only in part),
    ``stale`` (copies of some old text not tied to one secret) and ``notes``; with
    ``cap > 0``, ``locations``: the first ``cap`` locations (masked) of ``secret``'s copies."""
    out = {"status": s.status, "reason": s.reason, "partial": s.partial, "stale": len(s.unattributed),
           "notes": list(s.notes)}
    if cap > 0 and secret is not None:
        out["locations"] = list(s.hits.get(secret, [])[:cap])
    return out


def _fingerprint_left(scans: dict[str, SurfaceResult], fp: list[str]) -> dict[str, Any]:
    """How many of a user's fingerprint strings some checked surface still holds."""
    by_surface = {n: sum(1 for x in fp if s.hits.get(x)) for n, s in scans.items() if s.status == "checked"}
    left = sum(1 for x in fp if any(s.hits.get(x) for s in scans.values() if s.status == "checked"))
    return {"strings": len(fp), "remaining": left, "by_surface": {n: c for n, c in by_surface.items() if c}}


def run_unit(target: Target, instances: Sequence[Instance], plan: UnitPlan, *,
             say: Callable[[str], None] | None = None) -> UnitRun:
    """Run one unit of the study's protocol over ``target`` (module doc).

    Args:
        target: the memory system; each instance's user is fed into it.
        instances: the unit's users, one LongMemEval instance each.
        plan: what to run (:class:`UnitPlan`).
        say: called with a short line as each phase starts (progress on stderr).

    Returns:
        :class:`UnitRun` (records not yet validated; the questions scored).

    Raises:
        ValueError: no instances, duplicate user ids, an unknown scope.
        memkit.dataset.canaries.CanaryError: an instance without an eligible turn.
    """
    if not instances:
        raise ValueError("run_unit: no instances")
    from evaluators.forget_requests import ABOUT, REQUEST_KINDS

    for d in plan.deletions:
        if d.scope not in SCOPES:
            raise ValueError(f"forget scope must be one of {SCOPES}, got {d.scope!r}")
        if d.request is not None and (d.request not in REQUEST_KINDS or d.about not in ABOUT or d.scope != "secret"):
            raise ValueError(f"a forget request needs a kind of {REQUEST_KINDS}, about one of {ABOUT}, scope "
                             f"'secret'; got {d.request!r} about {d.about!r} (scope {d.scope!r})")
    u = _Unit(target, instances, plan, say or (lambda _msg: None))
    records = u.canary_records()
    tokens: dict[str, Any] = {}
    u.say(f"feeding {len(u.users)} users' sessions into {target.name}")
    with token_usage() as usage:
        for user, inst in zip(u.users, u.planted, strict=True):
            target.feed_sessions([(sid, date, [t.to_dict() for t in turns]) for sid, date, turns in inst.sessions()],
                                 user)
    tokens["write"] = usage.by_model
    u.say(f"asking {len(u.users)} users' questions and probes")
    with token_usage() as usage:
        records += u.main_phase()
    tokens["main"] = usage.by_model
    if plan.scan_before and not plan.deletions:
        records += u.scan(target, "none", "before", None, None)
    with token_usage() as usage:
        for d in plan.deletions:
            records += u.deletion(d)
    tokens["forget"] = usage.by_model
    score_questions([r for r in records if r["type"] == "call"])
    return UnitRun(records=records, users=u.users, canaries=u.canaries, tokens=tokens, na=u.na, phases=u.phases)


def safe_dir_name(question_id: str) -> str:
    """A question id as one directory name (``--keep-stores`` layout)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", question_id).lstrip(".") or "_"
