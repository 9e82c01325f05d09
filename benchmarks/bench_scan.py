"""Benchmark: memkit's byte-surface scan for many secrets against GNU grep, same files, same run.

Builds a directory of mixed store files (SQLite databases of JSON documents written
with ``sqlite3``, JSONL chat turns, plain text, random binary; the text holds line
breaks, accents, curly quotes and a little markup, so the JSON holds escapes) of about ``--mib`` MiB with planted verbatim
copies of the secrets, one per line, then times

* GNU ``grep -c -a -F -f SECRETS FILES`` (exact literals only), and
* memkit: every file through :class:`memkit.scan_engine.ScanEngine` (every spelling
  :mod:`memkit.matching` defines; ``--impl per-secret`` scans each secret with its
  own byte pattern instead, as memkit did before the engine, and runs on older
  checkouts too),

each in its own process, for each ``--secrets`` count. It prints wall time, MiB/s,
memkit/grep ratio and memkit's peak RSS, and checks that both find exactly the
planted copies (grep counts lines; each planted copy is alone on its line). Goal
(issue 22): memkit within 2x grep's wall time, peak RSS under 1 GiB.

Run: ``python benchmarks/bench_scan.py [--mib 1024] [--secrets 1,100,1000] [--impl engine]``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WORDS = ("the of and to in is was for on that with as by at from his her they have had my "
          "dog cat lake garden bread morning session memory user said token phone window "
          "river table coffee train music winter summer book letter friend house street").split()
_TAGS = ["VIOLET", "AMBER", "CEDAR", "DELTA", "EMBER", "FALCON", "GARNET", "HARBOR",
         "INDIGO", "JASPER", "KESTREL", "LUNAR", "MAPLE", "NECTAR", "ORCHID", "PEBBLE"]


def secrets_for(n: int, seed: int) -> list[str]:
    """``n`` distinct canary-shaped secrets (``XQ7-VIOLET-3829``), seeded."""
    rng = random.Random(seed)
    alnum = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
    out: dict[str, None] = {}
    while len(out) < n:
        out["".join(rng.choice(alnum) for _ in range(3)) + "-" + rng.choice(_TAGS) + "-"
            + "".join(rng.choice("0123456789") for _ in range(4))] = None
    return list(out)


_MARKS = ["caf\u00e9", "na\u00efve", "\u2014", "\u201cquoted\u201d", "it's", "50%", "a&b", "<b>bold</b>"]
"""What chat text holds besides words: accents, dashes, curly quotes, markup."""


def _prose(rng: random.Random, n_bytes: int) -> bytes:
    words = []
    size = 0
    while size < n_bytes:
        w = rng.choice(_WORDS) if rng.random() < 0.97 else rng.choice(_MARKS)
        words.append(w)
        size += len(w) + 1
        if rng.random() < 0.02:
            words.append("\n")  # a line break inside a message
    return " ".join(words).encode()


def build(root: Path, mib: int, secrets: list[str], copies: int, seed: int) -> dict[str, int]:
    """Write the mixed files under ``root``; return planted copies per file."""
    rng = random.Random(seed)
    kinds = ["sqlite", "jsonl", "text", "binary"]
    per_file = 8 << 20
    n_files = max(4, (mib << 20) // per_file)
    size = (mib << 20) // n_files
    planted: dict[str, int] = {}
    placements = [rng.randrange(n_files) for _ in range(copies)]
    which = [secrets[i % len(secrets)] for i in range(copies)]
    for f in range(n_files):
        kind = kinds[f % len(kinds)]
        mine = [s for s, p in zip(which, placements, strict=True) if p == f]
        path = root / f"f{f:04d}.{ {'sqlite': 'db', 'jsonl': 'jsonl', 'text': 'txt', 'binary': 'bin'}[kind]}"
        if kind == "sqlite":
            con = sqlite3.connect(path)
            con.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, text TEXT)")
            rows, written = [], 0
            while written < size:  # documents as a vector store keeps them: JSON with metadata
                t = json.dumps({"document": _prose(rng, 2000).decode(), "metadata": {"user": "u1"}})
                rows.append((t,))
                written += len(t)
            rows += [(f"\n{s}\n",) for s in mine]
            con.executemany("INSERT INTO memories (text) VALUES (?)", rows)
            con.commit()
            con.close()
        elif kind == "jsonl":
            with open(path, "w", encoding="utf-8") as fh:
                written = 0
                while written < size:
                    line = json.dumps({"role": "user", "content": _prose(rng, 400).decode()}) + "\n"
                    fh.write(line)
                    written += len(line)
                for s in mine:
                    fh.write(s + "\n")
        elif kind == "text":
            with open(path, "wb") as fh:
                fh.write(_prose(rng, size) + b"\n")
                for s in mine:
                    fh.write(s.encode() + b"\n")
        else:
            with open(path, "wb") as fh:
                fh.write(rng.randbytes(size) + b"\n")
                for s in mine:
                    fh.write(s.encode() + b"\n")
        planted[str(path)] = len(mine)
    return planted


_MEMKIT = r"""
import json, sys
from pathlib import Path
impl, secrets_file, *files = sys.argv[1:]
secrets = [s for s in Path(secrets_file).read_text().splitlines() if s]
counts = {}
if impl == "engine":
    from memkit.scan_engine import scan_files
    counts = {f: sum(c.values()) for f, c in scan_files(secrets, files).items()}
