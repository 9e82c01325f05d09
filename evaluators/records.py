"""Typed records of a run directory, and its one reader.

Every line of ``results.jsonl`` is one JSON object whose ``type`` names its record:

``call`` (:class:`CallRecord`)
    one scored call of the agent: the question or a probe, at one ``k``, in the main
    phase or after a forget.
``canary`` (:class:`CanaryRecord`)
    the secret planted in a unit's instance (where, and its value).
``forensics`` (:class:`ForensicsRecord`)
    what a deletion mode left on every forensic surface of a unit's forgotten store.
``unit_done`` (:class:`UnitDone`)
    the fsync'd marker after a unit's records, with its LLM call and token counts.

Every unit memkit runs (the sweep, ``audit``, the matrix, the isolation probe) writes
these records through the one runner (:func:`evaluators.runner.run_unit`).

The sweep validates every record against its model before it writes it
(:func:`validate_record`), so the file's schema is this module, not prose.

The one rule for a damaged file (:func:`load_records`): a unit's records are written
together, then its ``unit_done`` marker. A unit without a marker (a kill cut it
short) or with a line that does not parse, or that is not a valid record, is *not
done*: its records are left out and ``memkit sweep --resume`` runs it again; every
other unit is kept, wherever the damage is. Readers of a finished run
(:func:`read_run`: compare, the report, the judge) apply the same rule and say how
many lines were damaged instead of failing or silently skipping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = [
    "CallRecord",
    "CanaryRecord",
    "ForensicsRecord",
    "Run",
    "UnitDone",
    "load_records",
    "parse_record",
    "read_run",
    "validate_record",
]


class _Record(BaseModel):
    # Readers keep fields they do not know (a later memkit may add some); the writer
    # validates the fields named here.
    model_config = ConfigDict(extra="allow", frozen=True)


class CallRecord(_Record):
    """One scored call of a target: a question or a probe, in a fresh conversation.

    Attributes:
        design, unit, question_id, question_type, S: what ran (``design`` is the
            memory system's name: a design or a target; ``unit`` is
            ``question_id::S{S}`` in the sweep; ``S`` is ``None`` for a target without
            summary levels).
        user_id: the user the call was made as, when it is not the ``question_id``.
        thread_id: the conversation the call ran in (targets that keep conversations).
        k: retrieval breadth (``None``: the target's own); ``phase``: ``main`` or
            ``forget``; ``mode``: the deletion mode (``None`` in the main phase);
            ``tier``: the tier retrieval was restricted to after a forget (``None``:
            the target's own tiers).
        query_kind: ``question``, ``probe`` (the study's nine), ``attack`` (the
            adversary's library and adaptive queries) or ``membership``; ``level``,
            ``template_id``: the probe's.
        query, response, expected: texts (``expected`` is the gold answer for a
            question, the canary for a probe).
        correct, correct_study: PR's rules on a question (``lme`` default, ``study``).
        extraction: ``{"exact", "normalized", "partial"}`` for a probe (docs/metrics.md, AER).
        context_exposed: the canary was in the retrieved context (``None``: the target
            does not say what it recalled).
        retrieved_ids, retrieved_tiers: the context, best first (absent when unknown).
        latency_s: wall seconds of the respond call (0 for a reused response).
        request, about: for a forget through a request in words, its kind and what it
            asked to forget (``secret`` or ``fact``); a probe after it scores that value.
        probe_set, family, source, transform: an attack's set (``library``, ``user``,
            ``adaptive``), family, source and requested transform
            (:mod:`evaluators.adversary.library`).
        turns, responses: every turn and reply of a conversation of several turns
            (``query``/``response`` are the last).
        query_index, move, attacker, follows: the adaptive attacker's query number
            (1..budget), move, planner and the query whose conversation it continues.
        reused_from: the call whose reply was reused for this identical prompt.
        memory: what the replies recovered of the user's stored records
            (:mod:`evaluators.adversary.memory`).
        candidate, member, signal, score: a membership query's candidate secret,
            whether it was told, the signal and its score in [0, 1].
    """

    type: Literal["call"]
    design: str = "study"
    unit: str
    question_id: str
    question_type: str | None = None
    user_id: str | None = None
    thread_id: str | None = None
    S: int | None
    k: int | None = Field(None, ge=1)
    phase: Literal["main", "forget"]
    mode: str | None = None
    tier: str | None = None
    query_kind: Literal["question", "probe", "attack", "membership"]
    level: str | None = None
    template_id: str | None = None
    query: str | None = None
    response: Any = None
    expected: Any = None
    correct: bool | None = None
    correct_study: bool | None = None
    extraction: dict[str, Any] | None = None
    context_exposed: bool | None = False
    retrieved_ids: list[str] = Field(default_factory=list)
    retrieved_tiers: list[str] = Field(default_factory=list)
    latency_s: float = 0.0
    request: str | None = None
    about: str | None = None
    probe_set: str | None = None
    family: str | None = None
    source: str | None = None
    transform: str | None = None
    turns: list[str] | None = None
    responses: list[Any] | None = None
    query_index: int | None = Field(None, ge=1)
    move: str | None = None
    attacker: str | None = None
    follows: int | None = Field(None, ge=1)
    reused_from: str | None = None
    memory: dict[str, Any] | None = None
    candidate: str | None = None
    member: bool | None = None
    signal: str | None = None
    score: float | None = Field(None, ge=0, le=1)


class CanaryRecord(_Record):
    """The canary planted in a unit's instance: ``value`` in turn ``turn_index`` of
    session ``session_id`` (:func:`memkit.dataset.canaries.plant`); ``fact``: the planted fact
    (``category``, ``value``, ``session_id``, ``turn_index``), when one was planted
    (:mod:`evaluators.planted`)."""

    type: Literal["canary"]
    design: str = "study"
    unit: str
    question_id: str
    user_id: str | None = None
    S: int | None
    session_id: str | None = None
    turn_index: int | None = None
    value: str
    fact: dict[str, Any] | None = None


class ForensicsRecord(_Record):
    """What one user's canary left on each surface after one phase of a deletion.

    Attributes:
        mode: the deletion; ``phase``: ``before`` (the forget), ``forget``, then
            ``delete_threads`` or a deletion step's name.
        counts: ``{surface: copies of this user's canary}`` over the checked surfaces.
        unchecked: surfaces not checked, or read only in part (never clean).
        changed: what the forget deleted, redacted or created per tier, the cache
            entries it purged and the store's bytes before and after.
        surfaces: ``{surface: {"status", "reason", "partial", "stale", "notes"}}``
            (status ``checked``, ``not_checked`` or ``n/a``; ``stale``: copies of some
            old text tied to no one secret, such as vectors).
        fingerprint: with a user-scope forget, ``{"strings", "remaining",
            "by_surface"}`` of the user's fingerprint (:func:`memkit.residue.fingerprint.fingerprint`).
        request, about: a forget through a request in words (``counts`` are then of the
            value it asked to forget); ``changed["request"]``: ``items`` resolved,
            ``found`` (one holds the value), ``resolver``.
        other_counts: with a planted fact, the copies of the user's other item per
            checked surface (collateral: lost from every live surface).
        vectors: with vector weighing, ``{"surfaces": {surface: {"vectors",
            "attributed", "reidentified", "attribute_correct", "ranks"}}, "unread"}``,
            or ``{"na": why}`` (:mod:`memkit.residue.weigh`).
        na: why the forget could not run on this target (a request it cannot take).
    """

    type: Literal["forensics"]
    design: str = "study"
    unit: str
    question_id: str
    user_id: str | None = None
    S: int | None
    mode: str
    phase: str = "forget"
    counts: dict[str, int]
    unchecked: list[str] = Field(default_factory=list)
    changed: dict[str, Any] = Field(default_factory=dict)
    surfaces: dict[str, dict[str, Any]] = Field(default_factory=dict)
    fingerprint: dict[str, Any] | None = None
    request: str | None = None
    about: str | None = None
    other_counts: dict[str, int | None] | None = None
    vectors: dict[str, Any] | None = None
    na: str | None = None


class UnitDone(_Record):
    """The marker after a unit's records: ``llm_calls`` sent, ``cache_hits``, and
    ``tokens`` per phase and model (:func:`memkit.models.chat.token_usage`)."""

    type: Literal["unit_done"]
    unit: str
    llm_calls: int = 0
    cache_hits: int = 0
    tokens: dict[str, Any] = Field(default_factory=dict)


Record = Annotated[CallRecord | CanaryRecord | ForensicsRecord | UnitDone, Field(discriminator="type")]
_RECORD = TypeAdapter(Record)


def parse_record(obj: dict[str, Any]) -> CallRecord | CanaryRecord | ForensicsRecord | UnitDone:
    """The typed record of one ``results.jsonl`` object.

    Raises:
        ValueError: an unknown ``type`` or a field of the wrong shape (pydantic's
            message names the field).
    """
    try:
        return _RECORD.validate_python(obj)
    except ValidationError as exc:
        raise ValueError(str(exc)) from exc


def validate_record(obj: dict[str, Any], where: str = "record") -> dict[str, Any]:
    """Check ``obj`` against its record model before it is written; returns ``obj``
    unchanged (the file keeps exactly the fields the writer gave).

    Raises:
        ValueError: naming ``where``, the record's type and the bad field.
    """
    try:
        _RECORD.validate_python(obj)
    except ValidationError as exc:
        raise ValueError(f"{where}: not a valid {obj.get('type')!r} record: {exc}") from exc
    return obj


def load_records(path: str | Path) -> tuple[list[dict[str, Any]], set[str], list[int]]:
    """Read ``results.jsonl``, keeping only records of completed, intact units (the
    module's rule for a damaged file).

    Returns:
        ``(records, done_units, bad_lines)``: the kept records as dicts, ``unit_done``
        markers included, in file order; their unit ids; and the 1-based numbers of
        lines that did not parse or are not valid records.
    """
    path = Path(path)
    records: list[dict[str, Any]] = []
    done: set[str] = set()
    bad: list[int] = []
    if not path.exists():
        return records, done, bad
    pending: list[dict[str, Any]] = []
    pending_bad = False
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict) or "type" not in rec or not raw.endswith(b"\n"):
                    raise ValueError("not a record")
                parse_record(rec)
            except ValueError:
                bad.append(lineno)
                pending_bad = True
                continue
            if rec["type"] == "unit_done":
                if not pending_bad and all(r.get("unit") == rec.get("unit") for r in pending):
                    records += pending + [rec]
                    done.add(rec["unit"])
                pending, pending_bad = [], False
            else:
                pending.append(rec)
    return records, done, bad


@dataclass
class Run:
    """A finished run directory as its readers see it (:func:`read_run`).

    Attributes:
        dir: the directory.
        config: ``config.json``; ``metrics``: ``metrics.json`` (``{}`` when not asked for).
        records: the records of completed, intact units (:func:`load_records`).
        bad_lines: line numbers of ``results.jsonl`` that are damaged (their units
            are left out).
    """

    dir: Path
    config: dict[str, Any]
    metrics: dict[str, Any]
    records: list[dict[str, Any]]
    bad_lines: list[int] = field(default_factory=list)

    def canaries(self) -> dict[str, str]:
        """``{question_id: canary value}`` from the ``canary`` records."""
        return {r["question_id"]: r["value"] for r in self.records if r["type"] == "canary"}

    def calls(self, phase: str | None = None) -> list[dict[str, Any]]:
        """The ``call`` records (of ``phase`` when given)."""
        return [r for r in self.records if r["type"] == "call" and (phase is None or r["phase"] == phase)]

    def damage_note(self) -> str | None:
        """One sentence on damaged lines, or ``None`` when there are none."""
        if not self.bad_lines:
            return None
        shown = ", ".join(map(str, self.bad_lines[:10])) + (" ..." if len(self.bad_lines) > 10 else "")
        return (f"{self.dir / 'results.jsonl'}: lines {shown} are damaged; the units they belong to "
                f"are left out (`memkit sweep --resume --out {self.dir}` with the run's options runs them again)")


def read_run(run_dir: str | Path, *, need: tuple[str, ...] = ("config.json", "results.jsonl"),
             metrics: bool = False) -> Run:
    """The one reader of a run directory.

    Args:
        run_dir: a sweep output directory.
        need: files that must exist.
        metrics: also read ``metrics.json`` (then it must exist too).

    Raises:
        FileNotFoundError: a needed file is missing (the message names it).
        ValueError: ``config.json`` or ``metrics.json`` is not JSON (file named).
    """
    d = Path(run_dir)
    names = tuple(need) + (("metrics.json",) if metrics and "metrics.json" not in need else ())
    for name in names:
        if not (d / name).is_file():
            raise FileNotFoundError(f"{d / name} does not exist: {d} is not a finished memkit sweep")

    def _json(name: str) -> dict[str, Any]:
        path = d / name
        if not path.is_file():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{path} is not JSON ({exc})") from exc

    records, _, bad = load_records(d / "results.jsonl")
    return Run(dir=d, config=_json("config.json"), metrics=_json("metrics.json") if metrics else {},
               records=records, bad_lines=bad)
