"""Example 4: point memkit at Ollama or an OpenAI(-compatible) model.

The audit of example 1, with the agent's answers written by a served model:

    # Ollama (https://ollama.com): `ollama serve` and `ollama pull gemma3:12b` first
    python examples/04_remote_backends.py --provider ollama --model gemma3:12b

    # OpenAI: needs OPENAI_API_KEY in the environment
    python examples/04_remote_backends.py --provider openai --model gpt-4o-mini

    # any OpenAI-compatible server (llama.cpp's, vLLM, LM Studio ...)
    python -m llama_cpp.server --model FILE.gguf --model_alias gemma --port 8080 &
    python examples/04_remote_backends.py --provider openai --model gemma \\
        --base-url http://127.0.0.1:8080/v1

The same specs work everywhere memkit takes a model: ``memkit sweep --model
ollama:gemma3:12b``; ``OLLAMA_HOST`` / ``OPENAI_BASE_URL`` set the server for the
sweep. When the service is not there the script exits with status 2 and says what to
start or set (``memkit.models.chat.chat_model`` checks the server before anything runs).
Only the named service is contacted; the embedder stays local.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from evaluators.audit import audit, store_forgetter
from graphs.forget import DELETION_MODES
from memkit.models.chat import ModelSpecError, chat_model


def _example1() -> ModuleType:
    """Example 1's module (its agent, memory writer and store), loaded from its file."""
    path = Path(__file__).with_name("01_audit_react_agent.py")
    spec = importlib.util.spec_from_file_location("memkit_example_01", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # LangGraph resolves the state schema's annotations there
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    """Run the audit against the served model; returns the exit status (2: no service)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=("ollama", "openai"), required=True)
    parser.add_argument("--model", required=True, help="model name at the provider")
    parser.add_argument("--base-url", help="server URL (Ollama host, or an OpenAI-compatible /v1 URL)")
    parser.add_argument("--max-tokens", type=int, default=128, help="answer length cap")
    parser.add_argument("--n", type=int, default=2, help="users (LongMemEval instances)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", default="full_purge", choices=DELETION_MODES)
    parser.add_argument("--no-forget", action="store_true", help="skip the forget phase")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)

    kw: dict[str, Any] = {"temperature": 0}
    if args.base_url:
        kw["base_url"] = args.base_url
    if args.provider == "openai":
        kw["max_tokens"] = args.max_tokens
    else:
        kw["num_predict"] = args.max_tokens
    spec = f"{args.provider}:{args.model}"
    try:
        llm = chat_model(spec, **kw)
    except ModelSpecError as exc:
        print(f"04_remote_backends: {spec} is not available: {exc}", file=sys.stderr)
        return 2

    ex1 = _example1()
    t0 = time.perf_counter()
    store = ex1.make_store()
    agent = ex1.build_agent(store, llm)
    forget = None if args.no_forget else store_forgetter(store, args.mode)
    result = audit(agent, feed=ex1.build_memory_writer(store), forget=forget, forget_mode=args.mode, store=store,
                   n=args.n, seed=args.seed)
    print(result.report)
    out = result.to_dict(records=True)
    out["model"] = spec
    out["seconds"] = round(time.perf_counter() - t0, 2)
    print(f"{spec}: PR {result.pr:.2f}, AER_max {result.aer['max']:.2f} ({out['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
