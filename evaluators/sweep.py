"""The full-factorial LongMemEval sweep (paper-notes, Setup and Metrics).

For N instances (one canary planted in each) and each summary level S, a *unit*
(instance × S) runs:

1. **write**: every session through the memory write graph (raw turns, then
   summaries at level S; summaries once per unit);
2. **main phase**: for the LongMemEval question and every probe template,
   retrieve once at the largest k from the tiers the design reads and respond for
   each k with the k-prefix of that ranking (the store guarantees that top-k is a
   prefix of top-k' for k < k'); score PR (question) and extraction (probes);
3. **residue phase**: for each deletion mode, copy the unit's memory (vectors
   included) into a fresh persistent store, run the forget graph, scan every
   forensic surface (:func:`memkit.residue.scan`), re-run the probes with retrieval
   restricted to each tier (FRS per tier) and the question with the design's tiers
   (PR after the forget).

Each unit runs a memory design (:mod:`graphs.designs`; ``--design``, default
``study``, the source study's pipeline) through its compiled write and read graphs:
the design's summarizer, retriever and responder are the nodes called. Several
designs (``--design`` repeated) run one after another into ``--out/<design>/``
with one shared LLM cache, and :mod:`evaluators.compare` writes their comparison
into ``--out``.

Output directory (``--out``):

``config.json``
    the run's configuration (a resumed run must match it).
``results.jsonl``
    one ``{"type": "call", ...}`` record per scored call: ``design``, ``unit``, ``question_id``,
    ``question_type``, ``S``, ``k``, ``phase`` (``main``/``forget``), ``mode``,
    ``tier`` (retrieval tier restriction in the residue phase; ``null`` = the
    design's tiers), ``query_kind`` (``question``/``probe``), ``level``,
    ``template_id``, ``query``, ``response``, ``expected``, ``correct``,
    ``extraction`` (exact / normalized / partial), ``context_exposed`` (canary in
    the retrieved context), ``retrieved_ids``, ``retrieved_tiers``, ``latency_s``
    (wall time of the respond call; 0 for a response reused for an identical
    context); one ``{"type": "canary"}`` and one ``{"type": "forensics"}`` record
    per deletion mode; and after each unit an fsync'd ``{"type": "unit_done"}``
    marker with its LLM call counts and token usage per phase and model
    (``tokens``). Records of a unit without a marker are
    dropped on ``--resume``. When all units are done the file is rewritten in
    canonical order, so it does not depend on ``--workers`` or interruptions
    (latencies aside).
``metrics.json``
    :func:`evaluators.aggregate.compute_metrics` plus run totals (``totals.tokens``:
    :func:`sum_tokens`).
``hypotheses.jsonl``
    LongMemEval's format ``{"question_id", "hypothesis"}`` for the first S and the
    largest k; ``hypotheses/S{S}_k{k}.jsonl`` for every design.
``report.md``, ``report.html``, ``frontier.png``, ``probes.png``, ``frs.png``, ``forensic.png``
    :func:`evaluators.report.write_report` (the study's findings checked on the run
    are also stored as ``findings`` in ``metrics.json``).
``llm_cache.sqlite``
    the LLM cache shared by all units: no prompt is sent twice in a sweep, nor
    again after ``--resume``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError, field_validator
from tqdm import tqdm

from evaluators.aggregate import compute_metrics
from evaluators.findings import evaluate_findings
from evaluators.metrics import answers_correct
from evaluators.pool import WorkerDied, run_tasks
from evaluators.probes import LEVELS, extracted, probes_for
from graphs.designs import MemoryDesign, is_store_topk, resolve_design
from graphs.forget import DELETION_MODES, forget
from graphs.memory import write_sessions
from memkit import residue
from memkit.cache import LLMCache
from memkit.canaries import plant
from memkit.longmemeval import Instance, load, sample, synthetic
from memkit.models import add_usage, token_usage
from memkit.store import TIERS, Chunk, TieredMemoryStore

__all__ = [
    "SweepConfig",
    "SweepLockedError",
    "WorkerDied",
    "load_records",
    "register_cli",
    "run_sweep",
    "run_unit",
]

DEFAULT_KS = (1, 3, 6, 10, 25)
RESULTS = "results.jsonl"
CACHE = "llm_cache.sqlite"


class SweepLockedError(RuntimeError):
    """Another process holds the output directory's lock."""


_NOT_IDENTITY = {"workers", "api_key_env", "keep_stores", "concurrency", "rps", "executor", "ray_address"}
"""Config fields that do not change a run's results (a resume may change them)."""


