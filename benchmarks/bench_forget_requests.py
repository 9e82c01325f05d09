"""Forget requests in words: how often each resolver finds the item, per request kind.

For ``--n`` synthetic users (seeded), each with a planted canary (session token) and
a planted fact (PIN, doctor's name or home address), every request of
:data:`evaluators.forget_requests.REQUEST_KINDS` about each item is resolved over the
user's stored turns (:func:`graphs.forget_request.resolve`) by the deterministic
resolver and, with ``--model``, by the LLM resolver (a llama.cpp model by default).
A request succeeds when the sentences it resolved to hold the item's value; the
table also counts requests that selected a sentence *without* the value (wrong items,
the collateral a deletion would cause).

Usage::

    python benchmarks/bench_forget_requests.py --n 6 --model llamacpp:smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

from evaluators.forget_requests import REQUEST_KINDS, request_text
from graphs.forget_request import resolve, store_items
from graphs.memory import write_session
from graphs.nodes import make_summarizer
from memkit.dataset.canaries import plant
from memkit.dataset.facts import plant_fact
from memkit.dataset.synthetic import synthetic
from memkit.scan.matching import matcher
from memkit.store import TieredMemoryStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=6, help="synthetic users")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=None, help="chat model spec for the LLM resolver (default: none)")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    args = ap.parse_args()
    store = TieredMemoryStore(collection="bench-requests")
    summarizer = make_summarizer("extractive")
    users = []
    for inst in synthetic(args.n, args.seed):
        p, c = plant(inst, args.seed)
        p, f = plant_fact(p, args.seed, avoid=(c.session_index, c.turn_index))
        for sid, date, turns in p.sessions():
            write_session(store, inst.question_id, sid, date, [t.to_dict() for t in turns], 0, summarizer)
        users.append((inst.question_id, p, [("secret", c.value, c.kind, c.session_index),
                                            ("fact", f.value, f.category, f.session_index)]))
    resolvers = {"deterministic": None}
    if args.model:
        from memkit.models import chat_model

        resolvers[args.model] = chat_model(args.model, max_tokens=16)
    table: dict[str, dict[str, list[int]]] = {r: defaultdict(lambda: [0, 0, 0]) for r in resolvers}
    seconds: dict[str, float] = defaultdict(float)
    for ns, inst, items in users:
        candidates = store_items(store, ns)
        for _about, value, category, session in items:
            m = matcher(value)
            for kind in REQUEST_KINDS:
                text = request_text(kind, category, value, inst.haystack_dates[session], seed=args.seed)
                for name, model in resolvers.items():
                    t0 = time.perf_counter()
                    res = resolve(text, candidates, store.embedder, chat_model=model)
                    seconds[name] += time.perf_counter() - t0
                    hit = any(m.search(t) for t in res.texts())
                    wrong = any(not m.search(t) for t in res.texts())
                    row = table[name][kind]
                    row[0] += hit
                    row[1] += wrong
                    row[2] += 1
    out = {name: {k: {"found": v[0] / v[2], "wrong_items": v[1] / v[2], "requests": v[2]} for k, v in rows.items()}
           for name, rows in table.items()}
    if args.json:
        print(json.dumps({"n_users": args.n, "seed": args.seed, "resolvers": out,
                          "seconds": dict(seconds)}, indent=2))
        return
    names = list(resolvers)
    print(f"{args.n} users x 2 items, seed {args.seed}; share of requests resolved to the item "
          "(share that also selected a wrong item)")
    print("| kind | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for kind in REQUEST_KINDS:
        cells = [f"{out[n][kind]['found']:.2f} ({out[n][kind]['wrong_items']:.2f})" for n in names]
        print(f"| {kind} | " + " | ".join(cells) + " |")
    print("seconds:", {k: round(v, 1) for k, v in seconds.items()})


if __name__ == "__main__":
    main()
