"""Example 5: audit a popular memory layer, mem0, through :func:`evaluators.audit.audit`.

mem0 (package ``mem0ai``, the ``mem0`` extra) is configured fully offline:

* ``infer=False``: each message is stored as a memory as it is (no LLM extraction);
* vector store: Chroma with a local path (``<workdir>/chroma``);
* embedder: the bundled all-MiniLM-L6-v2 (``memkit.models.chat.minilm_path()``) through
  mem0's ``huggingface`` provider; no download;
* history database: ``<workdir>/history.db`` (SQLite: mem0 logs every ADD, UPDATE and
  DELETE with the old and new text);
* LLM: a LangChain chat model through mem0's ``langchain`` provider (never called with
  ``infer=False``), telemetry off (``MEM0_TELEMETRY=False``, set before import).

The agent answers from the user's top-``k`` mem0 search results with memkit's respond
prompt. The forget is mem0's own ``Memory.delete_all(user_id=...)``. The audit reports
PR and AER before and after the forget, and the residue: ``store=`` is mem0's Chroma
directory (scanned byte by byte and through a Chroma client on a copy) and ``also=``
its history database (live rows through SQL, freed pages through bytes).

    python examples/05_audit_mem0.py --n 4 --workdir runs/mem0-audit

Runs offline; ``--model llamacpp:gemma3-270m`` uses a real llama.cpp model to answer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from evaluators.audit import audit  # noqa: E402
from graphs.prompts import respond_prompt  # noqa: E402
from memkit.models.chat import chat_model, minilm_path  # noqa: E402


def make_memory(workdir: Path, llm: Any) -> Any:
    """A mem0 ``Memory`` over Chroma in ``workdir/chroma``, the bundled MiniLM, and a
    history database ``workdir/history.db``; ``llm`` is a LangChain chat model."""
    os.environ.setdefault("MEM0_DIR", str(workdir / "mem0"))
    from mem0 import Memory

    config = {
        "vector_store": {"provider": "chroma",
                         "config": {"collection_name": "memories", "path": str(workdir / "chroma")}},
        "embedder": {"provider": "huggingface",
                     "config": {"model": str(minilm_path()), "embedding_dims": 384}},
        "llm": {"provider": "langchain", "config": {"model": llm}},
        "history_db_path": str(workdir / "history.db"),
    }
    return Memory.from_config(config)


def make_feed(memory: Any):
    """``feed(turns, session_id, date, user_id)``: add the session's messages as raw
    memories of the user (``infer=False``)."""

    def feed(turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        messages = [{"role": t["role"], "content": t["content"]} for t in turns if t.get("content")]
        memory.add(messages, user_id=user_id, infer=False,
                   metadata={"session_id": session_id, "date": date})

    return feed


def make_agent(memory: Any, llm: Any, k: int = 3):
    """``ask(text, user_id)``: answer from the user's top-``k`` mem0 memories."""

    def ask(text: str, user_id: str) -> str:
        found = memory.search(text, filters={"user_id": user_id}, top_k=k)
        memories = [m["memory"] for m in found.get("results", [])]
        return str(llm.invoke(respond_prompt(text, memories)).content)

    return ask


def make_forget(memory: Any):
    """``forget(secret, user_id)``: mem0's ``delete_all`` for the user (mem0 cannot
    forget one fact by value; a user's "forget me" deletes every memory of theirs)."""

    def forget(secret: str, user_id: str) -> Any:
        return memory.delete_all(user_id=user_id)

    return forget


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the audit of mem0 and print its report; returns the result as a dict."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4, help="users (LongMemEval instances)")
    parser.add_argument("--data", default="synthetic", help="'synthetic' or a LongMemEval JSON file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="extractive", help="chat model spec (memkit.models.chat.chat_model)")
    parser.add_argument("--k", type=int, default=3, help="memories recalled per question")
    parser.add_argument("--workdir", type=Path,
                        help="where mem0 keeps its files, kept after the run (default: a temporary "
                             "directory, removed at the end: the files hold the canaries)")
    parser.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--json", type=Path, help="also write the result (with every call) here")
    args = parser.parse_args(argv)

    try:
        import mem0  # noqa: F401
    except ModuleNotFoundError:
        parser.exit(2, "examples/05_audit_mem0.py needs mem0: pip install -e '.[mem0]' "
                       "(or bash scripts/setup.sh mem0)\n")
    if args.workdir is not None:
        if args.workdir.exists() and any(args.workdir.iterdir()):
            parser.error(f"--workdir {args.workdir} is not empty; give a new directory")
        args.workdir.mkdir(parents=True, exist_ok=True)
        return _run(args, args.workdir)
    # mem0's files hold every planted canary: without --workdir they live in a
    # temporary directory that is removed when the audit is done.
    with tempfile.TemporaryDirectory(prefix="memkit-mem0-") as tmp:
        out = _run(args, Path(tmp))
    print(f"mem0's files (they hold the planted canaries) were in {tmp}, now removed; "
          "pass --workdir DIR to keep them")
    return out


def _run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    llm = chat_model(args.model)
    memory = make_memory(workdir, llm)
    result = audit(make_agent(memory, llm, args.k), feed=make_feed(memory), forget=make_forget(memory),
                   forget_mode="mem0 delete_all", store=workdir / "chroma",
                   also=[str(workdir / "history.db")], data=args.data, n=args.n, seed=args.seed,
                   n_resamples=args.n_resamples)
    print(result.report)
    out = result.to_dict(records=True)
    out["workdir"] = str(workdir)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    left = {s: c for s, c in (result.residue or {}).items() if c}
    print(f"audited mem0 with {result.n} users in {out['seconds']} s: PR {result.pr:.2f} -> "
          f"{result.pr_after:.2f}, AER_max {result.aer['max']:.2f} -> {result.aer_after['max']:.2f} "
          f"after delete_all; users with copies left: {left or 'none'}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
