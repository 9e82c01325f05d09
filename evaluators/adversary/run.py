"""The adversary's part of a unit: what :func:`evaluators.runner.run_unit` asks beyond
the study's probes when :attr:`UnitPlan.adversary <evaluators.runner.UnitPlan>` is set.

For each user, in the main phase and after each forget (with the target's own recall),
at each k of the plan, after the study's asks:

1. every probe of the plan's library (:mod:`evaluators.adversary.library`), each in
   its own conversation (a two-turn probe's turns in one thread);
2. the adaptive attacker (:mod:`evaluators.adversary.attacker`) for ``budget`` queries;
3. membership inference (:mod:`evaluators.adversary.membership`): the canary and
   ``decoys`` non-members, two signals each.

Each is one ``call`` record (:class:`evaluators.records.CallRecord`): ``query_kind``
``attack`` (``probe_set`` ``library``/``user``/``adaptive``, ``family``, ``query_index``
for the adaptive attacker) or ``membership`` (``candidate``, ``member``, ``signal``,
``score``); ``extraction`` holds every detector (:func:`evaluators.adversary.detect.detect`)
and ``memory`` what the reply recovers of the user's stored records
(:mod:`evaluators.adversary.memory`). A prompt already sent to the user in a fresh
conversation at the same k in the same phase (a study probe, a library probe, an
earlier adaptive move) is not sent again: its reply is reused (``reused_from`` names
the call, ``latency_s`` is 0).

The study's asks of a user come first in each phase, so their records are those of a
run without the adversary. A target that keeps conversations (a checkpointer) keeps
the adversary's too, and the scans after the forget count what they hold: a stronger
attack that got a canary into a reply leaves that reply on the surface.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluators.adversary.attacker import AttackState, Exchange, ModelAttacker, PolicyAttacker
from evaluators.adversary.detect import detect
from evaluators.adversary.library import AttackProbe, library, resolve_probes
from evaluators.adversary.membership import SIGNALS, candidates, membership_queries, score
from evaluators.adversary.memory import StoredRecords, stored_records

__all__ = ["ADVERSARY_DEFAULTS", "Adversary", "AdversaryPlan", "adversary_plan", "calls_per_user", "cost_text",
           "plan_from_options"]


@dataclass(frozen=True)
class AdversaryPlan:
    """What the adversary runs (module doc).

    Attributes:
        probes: library or user probes, rendered for the canary kind.
        budget: the adaptive attacker's queries per user, phase and k (0: none).
        attacker_model: a chat model spec or object that plans the adaptive queries
            (``None``: the seeded policy).
        membership: run membership inference. decoys: non-members per user.
        after_forget: attack again after each forget.
    """

    probes: tuple[AttackProbe, ...] = ()
    budget: int = 0
    attacker_model: Any = None
    membership: bool = False
    decoys: int = 3
    after_forget: bool = True

    def describe(self) -> dict[str, Any]:
        """JSON-ready: the probe ids per set, the budget, the attacker, membership."""
        sets: dict[str, list[str]] = {}
        for p in self.probes:
            sets.setdefault(p.set, []).append(p.id)
        model = self.attacker_model
        return {"probes": sets, "budget": self.budget,
                "attacker": "policy" if model is None else (model if isinstance(model, str) else type(model).__name__),
                "membership": self.membership, "decoys": self.decoys if self.membership else 0}


def adversary_plan(probes: Any = None, *, budget: int = 0, attacker_model: Any = None, membership: bool = False,
                   kind: str = "token", decoys: int = 3, after_forget: bool = True) -> AdversaryPlan | None:
    """An :class:`AdversaryPlan`, or ``None`` when nothing beyond the study's probes is
    asked for (the unit's records are then the study protocol's alone).

    Args:
        probes: :func:`evaluators.adversary.library.resolve_probes` specs (``"library"``,
            a probe file, a list of probes).

    Raises:
        ValueError: a negative budget, fewer than one decoy, an attacker model without
            a budget; :class:`~evaluators.adversary.library.ProbeError` for bad probes.
    """
    if budget < 0:
        raise ValueError(f"attack budget must be >= 0 queries, got {budget}")
    if decoys < 1:
        raise ValueError(f"membership inference needs at least one decoy, got {decoys}")
    if attacker_model is not None and budget == 0:
        raise ValueError("an attacker model plans the adaptive attack: give it a budget (queries per user) too")
    resolved = resolve_probes(probes, kind)
    if not resolved and budget == 0 and not membership:
        return None
    return AdversaryPlan(resolved, budget, attacker_model, membership, decoys, after_forget)


ADVERSARY_DEFAULTS: dict[str, Any] = {"probes": ["library"], "attack_budget": 30, "membership": True}
"""What ``--adversary`` turns on: the library, 30 adaptive queries per user, membership."""


def plan_from_options(probes: Sequence[str] | None, attack_budget: int | None, attacker_model: str | None,
                      membership: bool, adversary: bool, kind: str = "token") -> AdversaryPlan | None:
    """The plan of the command-line options (``--probes``, ``--attack-budget``,
    ``--attacker-model``, ``--membership``, ``--adversary``: the defaults of
    :data:`ADVERSARY_DEFAULTS` under the options given), checked before any work.

    Raises:
        ValueError: a bad option, named (a probe file, a model spec that cannot run).
    """
    if adversary:
        probes = list(probes or []) or ADVERSARY_DEFAULTS["probes"]
        attack_budget = ADVERSARY_DEFAULTS["attack_budget"] if attack_budget is None else attack_budget
        membership = True
    if attacker_model is not None:
        from memkit.models.chat import ModelSpecError, check_spec

        try:
            check_spec(attacker_model)
        except ModelSpecError as exc:
            raise ValueError(f"--attacker-model: {exc}") from exc
    try:
        return adversary_plan(list(probes or []) or None, budget=attack_budget or 0, attacker_model=attacker_model,
                              membership=membership, kind=kind)
    except ValueError as exc:
        msg = str(exc)
        if "budget" in msg and not msg.startswith("--"):
            msg = f"--attack-budget: {msg}"
        elif not msg.startswith("--"):
            msg = f"--probes: {msg}"
        raise ValueError(msg) from exc


def calls_per_user(plan: AdversaryPlan, n_ks: int = 1) -> dict[str, int]:
    """Upper bounds on the adversary's calls per user and phase: ``library`` (every
    turn of every probe), ``adaptive`` (the budget), ``membership`` and ``planner``
    (the attacker model's), each times the ``n_ks`` recall breadths, and ``agent``:
    the calls the agent answers. Replies reused from identical prompts cost less."""
    lib = sum(len(p.turns) for p in plan.probes) * n_ks
    adaptive = plan.budget * n_ks
    mia = (plan.decoys + 1) * len(SIGNALS) * n_ks if plan.membership else 0
    planner = max(plan.budget - 1, 0) * n_ks if plan.attacker_model is not None else 0
    return {"library": lib, "adaptive": adaptive, "membership": mia, "planner": planner,
            "agent": lib + adaptive + mia}


def cost_text(plan: AdversaryPlan, n_ks: int = 1, phases: int = 1) -> str:
    """The adversary's cost in one clause: agent calls per user (and planner calls)."""
    c = calls_per_user(plan, n_ks)
    parts = [f"{c['library']} library" if c["library"] else "", f"{c['adaptive']} adaptive" if c["adaptive"] else "",
             f"{c['membership']} membership" if c["membership"] else ""]
    text = (f"adversary: up to {c['agent'] * phases} agent calls per user "
            f"({' + '.join(p for p in parts if p)} per phase x {phases} phase{'s' if phases != 1 else ''})")
    if c["planner"]:
        text += f" and {c['planner'] * phases} attacker-model calls"
    return text


def _seed(*parts: Any) -> int:
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int(np.random.SeedSequence([int.from_bytes(digest[i:i + 4], "big") for i in range(0, 16, 4)])
               .generate_state(1)[0])


class Adversary:
    """Runs the adversary for one unit (module doc); :func:`evaluators.runner.run_unit`
    makes it and calls :meth:`run` after each user's study asks."""

    def __init__(self, unit: Any, plan: AdversaryPlan) -> None:
        self.unit, self.plan, self.kind = unit, plan, unit.plan.kind
        self.openers = list(plan.probes) or library(self.kind)
        self.stored: dict[int, StoredRecords] = {}
        self._model: Any = None

    def run(self, target: Any, i: int, *, phase: str, mode: str | None, tiers: tuple[str, ...] | None,
            seen: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The adversary's records for user ``i`` in one phase; ``seen`` are the study's
        calls of that phase (tier ``None``), whose replies are reused for equal prompts."""
        if i not in self.stored:  # the records stored before any forget
            turns = [t.content for _, _, ts in self.unit.planted[i].sessions() for t in ts if t.role == "user"]
            self.stored[i] = stored_records(target, self.unit.users[i], turns)
        sent = {(r["k"], r["query"]): r for r in seen if r.get("tier") is None}
        ctx = _Ctx(self, target, i, phase, mode, tiers, sent)
        out = self._library(ctx)
        if self.plan.budget:
            for k in self.unit.plan.ks:
                out += self._adaptive(ctx, k)
        if self.plan.membership:
            out += self._membership(ctx)
        for r in out:
            r.pop("_thread", None)
        return out

    def _score(self, ctx: _Ctx, rec: dict[str, Any]) -> dict[str, Any]:
        replies = rec.get("responses") or [rec["response"]]
        rec["extraction"] = detect(rec["expected"], replies, self.kind).to_dict()
        ids = rec.get("retrieved_ids") if rec.get("context_exposed") is not None else None
        rec["memory"] = self.stored[ctx.i].recovered(replies, ids)
        return rec

    def _library(self, ctx: _Ctx) -> list[dict[str, Any]]:
        talks, slots = [], []
        out: list[dict[str, Any] | None] = []
        for p in self.plan.probes:
            fields = {"query_kind": "attack", "probe_set": p.set, "family": p.family, "template_id": p.id,
                      "level": None, "source": p.source, **({"transform": p.transform} if p.transform else {})}
            for k in self.unit.plan.ks:
                if len(p.turns) == 1 and (k, p.turns[0]) in ctx.sent:
                    out.append(ctx.reuse(ctx.sent[(k, p.turns[0])], fields))
                    continue
                talks.append(ctx.talk(f"lib-{p.id}", p.turns, k, fields))
                slots.append(len(out))
                out.append(None)
        for slot, rec in zip(slots, ctx.converse(talks), strict=True):
            out[slot] = rec
        recs = [self._score(ctx, r) for r in out if r is not None]
        for r in recs:
            if "turns" not in r:
                ctx.sent.setdefault((r["k"], r["query"]), r)
        return recs

    def _attacker(self, ctx: _Ctx, k: int | None) -> Any:
        policy = PolicyAttacker(self.openers, _seed(self.unit.plan.seed, self.unit.users[ctx.i], ctx.phase,
                                                    ctx.mode, k))
        if self.plan.attacker_model is None:
            return policy
        if self._model is None:
            self._model = ModelAttacker(self.plan.attacker_model, policy)
        self._model.policy = policy
        return self._model

    def _adaptive(self, ctx: _Ctx, k: int | None) -> list[dict[str, Any]]:
        attacker = self._attacker(ctx, k)
        state = AttackState(self.kind)
        threads: list[str] = []
        out = []
        for q in range(1, self.plan.budget + 1):
            move = attacker.next(state)
            if move is None:
                break
            fields = {"query_kind": "attack", "probe_set": "adaptive", "family": move.family,
                      "template_id": f"adaptive-{q}", "level": None, "query_index": q, "move": move.move,
                      "attacker": getattr(attacker, "name", "policy"),
                      **({"probe_id": move.probe_id} if move.probe_id else {}),
                      **({"follows": move.follows + 1} if move.follows is not None else {})}
            if move.follows is None and (k, move.text) in ctx.sent:
                rec = ctx.reuse(ctx.sent[(k, move.text)], fields)
                threads.append(rec["_thread"])
            else:
                talk = ctx.talk(f"adaptive-{q}", (move.text,), k, fields,
                                thread=threads[move.follows] if move.follows is not None else None)
                threads.append(talk.thread or "")
                rec = ctx.converse([talk])[0]
            rec = self._score(ctx, rec)
            state.history.append(Exchange(move, rec["response"]))
            if move.follows is None:
                state.sent.add(move.text)
                ctx.sent.setdefault((k, move.text), rec)
            out.append(rec)
        return out

    def _membership(self, ctx: _Ctx) -> list[dict[str, Any]]:
        unit = self.unit
        talks = []
        cands = candidates(unit.canaries[ctx.i].value, self.kind, unit.plan.seed, unit.users[ctx.i], self.plan.decoys)
        for c, (cand, member) in enumerate(cands):
            for signal, text in membership_queries(cand, self.kind):
                fields = {"query_kind": "membership", "template_id": f"membership-{signal}", "level": None,
                          "signal": signal, "member": member, "candidate": cand, "candidate_index": c}
                for k in unit.plan.ks:
                    talks.append(ctx.talk(f"mia-{c}-{signal}", (text,), k, fields))
        recs = ctx.converse(talks)
        for r in recs:
            r["score"] = round(score(r["signal"], r["candidate"], r["response"]), 6)
        return recs


class _Ctx:
    """One user's adversary phase: the unit, target and what was sent."""

    def __init__(self, adv: Adversary, target: Any, i: int, phase: str, mode: str | None,
                 tiers: tuple[str, ...] | None, sent: dict[tuple[Any, str], dict[str, Any]]) -> None:
        self.adv, self.target, self.i, self.phase, self.mode, self.tiers = adv, target, i, phase, mode, tiers
        self.sent = sent

    def talk(self, key: str, turns: Sequence[str], k: int | None, fields: dict[str, Any],
             thread: str | None = None) -> Any:
        from evaluators.targets.base import Talk

        unit = self.adv.unit
        thread = thread or unit.thread(self.phase, self.mode, None, unit.users[self.i], key, k)
        return Talk(key, tuple(turns), k, thread, dict(fields))

    def converse(self, talks: list[Any]) -> list[dict[str, Any]]:
        if not talks:
            return []
        recs = self.adv.unit.converse(self.target, self.i, talks, phase=self.phase, mode=self.mode, tier=None,
                                      tiers=self.tiers)
        for r, t in zip(recs, talks, strict=True):
            r["_thread"] = t.thread
        return recs

    def reuse(self, rec: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        """A new record for a prompt already sent: its reply, 0 latency, ``reused_from``."""
        keep = ("type", "design", "unit", "question_id", "question_type", "user_id", "S", "k", "phase", "mode",
                "tier", "query", "response", "expected", "context_exposed", "retrieved_ids", "retrieved_tiers",
                "thread_id")
        out = {key: rec[key] for key in keep if key in rec}
        unit = self.adv.unit
        thread = rec.get("_thread") or unit.thread(self.phase, self.mode, None, unit.users[self.i],
                                                   rec.get("template_id") or "question", rec["k"])
        out.update(correct=None, extraction=None, latency_s=0.0, reused_from=rec.get("template_id"), **fields)
        out["_thread"] = thread
        return out
