"""Benchmark: reading bytes in every encoding, as a ratio to the UTF-8 pass and to grep.

``memkit residue`` matches every file's bytes as UTF-8 and as UTF-16/32 at every
alignment (:mod:`memkit.scan.encodings`). Decoding each file twelve ways would cost about
twelve text scans; the wide passes instead map every code unit through a lookup table
with numpy and decode only runs that could hold a copy. This prints, per kind of
content (random binary, zeros, ASCII prose, UTF-16 prose, float32 vectors as in an
HNSW file), the time of the UTF-16/32 passes divided by the UTF-8 byte pattern's time
on the same bytes and by ``grep -c -F`` for the secret (GNU grep, measured in the same
run; a lower bound no matcher of every spelling reaches). The target: a small constant
factor over the UTF-8 pass, not twelve.

Run: ``python benchmarks/bench_coverage.py [--mb 8]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from timing import best_of  # benchmarks/timing.py (run from any directory)

from memkit.scan.encodings import wide_spans
from memkit.scan.matching import matcher

SECRET = "XQ7-violet-3829"




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=8)
    args = ap.parse_args()
    n = args.mb << 20
    rng = random.Random(0)
    prose = ("I walked the dog to the lake and back before breakfast. " * (n // 56 + 1))[:n]
    contents = {
        "random": rng.randbytes(n),
        "zeros": bytes(n),
        "ascii prose": prose.encode(),
        "utf-16 prose": prose[: n // 2].encode("utf-16-le"),
        "float32 vectors": np.random.default_rng(0).standard_normal(n // 4).astype(np.float32).tobytes(),
    }
    m = matcher(SECRET)
    wide_spans(b"warm up the tables", m)
    grep = shutil.which("grep")
    print(f"{args.mb} MiB each; secret {SECRET!r}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in contents.items():
            utf8 = best_of(lambda data=data: m.byte_spans(data))
            wide = best_of(lambda data=data: wide_spans(data, m))
            line = (f"  {name:>16}: utf-8 {utf8 * 1e3:7.1f} ms, utf-16/32 {wide * 1e3:7.1f} ms "
                    f"= {wide / utf8:5.1f}x the utf-8 pass")
            if grep:
                f = Path(tmp) / "data"
                f.write_bytes(data)
                g = best_of(lambda f=f: subprocess.run([grep, "-c", "-F", "-a", SECRET, str(f)],
                                                     capture_output=True))
                line += f", {(utf8 + wide) / g:6.1f}x grep -F"
            print(line)


if __name__ == "__main__":
    main()
