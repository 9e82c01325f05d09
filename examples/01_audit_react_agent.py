"""Example 1: audit a LangGraph agent whose long-term memory lives in a MemkitStore.

The agent is the usual LangGraph long-term-memory pattern, built from stock parts:

* a **memory writer** graph (run in the background after each conversation): it
  stores every user turn in the namespace ``("memories", user_id)`` and the session's
  key facts in ``("memories", user_id, "facts")``;
* a **recall-then-answer** chat agent (``MessagesState``, an ``InMemorySaver``
  checkpointer): ``recall`` searches the user's memories (``store.search`` under
  ``("memories", user_id)``, top ``k``) and ``answer`` prompts a chat model with them.

Both are compiled with ``store=MemkitStore(...)``; the store puts user turns in the
``raw`` tier and facts in the ``summary`` tier (a tier rule on the namespace prefix).
:func:`evaluators.audit.audit` then plants one canary per user, feeds the sessions,
probes the agent (a fresh thread per question), forgets every canary with a deletion
mode and probes again.

Runs offline: ``--model extractive`` (default; memkit's model-free chat model) or
``--model llamacpp:gemma3-270m`` (needs the ``llamacpp`` extra).

    python examples/01_audit_react_agent.py --n 4 --mode full_purge
    python examples/01_audit_react_agent.py --n 4 --mode raw_only   # facts keep the secret
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import PutOp

from evaluators.audit import audit, store_forgetter
from graphs.forget import DELETION_MODES
from graphs.prompts import respond_prompt
from memkit.models.chat import chat_model
from memkit.models.extractive import key_facts
from memkit.store.langgraph import MemkitStore


def make_store() -> MemkitStore:
    """An in-memory MemkitStore: items embedded by their ``content`` field; user turns
    in the ``raw`` tier, facts under ``("memories", <user>, "facts")`` in ``summary``."""
    return MemkitStore(index={"fields": ["content"]}, tiers={("memories", "*", "facts"): "summary"})


class AgentState(MessagesState):
    """Chat messages plus the memories recalled for the last question."""

    memories: list[str]


def build_agent(store: MemkitStore, model: str | BaseChatModel = "extractive", k: int = 3,
                checkpointer: Any = None) -> Any:
    """The recall-then-answer agent: ``START -> recall -> answer -> END``, compiled with
    ``checkpointer`` (default an ``InMemorySaver``: every conversation is kept, which
    the audit scans as the ``checkpoint`` surface).

    ``model`` is a spec for :func:`memkit.models.chat.chat_model` or a chat model. The user
    is ``config["configurable"]["user_id"]``; memories come from ``runtime.store``
    (the store the graph is compiled with).
    """
    llm = chat_model(model) if isinstance(model, str) else model

    def recall(state: AgentState, config: RunnableConfig, runtime: Runtime) -> dict[str, Any]:
        user = config["configurable"]["user_id"]
        query = str(state["messages"][-1].content)
        items = runtime.store.search(("memories", user), query=query, limit=k)
        return {"memories": [item.value["content"] for item in items]}

    def answer(state: AgentState) -> dict[str, Any]:
        query = str(state["messages"][-1].content)
        return {"messages": [llm.invoke(respond_prompt(query, state["memories"]))]}

    graph = StateGraph(AgentState)
    graph.add_node("recall", recall)
    graph.add_node("answer", answer)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "answer")
    graph.add_edge("answer", END)
    return graph.compile(store=store, checkpointer=checkpointer or InMemorySaver(), name="memory-agent")


class WriterState(TypedDict):
    """Input of the memory writer: one finished conversation."""

    turns: list[dict[str, Any]]
    session_id: str
    date: str
    user_id: str


def build_memory_writer(store: MemkitStore) -> Any:
    """The background memory writer: ``START -> remember -> reflect -> END``.

    ``remember`` stores each user turn (key ``<session>/<turn>``); ``reflect`` stores
    the session's key facts (:func:`memkit.models.extractive.key_facts`: the user's
    first-person statements) under the ``facts`` sub-namespace.
    """

    def remember(state: WriterState, runtime: Runtime) -> dict[str, Any]:
        ns = ("memories", state["user_id"])
        runtime.store.batch([  # one batch: one embedding call for the session
            PutOp(ns, f"{state['session_id']}/{i}", {"content": turn["content"], "date": state["date"]})
            for i, turn in enumerate(state["turns"])
            if turn["role"] == "user"
        ])
        return {}

    def reflect(state: WriterState, runtime: Runtime) -> dict[str, Any]:
        ns = ("memories", state["user_id"], "facts")
        texts = [t["content"] for t in state["turns"] if t["role"] == "user"]
        runtime.store.batch([
            PutOp(ns, f"{state['session_id']}/fact-{j}", {"content": fact, "date": state["date"]})
            for j, fact in enumerate(key_facts(texts))
        ])
        return {}

    graph = StateGraph(WriterState)
    graph.add_node("remember", remember)
    graph.add_node("reflect", reflect)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "reflect")
    graph.add_edge("reflect", END)
    return graph.compile(store=store, name="memory-writer")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the audit and print its report; returns the result as a dict."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4, help="users (LongMemEval instances)")
    parser.add_argument("--data", default="synthetic", help="'synthetic' or a LongMemEval JSON file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="extractive", help="chat model spec (memkit.models.chat.chat_model)")
    parser.add_argument("--k", type=int, default=3, help="memories recalled per question")
    parser.add_argument("--mode", default="full_purge", choices=DELETION_MODES, help="deletion mode")
    parser.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--delete-threads", action="store_true",
                        help="after the forget, also delete each user's conversations (checkpointer threads)")
    parser.add_argument("--json", type=Path, help="also write the result (with every call) here")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    store = make_store()
    agent = build_agent(store, args.model, args.k)
    feed = build_memory_writer(store)
    result = audit(agent, feed=feed, forget=store_forgetter(store, args.mode),
                   forget_mode=args.mode, delete_threads=args.delete_threads, store=store,
                   data=args.data, n=args.n, seed=args.seed, n_resamples=args.n_resamples)
    print(result.report)
    out = result.to_dict(records=True)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(f"audited {result.n} users in {out['seconds']} s: PR {result.pr:.2f}, "
          f"AER_max {result.aer['max']:.2f} -> {result.aer_after['max']:.2f} after {args.mode}, "
          f"FRS_worst {result.frs['worst']:.2f}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
