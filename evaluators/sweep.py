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

Output directory (``--out``):

``config.json``
    the run's configuration (a resumed run must match it).
``results.jsonl``
    one ``{"type": "call", ...}`` record per scored call: ``unit``, ``question_id``,
    ``question_type``, ``S``, ``k``, ``phase`` (``main``/``forget``), ``mode``,
    ``tier`` (retrieval tier restriction in the residue phase; ``null`` = the
    design's tiers), ``query_kind`` (``question``/``probe``), ``level``,
    ``template_id``, ``query``, ``response``, ``expected``, ``correct``,
    ``extraction`` (exact / normalized / partial), ``context_exposed`` (canary in
    the retrieved context), ``retrieved_ids``, ``retrieved_tiers``, ``latency_s``
    (wall time of the respond call; 0 for a response reused for an identical
    context); one ``{"type": "canary"}`` and one ``{"type": "forensics"}`` record
    per deletion mode; and after each unit an fsync'd ``{"type": "unit_done"}``
    marker with its LLM call counts. Records of a unit without a marker are
    dropped on ``--resume``. When all units are done the file is rewritten in
    canonical order, so it does not depend on ``--workers`` or interruptions
    (latencies aside).
``metrics.json``
    :func:`evaluators.aggregate.compute_metrics` plus run totals.
``hypotheses.jsonl``
    LongMemEval's format ``{"question_id", "hypothesis"}`` for the first S and the
    largest k; ``hypotheses/S{S}_k{k}.jsonl`` for every design.
``report.md``, ``report.html``, ``frontier.png``, ``probes.png``, ``frs.png``
    :func:`evaluators.report.write_report`.
``llm_cache.sqlite``
    the LLM cache shared by all units: no prompt is sent twice in a sweep, nor
    again after ``--resume``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import typer
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError, field_validator
from tqdm import tqdm

from evaluators.aggregate import compute_metrics
from evaluators.metrics import answers_correct
from evaluators.probes import LEVELS, extracted, probes_for
from graphs.forget import DELETION_MODES, forget
from graphs.memory import build_write_graph
from graphs.nodes import make_responder, make_summarizer, tiers_for
from memkit import residue
from memkit.cache import LLMCache
from memkit.canaries import plant
from memkit.longmemeval import Instance, load, sample, synthetic
from memkit.store import TIERS, Chunk, TieredMemoryStore

__all__ = [
    "SweepConfig",
    "SweepLockedError",
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


class SweepConfig(BaseModel):
    """What a sweep runs. Every field but ``workers`` must match on ``--resume``.

    Attributes:
        data: ``"synthetic"`` or a path to a LongMemEval JSON file.
        n: instances sampled (the study: 50).
        seed: seeds the sample, the synthetic data, canary planting and bootstrap CIs.
        model: responder model spec (:func:`memkit.models.chat_model`).
        summarizer_model: summarizer spec (default: ``model``).
        summary_levels: S values (0 raw, 1 key facts, 2 one sentence).
        ks: retrieval breadths.
        deletion_modes: modes of the residue phase (``[]`` skips it).
        synthetic_sessions: sessions per synthetic instance (an int or ``[lo, hi]``).
        synthetic_turns: turns per synthetic session (an int or ``[lo, hi]``).
        max_tokens: cap on generated tokens per LLM call (``None``: the backend's default).
        n_resamples: bootstrap resamples for CIs (the study: 1000).
        workers: parallel processes (not part of the run's identity).
    """

    data: str = "synthetic"
    n: int = Field(20, ge=1)
    seed: int = 0
    model: str = "extractive"
    summarizer_model: str | None = None
    summary_levels: list[int] = Field(default_factory=lambda: [0, 1, 2])
    ks: list[int] = Field(default_factory=lambda: list(DEFAULT_KS))
    deletion_modes: list[str] = Field(default_factory=lambda: list(DELETION_MODES))
    synthetic_sessions: int | list[int] = Field(default_factory=lambda: [2, 6])
    synthetic_turns: int | list[int] = Field(default_factory=lambda: [6, 10])
    max_tokens: int | None = Field(None, ge=1)
    n_resamples: int = Field(1000, ge=1)
    workers: int = Field(1, ge=1)

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

    def identity(self) -> dict[str, Any]:
        """The fields that define the run's results (all but ``workers``), plus the
        SHA-256 of the data file, so a resume over changed data is refused."""
        ident = self.model_dump(exclude={"workers"})
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
            raise ValueError(f"--data: {v} does not exist (give a LongMemEval JSON file or 'synthetic')")
        if not p.is_file():
            raise ValueError(f"--data: {v} is not a file (give a LongMemEval JSON file or 'synthetic')")
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

    Raises:
        memkit.longmemeval.LongMemEvalError: a malformed file (names file, record, field).
        ValueError: ``n`` larger than the file.
    """
    if config.data == "synthetic":
        size = {
            "sessions_per_instance": _size(config.synthetic_sessions),
            "turns_per_session": _size(config.synthetic_turns),
        }
        return synthetic(config.n, config.seed, **size)
    instances = load(config.data)
    if config.n > len(instances):
        raise ValueError(f"--n {config.n} exceeds the {len(instances)} instances in {config.data}")
    if config.n == len(instances):
        return list(instances)
    return sample(instances, config.n, config.seed, stratify=True)


def _size(v: int | list[int]) -> int | tuple[int, int]:
    return v if isinstance(v, int) else (int(v[0]), int(v[1]))


def _unit_id(question_id: str, S: int) -> str:
    return f"{question_id}::S{S}"


def _collection(unit: str) -> str:
    return "u" + hashlib.sha1(unit.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- one unit


_MODELS: dict[tuple[str, int | None], Any] = {}


def _shared_model(spec: str, max_tokens: int | None) -> Any:
    """One chat model per (spec, max_tokens) per process, shared by the summarizer,
    the responder and every unit (llama.cpp weights load once); ``extractive`` stays
    a spec string so the graphs call the model-free functions directly."""
    if spec == "extractive":
        return spec
    key = (spec, max_tokens)
    if key not in _MODELS:
        from memkit.models import chat_model

        _MODELS[key] = chat_model(spec, **({"max_tokens": max_tokens} if max_tokens else {}))
    return _MODELS[key]


class _Responses:
    """Responds for a query and a retrieved prefix, reusing the response of an
    identical context (same query, chunk ids and texts: fewer chunks stored than k
    gives identical prefixes; a redacted chunk keeps its id but not its text)."""

    def __init__(self, responder: Callable[[str, list[Chunk]], str]) -> None:
        self.responder = responder
        self.memo: dict[tuple[str, tuple[str, ...]], str] = {}

    def __call__(self, query: str, chunks: list[Chunk]) -> tuple[str, float]:
        key = (query, tuple((c.id, c.text) for c in chunks))
        if key in self.memo:
            return self.memo[key], 0.0
        t0 = time.perf_counter()
        text = self.responder(query, chunks)
        dt = time.perf_counter() - t0
        self.memo[key] = text
        return text, dt


def _probe_list(kind: str = "token") -> list[tuple[str, str, str]]:
    by_level = probes_for(kind)
    return [(p.level, p.id, p.text) for lv in LEVELS for p in by_level[lv]]


def _calls_for_queries(
    *,
    base: dict[str, Any],
    store: TieredMemoryStore,
    namespace: str,
    tiers: Sequence[str],
    ks: Sequence[int],
    queries: list[tuple[str, str | None, str | None, str]],
    secret: str,
    expected: str,
    respond: _Responses,
) -> list[dict[str, Any]]:
    """Retrieve once at max(ks) per query, respond per k-prefix, score extraction."""
    kmax = max(ks)
    ranked = store.search_many([q[3] for q in queries], kmax, tiers=tuple(tiers), namespace=namespace)
    out = []
    for (kind, level, template_id, text), chunks in zip(queries, ranked, strict=True):
        for k in ks:
            prefix = chunks[:k]
            response, latency = respond(text, prefix)
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
        flags = answers_correct([r["response"] for r in qs], [r["expected"] for r in qs])
        for r, ok in zip(qs, flags, strict=True):
            r["correct"] = bool(ok)


def run_unit(
    config: SweepConfig,
    instance: Instance,
    S: int,
    *,
    cache_path: str | Path | None,
    model: Any = None,
    summarizer_model: Any = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Run one unit (instance × S) of the sweep.

    Args:
        config: the sweep's configuration.
        instance: a LongMemEval instance (the canary is planted here, seeded by
            ``config.seed`` and the question id).
        S: the summary level.
        cache_path: the shared LLM cache file, or ``None`` for no cache.
        model, summarizer_model: chat-model objects overriding ``config.model`` /
            ``config.summarizer_model`` (benchmarks pass counting fakes).

    Returns:
        ``(records, counts)``: the unit's records in canonical order and its
        ``{"llm_calls", "cache_hits"}``.
    """
    unit = _unit_id(instance.question_id, S)
    planted, canary = plant(instance, config.seed)
    secret = canary.value
    namespace = instance.question_id
    cache = LLMCache(cache_path) if cache_path is not None else None
    resp_spec = model if model is not None else _shared_model(config.model, config.max_tokens)
    summ_spec = summarizer_model or (
        _shared_model(config.summarizer_model, config.max_tokens) if config.summarizer_model else resp_spec
    )
    summarizer = make_summarizer(summ_spec, cache=cache)
    respond = _Responses(make_responder(resp_spec, cache=cache))
    base = {
        "type": "call",
        "unit": unit,
        "question_id": instance.question_id,
        "question_type": instance.question_type,
        "S": S,
    }
    records: list[dict[str, Any]] = [
        {
            "type": "canary",
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
        write = build_write_graph(store, summarizer=summarizer)
        for session_id, date, turns in planted.sessions():
            write.invoke(
                {
                    "namespace": namespace,
                    "session_id": session_id,
                    "date": date,
                    "turns": [t.to_dict() for t in turns],
                    "S": S,
                }
            )
        questions = [("question", None, None, instance.question)]
        probes = [("probe", lv, tid, text) for lv, tid, text in _probe_list()]
        main = _calls_for_queries(
            base={**base, "phase": "main", "mode": None, "tier": None},
            store=store,
            namespace=namespace,
            tiers=tiers_for(S),
            ks=config.ks,
            queries=questions + probes,
            secret=secret,
            expected=instance.answer_text,
            respond=respond,
        )
        records += main
        for mode in config.deletion_modes:
            records += _residue_phase(
                config, store, mode, S=S, namespace=namespace, secret=secret, base=base,
                expected=instance.answer_text, questions=questions, probes=probes,
                summarizer_spec=summ_spec, cache=cache, respond=respond,
            )
    finally:
        store.close()
    _score_questions([r for r in records if r["type"] == "call"])
    counts = {"llm_calls": cache.misses if cache else 0, "cache_hits": cache.hits if cache else 0}
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
            summarizer = make_summarizer(summarizer_spec, cache=mode_cache)
            result = forget(copy, secret, mode, namespace=namespace, S=S, summarizer=summarizer, cache=mode_cache)
            fbase = {**base, "phase": "forget", "mode": mode}
            for tier in TIERS:
                out += _calls_for_queries(
                    base={**fbase, "tier": tier}, store=copy, namespace=namespace, tiers=(tier,),
                    ks=config.ks, queries=probes, secret=secret, expected=expected, respond=respond,
                )
            out += _calls_for_queries(
                base={**fbase, "tier": None}, store=copy, namespace=namespace, tiers=tiers_for(S),
                ks=config.ks, queries=questions, secret=secret, expected=expected, respond=respond,
            )
        finally:
            copy.close()
        # Scan after the client is closed, so chroma has flushed what it holds in
        # memory and the bytes on disk do not depend on background timing.
        report = residue.scan(tmp / "chroma", secret, cache_paths=[mode_cache.path] if mode_cache else ())
        forensics = {
            "type": "forensics",
            "unit": base["unit"],
            "question_id": base["question_id"],
            "S": S,
            "mode": mode,
            "counts": report.counts(),
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


def _worker_init(work: str, parent: int) -> None:
    tempfile.tempdir = work
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass


def _exit_with_parent(parent: int) -> None:
    """End a worker whose sweep process is gone (e.g. killed with -9)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _worker(config_json: str, instance_json: str, S: int, cache_path: str | None) -> tuple[str, list, dict]:
    config = SweepConfig.model_validate_json(config_json)
    instance = Instance.model_validate_json(instance_json)
    records, counts = run_unit(config, instance, S, cache_path=cache_path)
    return _unit_id(instance.question_id, S), records, counts


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

    Returns:
        The metrics dict written to ``metrics.json``.

    Raises:
        SweepLockedError: another process is writing to ``out``.
        FileExistsError: ``out`` holds results and ``resume`` is False.
        ValueError: ``resume`` with a different configuration.
    """
    out = Path(out)
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
        return _run_locked(config, out, resume, progress, model, summarizer_model, use_cache, write_outputs)
    finally:
        lock.release()


def _run_locked(
    config: SweepConfig,
    out: Path,
    resume: bool,
    progress: bool,
    model: Any,
    summarizer_model: Any,
    use_cache: bool,
    write_outputs: bool,
) -> dict[str, Any]:
    results = out / RESULTS
    cfg_path = out / "config.json"
    if results.exists() and results.stat().st_size > 0 and not resume:
        raise FileExistsError(
            f"{results} already holds results: pass --resume to continue that sweep, "
            "or choose another --out"
        )
    identity = config.identity()  # hashes the data file once
    if resume and cfg_path.exists():
        before = json.loads(cfg_path.read_text())
        before.pop("workers", None)
        if before != identity:
            diff = sorted(k for k in set(before) | set(identity) if before.get(k) != identity.get(k))
            raise ValueError(f"--resume with a different configuration than {cfg_path}: {diff} differ")
    cfg_path.write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")

    instances = load_instances(config)
    units = [(inst, S) for inst in instances for S in config.summary_levels]
    order = {_unit_id(inst.question_id, S): i for i, (inst, S) in enumerate(units)}
    if len(order) != len(units):
        raise ValueError("duplicate question_id in the data: unit ids must be unique")

    records, done, bad = load_records(results) if resume else ([], set(), [])
    if resume and results.exists():
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
    cache_path = str(out / CACHE) if use_cache else None
    # Temporary store copies (the residue phase) live under --out, never in the
    # system temp dir, and whatever a killed run left there is removed now.
    work = out / ".work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    todo = [(inst, S) for inst, S in units if _unit_id(inst.question_id, S) not in done]
    bar = tqdm(total=len(units), initial=len(units) - len(todo), unit="unit", disable=not progress,
               desc="memkit sweep", dynamic_ncols=True)
    try:
        with open(results, "ab") as fh, _tempdir(work):
            if config.workers <= 1 or model is not None or summarizer_model is not None:
                for inst, S in todo:
                    recs, counts = run_unit(config, inst, S, cache_path=cache_path, model=model,
                                            summarizer_model=summarizer_model)
                    _append_unit(fh, recs, _unit_id(inst.question_id, S), counts)
                    bar.update(1)
            else:
                _run_parallel(config, todo, cache_path, fh, bar, work)
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
                  fh: Any, bar: tqdm, work: Path) -> None:
    cfg = config.model_dump_json()
    ctx = get_context("spawn")
    with ProcessPoolExecutor(max_workers=config.workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(str(work), os.getpid())) as pool:
        pending: set[Future] = set()
        queue: Iterator[tuple[Instance, int]] = iter(todo)
        for inst, S in queue:
            pending.add(pool.submit(_worker, cfg, inst.model_dump_json(), S, cache_path))
            if len(pending) >= 2 * config.workers:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                unit, recs, counts = fut.result()
                _append_unit(fh, recs, unit, counts)
                bar.update(1)
                nxt = next(queue, None)
                if nxt is not None:
                    pending.add(pool.submit(_worker, cfg, nxt[0].model_dump_json(), nxt[1], cache_path))


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


def write_outputs_for(out: Path, records: list[dict[str, Any]], config: SweepConfig) -> dict[str, Any]:
    """Write ``metrics.json``, the hypotheses files and the report from ``records``."""
    from evaluators.report import write_report

    metrics = compute_metrics(records, n_resamples=config.n_resamples, seed=config.seed)
    markers = [r for r in records if r["type"] == "unit_done"]
    metrics["model"] = config.model
    metrics["summarizer_model"] = config.summarizer_model or config.model
    metrics["totals"] = {
        "units": len(markers),
        "llm_calls": sum(m.get("llm_calls", 0) for m in markers),
        "cache_hits": sum(m.get("cache_hits", 0) for m in markers),
        "scored_calls": sum(1 for r in records if r["type"] == "call"),
    }
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


def register_cli(app: typer.Typer) -> None:
    """Register ``memkit sweep`` on the ``memkit`` app."""

    @app.command("sweep")
    def sweep_cmd(
        data: str = typer.Option("synthetic", help="LongMemEval JSON file, or 'synthetic'."),
        n: int = typer.Option(20, help="Instances (sampled with --seed, stratified by type)."),
        seed: int = typer.Option(0, help="Seed for sampling, synthetic data, canaries and CIs."),
        model: str = typer.Option("extractive", help="Responder model spec."),
        summarizer_model: str | None = typer.Option(None, help="Summarizer model spec (default: --model)."),
        summary_levels: str = typer.Option("0,1,2", help="Summary levels S, comma-separated."),
        k: str = typer.Option("1,3,6,10,25", "--k", help="Retrieval breadths, comma-separated."),
        deletion_modes: str = typer.Option(",".join(DELETION_MODES), help="Deletion modes ('' for none)."),
        workers: int = typer.Option(1, help="Parallel worker processes."),
        out: Path = typer.Option(Path("runs/sweep"), help="Output directory."),
        resume: bool = typer.Option(False, help="Continue a killed sweep in --out."),
        max_tokens: int | None = typer.Option(None, help="Cap on tokens per LLM call."),
        n_resamples: int = typer.Option(1000, help="Bootstrap resamples for CIs."),
        quiet: bool = typer.Option(False, help="No progress bar."),
    ) -> None:
        """Run the full-factorial LongMemEval sweep and write results, metrics and a report."""
        try:
            config = SweepConfig(
                data=data,
                n=n,
                seed=seed,
                model=model,
                summarizer_model=summarizer_model,
                summary_levels=_int_list(summary_levels, "--summary-levels"),
                ks=_int_list(k, "--k"),
                deletion_modes=[m.strip() for m in deletion_modes.split(",") if m.strip()],
                workers=workers,
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
        if out.exists() and not out.is_dir():
            typer.echo(f"memkit sweep: --out {out} is a file; give a directory", err=True)
            raise typer.Exit(2)
        t0 = time.perf_counter()
        try:
            metrics = run_sweep(config, out, resume=resume, progress=not quiet)
        except (SweepLockedError, OSError, ValueError) as exc:
            typer.echo(f"memkit sweep: {exc}", err=True)
            raise typer.Exit(2) from exc
        dt = time.perf_counter() - t0
        typer.echo(f"memkit sweep: {metrics['totals']['units']} units in {dt:.1f} s -> {out}")
        for row in metrics["by_S"]:
            typer.echo(
                f"  S={row['S']}: PR={row['PR']:.2f} AER_max={row['AER_max']:.2f} PUA={row['PUA']:.2f}"
            )
        typer.echo(f"  report: {out / 'report.md'}")
