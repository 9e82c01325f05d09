"""LongMemEval data: typed records, a validating (streaming) loader and sampling; the
synthetic generator of the same schema is :mod:`memkit.dataset.synthetic` (re-exported here).

LongMemEval (Wu et al., "LongMemEval: Benchmarking Chat Assistants on Long-Term
Interactive Memory", ICLR 2025) ships three JSON files, each a JSON array of 500
instances: ``longmemeval_oracle.json`` (only the evidence sessions),
``longmemeval_s_cleaned.json`` (~50 sessions per instance) and
``longmemeval_m_cleaned.json`` (~500 sessions, ~2.7 GB). Each instance has the keys

``question_id`` (str; ``_abs`` suffix = abstention question), ``question_type``
(one of :data:`QUESTION_TYPES`), ``question`` (str), ``answer`` (str or number),
``question_date`` (str, ``"2023/05/30 (Tue) 14:10"``), ``haystack_session_ids``,
``haystack_dates`` and ``haystack_sessions`` (three parallel lists; a session is a
list of turns ``{"role", "content", "has_answer"?}``) and ``answer_session_ids``.

The source study (arXiv 2606.10062, Setup) uses N = 50 instances sampled from the
oracle split; :func:`sample` draws such subsets reproducibly.

Public API: :func:`load`, :func:`iter_load`, :func:`sample`, :func:`synthetic`,
:func:`write_synthetic`, :class:`Instance`, :class:`Turn`, :class:`LongMemEvalError`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

__all__ = [
    "ABSTENTION_SUFFIX",
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_STREAM_THRESHOLD",
    "QUESTION_TYPES",
    "Instance",
    "LongMemEvalError",
    "Turn",
    "format_date",
    "iter_load",
    "load",
    "parse_date",
    "sample",
    "validate_instance",
]

QuestionType = Literal[
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
]

QUESTION_TYPES: tuple[str, ...] = get_args(QuestionType)
"""The six LongMemEval question types (Wu et al. 2025, Section 3)."""

ABSTENTION_SUFFIX = "_abs"
"""``question_id`` suffix marking an abstention (unanswerable) question."""

DEFAULT_STREAM_THRESHOLD = 64 * 1024 * 1024
"""Files larger than this many bytes are parsed incrementally (see :func:`iter_load`)."""

DEFAULT_CHUNK_CHARS = 4 * 1024 * 1024
"""Characters read per chunk when streaming."""

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DATE_RE = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) \(([A-Za-z]{3})\) (\d{2}):(\d{2})$")


class LongMemEvalError(ValueError):
    """A LongMemEval file or record is malformed.

    The message names the file, the instance (index and ``question_id`` where
    known), the field and what is wrong; the same facts are kept as attributes.

    Attributes:
        path: the file (``None`` for in-memory records).
        index: 0-based position of the instance in the file's array, if known.
        question_id: the instance's ``question_id``, if it could be read.
        field: dotted path of the offending field, e.g. ``haystack_sessions[3][2].role``.
        line, column: 1-based position of a JSON syntax error, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        index: int | None = None,
        question_id: str | None = None,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.index = index
        self.question_id = question_id
        self.field = field
        self.line = line
        self.column = column


# --------------------------------------------------------------------------- records


