"""Benchmark: memkit's sweep against a naive loop, on the same small sweep, in one process.

The naive loop is what a first script does: for every (instance, S, k) it builds a
fresh store, writes and re-summarizes every session, then retrieves and responds
for every query at that k, with no LLM cache. memkit's sweep summarizes once per
(instance, S), retrieves once at the largest k and uses prefixes for smaller k,
and sends no prompt twice (the LLM cache).

Both use the same counting fake chat model (``CountingFakeChatModel``: a fake, named
as such, with a fixed per-call delay) so the ratios reflect the pipeline, not a
model. Both run the main phase only (``deletion_modes=[]``): the naive loop has no
residue phase to compare with.

Run: ``python benchmarks/bench_sweep.py [--n 4] [--delay 0.02]``. Prints the LLM
calls and wall time of each way and their ratios.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from evaluators.scoring.probes import LEVELS, probes_for
from evaluators.sweep import SweepConfig, load_instances, run_sweep
from graphs.memory import write_session
from graphs.nodes import make_responder, make_summarizer, tiers_for
from memkit.dataset.canaries import plant
from memkit.store.tiered import TieredMemoryStore


class CountingFakeChatModel(BaseChatModel):
    """A FAKE chat model for benchmarks: sleeps ``delay`` seconds per call, counts calls
    in the shared ``counter`` dict, and answers with the last line of the prompt."""

    delay: float = 0.02
    counter: dict[str, int] = Field(default_factory=lambda: {"calls": 0})

    @property
    def _llm_type(self) -> str:
        return "counting-fake"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.counter["calls"] += 1
        time.sleep(self.delay)
        text = str(messages[-1].content).strip().splitlines()
        reply = text[-1] if text else ""
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"- {reply}"))])


def naive_loop(config: SweepConfig, model: BaseChatModel) -> int:
    """Rebuild, re-summarize and re-retrieve for every (instance, S, k); return scored calls."""
    summarizer = make_summarizer(model)
    responder = make_responder(model)
    probes = [p.text for lv in LEVELS for p in probes_for()[lv]]
    scored = 0
    for inst in load_instances(config):
        planted, _ = plant(inst, config.seed)
        for S in config.summary_levels:
            for k in config.ks:
                store = TieredMemoryStore(collection=f"naive-{abs(hash((inst.question_id, S, k)))}")
                try:
                    for sid, date, turns in planted.sessions():
                        write_session(store, inst.question_id, sid, date, [t.to_dict() for t in turns], S,
                                      summarizer)
                    for query in [inst.question, *probes]:
                        chunks = store.search(query, k, tiers=tiers_for(S), namespace=inst.question_id)
                        responder(query, chunks)
                        scored += 1
                finally:
                    store.close()
    return scored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--delay", type=float, default=0.02, help="seconds per fake LLM call")
    args = ap.parse_args()
    config = SweepConfig(n=args.n, seed=0, summary_levels=[0, 1, 2], deletion_modes=[], n_resamples=50)

    naive_model = CountingFakeChatModel(delay=args.delay)
    t0 = time.perf_counter()
    naive_scored = naive_loop(config, naive_model)
    naive_s = time.perf_counter() - t0

    kit_model = CountingFakeChatModel(delay=args.delay)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run_sweep(config, Path(tmp) / "out", model=kit_model, summarizer_model=kit_model,
                  progress=False, write_outputs=False)
        kit_s = time.perf_counter() - t0

    n_calls, k_calls = naive_model.counter["calls"], kit_model.counter["calls"]
    print(f"sweep: n={config.n} S={config.summary_levels} k={config.ks} (main phase), "
          f"fake LLM delay {args.delay * 1000:.0f} ms/call")
    print(f"naive loop : {n_calls:6d} LLM calls  {naive_s:8.2f} s  ({naive_scored} scored calls)")
    print(f"memkit     : {k_calls:6d} LLM calls  {kit_s:8.2f} s")
    print(f"ratio naive/memkit: LLM calls {n_calls / max(1, k_calls):.2f}x, wall time {naive_s / kit_s:.2f}x")


if __name__ == "__main__":
    main()
