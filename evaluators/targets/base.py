"""The target protocol: one small interface for "a memory system under audit".

A :class:`Target` is what :func:`evaluators.audit.audit` runs: it can

* **feed** a session into its memory (``feed(turns, session_id, date, user_id)``);
* **ask** a question in a fresh conversation (``ask(text, user_id, thread_id)``);
* **forget a secret** of a user (``forget_secret(secret, user_id)``);
* **forget a user** (``forget_user(user_id)``: every memory and conversation);
* **forget what a request in words asks** (``forget_request(request, user_id)``:
  "forget my doctor's name"; a target that takes only a secret is n/a for requests);
* give its **leftover vectors** (:meth:`Target.leftover_vectors`: stored vectors no
  live record owns, weighed by :mod:`memkit.residue.weigh`);
* list the **surfaces** it keeps (:meth:`Target.surfaces`): each a :class:`Surface`,
  a scanner that reports where copies of a secret still live;
* run **deletion steps** beyond its API delete (:meth:`Target.deletion_steps`:
  ``VACUUM``, ``VACUUM FULL``, a WAL switch ...), each rescanned by the audit.

Any operation may be *not applicable* to a target: it raises :class:`NotApplicable`
with the reason and the audit reports "n/a" for it, never 0. A surface a scanner
could not read (a server's disk memkit has no access to) is reported ``not_checked``
with the reason: memkit never calls bytes it did not read clean.

The shape follows the six-method adapter of ForgetEval (arXiv 2606.15903), in which
a store can answer "not applicable"; memkit adds the surfaces, which that adapter
lacks. ``load_target("package.module:factory")`` loads a user's own target; the
built-in ones (``langgraph``, ``langmem``, ``mem0``, ``memkit``) live beside this
module (:data:`BUILTIN`).
"""

from __future__ import annotations

import inspect
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memkit.residue.report import ResidueReport, Status, SurfaceResult
from memkit.scan.matching import matcher

__all__ = [
    "BUILTIN",
    "Answer",
    "NotApplicable",
    "Query",
    "Recalled",
    "Surface",
    "SurfaceResult",
    "Talk",
    "Target",
    "copies_in",
    "load_target",
]


BUILTIN: dict[str, str] = {
    "langgraph": "evaluators.targets.langgraph:build",
    "langmem": "evaluators.targets.langmem:build",
    "mem0": "evaluators.targets.mem0:build",
    "memkit": "evaluators.targets.memkit_design:build",
}
"""Built-in target names -> ``module:factory``."""


class NotApplicable(Exception):  # noqa: N818 - the field's term ("n/a"), not an error
    """The target has no such operation or surface; reported as n/a, never as 0."""




