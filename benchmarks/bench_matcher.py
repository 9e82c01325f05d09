"""Benchmark: the secret matcher's time on adversarial text, as a ratio to plain text.

A store can hold text written to trap a regex: long runs of separators, escapes or
tags between near-miss characters. :mod:`memkit.scan.matching` keeps separator runs atomic,
so its time grows linearly; this prints, for 100 KB of each trap, the search time
divided by the time on 100 KB of ordinary prose measured in the same run (the target:
every ratio within a small constant, never growing with the length).

Run: ``python benchmarks/bench_matcher.py [--kb 100]``.
"""

from __future__ import annotations

import argparse

from timing import best_of  # benchmarks/timing.py (run from any directory)

from memkit.scan.matching import matcher

SECRET = "XQ7-VIOLET-3829"
TRAPS = ["\\", "<q>", "&#7;", "-", "\\u2013", "%2D", "\u200b", "&nbsp;"]




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=int, default=100)
    args = ap.parse_args()
    n = args.kb * 1000
    m = matcher(SECRET)
    prose = ("I walked the dog to the lake and back before breakfast. " * (n // 56 + 1))[:n]
    base_t = best_of(lambda: m.search(prose))
    base_b = best_of(lambda: m.bytes.search(prose.encode()))
    print(f"{args.kb} KB of prose: text {base_t * 1e3:.2f} ms, bytes {base_b * 1e3:.2f} ms (baseline)")
    for trap in TRAPS:
        text = "XQ7" + trap * (n // len(trap)) + "Z"
        t = best_of(lambda text=text: m.search(text))
        b = best_of(lambda text=text: m.bytes.search(text.encode()))
        print(f"  trap {trap!r:>10}: text {t / base_t:6.2f}x, bytes {b / base_b:6.2f}x the baseline")


if __name__ == "__main__":
    main()