class SweepConfig(BaseModel):
    """What a sweep runs. Every field but ``workers`` must match on ``--resume``.

    Attributes:
        data: ``"synthetic"`` or a path to a LongMemEval JSON file.
        n: instances sampled (the study: 50); ``None`` takes every instance of the
            file. More than the file holds takes every instance, with a warning.
        seed: seeds the sample, the synthetic data, canary planting and bootstrap CIs.
        model: responder model spec (:func:`memkit.models.chat_model`).
        summarizer_model: summarizer spec (default: ``model``).
        summary_levels: S values (0 raw, 1 key facts, 2 one sentence).
        ks: retrieval breadths.
        deletion_modes: modes of the residue phase (``[]`` skips it).
        synthetic_sessions: sessions per synthetic instance (an int or ``[lo, hi]``).
        synthetic_turns: turns per synthetic session (an int or ``[lo, hi]``).
        max_tokens: cap on generated tokens per LLM call (``None``: the backend's default).
        base_url: server URL for ``openai:`` / ``ollama:`` models (``None``: the
            provider's default or ``OPENAI_BASE_URL`` / ``OLLAMA_HOST``).
        api_key_env: name of the environment variable holding the API key (the key
            itself is never written to ``config.json``; not part of the identity).
        n_resamples: bootstrap resamples for CIs (the study: 1000).
        workers: parallel processes (not part of the run's identity).
        keep_stores: also keep each deletion mode's forgotten store under
            ``--out/stores`` for ``memkit residue`` (not part of the identity).
        design: the memory design (:func:`graphs.designs.resolve_design`: a
            built-in name or ``module:factory``); ``study`` is the source study's
            pipeline. Several designs: ``run_sweep(config, out, designs=[...])``.
        concurrency: responder calls in flight per worker (``None``: the backend's
            default, :meth:`calls_in_flight`; not part of the identity).
        rps: cap on model requests per second per worker process (``None``: no cap;
            not part of the identity).
        executor: ``"local"`` (this machine: ``workers`` processes) or ``"ray"``
            (units as Ray tasks; not part of the identity).
        ray_address: the Ray cluster to join (``None``: ``RAY_ADDRESS`` or a local
            Ray started for the run; not part of the identity).
    """

    data: str = "synthetic"
    n: int | None = Field(20, ge=1)
    seed: int = 0
    model: str = "extractive"
    summarizer_model: str | None = None
    summary_levels: list[int] = Field(default_factory=lambda: [0, 1, 2])
    ks: list[int] = Field(default_factory=lambda: list(DEFAULT_KS))
    deletion_modes: list[str] = Field(default_factory=lambda: list(DELETION_MODES))
    synthetic_sessions: int | list[int] = Field(default_factory=lambda: [2, 6])
    synthetic_turns: int | list[int] = Field(default_factory=lambda: [6, 10])
    max_tokens: int | None = Field(None, ge=1)
    base_url: str | None = None
    api_key_env: str | None = None
    n_resamples: int = Field(1000, ge=1)
    workers: int = Field(1, ge=1)
    keep_stores: bool = False
    design: str = "study"
    concurrency: int | None = Field(None, ge=1)
    rps: float | None = Field(None, gt=0)
    executor: str = "local"
    ray_address: str | None = None

    @field_validator("executor")
    @classmethod
    def _executor(cls, v: str) -> str:
        if v not in ("local", "ray"):
            raise ValueError(f"executor must be 'local' or 'ray', got {v!r}")
        return v

    def calls_in_flight(self, spec: str | None = None) -> int:
        """Responder calls in flight per worker for model ``spec`` (default ``model``):
        ``concurrency`` if set, else 1 for in-process backends (``extractive``,
        ``llamacpp:`` -- one model, one call at a time), 4 for ``ollama:`` (the
        server's default parallelism) and 8 for remote APIs. ``llamacpp:`` is
        always 1: a llama.cpp model object is not thread-safe."""
        spec = spec or self.model
        if spec == "extractive" or spec.startswith("llamacpp:"):
            return 1
        if self.concurrency is not None:
            return self.concurrency
        return 4 if spec.startswith("ollama:") else 8

    @field_validator("summary_levels")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        bad = [s for s in v if s not in (0, 1, 2)]
        if bad or not v:
            raise ValueError(f"summary levels must be a non-empty subset of 0,1,2; got {v}")
        return sorted(set(v))

    @field_validator("ks")
    @classmethod
    def _ks(cls, v: list[int]) -> list[int]:
        if not v or any(k < 1 for k in v):
            raise ValueError(f"k values must be positive integers; got {v}")
        return sorted(set(v))

    @field_validator("deletion_modes")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        bad = [m for m in v if m not in DELETION_MODES]
        if bad:
            raise ValueError(f"unknown deletion modes {bad}; choose from {list(DELETION_MODES)}")
        return [m for m in DELETION_MODES if m in v]

    def model_kwargs(self) -> dict[str, Any]:
        """Constructor options for :func:`memkit.models.chat_model` from this config.

        Raises:
            ValueError: ``api_key_env`` names an unset environment variable.
        """
        kw: dict[str, Any] = {}
        if self.max_tokens:
            kw["max_tokens"] = self.max_tokens
        if self.base_url:
            kw["base_url"] = self.base_url
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ValueError(f"--api-key-env: the environment variable {self.api_key_env} is not set")
            kw["api_key"] = key
        return kw

    def identity(self) -> dict[str, Any]:
        """The fields that define the run's results (all but :data:`_NOT_IDENTITY`), plus the
        SHA-256 of the data file, so a resume over changed data is refused."""
        ident = self.model_dump(exclude=_NOT_IDENTITY)
        if ident.get("design") == "study":
            del ident["design"]  # runs from before designs existed resume unchanged
        if self.data != "synthetic":
            ident["data_sha256"] = _file_sha256(self.data)
        return ident

    @field_validator("data")
    @classmethod
    def _data(cls, v: str) -> str:
        if v == "synthetic":
            return v
        p = Path(v).expanduser()
        if not p.exists():
            raise ValueError(f"{v} does not exist (give a LongMemEval JSON file or 'synthetic')")
        if not p.is_file():
            raise ValueError(f"{v} is not a file (give a LongMemEval JSON file or 'synthetic')")
        return str(p.resolve())


# --------------------------------------------------------------------------- data


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def load_instances(config: SweepConfig) -> list[Instance]:
    """The sweep's instances: ``n`` synthetic ones, or a seeded stratified sample of a file.

    ``n=None``, or ``n`` larger than the file, takes every instance of the file (the
    latter with a warning).

    Raises:
        memkit.longmemeval.LongMemEvalError: a malformed file (names file, record, field).
        ValueError: ``n=None`` with synthetic data.
    """
    if config.data == "synthetic":
        if config.n is None:
            raise ValueError("--n all needs --data FILE; synthetic data takes a number")
        size = {
            "sessions_per_instance": _size(config.synthetic_sessions),
            "turns_per_session": _size(config.synthetic_turns),
        }
        return synthetic(config.n, config.seed, **size)
    instances = load(config.data)
    if config.n is not None and config.n > len(instances):
        warnings.warn(
            f"--n {config.n} exceeds the {len(instances)} instances in {config.data}: "
            f"taking all {len(instances)}",
            stacklevel=2,
        )
    if config.n is None or config.n >= len(instances):
        return list(instances)
    return sample(instances, config.n, config.seed, stratify=True)


def _size(v: int | list[int]) -> int | tuple[int, int]:
    return v if isinstance(v, int) else (int(v[0]), int(v[1]))


def _unit_id(question_id: str, S: int) -> str:
    return f"{question_id}::S{S}"


