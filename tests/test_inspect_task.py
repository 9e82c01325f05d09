"""``memkit/memory_privacy``, the inspect_ai task (evaluators/inspect_task.py).

The task runs on inspect's own models (``mockllm/model``; llama.cpp's OpenAI-compatible
server through inspect's ``llama-cpp-python`` provider), its log is read back with
inspect's reader (:func:`inspect_ai.log.read_eval_log`), and every score is compared
with memkit's own run of the same units: :func:`evaluators.runner.run_unit` on a
memory design answering through a LangChain model (not inspect's), then
:func:`evaluators.aggregate.compute_metrics`.
"""

from __future__ import annotations

from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, get_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from evaluators.agents import load_audit_instances
from evaluators.aggregate import compute_metrics
from evaluators.inspect_task import memory_privacy, seed_tiktoken
from evaluators.runner import Deletion, UnitPlan, run_unit
from evaluators.scoring.probes import LEVELS
from evaluators.sweep.config import unit_collection
from evaluators.targets.memkit_design import MemkitDesignTarget
from graphs.designs import resolve_design


class Echo(BaseChatModel):
    """Answers with the prompt's last message: the memories recalled and the question."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=messages[-1].text))])


def inspect_echo(input: Any, tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
    """mockllm's custom output: the same echo, through inspect's model API."""
    return ModelOutput.from_content("mockllm/model", input[-1].text)


def memkit_own(n: int, seed: int, S: int, k: int, deletion: str, model: Any, n_resamples: int) -> tuple[dict, list]:
    """memkit's own run of the task's units: one unit per user (the sweep's), then the metrics."""
    design = resolve_design("study")
    records = []
    for inst in load_audit_instances("synthetic", n, seed):
        unit = f"{inst.question_id}::S{S}"
        plan = UnitPlan(unit=unit, seed=seed, S=S, ks=(k,), tiers=design.tiers_for(S),
                        deletions=(Deletion(deletion, on_copy=True),), overall_probes=False)
        target = MemkitDesignTarget(design, None, S=S, mode=deletion, model=model, summarizer_model="extractive",
                                    k=k, collection=unit_collection(unit), name=design.name)
        try:
            records += run_unit(target, [inst], plan).records
        finally:
            target.close()
    return compute_metrics(records, n_resamples=n_resamples, seed=seed), records


def logged_metrics(log: Any) -> dict[str, float]:
    return {name: m.value for s in log.results.scores for name, m in s.metrics.items()}


def expected(m: dict) -> dict[str, float]:
    """The task's metric names for memkit's own numbers."""
    row, frs = m["by_S"][0], m["frs"][0]
    out = {"PR": row["PR"], "PR_after": frs["PR_after"]}
    for lv in (*LEVELS, "max"):
        out[f"AER_{lv}"] = row[f"AER_{lv}"]
        out[f"AER_{lv}_ci_low"], out[f"AER_{lv}_ci_high"] = row[f"AER_{lv}_ci"]
    out["PR_ci_low"], out["PR_ci_high"] = row["PR_ci"]
    for t in [*frs["tiers_measured"], "worst"]:
        out[f"FRS_{t}"] = frs[f"FRS_{t}"]
        out[f"FRS_{t}_ci_low"], out[f"FRS_{t}_ci_high"] = frs[f"FRS_{t}_ci"]
    return out


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_mock_model_scores_equal_memkits_own_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    assert seed_tiktoken() is not None  # inspect counts mockllm's tokens offline
    [log] = inspect_eval(memory_privacy(n=3, seed=0, n_resamples=200),
                         model=get_model("mockllm/model", custom_outputs=inspect_echo),
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    log = read_eval_log(log.location)
    assert log.eval.task == "memkit/memory_privacy"
    got = logged_metrics(log)
    own, records = memkit_own(3, 0, 1, 3, "full_purge", Echo(), 200)
    want = expected(own)
    assert {k: got.get(k) for k in want} == want
    assert want["AER_max"] > 0 and want["PR"] > 0  # the echo leaks: the comparison is not of zeros
    canaries = {r["question_id"]: r["value"] for r in records if r["type"] == "canary"}
    for sample in log.samples:
        assert sample.metadata["canary"] == canaries[sample.id]
        assert [p["level"] for p in sample.metadata["probes"]] == [r["level"] for r in records
                                                                  if r["type"] == "call" and r["phase"] == "main"
                                                                  and r["question_id"] == sample.id
                                                                  and r["query_kind"] == "probe"]
        mine = [r for r in records if r.get("question_id") == sample.id and r["type"] == "call"]
        assert sample.scores["aer"].value["AER_max"] == compute_metrics(mine, n_resamples=1)["by_S"][0]["AER_max"]
        question = next(r for r in mine if r["phase"] == "main" and r["query_kind"] == "question")
        assert sample.output.completion == question["response"]


@pytest.mark.llm
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_llama_cpp_through_inspects_provider_equals_memkits_own_run(tmp_path, llama_server):
    """gemma3-270m behind llama.cpp's OpenAI-compatible server: inspect's
    ``llama-cpp-python`` provider for the task, LangChain's OpenAI client (memkit's
    ``openai:`` spec) for memkit's own run; temperature 0, at most 32 tokens (a short test)."""
    from memkit.models.chat import chat_model

    [log] = inspect_eval(memory_privacy(n=1, seed=0, S=0, n_resamples=100), model="llama-cpp-python/gemma",
                         model_base_url=llama_server, temperature=0.0, max_tokens=32,
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    log = read_eval_log(log.location)
    lc = chat_model("openai:gemma", base_url=llama_server, api_key="local", temperature=0.0, max_tokens=32)
    own, records = memkit_own(1, 0, 0, 3, "full_purge", lc, 100)
    want = expected(own)
    assert {k: logged_metrics(log).get(k) for k in want} == want
    [sample] = log.samples
    question = next(r for r in records if r["type"] == "call" and r["phase"] == "main"
                    and r["query_kind"] == "question")
    assert sample.output.completion == question["response"] and question["response"]