class Turn(BaseModel):
    """One chat turn: ``{"role", "content", "has_answer"?}``.

    ``has_answer`` is ``True`` on evidence turns in the official files and absent
    elsewhere (and absent everywhere in some re-packagings); it is kept absent on
    output when it was absent on input. Unknown extra keys are kept. Validation is
    strict: no type coercion (``"true"`` is not a boolean).
    """

    model_config = ConfigDict(strict=True, extra="allow")

    role: Literal["user", "assistant", "system"]
    content: str
    has_answer: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The turn in the official schema (keys that were never set are left out)."""
        return self.model_dump(exclude_unset=True)


class Instance(BaseModel):
    """One LongMemEval instance, with the official field names as attributes.

    Validation is strict (no coercion); ``haystack_session_ids``, ``haystack_dates``
    and ``haystack_sessions`` must have equal lengths. Unknown extra keys are kept
    so that :meth:`to_dict` gives back the record it was built from.
    """

    model_config = ConfigDict(strict=True, extra="allow")

    question_id: str = Field(min_length=1)
    question_type: QuestionType
    question: str
    answer: str | int | float
    question_date: str
    haystack_session_ids: list[str]
    haystack_dates: list[str]
    haystack_sessions: list[list[Turn]]
    answer_session_ids: list[str]

    @field_validator("haystack_sessions")
    @classmethod
    def _parallel_lengths(cls, value: list[list[Turn]], info: ValidationInfo) -> list[list[Turn]]:
        ids = info.data.get("haystack_session_ids")
        dates = info.data.get("haystack_dates")
        lengths = [len(x) for x in (ids, dates) if x is not None]
        if any(n != len(value) for n in lengths):
            raise ValueError(
                "haystack_session_ids, haystack_dates and haystack_sessions must have equal "
                f"lengths, got {len(ids) if ids is not None else '?'}, "
                f"{len(dates) if dates is not None else '?'} and {len(value)}"
            )
        return value

    @property
    def is_abstention(self) -> bool:
        """True for abstention questions (``question_id`` ends with ``_abs``)."""
        return self.question_id.endswith(ABSTENTION_SUFFIX)

    @property
    def answer_text(self) -> str:
        """The expected answer as a string (the official files hold some as numbers): a
        whole float is written without its fraction (``38.0`` → ``"38"``), as a reader
        would, so PR's rules match ``"You have 38 coins."``."""
        if isinstance(self.answer, float) and self.answer.is_integer():
            return str(int(self.answer))
        return str(self.answer)

    @property
    def has_labels(self) -> bool:
        """True when at least one turn carries ``has_answer: true``."""
        return any(t.has_answer is True for s in self.haystack_sessions for t in s)

    def sessions(self) -> Iterator[tuple[str, str, list[Turn]]]:
        """Yield ``(session_id, date, turns)`` for each haystack session, in file order."""
        yield from zip(
            self.haystack_session_ids, self.haystack_dates, self.haystack_sessions, strict=True
        )

    def to_dict(self) -> dict[str, Any]:
        """The instance in the official schema; ``Instance.model_validate(x.to_dict()) == x``."""
        return self.model_dump(exclude_unset=True)


# --------------------------------------------------------------------------- dates


def parse_date(text: str) -> _dt.datetime:
    """Parse a LongMemEval date such as ``"2023/05/30 (Tue) 14:10"`` (locale independent).

    Raises:
        LongMemEvalError: if ``text`` is not of that form or is not a valid date.
    """
    m = _DATE_RE.match(text)
    if m is None:
        raise LongMemEvalError(
            f"date {text!r} is not of the form 'YYYY/MM/DD (Day) HH:MM'", field="date"
        )
    y, mo, d, _, h, mi = m.groups()
    try:
        return _dt.datetime(int(y), int(mo), int(d), int(h), int(mi))
    except ValueError as exc:
        raise LongMemEvalError(f"date {text!r} is invalid: {exc}", field="date") from exc


def format_date(when: _dt.datetime) -> str:
    """Format a datetime as LongMemEval does: ``"2023/05/30 (Tue) 14:10"``."""
    return f"{when:%Y/%m/%d} ({_WEEKDAYS[when.weekday()]}) {when:%H:%M}"


# --------------------------------------------------------------------------- loading

_JSON_WS = " \t\n\r"
# An error within this many characters of the buffer's end may be due to a chunk cut.
_CUT_MARGIN = 16