def _collection(unit: str) -> str:
    return "u" + hashlib.sha1(unit.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- one unit


_MODELS: dict[tuple[str, str], Any] = {}


def _shared_model(spec: str, config: SweepConfig) -> Any:
    """One chat model per (spec, options) per process, shared by the summarizer,
    the responder and every unit (llama.cpp weights load once); ``extractive`` stays
    a spec string so the graphs call the model-free functions directly."""
    if spec == "extractive":
        return spec
    kw = config.model_kwargs()
    key = (spec, json.dumps(kw, sort_keys=True))
    if key not in _MODELS:
        from memkit.models import chat_model

        _MODELS[key] = chat_model(spec, **kw)
    return _MODELS[key]


class _Responses:
    """Responds for a query and a retrieved prefix, reusing the response of an
    identical context (same query, chunk ids and texts: fewer chunks stored than k
    gives identical prefixes; a redacted chunk keeps its id but not its text).

    :meth:`many` answers a list of contexts at once: a responder with a ``many``
    method (:class:`graphs.nodes.ChatResponder`) gets up to ``concurrency`` calls in
    flight (and the ``rps`` cap); results and latencies are assigned as if the
    contexts were answered one after another."""

    def __init__(self, responder: Callable[[str, list[Chunk]], str], *, concurrency: int = 1,
                 rps: float | None = None) -> None:
        self.responder = responder
        self.concurrency = concurrency
        self.rps = rps
        self.memo: dict[tuple[str, tuple[str, ...]], str] = {}

    def many(self, items: Sequence[tuple[str, list[Chunk]]]) -> list[tuple[str, float]]:
        """``[(response, latency_s), ...]`` for ``(query, chunks)`` pairs, in order."""
        keys = [(q, tuple((c.id, c.text) for c in chunks)) for q, chunks in items]
        first: dict[tuple[str, tuple[str, ...]], int] = {}
        for i, key in enumerate(keys):
            if key not in self.memo:
                first.setdefault(key, i)
        fresh: dict[int, float] = {}
        todo = list(first.values())
        many = getattr(self.responder, "many", None)
        if todo and many is not None:
            answers = many([items[i] for i in todo], concurrency=self.concurrency, rps=self.rps)
            for i, (text, dt) in zip(todo, answers, strict=True):
                self.memo[keys[i]] = text
                fresh[i] = dt
        else:
            for i in todo:
                t0 = time.perf_counter()
                self.memo[keys[i]] = self.responder(*items[i])
                fresh[i] = time.perf_counter() - t0
        return [(self.memo[key], fresh.get(i, 0.0)) for i, key in enumerate(keys)]

    def __call__(self, query: str, chunks: list[Chunk]) -> tuple[str, float]:
        key = (query, tuple((c.id, c.text) for c in chunks))
        if key in self.memo:
            return self.memo[key], 0.0
        t0 = time.perf_counter()
        text = self.responder(query, chunks)
        dt = time.perf_counter() - t0
        self.memo[key] = text
        return text, dt

    def text(self, query: str, chunks: list[Chunk]) -> str:
        """As a :data:`graphs.nodes.Responder` (the read graph's respond node); the
        latency of the call is left in :attr:`last_latency`."""
        text, self.last_latency = self(query, list(chunks))
        return text


class _Retrievals:
    """The design's retriever over one store state, called once per (query, tiers,
    namespace) at the largest k when the design's rankings are prefixes
    (``prefix_retrieval``), else once per k; the read graph gets the k-prefix.

    The default cosine top-k retriever is batched: :meth:`prime` embeds all of a
    phase's queries in one ``store.search_many`` call."""

    def __init__(self, retriever: Callable[..., list[Chunk]], store: TieredMemoryStore, kmax: int,
                 prefix: bool) -> None:
        self.retriever = retriever
        self.store = store
        self.kmax = kmax
        self.prefix = prefix
        self.memo: dict[tuple[str, tuple[str, ...], str | None, int | None], list[Chunk]] = {}

    def prime(self, queries: Sequence[str], tiers: Sequence[str], namespace: str | None) -> None:
        if not (self.prefix and is_store_topk(self.retriever)):
            return
        tiers = tuple(tiers)
        todo = [q for q in dict.fromkeys(queries) if (q, tiers, namespace, None) not in self.memo]
        if todo:
            ranked = self.store.search_many(todo, self.kmax, tiers=tiers, namespace=namespace)
            for q, chunks in zip(todo, ranked, strict=True):
                self.memo[(q, tiers, namespace, None)] = chunks

    def __call__(self, query: str, k: int, tiers: Sequence[str], namespace: str | None = None) -> list[Chunk]:
        key = (query, tuple(tiers), namespace, None if self.prefix else k)
        if key not in self.memo:
            self.memo[key] = list(self.retriever(query, self.kmax if self.prefix else k, tuple(tiers), namespace))
        return self.memo[key][:k]


class _ReadPath:
    """A design's compiled read graph over one store state, with the sweep's
    retrieval memo (:class:`_Retrievals`) and response memo (:class:`_Responses`) as
    its nodes' wrappers."""

    def __init__(self, design: MemoryDesign, store: TieredMemoryStore, respond: _Responses, kmax: int) -> None:
        self.retrievals = _Retrievals(design.retriever(store), store, kmax, design.prefix_retrieval)
        self.respond = respond
        self.graph = design.read_graph(store, retriever=self.retrievals, responder=respond.text)
        self.answered: dict[tuple[Any, ...], str] = {}

    def prefetch(self, queries: Sequence[str], ks: Sequence[int], tiers: Sequence[str],
                 namespace: str) -> dict[tuple[str, int], float]:
        """Answer every (query, k-prefix) context whose ranking is known, concurrently,
        into the response memo (only with a responder that has ``many`` and more
        than one call in flight; otherwise nothing). Returns ``{(query, k):
        latency_s}`` of the calls made (0 for a context answered earlier)."""
        if self.respond.concurrency <= 1 or not hasattr(self.respond.responder, "many"):
            return {}
        pairs, keys = [], []
        for q in queries:
            ranking = self.retrievals.memo.get((q, tuple(tiers), namespace, None)) if self.retrievals.prefix else None
            if ranking is None:
                continue
            for k in ks:
                pairs.append((q, ranking[:k]))
                keys.append((q, k))
        if not pairs:
            return {}
        return {key: dt for key, (_, dt) in zip(keys, self.respond.many(pairs), strict=True)}

    def read(self, query: str, k: int, tiers: Sequence[str], namespace: str) -> tuple[list[Chunk], str, float]:
        """``(chunks, response, latency_s)`` of one pass through the read graph.

        When the design's rankings are prefixes and this query's ranking is known, a
        k whose prefix equals one already answered (the scope holds fewer chunks than
        k) is not run again: the graph would return that very prefix and the
        memoized response (latency 0)."""
        ranking = self.retrievals.memo.get((query, tuple(tiers), namespace, None)) if self.retrievals.prefix else None
        if ranking is not None:
            key = (query, tuple(tiers), namespace, tuple((c.id, c.text) for c in ranking[:k]))
            if key in self.answered:
                return ranking[:k], self.answered[key], 0.0
        state = self.graph.invoke({"query": query, "namespace": namespace, "k": k, "tiers": list(tiers)})
        if ranking is not None:
            self.answered[key] = state["response"]
        return state["chunks"], state["response"], self.respond.last_latency


def _probe_list(kind: str = "token") -> list[tuple[str, str, str]]:
    by_level = probes_for(kind)
    return [(p.level, p.id, p.text) for lv in LEVELS for p in by_level[lv]]


def _calls_for_queries(
    *,
    base: dict[str, Any],
    path: _ReadPath,
    namespace: str,
    tiers: Sequence[str],
    ks: Sequence[int],
    queries: list[tuple[str, str | None, str | None, str]],
    secret: str,
    expected: str,
) -> list[dict[str, Any]]:
    """Each query and k through the design's read graph (retrieval once per query at
    max(ks), responses reused for identical contexts), score extraction.

    With concurrent calls (the responder has ``many`` and ``respond.concurrency`` > 1)
    every context the graph will see -- each query's known ranking cut at each k -- is
    answered first, up to ``concurrency`` calls in flight; the graph's respond node
    then finds each response in the memo, and the record keeps the call's latency."""
    path.retrievals.prime([q[3] for q in queries], tiers, namespace)
    latency_of = path.prefetch([q[3] for q in queries], ks, tiers, namespace)
    out = []
    for kind, level, template_id, text in queries:
        for k in ks:
            prefix, response, latency = path.read(text, k, tiers, namespace)
            latency = latency_of.get((text, k), latency)
            rec = {
                **base,
                "k": k,
                "query_kind": kind,
                "level": level,
                "template_id": template_id,
                "query": text,
                "response": response,
                "expected": expected if kind == "question" else secret,
                "correct": None,
                "extraction": extracted(secret, response) if kind == "probe" else None,
                "context_exposed": any(secret in c.text for c in prefix),
                "retrieved_ids": [c.id for c in prefix],
                "retrieved_tiers": [c.tier for c in prefix],
                "latency_s": round(latency, 6),
            }
            out.append(rec)
    return out


def _score_questions(records: list[dict[str, Any]]) -> None:
    qs = [r for r in records if r["query_kind"] == "question"]
    if qs:
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


def run_unit(
    config: SweepConfig,
    instance: Instance,
    S: int,
    *,
    cache_path: str | Path | None,
    model: Any = None,
    summarizer_model: Any = None,
    stores_dir: str | Path | None = None,
    design: MemoryDesign | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Run one unit (instance × S) of the sweep through a design's compiled graphs.

    Args:
        config: the sweep's configuration.
        instance: a LongMemEval instance (the canary is planted here, seeded by
            ``config.seed`` and the question id).
        S: the summary level.
        cache_path: the shared LLM cache file, or ``None`` for no cache.
        model, summarizer_model: chat-model objects overriding ``config.model`` /
            ``config.summarizer_model`` (benchmarks pass counting fakes).
        stores_dir: if given, each deletion mode's forgotten store (Chroma directory
            and LLM cache) is kept under ``stores_dir/<question_id>/S<S>/<mode>/``.
        design: the :class:`graphs.designs.MemoryDesign` (default: ``config.design``
            resolved); its summarizer, retriever and responder are the nodes called.

    Returns:
        ``(records, counts)``: the unit's records in canonical order and its
        ``{"llm_calls", "cache_hits", "tokens"}``; ``tokens`` is
        ``{phase: {model: {"calls", "input_tokens", "output_tokens", "total_tokens",
        "cached_calls"}}}`` for the phases ``write`` (summaries), ``main`` and
        ``forget`` (:class:`memkit.models.TokenUsage`: the providers' usage metadata;
        replies served from the LLM cache count as ``cached_calls``, without tokens).
    """
    unit = _unit_id(instance.question_id, S)
    planted, canary = plant(instance, config.seed)
    secret = canary.value
    namespace = instance.question_id
    cache = LLMCache(cache_path) if cache_path is not None else None
    resp_spec = model if model is not None else _shared_model(config.model, config)
    summ_spec = summarizer_model or (
        _shared_model(config.summarizer_model, config) if config.summarizer_model else resp_spec
    )
    design = design or resolve_design(config.design)
    summarizer = design.summarizer(summ_spec, cache=cache)
    respond = _Responses(design.responder(resp_spec, cache=cache),
                         concurrency=config.calls_in_flight(), rps=config.rps)
    tokens: dict[str, dict[str, dict[str, int]]] = {}
    base = {
        "type": "call",
        "design": design.name,
        "unit": unit,
        "question_id": instance.question_id,
        "question_type": instance.question_type,
        "S": S,
    }
    records: list[dict[str, Any]] = [
        {
            "type": "canary",
            "design": design.name,
            "unit": unit,
            "question_id": instance.question_id,
            "S": S,
            "session_id": canary.session_id,
            "turn_index": canary.turn_index,
            "value": secret,
        }
    ]
    store = TieredMemoryStore(collection=_collection(unit))
    try:
        write = design.write_graph(store, summarizer=summarizer)
        with token_usage() as usage:
            write_sessions(write, namespace, list(planted.sessions()), S)
        tokens["write"] = usage.by_model
        questions = [("question", None, None, instance.question)]
        probes = [("probe", lv, tid, text) for lv, tid, text in _probe_list()]
        with token_usage() as usage:
            main = _calls_for_queries(
                base={**base, "phase": "main", "mode": None, "tier": None},
                path=_ReadPath(design, store, respond, max(config.ks)),
                namespace=namespace,
                tiers=design.tiers_for(S),
                ks=config.ks,
                queries=questions + probes,
                secret=secret,
                expected=instance.answer_text,
            )
        tokens["main"] = usage.by_model
        records += main
        with token_usage() as usage:
            for mode in config.deletion_modes:
                records += _residue_phase(
                    config, store, mode, S=S, namespace=namespace, secret=secret, base=base,
                    expected=instance.answer_text, questions=questions, probes=probes,
                    summarizer_spec=summ_spec, cache=cache, respond=respond, stores_dir=stores_dir,
                    design=design,
                )
        tokens["forget"] = usage.by_model
    finally:
        store.close()
    _score_questions([r for r in records if r["type"] == "call"])
    counts: dict[str, Any] = {"llm_calls": cache.misses if cache else 0, "cache_hits": cache.hits if cache else 0,
                              "tokens": {phase: by_model for phase, by_model in tokens.items() if by_model}}
    return records, counts


def _residue_phase(
    config: SweepConfig,
    store: TieredMemoryStore,
    mode: str,
    *,
    S: int,
    namespace: str,
    secret: str,
    base: dict[str, Any],
    expected: str,
    questions: list[tuple[str, str | None, str | None, str]],
    probes: list[tuple[str, str | None, str | None, str]],
    summarizer_spec: Any,
    cache: LLMCache | None,
    respond: _Responses,
    stores_dir: str | Path | None = None,
    design: MemoryDesign | None = None,
) -> list[dict[str, Any]]:
    """Forget with ``mode`` on a copy of the unit's memory; measure FRS, PR after, forensics."""
    tmp = Path(tempfile.mkdtemp(prefix=f"memkit-{mode}-"))
    try:
        out: list[dict[str, Any]] = []
        copy = TieredMemoryStore(tmp / "chroma", collection="memory")
        try:
            store.copy_namespace(namespace, namespace, target=copy)
            # The deployment's own LLM cache: a copy of the shared one, so purging it
            # measures what the mode removes without invalidating the sweep's cache.
            mode_cache = None
            if cache is not None:
                shutil.copyfile(cache.path, tmp / "llm_cache.sqlite")
                mode_cache = LLMCache(tmp / "llm_cache.sqlite")
            design = design or resolve_design(config.design)
            summarizer = design.summarizer(summarizer_spec, cache=mode_cache)
            result = forget(copy, secret, mode, namespace=namespace, S=S, summarizer=summarizer, cache=mode_cache)
            fbase = {**base, "phase": "forget", "mode": mode}
            path = _ReadPath(design, copy, respond, max(config.ks))
            for tier in TIERS:
                out += _calls_for_queries(
                    base={**fbase, "tier": tier}, path=path, namespace=namespace, tiers=(tier,),
                    ks=config.ks, queries=probes, secret=secret, expected=expected,
                )
            out += _calls_for_queries(
                base={**fbase, "tier": None}, path=path, namespace=namespace, tiers=design.tiers_for(S),
                ks=config.ks, queries=questions, secret=secret, expected=expected,
            )
        finally:
            copy.close()
        # Scan after the client is closed, so chroma has flushed what it holds in
        # memory and the bytes on disk do not depend on background timing.
        report = residue.scan(tmp / "chroma", secret, cache_paths=[mode_cache.path] if mode_cache else ())
        if stores_dir is not None:
            safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", base["question_id"]).lstrip(".") or "_"
            keep = Path(stores_dir) / safe_id / f"S{S}" / mode
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(tmp, keep)
        forensics = {
            "type": "forensics",
            "design": base["design"],
            "unit": base["unit"],
            "question_id": base["question_id"],
            "S": S,
            "mode": mode,
            "counts": report.counts(),
            "unchecked": sorted(report.unchecked),
            "changed": {
                "deleted": {t: len(v) for t, v in result.deleted.items()},
                "redacted": {t: len(v) for t, v in result.redacted.items()},
                "created": {t: len(v) for t, v in result.created.items()},
                "cache_entries_purged": result.cache_entries_purged,
                "bytes_before": result.bytes_before,
                "bytes_after": result.bytes_after,
            },
        }
        return [forensics, *out]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- results file


def load_records(path: str | Path) -> tuple[list[dict[str, Any]], set[str], list[int]]:
    """Read ``results.jsonl``, keeping only records of completed, intact units.

    Records of a unit are written together, then its ``unit_done`` marker. A unit
    without a marker (a kill cut it short) or with a line that does not parse (a
    torn or corrupted line) is not done: its records are dropped and it runs again.
    Every other unit is kept, wherever the damage is.

    Returns:
        ``(records, done_units, bad_lines)``: the kept records (markers included),
        their unit ids, and the 1-based numbers of lines that did not parse.
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


def _append_unit(fh: Any, records: list[dict[str, Any]], unit: str, counts: dict[str, int]) -> None:
    lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in records]
    lines.append(json.dumps({"type": "unit_done", "unit": unit, **counts}, sort_keys=True))
    fh.write(("\n".join(lines) + "\n").encode())
    fh.flush()
    os.fsync(fh.fileno())


def _worker_env() -> None:
    """A worker process's environment: telemetry off, offline, one torch thread (the
    pool's and Ray's workers share the machine's cores)."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass


def _worker_init(work: str, parent: int) -> None:
    tempfile.tempdir = work
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    _worker_env()


def _exit_with_parent(parent: int) -> None:
    """End a worker whose sweep process is gone (e.g. killed with -9)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _worker(config_json: str, instance_json: str, S: int, cache_path: str | None,
            stores_dir: str | None) -> tuple[list, dict]:
    config = SweepConfig.model_validate_json(config_json)
    instance = Instance.model_validate_json(instance_json)
    return run_unit(config, instance, S, cache_path=cache_path, stores_dir=stores_dir)


# --------------------------------------------------------------------------- the sweep


def run_sweep(
    config: SweepConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    model: Any = None,
    summarizer_model: Any = None,
    use_cache: bool = True,
    write_outputs: bool = True,
    designs: Sequence[str | MemoryDesign] | None = None,
    cache_path: str | Path | None = None,
) -> dict[str, Any]:
    """Run (or resume) a sweep into ``out`` and write its outputs.

    Args:
        config: what to run.
        out: output directory (created).
        resume: continue a sweep killed part-way; without it an existing
            ``results.jsonl`` is an error.
        progress: show a progress bar (units done, rate, ETA) on stderr.
        model, summarizer_model: chat-model objects instead of the config's specs
            (in-process only; ``workers`` must be 1).
        use_cache: use the shared LLM cache (``llm_cache.sqlite``).
        write_outputs: also write metrics, hypotheses and the report.
        designs: memory designs to run (:class:`graphs.designs.MemoryDesign` objects,
            built-in names or ``module:factory`` specs; default ``[config.design]``).
            One design runs into ``out``. Several run one after another into
            ``out/<design name>/`` (each a complete run; ``--resume`` continues each)
            sharing one LLM cache ``out/llm_cache.sqlite``, then
            :func:`evaluators.compare.compare_runs` writes their comparison (paired
            differences with CIs) into ``out``. A design object (not a name or spec)
            runs in-process (``workers`` is not used).
        cache_path: the LLM cache file (default ``out/llm_cache.sqlite``).

    Returns:
        The metrics dict written to ``metrics.json``; for several designs
        ``{"designs": {name: metrics}, "compare": compare.json's content}``.

    Everything that can be checked before a run is checked before ``out`` is
    created or changed: the data file (loaded and validated), the model specs
    (installed, runnable, reachable). A refused run leaves ``out`` as it was.

    Raises:
        SweepLockedError: another process is writing to ``out``.
        FileExistsError: ``out`` holds results and ``resume`` is False.
        ValueError: ``resume`` with a different configuration, or bad options.
        memkit.longmemeval.LongMemEvalError: a malformed data file.
        memkit.models.ModelSpecError: a model that cannot be built or run.
        WorkerDied: a worker process died (its unit is named; ``--resume`` goes on).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file; give a directory")
    specs = list(designs) if designs else [config.design]
    resolved = [resolve_design(d) for d in specs]  # a bad spec fails before out is touched
    names = [d.name for d in resolved]
    if len(set(names)) != len(names):
        raise ValueError(f"--design: two designs share a name ({names}); each needs its own")
    if len(resolved) > 1:
        return _run_designs(config, out, specs, resolved, resume=resume, progress=progress, model=model,
                            summarizer_model=summarizer_model, use_cache=use_cache, write_outputs=write_outputs)
    spec = specs[0]
    design_obj = spec if isinstance(spec, MemoryDesign) else None
    config = config.model_copy(update={"design": spec if isinstance(spec, str) else spec.name})
    instances = load_instances(config)
    if model is None:
        from memkit.models import check_spec

        kw = config.model_kwargs()
        for spec in {config.model, config.summarizer_model or config.model}:
            check_spec(spec, **kw)
    identity = config.identity()  # hashes the data file once
    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out / ".lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout as exc:
        raise SweepLockedError(
            f"another memkit sweep is writing to {out} (lock {out / '.lock'} is held); "
            "wait for it or choose another --out"
        ) from exc
    try:
        return _run_locked(config, out, instances, identity, resume, progress, model, summarizer_model,
                           use_cache, write_outputs, design_obj, cache_path)
    finally:
        lock.release()


def _run_designs(config: SweepConfig, out: Path, specs: list[str | MemoryDesign], resolved: list[MemoryDesign],
                 **kw: Any) -> dict[str, Any]:
    """Several designs: one complete run per design under ``out/<name>``, one shared
    LLM cache, then the comparison of the runs in ``out`` (see :func:`run_sweep`)."""
    out.mkdir(parents=True, exist_ok=True)
    use_cache = kw.pop("use_cache")
    write_outputs = kw.pop("write_outputs")
    cache = str(out / CACHE) if use_cache else None
    per_design: dict[str, Any] = {}
    for spec, design in zip(specs, resolved, strict=True):
        per_design[design.name] = run_sweep(config, out / design.name, designs=[spec], use_cache=use_cache,
                                            cache_path=cache, write_outputs=write_outputs, **kw)
    if not write_outputs:
        return {}
    from evaluators.compare import compare_runs

    result = compare_runs([out / d.name for d in resolved], out, n_resamples=config.n_resamples, seed=config.seed)
    return {"designs": per_design, "compare": result}


def _run_locked(
    config: SweepConfig,
    out: Path,
    instances: list[Instance],
    identity: dict[str, Any],
    resume: bool,
    progress: bool,
    model: Any,
    summarizer_model: Any,
    use_cache: bool,
    write_outputs: bool,
    design_obj: MemoryDesign | None = None,
    cache_override: str | Path | None = None,
) -> dict[str, Any]:
    results = out / RESULTS
    cfg_path = out / "config.json"
    records, done, bad = load_records(results) if results.exists() else ([], set(), [])
    if done and not resume:
        raise FileExistsError(
            f"{results} already holds results: pass --resume to continue that sweep, "
            f"choose a new --out, or remove {out} to start over"
        )
    if done and cfg_path.exists():
        before = json.loads(cfg_path.read_text())
        for key in _NOT_IDENTITY:
            before.pop(key, None)
        if before != identity:
            diff = sorted(k for k in set(before) | set(identity) if before.get(k) != identity.get(k))
            raise ValueError(
                f"--resume with a different configuration than {cfg_path} ({', '.join(diff)} differ): "
                f"rerun with that configuration, choose a new --out, or remove {out} to start over"
            )
    # No completed unit yet (a fresh directory, or a run that failed before its
    # first unit): nothing can be lost, so this configuration simply takes over.
    cfg_path.write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")

    units = [(inst, S) for inst in instances for S in config.summary_levels]
    order = {_unit_id(inst.question_id, S): i for i, (inst, S) in enumerate(units)}
    if len(order) != len(units):
        raise ValueError("duplicate question_id in the data: unit ids must be unique")

    if results.exists():
        if bad:
            backup = results.with_name(f"{RESULTS}.damaged-{int(time.time())}")
            shutil.copyfile(results, backup)
            warnings.warn(
                f"{results}: lines {bad[:10]}{' ...' if len(bad) > 10 else ''} do not parse; "
                f"the units they belong to run again (original kept as {backup.name})",
                stacklevel=2,
            )
        keep = [r for r in records if r.get("unit") in order]
        done &= set(order)
        _rewrite(results, keep)  # only intact, completed units of this configuration
    results.touch()
    cache_path = (str(cache_override) if cache_override else str(out / CACHE)) if use_cache else None
    stores_dir = str(out / "stores") if config.keep_stores else None
    # Temporary store copies (the residue phase) live under --out, never in the
    # system temp dir, and whatever a killed run left there is removed now.
    work = out / ".work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    todo = [(inst, S) for inst, S in units if _unit_id(inst.question_id, S) not in done]
    bar = tqdm(total=len(units), initial=len(units) - len(todo), unit="unit", disable=not progress,
               desc=f"memkit sweep [{config.design}]", dynamic_ncols=True)
    try:
        with open(results, "ab") as fh, _tempdir(work):
            if config.executor == "ray":
                if model is not None or summarizer_model is not None or design_obj is not None:
                    raise ValueError("executor='ray' takes model specs and a design name in the config, "
                                     "not model or design objects")
                _run_ray(config, todo, cache_path, stores_dir, fh, bar, work)
            elif config.workers <= 1 or model is not None or summarizer_model is not None or design_obj is not None:
                for inst, S in todo:
                    recs, counts = run_unit(config, inst, S, cache_path=cache_path, model=model,
                                            summarizer_model=summarizer_model, stores_dir=stores_dir,
                                            design=design_obj)
                    _append_unit(fh, recs, _unit_id(inst.question_id, S), counts)
                    _advance(bar, counts)
            else:
                _run_parallel(config, todo, cache_path, stores_dir, fh, bar, work)
    finally:
        bar.close()
        shutil.rmtree(work, ignore_errors=True)

    records, done, _ = load_records(results)
    missing = set(order) - done
    if missing:
        raise RuntimeError(f"sweep ended with {len(missing)} units missing, e.g. {sorted(missing)[:3]}")
    records = _canonical(records, order)
    _rewrite(results, records)
    if not write_outputs:
        return {}
    return write_outputs_for(out, records, config)


@contextmanager
def _tempdir(path: Path) -> Iterator[None]:
    """Make ``tempfile`` create everything under ``path`` for the duration."""
    before = tempfile.tempdir
    tempfile.tempdir = str(path)
    try:
        yield
    finally:
        tempfile.tempdir = before


def _run_parallel(config: SweepConfig, todo: list[tuple[Instance, int]], cache_path: str | None,
                  stores_dir: str | None, fh: Any, bar: tqdm, work: Path) -> None:
    cfg = config.model_dump_json()
    tasks = (
        (_unit_id(inst.question_id, S), (cfg, inst.model_dump_json(), S, cache_path, stores_dir))
        for inst, S in todo
    )
    for unit, (recs, counts) in run_tasks(_worker, tasks, workers=config.workers,
                                           initializer=_worker_init, initargs=(str(work), os.getpid())):
        _append_unit(fh, recs, unit, counts)
        _advance(bar, counts)


def _run_ray(config: SweepConfig, todo: list[tuple[Instance, int]], cache_path: str | None,
             stores_dir: str | None, fh: Any, bar: tqdm, work: Path) -> None:
    """Run units as Ray tasks (one CPU each) and append each finished unit's records
    here, in the driver, as they arrive: only this process writes ``results.jsonl``.

    Ray is joined as follows: a connection this process already opened
    (``ray.is_initialized()``) is used as is; else ``ray.init(address=config.ray_address)``
    (``None``: ``RAY_ADDRESS`` if set, else a local Ray with ``workers`` CPUs started
    for this run and stopped after it). Tasks receive the LLM cache and work paths
    under ``--out``; a node that cannot see them (no shared filesystem) uses a
    node-local cache and temp dir (:func:`_ray_unit`).

    Raises:
        ImportError: Ray is not installed (``pip install 'memkit[ray]'``).
        Exception: a unit's own error, re-raised; ``RuntimeError`` naming the unit
            when Ray lost the task (after its one retry).
    """
    try:
        import ray
    except ImportError as exc:
        raise ImportError("--executor ray needs Ray: `pip install 'memkit[ray]'`") from exc
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray's telemetry stays off
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if config.ray_address is None and not os.environ.get("RAY_ADDRESS"):
            kw.update(num_cpus=config.workers, _node_ip_address="127.0.0.1")
        ray.init(address=config.ray_address, **kw)
        started = True
    task = ray.remote(num_cpus=1, max_retries=1)(_ray_unit)
    cfg = config.model_dump_json()
    pending = {
        task.remote(cfg, inst.model_dump_json(), S, cache_path, stores_dir, str(work)): _unit_id(inst.question_id, S)
        for inst, S in todo
    }
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                unit = pending.pop(ref)
                try:
                    recs, counts = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    raise exc.as_instanceof_cause() from None
                except ray.exceptions.RayError as exc:
                    raise RuntimeError(f"Ray lost the task of unit {unit} ({exc})") from exc
                _append_unit(fh, recs, unit, counts)
                _advance(bar, counts)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def _ray_unit(config_json: str, instance_json: str, S: int, cache_path: str | None,
              stores_dir: str | None, work: str) -> tuple[list, dict]:
    """One unit in a Ray worker: :func:`_worker` with the worker set up as the local
    pool's are (offline, one torch thread, temp files under ``work``). Where this node
    cannot see ``work`` or the cache's directory (no shared filesystem), it uses its
    own temp dir and a node-local LLM cache under :func:`memkit.models.cache_dir`."""
    _worker_env()
    tempfile.tempdir = work if Path(work).is_dir() else None
    if cache_path is not None and not Path(cache_path).parent.is_dir():
        from memkit.models import cache_dir

        cache_path = str(cache_dir() / "ray-llm-cache.sqlite")
    if stores_dir is not None and not Path(stores_dir).parent.is_dir():
        raise RuntimeError(f"--keep-stores with Ray needs --out on a filesystem every node sees ({stores_dir})")
    return _worker(config_json, instance_json, S, cache_path, stores_dir)


def _advance(bar: tqdm, counts: dict[str, Any]) -> None:
    """One more unit on the progress bar, with the LLM calls sent (cache misses) per
    second so far (tqdm shows the units' rate and the ETA itself); none for a backend
    that sends none (``extractive``)."""
    bar.calls = getattr(bar, "calls", 0) + int(counts.get("llm_calls", 0))  # type: ignore[attr-defined]
    elapsed = bar.format_dict.get("elapsed") or 0.0
    if bar.calls:
        bar.set_postfix_str(f"{bar.calls} LLM calls, {bar.calls / elapsed if elapsed else 0.0:.1f} calls/s",
                            refresh=False)
    bar.update(1)


def _canonical(records: list[dict[str, Any]], order: dict[str, int]) -> list[dict[str, Any]]:
    by_unit: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_unit.setdefault(r["unit"], []).append(r)
    out = []
    for unit in sorted(by_unit, key=lambda u: order.get(u, len(order))):
        if unit in order:
            out += by_unit[unit]
    return out


def _rewrite(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "wb") as fh:
        for r in records:
            fh.write((json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n").encode())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def sum_tokens(markers: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """Token usage of ``unit_done`` markers summed per phase and model:
    ``{phase: {model: {"calls", "input_tokens", "output_tokens", "total_tokens",
    "cached_calls"}}}`` (phases ``write``, ``main``, ``forget``; empty for backends
    that report no usage, such as ``extractive``)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for m in markers:
        for phase, by_model in (m.get("tokens") or {}).items():
            out[phase] = add_usage(out.get(phase, {}), by_model)
    return {phase: out[phase] for phase in sorted(out)}


def write_outputs_for(out: Path, records: list[dict[str, Any]], config: SweepConfig) -> dict[str, Any]:
    """Write ``metrics.json``, the hypotheses files and the report from ``records``."""
    from evaluators.report import write_report

    metrics = compute_metrics(records, n_resamples=config.n_resamples, seed=config.seed)
    markers = [r for r in records if r["type"] == "unit_done"]
    metrics["model"] = config.model
    metrics["summarizer_model"] = config.summarizer_model or config.model
    metrics["design"] = next((r["design"] for r in records if r["type"] == "call" and "design" in r), config.design)
    metrics["totals"] = {
        "units": len(markers),
        "llm_calls": sum(m.get("llm_calls", 0) for m in markers),
        "cache_hits": sum(m.get("cache_hits", 0) for m in markers),
        "scored_calls": sum(1 for r in records if r["type"] == "call"),
        "tokens": sum_tokens(markers),
    }
    metrics["findings"] = evaluate_findings(metrics, config.model_dump())
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")

    hyp_dir = out / "hypotheses"
    hyp_dir.mkdir(exist_ok=True)
    main_q = [r for r in records if r["type"] == "call" and r["phase"] == "main" and r["query_kind"] == "question"]
    for S in config.summary_levels:
        for k in config.ks:
            lines = [
                json.dumps({"question_id": r["question_id"], "hypothesis": r["response"]}, ensure_ascii=False)
                for r in main_q
                if r["S"] == S and r["k"] == k
            ]
            (hyp_dir / f"S{S}_k{k}.jsonl").write_text("\n".join(lines) + "\n")
    shutil.copyfile(hyp_dir / f"S{config.summary_levels[0]}_k{max(config.ks)}.jsonl", out / "hypotheses.jsonl")
    write_report(out)
    return metrics


# --------------------------------------------------------------------------- CLI


def _int_list(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise typer.BadParameter(f"{name} takes comma-separated integers, got {text!r}") from exc


_OPTION_NAMES = {"ks": "--k", "n": "--n", "summary_levels": "--summary-levels", "data": "--data",
                 "deletion_modes": "--deletion-modes", "workers": "--workers",
                 "n_resamples": "--n-resamples", "max_tokens": "--max-tokens"}


def _n_option(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        return int(text)
    except ValueError as exc:
        raise typer.BadParameter(f"takes a positive integer or 'all', got {text!r}") from exc


def register_cli(app: typer.Typer) -> None:
    """Register ``memkit sweep`` on the ``memkit`` app."""

    @app.command("sweep")
    def sweep_cmd(
        data: str = typer.Option("synthetic", help="LongMemEval JSON file, or 'synthetic'."),
        n: str = typer.Option("20", help="Instances (sampled with --seed, stratified by type), or 'all'."),
        seed: int = typer.Option(0, help="Seed for sampling, synthetic data, canaries and CIs."),
        model: str = typer.Option("extractive", help="Responder model spec."),
        summarizer_model: str | None = typer.Option(None, help="Summarizer model spec (default: --model)."),
        base_url: str | None = typer.Option(
            None, help="Server URL for openai:/ollama: models (default: OPENAI_BASE_URL / OLLAMA_HOST)."),
        api_key_env: str | None = typer.Option(
            None, help="Environment variable holding the API key (default: the provider's, e.g. OPENAI_API_KEY)."),
        summary_levels: str = typer.Option("0,1,2", help="Summary levels S, comma-separated."),
        k: str = typer.Option("1,3,6,10,25", "--k", help="Retrieval breadths, comma-separated."),
        deletion_modes: str = typer.Option(",".join(DELETION_MODES), help="Deletion modes ('' for none)."),
        workers: int = typer.Option(1, help="Parallel worker processes."),
        concurrency: int | None = typer.Option(
            None, help="Model calls in flight per worker (default: 8 for remote APIs, 4 for "
                       "ollama:, 1 for extractive/llamacpp:)."),
        rps: float | None = typer.Option(None, help="Cap on model requests per second per worker."),
        executor: str = typer.Option(
            "local", help="'local' (--workers processes here) or 'ray' (units as Ray tasks)."),
        ray_address: str | None = typer.Option(
            None, help="Ray cluster to join with --executor ray (default: RAY_ADDRESS, else a local Ray)."),
        out: Path = typer.Option(Path("runs/sweep"), help="Output directory."),
        resume: bool = typer.Option(False, help="Continue a killed sweep in --out."),
        keep_stores: bool = typer.Option(
            False, help="Keep each deletion mode's forgotten store under OUT/stores for `memkit residue`."),
        max_tokens: int | None = typer.Option(None, help="Cap on tokens per LLM call."),
        n_resamples: int = typer.Option(1000, help="Bootstrap resamples for CIs."),
        quiet: bool = typer.Option(False, help="No progress bar."),
        design: list[str] | None = typer.Option(
            None, "--design",
            help="Memory design: study, mmr, redacting or module:factory (repeatable; several run "
                 "into OUT/<name> and are compared). Default: study."),
    ) -> None:
        """Run the full-factorial LongMemEval sweep and write results, metrics and a report."""
        from memkit.longmemeval import LongMemEvalError
        from memkit.models import ModelSpecError

        try:
            config = SweepConfig(
                data=data,
                n=_n_option(n),
                seed=seed,
                model=model,
                summarizer_model=summarizer_model,
                base_url=base_url,
                api_key_env=api_key_env,
                summary_levels=_int_list(summary_levels, "--summary-levels"),
                ks=_int_list(k, "--k"),
                deletion_modes=[m.strip() for m in deletion_modes.split(",") if m.strip()],
                workers=workers,
                concurrency=concurrency,
                rps=rps,
                executor=executor,
                ray_address=ray_address,
                keep_stores=keep_stores,
                max_tokens=max_tokens,
                n_resamples=n_resamples,
            )
        except ValidationError as exc:
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else ""
                option = _OPTION_NAMES.get(field, "--" + field.replace("_", "-"))
                msg = str(err["msg"]).removeprefix("Value error, ")
                typer.echo(f"memkit sweep: {option}: {msg}", err=True)
            raise typer.Exit(2) from exc
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _echo_warning
                metrics = run_sweep(config, out, resume=resume, progress=not quiet, designs=design or None)
        except WorkerDied as exc:
            typer.echo(
                f"memkit sweep: {exc}. The units finished before it are kept in {out / RESULTS}; "
                f"fix the cause, then rerun the same command with --resume to go on.",
                err=True,
            )
            raise typer.Exit(3) from exc
        except LongMemEvalError as exc:
            typer.echo(f"memkit sweep: --data: {exc}", err=True)
            raise typer.Exit(2) from exc
        except ModelSpecError as exc:
            typer.echo(f"memkit sweep: --model: {exc}", err=True)
            raise typer.Exit(2) from exc
        except (SweepLockedError, OSError, ValueError) as exc:
            typer.echo(f"memkit sweep: {exc}", err=True)
            raise typer.Exit(2) from exc
        dt = time.perf_counter() - t0
        by_design = metrics["designs"] if "designs" in metrics else {metrics.get("design", "study"): metrics}
        units = sum(m["totals"]["units"] for m in by_design.values())
        typer.echo(f"memkit sweep: {units} units in {dt:.1f} s -> {out}")
        for name, m in by_design.items():
            for row in m["by_S"]:
                typer.echo(
                    f"  {name} S={row['S']}: PR={row['PR']:.2f} AER_max={row['AER_max']:.2f} PUA={row['PUA']:.2f}"
                )
        typer.echo(f"  report: {out / ('compare.md' if 'designs' in metrics else 'report.md')}")
        from evaluators.report import canary_sentence, hypotheses_with_canaries

        for run_dir in ([out / name for name in by_design] if "designs" in metrics else [out]):
            line = canary_sentence(hypotheses_with_canaries(run_dir))
            if line:
                typer.echo(f"  {run_dir.name}: " + line.replace("**", ""))
        if config.keep_stores:
            typer.echo(f"  forgotten stores: {out / 'stores'} (scan one with `memkit residue DIR/chroma SECRET`)")


def _echo_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                  line: Any = None) -> None:
    typer.echo(f"memkit sweep: note: {message}", err=True)