def copies_in(value: Any, secret: str) -> int:
    """Copies of ``secret`` in a value: a string (searched as is and, when it is a
    JSON document, decoded too), bytes (UTF-8), a number, or nested mappings (keys
    too) / sequences of them (:class:`memkit.scan.matching.SecretMatcher`).

    Returns:
        The number of non-overlapping copies (0 when none).
    """
    m = matcher(secret)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(m.byte_spans(bytes(value)))
    if isinstance(value, str):
        n = len(m.spans(value))
        if n == 0 and value[:1] in "[{\"":
            import json

            try:
                decoded = json.loads(value)
            except (ValueError, RecursionError):
                return 0
            if decoded != value:
                return copies_in(decoded, secret)
        return n
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, (int, float)):
        return len(m.spans(str(value)))
    if isinstance(value, dict):
        return sum(copies_in(k, secret) + copies_in(v, secret) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(copies_in(v, secret) for v in value)
    if hasattr(value, "model_dump"):
        return copies_in(value.model_dump(), secret)
    return len(m.spans(repr(value)))


class Surface(ABC):
    """A place a target keeps data, with a scanner for copies of secrets.

    Attributes:
        name: the surface's name in reports.
        description: what is read, and how (API, SQL, bytes).
    """

    name: str = "surface"
    description: str = ""

    @abstractmethod
    def scan(self, secrets: Sequence[str]) -> SurfaceResult:
        """Copies of each secret on this surface (read-only)."""


class FunctionSurface(Surface):
    """A :class:`Surface` from a function ``secrets -> SurfaceResult``."""

    def __init__(self, name: str, fn: Callable[[Sequence[str]], SurfaceResult], description: str = ""):
        self.name, self._fn, self.description = name, fn, description

    def scan(self, secrets: Sequence[str]) -> SurfaceResult:
        """Run the function; its result is renamed to this surface."""
        out = self._fn(secrets)
        out.surface = self.name
        return out


class UncheckedSurface(Surface):
    """A surface memkit cannot read here (``not_checked``) or that this configuration
    of the target does not keep (``status="n/a"``), with the reason."""

    def __init__(self, name: str, reason: str, description: str = "", status: Status = "not_checked"):
        self.name, self.reason, self.description, self.status = name, reason, description, status

    def scan(self, secrets: Sequence[str]) -> SurfaceResult:
        """Report the status with the reason."""
        return SurfaceResult(self.name, self.status, reason=self.reason)


@dataclass(frozen=True)
class Query:
    """One question to a target: ``text`` asked as ``user_id`` in the fresh
    conversation ``thread_id``; ``k`` (memories recalled) and ``tiers`` (the tiers
    recall may read) where the target takes them (``None``: its own setting)."""

    text: str
    user_id: str
    thread_id: str
    k: int | None = None
    tiers: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Talk:
    """One conversation the runner holds with a target (:mod:`evaluators.runner`): several
    turns in one thread.

    Attributes:
        key: names its fresh thread (unique per user, phase and k).
        turns: the texts sent, in order, in one thread.
        k: recall breadth (``None``: the target's own).
        thread: an earlier thread to continue instead of a fresh one.
        fields: record fields to add (``query_kind``, the probe's id and family ...).
    """

    key: str
    turns: tuple[str, ...]
    k: int | None = None
    thread: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recalled:
    """One memory a target recalled for an answer: its id, tier and text."""

    id: str
    tier: str | None
    text: str


@dataclass(frozen=True)
class Answer:
    """A target's answer to a :class:`Query`: the ``response`` text, what it
    recalled (``None`` when the target does not say) and the call's wall seconds."""

    response: str
    recalled: tuple[Recalled, ...] | None = None
    latency_s: float = 0.0


class Target(ABC):
    """A memory system under evaluation (module doc). Subclasses implement
    :meth:`feed` and :meth:`ask`; every other operation defaults to
    :class:`NotApplicable`.

    Attributes:
        name: the target's label in reports and records (e.g. ``langgraph[postgres]``).
        forget_label: what its forget is called in reports (the deletion mode).
        takes_k: :meth:`ask_many` honours :attr:`Query.k` (the sweep's k grid); a
            target without it answers at its own k, one point of the grid.
        tiers: the tiers :attr:`Query.tiers` can restrict recall to (FRS per tier);
            empty when recall cannot be restricted.
        uses_threads: the target keeps conversations (threads); records carry
            each call's ``thread_id``.
        reads_write: asking may write to the memory (a checkpointer keeps every
            conversation; an agent may store what it hears). When False, the
            runner asks its after-forget questions before it scans, so a copy can
            be closed (its files flushed) first.
    """

    name: str = "target"
    forget_label: str = "forget"
    takes_k: bool = False
    tiers: tuple[str, ...] = ()
    uses_threads: bool = True
    reads_write: bool = True

    def user_id_for(self, instance: Any) -> str:
        """The user id this target files an instance under: ``"user-"`` + its
        ``question_id`` with ``"."`` and ``"/"`` replaced by ``"_"`` (a valid
        LangGraph namespace label)."""
        return "user-" + instance.question_id.replace(".", "_").replace("/", "_")

    @abstractmethod
    def feed(self, turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        """Put one session (LongMemEval turn dicts ``{"role", "content"}``) into the
        user's memory, as the system does after a conversation."""

    def feed_sessions(self, sessions: Sequence[tuple[str, str, list[dict[str, Any]]]], user_id: str) -> None:
        """Every session of a user, ``(session_id, date, turns)`` in order (default:
        :meth:`feed` each; a target may write them in one batch)."""
        for session_id, date, turns in sessions:
            self.feed(turns, session_id, date, user_id)

    @abstractmethod
    def ask(self, text: str, user_id: str, thread_id: str) -> str:
        """Answer ``text`` for ``user_id`` in a new conversation ``thread_id``."""

    def ask_many(self, queries: Sequence[Query]) -> list[Answer]:
        """Answers to ``queries``, in order (default: :meth:`ask` each, timed; a
        target may batch them and say what it recalled)."""
        out = []
        for q in queries:
            t0 = time.perf_counter()
            text = self.ask(q.text, q.user_id, q.thread_id)
            out.append(Answer(text, None, time.perf_counter() - t0))
        return out

    def forget_secret(self, secret: str, user_id: str) -> Any:
        """Delete ``secret`` from the user's memory through the system's own API.

        Raises:
            NotApplicable: the system cannot forget one fact (the default).
        """
        raise NotApplicable(f"{self.name} has no API to forget one secret")

    def forget_user(self, user_id: str) -> Any:
        """Delete everything the system keeps of ``user_id`` through its own API.

        Raises:
            NotApplicable: the system cannot forget a user (the default).
        """
        raise NotApplicable(f"{self.name} has no API to forget a user")

    def forget_request(self, request: str, user_id: str) -> Any:
        """Forget what ``request`` (the user's own words) asks to forget from the user's
        memory; returns an object whose ``resolved_texts`` are the memories it resolved to
        and whose ``changes()`` says what changed (:class:`graphs.forget_request.RequestForget`).

        Raises:
            NotApplicable: the system takes only a secret, not a request (the default).
        """
        raise NotApplicable(f"{self.name} takes only a secret to forget, not a request in words")

    def leftover_vectors(self) -> tuple[Any, Any]:
        """``(read, embedder)``: every stored vector no live record owns
        (:class:`memkit.residue.vectors.VectorRead`) and the embedding model that wrote them.

        Raises:
            NotApplicable: the vectors cannot be read here (the default).
        """
        raise NotApplicable(f"{self.name}: memkit cannot read its stored vectors")

    def delete_threads(self, user_id: str) -> Any:
        """Delete the user's conversations (checkpointer threads).

        Raises:
            NotApplicable: the system keeps no conversations (the default).
        """
        raise NotApplicable(f"{self.name} keeps no conversations to delete")

    def fork(self, workdir: Path, mode: str | None = None) -> Target:
        """A copy of the memory in ``workdir`` whose forget runs deletion mode
        ``mode`` (the sweep forgets each mode on its own copy).

        Raises:
            NotApplicable: the target cannot copy its memory (the default).
        """
        raise NotApplicable(f"{self.name} cannot copy its memory")

    def supports(self, operation: str) -> bool:
        """Whether the target implements ``operation`` (``forget_secret``,
        ``forget_user``, ``forget_request``, ``delete_threads``, ``fork``,
        ``leftover_vectors``): a subclass overrides it."""
        return getattr(type(self), operation, None) is not getattr(Target, operation, None)

    def surfaces(self) -> list[Surface]:
        """The surfaces the system keeps (default none)."""
        return []

    def memories(self, user_id: str) -> list[Recalled] | None:
        """The records the system stores for ``user_id`` (raw turns, summaries, facts),
        as its recall would return them; ``None`` when it cannot list them (the
        default: memory extraction then counts the user turns fed in)."""
        return None

    def deletion_steps(self) -> dict[str, Callable[[], Any]]:
        """Deletion steps beyond the API delete, by name, in the order they apply
        (default none); the runner runs the ones asked for after the forget."""
        return {}

    def usage(self) -> dict[str, int]:
        """Model calls the target made and cache hits it served, where it counts
        them: ``{"llm_calls", "cache_hits"}`` (default zeros)."""
        return {"llm_calls": 0, "cache_hits": 0}

    def close(self) -> None:  # noqa: B027 - optional hook: most targets hold nothing
        """Release what the target holds (connections, servers); idempotent."""

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def scan_all(surfaces: Sequence[Surface], secrets: Sequence[str], target: str = "target") -> ResidueReport:
    """Every surface's scan in one :class:`~memkit.residue.report.ResidueReport` (the
    one report type): a scanner that raises :class:`NotApplicable` is ``n/a``; one that
    raises ``OSError`` is not checked, with the error. ``report[name]`` is one
    surface's :class:`~memkit.residue.report.SurfaceResult`."""
    results: dict[str, SurfaceResult] = {}
    for s in surfaces:
        try:
            results[s.name] = s.scan(secrets)
        except NotApplicable as exc:
            results[s.name] = SurfaceResult(s.name, "n/a", reason=str(exc))
        except OSError as exc:
            results[s.name] = SurfaceResult(s.name, "not_checked", reason=f"{type(exc).__name__}: {exc}")
    return ResidueReport.from_results(target, list(secrets), results)


def load_target(spec: str, **options: Any) -> Any:
    """Load a target's factory result: a built-in name (:data:`BUILTIN`) or
    ``"package.module:factory"`` (the current directory is importable,
    :func:`memkit.runtime.import_spec`).

    The factory is called with the ``options`` its signature accepts (a factory with
    ``**kwargs`` gets all of them; options it does not take are dropped). Turn the
    result into a :class:`Target` with :func:`evaluators.targets.agent.as_target`.

    Args:
        spec: ``langgraph``, ``langmem``, ``mem0``, ``memkit`` or ``module:factory``.
        options: keyword options for the factory (``backend``, ``pg_uri``, ``pgdata``,
            ``mode`` ...).

    Returns:
        What the factory returns: a :class:`Target`; a compiled LangGraph graph; a
        mapping with ``agent`` and optionally ``store``, ``checkpointer``, ``feed``,
        ``forget``, ``also``, ``pgdata``; or a tuple ``(agent, feed[, forget[, store]])``.

    Raises:
        ValueError: ``spec`` is neither a built-in name nor ``module:factory``, or
            cannot be imported (:class:`memkit.runtime.SpecError`).
        ImportError: a built-in target's package is not installed (the message names
            the extra to install).
    """
    from memkit.runtime import SpecError, import_spec

    path = BUILTIN.get(spec, spec)
    if ":" not in path:
        raise ValueError(f"target {spec!r}: give a built-in name ({', '.join(BUILTIN)}) or module:factory")
    try:
        factory = import_spec(path, "target")
    except SpecError as exc:
        cause = exc.__cause__
        if spec in BUILTIN and isinstance(cause, ModuleNotFoundError):
            raise ImportError(f"target {spec!r} needs a package that is not installed ({cause.name}); "
                              f"install memkit's extra for it (pip install -e '.[{spec}]' or '.[postgres]')") from exc
        raise
    if not callable(factory):
        return factory
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return factory(**options)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return factory(**options)
    return factory(**{k: v for k, v in options.items() if k in params})