class _ArrayReader:
    """Incremental reader of a top-level JSON array, one element at a time.

    Uses :meth:`json.JSONDecoder.raw_decode` on a sliding text buffer; the buffer
    grows geometrically while one element does not fit, so an element is decoded in
    amortised linear time and memory never holds much more than one element's text.
    With ``chunk_chars=None`` the whole file is read at once.
    """

    def __init__(self, fp: Any, path: Path, chunk_chars: int | None) -> None:
        self.fp = fp
        self.path = path
        self.chunk = chunk_chars
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.base_line = 1  # line of buf[0]
        self.base_col = 1  # column of buf[0]
        self.index = 0  # index of the next element
        self.decoder = json.JSONDecoder()

    # -- buffer management
    def _fill(self, at_least: int = 0) -> None:
        if self.eof:
            return
        if self.pos:
            consumed = self.buf[: self.pos]
            newlines = consumed.count("\n")
            if newlines:
                self.base_line += newlines
                self.base_col = self.pos - consumed.rfind("\n")
            else:
                self.base_col += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        try:
            new = self.fp.read() if self.chunk is None else self.fp.read(max(self.chunk, at_least))
        except UnicodeDecodeError as exc:
            raise LongMemEvalError(
                f"{self.path}: not valid UTF-8 text near element {self.index}: {exc}",
                path=self.path,
                index=self.index,
            ) from exc
        if not new:
            self.eof = True
        else:
            self.buf += new
            if self.chunk is None:
                self.eof = True

    def _skip_ws(self) -> None:
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _JSON_WS:
                self.pos += 1
            if self.pos < n or self.eof:
                return
            self._fill()

    def _peek(self) -> str:
        self._skip_ws()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def _error(self, msg: str, pos: int, *, in_element: bool = True) -> LongMemEvalError:
        before = self.buf[:pos]
        newlines = before.count("\n")
        line = self.base_line + newlines
        col = pos - before.rfind("\n") if newlines else self.base_col + pos
        where = f" in instance {self.index}" if in_element else ""
        return LongMemEvalError(
            f"{self.path}: invalid JSON{where} at line {line}, column {col}: {msg}",
            path=self.path,
            index=self.index if in_element else None,
            line=line,
            column=col,
        )

    def _decode(self) -> Any:
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf) - _CUT_MARGIN
                if cut and not self.eof:
                    self._fill(len(self.buf) - self.pos)
                    continue
                raise self._error(exc.msg, exc.pos) from None
            if end >= len(self.buf) and not self.eof:
                # A bare number may continue in the next chunk: decode again with more text.
                self._fill(len(self.buf) - self.pos)
                continue
            self.pos = end
            return obj

    # -- the array
    def __iter__(self) -> Iterator[tuple[int, Any]]:
        c = self._peek()
        if c == "":
            raise self._error("empty file, expected a JSON array of instances", self.pos, in_element=False)
        if c != "[":
            raise self._error(
                f"expected a JSON array of instances ('['), found {c!r}", self.pos, in_element=False
            )
        self.pos += 1
        if self._peek() == "]":
            self.pos += 1
        else:
            while True:
                if self._peek() == "":
                    raise self._error("unexpected end of file (truncated?)", self.pos)
                obj = self._decode()
                yield self.index, obj
                self.index += 1
                c = self._peek()
                if c == ",":
                    self.pos += 1
                    if self._peek() == "]":
                        raise self._error("trailing comma before ']'", self.pos)
                    continue
                if c == "]":
                    self.pos += 1
                    break
                if c == "":
                    raise self._error("unexpected end of file: array not closed (truncated?)", self.pos)
                raise self._error(f"expected ',' or ']' after an instance, found {c!r}", self.pos)
        if self._peek() != "":
            raise self._error("extra data after the top-level array", self.pos, in_element=False)


_KNOWN_FIELDS = frozenset(Instance.model_fields) | frozenset(Turn.model_fields)


