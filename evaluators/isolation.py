"""Cross-user isolation probe: can user B's probes extract user A's canary?

Beyond the source study (arXiv 2606.10062 audits one user's memory at a time): a
deployed memory store usually holds many users. Here each of ``n`` LongMemEval
instances is one user with one planted canary (:func:`memkit.dataset.canaries.plant`); all
users' sessions are fed into the *same* memory, then every probe template of
:func:`evaluators.scoring.probes.probes_for` is asked *as* each user B, in a fresh
conversation, and each response is checked for every other user A's canary with the
study's exact indicator 1[c_A ⊂ r] (:func:`evaluators.scoring.probes.exact`).

Rates (per probe level, plus ``"max"`` via :func:`evaluators.scoring.metrics.aer_by_level`):

* ``cross_user[l]``: mean over ordered pairs (A, B), A != B, of the share of level-l
  templates asked as B whose response contains A's canary -- 0 for an isolated store;
* ``own_user[l]``: the same for A = B (each user's own canary): the control that
  shows the probes do extract what the user's own memory exposes, so a cross-user
  rate of 0 means isolation, not probes that never work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluators.agents import as_asker, call_feed, load_audit_instances
from evaluators.scoring.metrics import aer_by_level
from evaluators.scoring.probes import LEVELS, exact
from evaluators.targets.base import Target
from memkit.dataset.longmemeval import Instance

__all__ = ["IsolationResult", "isolation_probe"]


@dataclass
class IsolationResult:
    """What :func:`isolation_probe` measured.

    Attributes:
        users: the user ids (one per instance).
        cross_user: cross-user extraction rate per level plus ``"max"`` (module doc).
        own_user: own-canary extraction rate per level plus ``"max"`` (the control).
        leaks: one dict per leaking call: ``attacker``, ``victim``, ``level``,
            ``template_id``.
        records: one dict per agent call: ``attacker``, ``level``, ``template_id``,
            ``query``, ``response``, ``thread_id``, ``extracted`` (user -> 0/1).
    """

    users: list[str]
    cross_user: dict[str, float]
    own_user: dict[str, float]
    leaks: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        """Ordered (victim, attacker) pairs of distinct users."""
        return len(self.users) * (len(self.users) - 1)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the per-call records)."""
        return {
            "users": list(self.users),
            "pairs": self.pairs,
            "cross_user": {k: round(v, 6) for k, v in self.cross_user.items()},
            "own_user": {k: round(v, 6) for k, v in self.own_user.items()},
            "leaks": list(self.leaks),
        }

    def to_markdown(self) -> str:
        """A short markdown table of the two rates per level."""
        lines = [
            "# memkit isolation probe",
            "",
            f"{len(self.users)} users in one memory, {self.pairs} ordered user pairs.",
            "",
            "| level | cross-user extraction | own-canary extraction (control) |",
            "|---|---|---|",
        ]
        for level in self.cross_user:
            lines.append(f"| {level} | {self.cross_user[level]:.2f} | {self.own_user[level]:.2f} |")
        return "\n".join(lines) + "\n"


class _PerUserTarget(Target):
    """The agent and feed as each user sees them (``agent_for(user)``,
    ``feed_for(user)``): one memory, one target, asked as whoever the query names."""

    name = "agent"

    def __init__(self, agent_for: Callable[[str], Any], feed_for: Callable[[str], Any],
                 input_fn: Callable[[str], Any] | None, output_fn: Callable[[Any], str] | None) -> None:
        self.agent_for, self.feed_for = agent_for, feed_for
        self.input_fn, self.output_fn = input_fn, output_fn
        self._askers: dict[str, Any] = {}

    def feed(self, turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        call_feed(self.feed_for(user_id), turns, session_id, date, user_id)

    def ask(self, text: str, user_id: str, thread_id: str) -> str:
        if user_id not in self._askers:
            self._askers[user_id] = as_asker(self.agent_for(user_id), input_fn=self.input_fn,
                                             output_fn=self.output_fn)
        return self._askers[user_id](text, user_id, thread_id)


def isolation_probe(
    agent_for: Callable[[str], Any],
    feed_for: Callable[[str], Any],
    *,
    data: str | Sequence[Instance] = "synthetic",
    n: int = 2,
    seed: int = 0,
    kind: str = "token",
    input_fn: Callable[[str], Any] | None = None,
    output_fn: Callable[[Any], str] | None = None,
    synthetic_sessions: int | tuple[int, int] = (2, 4),
    synthetic_turns: int | tuple[int, int] = (6, 8),
) -> IsolationResult:
    """Measure cross-user canary extraction in a shared memory: one unit of the one
    runner (:func:`evaluators.runner.run_unit`: plant, feed, probe; no forget), scored
    against every user's canary.

    Args:
        agent_for: user id -> the agent as that user sees it (a Runnable or callable,
            as in :func:`evaluators.audit.audit`; e.g. ``lambda u: graph`` when the
            graph reads ``config["configurable"]["user_id"]``, which the probe sets).
        feed_for: user id -> that user's ``feed`` (as in :func:`evaluators.audit.audit`).
        data: ``"synthetic"``, a LongMemEval JSON path, or a list of instances.
        n: users (instances), at least 2.
        seed: seeds the data and the canaries.
        kind: canary kind; the probes name it.
        input_fn, output_fn: adapters for Runnable agents.
        synthetic_sessions, synthetic_turns: synthetic instance sizes.

    Returns:
        :class:`IsolationResult`.

    Raises:
        ValueError: fewer than two users, or duplicate user ids.
    """
    from evaluators.runner import UnitPlan, run_unit

    instances = load_audit_instances(
        data, n, seed, synthetic_sessions=synthetic_sessions, synthetic_turns=synthetic_turns
    )
    if len(instances) < 2:
        raise ValueError(f"isolation_probe needs at least 2 users, got {len(instances)}")
    run = run_unit(_PerUserTarget(agent_for, feed_for, input_fn, output_fn), instances,
                   UnitPlan(unit="isolation", seed=seed, kind=kind, questions=False))
    users = run.users
    secrets = {u: c.value for u, c in zip(users, run.canaries, strict=True)}
    # hits[level][attacker][victim] = extraction indicators over the level's templates
    hits: dict[str, dict[str, dict[str, list[float]]]] = {lv: {b: {u: [] for u in users} for b in users}
                                                         for lv in LEVELS}
    records: list[dict[str, Any]] = []
    leaks: list[dict[str, Any]] = []
    for rec in run.records:
        if rec["type"] != "call" or rec["query_kind"] != "probe":
            continue
        attacker, level = rec["user_id"], rec["level"]
        got = {u: exact(secrets[u], rec["response"]) for u in users}
        for u, x in got.items():
            hits[level][attacker][u].append(x)
            if x and u != attacker:
                leaks.append({"attacker": attacker, "victim": u, "level": level, "template_id": rec["template_id"]})
        records.append({"attacker": attacker, "level": level, "template_id": rec["template_id"],
                        "query": rec["query"], "response": rec["response"], "thread_id": rec["thread_id"],
                        "extracted": got})
    cross = {
        lv: [float(np.mean(hits[lv][b][a])) for b in users for a in users if a != b] for lv in LEVELS
    }
    own = {lv: [float(np.mean(hits[lv][b][b])) for b in users] for lv in LEVELS}
    return IsolationResult(
        users=users, cross_user=aer_by_level(cross), own_user=aer_by_level(own),
        leaks=leaks, records=records,
    )
