"""Built-in target ``langmem``: LangMem's memory tools inside a LangGraph agent.

The agent is LangGraph's prebuilt ReAct agent (``create_react_agent``) with LangMem's
own tools, ``create_manage_memory_tool`` and ``create_search_memory_tool``, under the
namespace ``("memories", "{user_id}")`` of the store under audit (any backend of
:mod:`evaluators.targets.langgraph`: ``memory``, ``sqlite``, ``postgres``; the same
surfaces and deletion steps). Every memory write and delete goes through LangMem's
real tool code and the store's API.

**Stand-in for the model.** Which tool to call is a model's choice; here a
deterministic scripted policy (:class:`ScriptedToolPolicy`, a LangChain chat model
that only emits tool calls by rule) stands in for it, so the audit measures the
memory and not a model's whims:

* after a conversation (``feed``): one ``manage_memory(action="create", content=turn)``
  per user turn, as an agent told to remember what the user says would;
* a question (``ask``): ``search_memory(query=question, limit=k)``, then the answer
  from the memories found (memkit's model-free ``extractive`` model, or ``model=``);
* forget a secret: ``search_memory(query=secret)`` over every memory of the user,
  then ``manage_memory(action="delete", id=...)`` for each memory holding it;
* forget a user: the same search, deleting every memory, and the user's threads.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from evaluators.targets import langgraph as lg
from memkit.scan.matching import matcher

__all__ = ["ScriptedToolPolicy", "build"]

_REMEMBER, _FORGET, _FORGET_USER = "[remember]", "[forget]", "[forget-user]"
_ALL = 10_000  # search limit that covers every memory of a user


class ScriptedToolPolicy(BaseChatModel):
    """A stand-in for the agent's model (module doc): emits LangMem tool calls by rule.

    Attributes:
        answer_model: the chat model that writes the final answer of a question from
            the memories found (memkit's ``extractive`` by default).
        k: memories a question searches for.
    """

    answer_model: Any = None
    k: int = 3

    @property
    def _llm_type(self) -> str:
        return "memkit-scripted-tool-policy"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolPolicy:
        """The policy knows its tools by name; binding changes nothing."""
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        i = max(j for j, m in enumerate(messages) if isinstance(m, HumanMessage))
        task, after = str(messages[i].content), messages[i + 1:]
        tools = [m for m in after if isinstance(m, ToolMessage)]
        return ChatResult(generations=[ChatGeneration(message=self._next(task, tools))])

    @staticmethod
    def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}

    def _next(self, task: str, tools: list[ToolMessage]) -> AIMessage:
        if task.startswith(_REMEMBER):
            if tools:
                return AIMessage("Saved.")
            lines = [ln for ln in json.loads(task[len(_REMEMBER):]) if ln.strip()]
            return AIMessage("", tool_calls=[self._call("manage_memory", {"content": ln, "action": "create"})
                                             for ln in lines])
        if task.startswith((_FORGET_USER, _FORGET)):
            if not tools:
                secret = task[len(_FORGET):].strip() if task.startswith(_FORGET + " ") else ""
                return AIMessage("", tool_calls=[self._call("search_memory",
                                                            {"query": secret or "memory", "limit": _ALL})])
            if len(tools) > 1:
                return AIMessage("Deleted.")
            found = json.loads(str(tools[0].content))
            if task.startswith(_FORGET_USER):
                doomed = [m["key"] for m in found]
            else:
                m = matcher(task[len(_FORGET):].strip())
                doomed = [x["key"] for x in found if m.contains(x.get("value"))]
            if not doomed:
                return AIMessage("Nothing to delete.")
            return AIMessage("", tool_calls=[self._call("manage_memory", {"action": "delete", "id": key})
                                             for key in doomed])
        if not tools:
            return AIMessage("", tool_calls=[self._call("search_memory", {"query": task, "limit": self.k})])
        from graphs.prompts import respond_prompt

        memories = [str(x["value"].get("content", "")) for x in json.loads(str(tools[-1].content))]
        return AIMessage(self.answer_model.invoke(respond_prompt(task, memories)).text)


def build(backend: str = "memory", *, pg_uri: str | None = None, pgdata: str | Path | None = None,
          workdir: str | Path | None = None, model: Any = "extractive", k: int = 3,
          embed: Any = None, dims: int | None = None) -> Any:
    """The ``langmem`` target on a backend (arguments as
    :func:`evaluators.targets.langgraph.build`): LangGraph's prebuilt ReAct agent with
    LangMem's tools, through the one adapter (:class:`evaluators.targets.agent.AgentTarget`).

    Raises:
        ImportError: langmem is not installed (the ``langmem`` extra).
    """
    try:
        from langmem import create_manage_memory_tool, create_search_memory_tool
    except ModuleNotFoundError as exc:
        raise ImportError("target 'langmem' needs langmem (pip install -e '.[langmem]')") from exc
    from langgraph.prebuilt import create_react_agent

    from evaluators.targets.agent import AgentTarget
    from memkit.models.chat import chat_model

    if backend not in lg.BACKENDS:
        raise ValueError(f"unknown langgraph backend {backend!r}; use one of {lg.BACKENDS}")
    embed, dims = lg.default_embed(embed, dims)
    store, saver, closers = lg.open_backend(backend, embed, dims, pg_uri, workdir)
    ns = (lg.NAMESPACE, "{user_id}")
    tools = [create_manage_memory_tool(namespace=ns), create_search_memory_tool(namespace=ns)]
    policy = ScriptedToolPolicy(answer_model=chat_model(model) if isinstance(model, str) else model, k=k)
    agent = create_react_agent(policy, tools, store=store, checkpointer=saver, name="langmem-agent")
    holder: dict[str, Any] = {}

    def run(text: str, user_id: str, thread_id: str) -> str:
        return holder["target"].ask(text, user_id, thread_id)

    def feed(turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        lines = [str(t["content"]) for t in turns if t.get("role") == "user" and str(t.get("content", "")).strip()]
        run(_REMEMBER + json.dumps(lines), user_id, f"{user_id}:{session_id}")

    def forget(secret: str, user_id: str) -> str:
        return run(f"{_FORGET} {secret}", user_id, f"memkit-forget:{uuid.uuid4().hex}")

    def forget_user(user_id: str) -> str:
        out = run(_FORGET_USER, user_id, f"memkit-forget:{uuid.uuid4().hex}")
        holder["target"].delete_threads(user_id)
        return out

    target = AgentTarget(agent, feed=feed, forget=forget, forget_user=forget_user, forget_mode="langmem delete",
                         store=store, checkpointer=saver, pgdata=pgdata, name=f"langmem[{backend}]",
                         namespace_for=lambda u: (lg.NAMESPACE, u), cleanup=False)
    holder["target"] = target
    target.attached.closers += closers
    return target
