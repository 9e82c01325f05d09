"""The full-factorial LongMemEval sweep (arXiv 2606.10062, Setup; docs/metrics.md).

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
   forensic surface (:func:`memkit.residue.chroma.scan`), re-run the probes with retrieval
   restricted to each tier (FRS per tier) and the question with the design's tiers
   (PR after the forget).

Each unit runs a memory design (:mod:`graphs.designs`; ``--design``, default
``study``, the source study's pipeline) through its compiled write and read graphs:
the design's summarizer, retriever and responder are the nodes called. Several
designs (``--design`` repeated) run one after another into ``--out/<design>/``
with one shared LLM cache, and :mod:`evaluators.report.compare` writes their comparison
into ``--out``.

Output directory (``--out``):

``config.json``
    the run's configuration (a resumed run must match it).
``results.jsonl``
    typed records (their models and the one reader: :mod:`evaluators.records`):
    one ``{"type": "call", ...}`` record per scored call: ``design``, ``unit``, ``question_id``,
    ``question_type``, ``S``, ``k``, ``phase`` (``main``/``forget``), ``mode``,
    ``tier`` (retrieval tier restriction in the residue phase; ``null`` = the
    design's tiers), ``query_kind`` (``question``/``probe``; ``attack``/``membership``
    with the adversary, :mod:`evaluators.adversary.run`), ``level``,
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
    :func:`evaluators.report.markdown.write_report` (the study's findings checked on the run
    are also stored as ``findings`` in ``metrics.json``).
``llm_cache.sqlite``
    the LLM cache shared by all units: no prompt is sent twice in a sweep, nor
    again after ``--resume``.
"""

from evaluators.pool import WorkerDied
from evaluators.records import load_records
from evaluators.sweep.config import (
    CACHE,
    DEFAULT_KS,
    RESULTS,
    SweepConfig,
    SweepLockedError,
    load_instances,
)
from evaluators.sweep.outputs import sum_tokens, write_outputs_for
from evaluators.sweep.run import run_sweep
from evaluators.sweep.unit import run_sweep_unit

__all__ = [
    "CACHE",
    "DEFAULT_KS",
    "RESULTS",
    "SweepConfig",
    "SweepLockedError",
    "WorkerDied",
    "load_instances",
    "load_records",
    "run_sweep",
    "run_sweep_unit",
    "sum_tokens",
    "write_outputs_for",
]
