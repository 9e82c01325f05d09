"""One unit (instance x S) of the sweep: write, main phase, residue phase."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluators.probes import extracted
from evaluators.protocol import probe_queries, score_questions
from evaluators.sweep.config import SweepConfig, unit_collection, unit_id
from evaluators.sweep.read_path import ReadPath, Responses, shared_model
from graphs.designs import MemoryDesign, resolve_design
from graphs.forget import forget
from graphs.memory import write_sessions
from memkit import residue
from memkit.cache import LLMCache
from memkit.canaries import plant
from memkit.longmemeval import Instance
from memkit.models import token_usage
from memkit.store import TIERS, TieredMemoryStore


def _calls_for_queries(
    *,
    base: dict[str, Any],
    path: ReadPath,
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
    unit = unit_id(instance.question_id, S)
    planted, canary = plant(instance, config.seed)
    secret = canary.value
    namespace = instance.question_id
    cache = LLMCache(cache_path) if cache_path is not None else None
    resp_spec = model if model is not None else shared_model(config.model, config)
    summ_spec = summarizer_model or (
        shared_model(config.summarizer_model, config) if config.summarizer_model else resp_spec
    )
    design = design or resolve_design(config.design)
    summarizer = design.summarizer(summ_spec, cache=cache)
    respond = Responses(design.responder(resp_spec, cache=cache),
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
    store = TieredMemoryStore(collection=unit_collection(unit))
    try:
        write = design.write_graph(store, summarizer=summarizer)
        with token_usage() as usage:
            write_sessions(write, namespace, list(planted.sessions()), S)
        tokens["write"] = usage.by_model
        questions = [("question", None, None, instance.question)]
        probes = [("probe", lv, tid, text) for lv, tid, text in probe_queries()]
        with token_usage() as usage:
            main = _calls_for_queries(
                base={**base, "phase": "main", "mode": None, "tier": None},
                path=ReadPath(design, store, respond, max(config.ks)),
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
    score_questions([r for r in records if r["type"] == "call"])
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
    respond: Responses,
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
            path = ReadPath(design, copy, respond, max(config.ks))
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
