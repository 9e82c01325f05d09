"""One unit of the sweep: an instance at one configuration of the target, through the
one runner (:func:`evaluators.runner.run_unit`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evaluators.runner import UnitPlan, run_unit, safe_dir_name
from evaluators.sweep.config import SweepConfig, unit_collection, unit_id
from evaluators.sweep.read_path import shared_model
from graphs.designs import MemoryDesign, resolve_design
from memkit.dataset.longmemeval import Instance
from memkit.store.cache import LLMCache


def run_sweep_unit(
    config: SweepConfig,
    instance: Instance,
    S: int | None,
    *,
    cache_path: str | Path | None,
    model: Any = None,
    summarizer_model: Any = None,
    stores_dir: str | Path | None = None,
    design: MemoryDesign | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run one unit (instance × S) of the sweep: a memory design (``config.design``, or
    ``design``) or a target (``config.target``), through the one runner.

    Args:
        config: the sweep's configuration.
        instance: a LongMemEval instance (the canary is planted here, seeded by
            ``config.seed`` and the question id).
        S: the summary level (``None`` for a target without one).
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
        ``forget`` (:class:`memkit.models.chat.TokenUsage`: the providers' usage metadata;
        replies served from the LLM cache count as ``cached_calls``, without tokens).
    """
    unit = unit_id(instance.question_id, S)
    if config.target is not None:
        from evaluators.sweep.targets import target_unit

        return target_unit(config, instance, S, unit)
    from evaluators.targets.memkit_design import MemkitDesignTarget

    assert S is not None
    cache = LLMCache(cache_path) if cache_path is not None else None
    resp_spec = model if model is not None else shared_model(config.model, config)
    summ_spec = summarizer_model or (
        shared_model(config.summarizer_model, config) if config.summarizer_model else resp_spec
    )
    design = design or resolve_design(config.design)
    target = MemkitDesignTarget(design, None, S=S, model=resp_spec, summarizer_model=summ_spec, k=max(config.ks),
                                cache=cache, concurrency=config.calls_in_flight(), rps=config.rps,
                                collection=unit_collection(unit), name=design.name,
                                resolver=config.forget_resolver)
    plan = UnitPlan(
        unit=unit, seed=config.seed, S=S, ks=tuple(config.ks), tiers=design.tiers_for(S),
        deletions=config.deletions(fork=True),
        overall_probes=False, adversary=config.adversary(),
        keep_dir=Path(stores_dir) / safe_dir_name(instance.question_id) / f"S{S}" if stores_dir else None,
        weigh_vectors=config.weigh_vectors,
    )
    try:
        run = run_unit(target, [instance], plan)
    finally:
        target.close()
    counts: dict[str, Any] = {**target.usage(),
                              "tokens": {phase: by_model for phase, by_model in run.tokens.items() if by_model}}
    return run.records, counts