else:
    import mmap
    from memkit.matching import matcher
    ms = [matcher(s) for s in secrets]
    for f in files:
        with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            counts[f] = sum(len(m.byte_spans(mm)) for m in ms)
print(json.dumps(counts))
"""


def _run(cmd: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{cmd[0]} failed ({out.returncode}): {out.stderr[-2000:]}")
    return wall, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024, help="total size of the directory (MiB)")
    ap.add_argument("--secrets", default="1,100,1000", help="comma-separated secret counts")
    ap.add_argument("--copies", type=int, default=50, help="planted copies in the directory")
    ap.add_argument("--impl", choices=["engine", "per-secret"], default="engine")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--dir", type=Path, default=None, help="where to build (default: a temp dir)")
    # peak RSS is the maximum over child processes: grep's is small, memkit's dominates
    args = ap.parse_args()
    grep = shutil.which("grep")
    if grep is None:
        sys.exit("GNU grep not found")
    root = Path(tempfile.mkdtemp(prefix="memkit-bench-scan-", dir=args.dir))
    try:
        print(f"{'secrets':>8} {'grep s':>8} {'grep MiB/s':>10} {'memkit s':>9} {'memkit MiB/s':>12} "
              f"{'ratio':>6} {'RSS MiB':>8}  found")
        for k in [int(x) for x in args.secrets.split(",")]:
            secrets = secrets_for(k, args.seed)
            shutil.rmtree(root)
            root.mkdir()
            data = root / "data"
            data.mkdir()
            planted = build(data, args.mib, secrets, args.copies, args.seed)
            files = sorted(planted)
            mib = sum(Path(f).stat().st_size for f in files) / 2**20
            sfile = root / "secrets.txt"
            sfile.write_text("\n".join(secrets) + "\n")
            g_wall, g_out = _run([grep, "-c", "-a", "-F", "-f", str(sfile), *files])
            g_counts = {ln.rsplit(":", 1)[0]: int(ln.rsplit(":", 1)[1]) for ln in g_out.splitlines()}
            m_wall, m_out = _run([sys.executable, "-c", _MEMKIT, args.impl, str(sfile), *files])
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            m_counts = json.loads(m_out)
            ok = g_counts == planted == m_counts
            note = "exactly the planted copies" if ok else (
                f"MISMATCH planted {sum(planted.values())}, grep {sum(g_counts.values())}, "
                f"memkit {sum(m_counts.values())}")
            print(f"{k:>8} {g_wall:8.2f} {mib / g_wall:10.1f} {m_wall:9.2f} {mib / m_wall:12.2f} "
                  f"{m_wall / g_wall:6.1f} {rss:8.0f}  {note}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
