"""An agent's own module, as `memkit audit` loads it in CI: `build` returns the agent.

    memkit audit examples.my_agent:build --mode raw_only --fail-on residue            # exit 1
    memkit audit examples.my_agent:build --mode full_purge --delete-threads --fail-on residue  # exit 0

`build` wires example 1's agent (``examples/01_audit_react_agent.py``: a
recall-then-answer LangGraph agent with an ``InMemorySaver``, and a memory writer,
both over a ``MemkitStore``) and returns what :func:`evaluators.audit.audit` needs:
the agent, how a session is fed, how a secret is forgotten (a deletion mode of
``graphs/forget.py``), and the store to scan. The agent's checkpointer is found on
the compiled graph and scanned too. In your own project, `build` returns your
agent the same way (or an :class:`evaluators.targets.base.Target`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from evaluators.audit import store_forgetter


def _example_1() -> Any:
    path = Path(__file__).with_name("01_audit_react_agent.py")
    spec = importlib.util.spec_from_file_location("memkit_example_01", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # LangGraph reads the state classes' annotations through it
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def build(mode: str = "full_purge") -> dict[str, Any]:
    """Example 1's agent, feed, forget (deletion ``mode``) and store, for ``memkit audit``.

    Args:
        mode: a deletion mode of ``graphs/forget.py`` (``raw_only``, ``full_purge`` ...).

    Returns:
        ``{"agent", "feed", "forget", "store", "forget_mode"}``.
    """
    ex = _example_1()
    store = ex.make_store()
    return {"agent": ex.build_agent(store), "feed": ex.build_memory_writer(store),
            "forget": store_forgetter(store, mode), "store": store, "forget_mode": mode}