def _field_path(loc: tuple[int | str, ...]) -> str:
    """``('haystack_sessions', 3, 2, 'role')`` -> ``haystack_sessions[3][2].role``;
    pydantic's union/validator tags (``'str'``, ``'int'``...) are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _KNOWN_FIELDS:
            out += ("." if out else "") + part
    return out or "<instance>"


def _describe(exc: ValidationError) -> tuple[str, str]:
    """(first field, readable message) for a pydantic error, grouped by field."""
    groups: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False):
        field = _field_path(err["loc"])
        if err["type"] == "missing":
            text = "missing key"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"].endswith("_type") or err["type"] == "literal_error":
                msg += f" (got {type(err['input']).__name__} {_short(err['input'])})"
            text = msg
        groups.setdefault(field, [])
        if text not in groups[field]:
            groups[field].append(text)
    parts = [f"field '{f}': {' / '.join(msgs)}" for f, msgs in list(groups.items())[:3]]
    if len(groups) > 3:
        parts.append(f"and {len(groups) - 3} more field(s)")
    return next(iter(groups)), "; ".join(parts)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validate_instance(
    record: Any, *, index: int | None = None, path: str | os.PathLike[str] | None = None
) -> Instance:
    """Validate one parsed JSON record as an :class:`Instance`.

    Args:
        record: the parsed JSON value (should be a dict in the official schema).
        index: its position in the file, for the error message.
        path: the file it came from, for the error message.

    Raises:
        LongMemEvalError: naming file, index, ``question_id`` and field.
    """
    qid = record.get("question_id") if isinstance(record, dict) else None
    qid = qid if isinstance(qid, str) else None
    where = f"{path}: " if path is not None else ""
    where += f"instance {index}" if index is not None else "instance"
    where += f" (question_id={qid!r})" if qid is not None else " (question_id unknown)"
    if not isinstance(record, dict):
        raise LongMemEvalError(
            f"{where}: expected a JSON object, got {type(record).__name__}",
            path=path,
            index=index,
            field="<instance>",
        )
    try:
        return Instance.model_validate(record)
    except ValidationError as exc:
        field, text = _describe(exc)
        raise LongMemEvalError(
            f"{where}: {text}", path=path, index=index, question_id=qid, field=field
        ) from None


def iter_load(
    path: str | os.PathLike[str],
    *,
    stream_threshold: int = DEFAULT_STREAM_THRESHOLD,
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
) -> Iterator[Instance]:
    """Yield the validated instances of a LongMemEval JSON file one at a time.

    Files larger than ``stream_threshold`` bytes are read in chunks of
    ``chunk_chars`` characters and decoded element by element, so only one
    instance's text and parsed dict are held at once (LongMemEval_M is ~2.7 GB);
    smaller files are read whole. Both paths give the same instances and errors.

    Args:
        path: a ``longmemeval_{oracle,s_cleaned,m_cleaned}.json``-style file.
        stream_threshold: size in bytes above which the file is streamed.
        chunk_chars: characters per read when streaming (> 0).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        LongMemEvalError: invalid JSON (with line/column), a top level that is not
            an array, a record violating the schema (naming index, ``question_id``
            and field), or a duplicate ``question_id``.
    """
    if chunk_chars <= 0:
        raise ValueError(f"chunk_chars must be positive, got {chunk_chars}")
    p = Path(path)
    size = p.stat().st_size
    seen: dict[str, int] = {}
    with p.open(encoding="utf-8") as fp:
        reader = _ArrayReader(fp, p, chunk_chars if size > stream_threshold else None)
        for index, record in reader:
            inst = validate_instance(record, index=index, path=p)
            if inst.question_id in seen:
                raise LongMemEvalError(
                    f"{p}: instance {index} (question_id={inst.question_id!r}): field "
                    f"'question_id': duplicate of instance {seen[inst.question_id]}",
                    path=p,
                    index=index,
                    question_id=inst.question_id,
                    field="question_id",
                )
            seen[inst.question_id] = index
            yield inst


def load(
    path: str | os.PathLike[str],
    *,
    stream_threshold: int = DEFAULT_STREAM_THRESHOLD,
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
) -> list[Instance]:
    """Load and validate a LongMemEval JSON file (oracle, S or M) as a list of instances.

    See :func:`iter_load` for the arguments, streaming behaviour and raised errors.
    """
    return list(iter_load(path, stream_threshold=stream_threshold, chunk_chars=chunk_chars))


# --------------------------------------------------------------------------- sampling


def sample(
    instances: Sequence[Instance], n: int, seed: int, stratify: bool = True
) -> list[Instance]:
    """Draw ``n`` distinct instances reproducibly (the study samples N = 50, Setup).

    With ``stratify=True`` each ``question_type`` gets a proportional share:
    ``floor(n * size / total)``, and the leftover slots go to the types with the
    largest remainders (ties broken by a seeded random order); within a type the
    instances are drawn uniformly without replacement by ``numpy.random.default_rng(seed)``.
    The result keeps the input order.

    Args:
        instances: the population.
        n: how many to draw, ``0 <= n <= len(instances)``.
        seed: seed of the numpy Generator.
        stratify: allocate by question type (True) or draw uniformly (False).

    Raises:
        ValueError: if ``n`` is negative or larger than ``len(instances)``.
    """
    total = len(instances)
    if not 0 <= n <= total:
        raise ValueError(f"cannot sample n={n} instances from a population of {total}")
    rng = np.random.default_rng(seed)
    if not stratify:
        picked = rng.choice(total, size=n, replace=False)
        return [instances[i] for i in sorted(int(i) for i in picked)]
    groups: dict[str, list[int]] = {}
    for i, inst in enumerate(instances):
        groups.setdefault(inst.question_type, []).append(i)
    names = sorted(groups)
    base = {g: n * len(groups[g]) // total for g in names}
    remainder = {g: n * len(groups[g]) % total for g in names}
    left = n - sum(base.values())
    tiebreak = rng.permutation(len(names))
    order = sorted(range(len(names)), key=lambda j: (-remainder[names[j]], int(tiebreak[j])))
    for j in order[:left]:
        base[names[j]] += 1
    chosen: list[int] = []
    for g in names:
        members = groups[g]
        picked = rng.choice(len(members), size=base[g], replace=False)
        chosen.extend(members[int(k)] for k in picked)
    return [instances[i] for i in sorted(chosen)]
