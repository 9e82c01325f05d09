"""Benchmark: ``memkit residue`` and its scan engine against GNU grep, same files, same run.

Builds mixed store files (SQLite databases of JSON documents written with ``sqlite3``,
JSONL chat turns, plain text, random binary; the text holds line breaks, accents, curly
quotes and a little markup, so the JSON holds escapes) of about ``--mib`` MiB, with
planted copies of the secrets: verbatim, each alone on its line (grep sees those), and
spellings grep cannot see (spaced lower case, a JSON ``\\u`` escape, fullwidth, UTF-16).
Then, for each ``--secrets`` count, best of ``--repeat``:

* **one large file**: ``grep -c -a -F -f SECRETS FILE`` against ``memkit residue STORE
  --secrets-file SECRETS --also FILE --json --no-embeddings`` (STORE: a small Chroma
  directory), FILE the mixed files concatenated; memkit's time is also given less its
  time on a 1-byte FILE (start-up, the store's own surfaces), which is what the file
  costs;
* **a directory**: ``grep -r -c -a -F -f SECRETS DIR`` against ``memkit residue DIR
  --secrets-file SECRETS --json --no-embeddings``, DIR a Chroma directory holding the
  mixed files; memkit's time also less its time on the store alone;
* **the engine** alone: :func:`memkit.scan.engine.scan_files` over the directory's
  files (every spelling, UTF-8 only), in its own process.

It prints wall times, the ratios to grep, each memkit process tree's peak RSS
(``getrusage(RUSAGE_CHILDREN)`` of a process that runs only it), the CPU seconds the
file and the directory cost (user and system, the worker processes included, less
those of the 1-byte file or the store alone; the command reads files in workers while
it loads chromadb, so its wall time can hide what its CPUs spend), and checks the counts:
grep finds exactly the verbatim copies, memkit every planted copy in the files' bytes
(each SQLite copy counted once, by its bytes). ``--huge 100000`` also times the large
file at that many secrets (no grep baseline: a check that it finishes, and its RSS).

Run: ``python benchmarks/bench_scan.py [--mib 128] [--secrets 1,100,10000] [--repeat 3]
[--huge 100000]``; ``--mib 1024`` for 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
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
_REPO = Path(__file__).resolve().parent.parent


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


def _hidden(secret: str, how: int) -> bytes:
    """A spelling grep cannot see, alone on its line."""
    if how == 0:
        return b"\n" + " ".join(secret.lower().split("-")).encode() + b"\n"  # xq7 violet 3829
    if how == 1:  # the second character escaped (an escaped first digit would end in that digit)
        return b'\n{"note": "' + secret[0].encode() + b"\\u00" + f"{ord(secret[1]):02x}".encode() + secret[2:].encode() + b'"}\n'
    if how == 2:
        return b"\n" + "".join(chr(0xFEE0 + ord(c)) if c.isalnum() else c for c in secret).encode() + b"\n"
    return b"\n\x00\x00" + f" {secret} ".encode("utf-16-le") + b"\x00\x00\n"


def build(root: Path, mib: int, secrets: list[str], copies: int, seed: int) -> dict[str, tuple[int, int, int]]:
    """Write the mixed files under ``root``; return ``{path: (verbatim, every spelling,
    those in UTF-8)}`` planted per file (each SQLite copy a row of its own)."""
    rng = random.Random(seed)
    kinds = ["sqlite", "jsonl", "text", "binary"]
    per_file = 8 << 20
    n_files = max(4, (mib << 20) // per_file)
    size = (mib << 20) // n_files
    planted: dict[str, tuple[int, int, int]] = {}
    placements = [rng.randrange(n_files) for _ in range(copies)]
    which = [secrets[i % len(secrets)] for i in range(copies)]
    for f in range(n_files):
        kind = kinds[f % len(kinds)]
        mine = [s for s, p in zip(which, placements, strict=True) if p == f]
        plain = mine[: (len(mine) + 1) // 2]
        hidden = [_hidden(s, k % 4) for k, s in enumerate(mine[len(plain):])]
        path = root / f"f{f:04d}.{ {'sqlite': 'db', 'jsonl': 'jsonl', 'text': 'txt', 'binary': 'bin'}[kind]}"
        if kind == "sqlite":
            con = sqlite3.connect(path)
            con.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, text TEXT)")
            rows, written = [], 0
            while written < size:  # documents as a vector store keeps them: JSON with metadata
                t = json.dumps({"document": _prose(rng, 2000).decode(), "metadata": {"user": "u1"}})
                rows.append((t,))
                written += len(t)
            rows += [(f"\n{s}\n",) for s in plain]
            rows += [(h.decode("utf-8", "surrogateescape"),) for h in hidden if b"\x00" not in h]
            hidden = [h for h in hidden if b"\x00" not in h]
            con.executemany("INSERT INTO memories (text) VALUES (?)", rows)
            con.commit()
            con.close()
        else:
            with open(path, "wb") as fh:
                if kind == "jsonl":
                    written = 0
                    while written < size:
                        line = (json.dumps({"role": "user", "content": _prose(rng, 400).decode()}) + "\n").encode()
                        fh.write(line)
                        written += len(line)
                elif kind == "text":
                    fh.write(_prose(rng, size) + b"\n")
                else:
                    fh.write(rng.randbytes(size) + b"\n")
                for s in plain:
                    fh.write(s.encode() + b"\n")
                for h in hidden:
                    fh.write(h)
        wide = sum(1 for h in hidden if b"\x00" in h)
        planted[str(path)] = (len(plain), len(plain) + len(hidden), len(plain) + len(hidden) - wide)
    return planted


def store(path: Path, seed: int) -> None:
    """A small Chroma directory written with chromadb (50 records, 384-dim vectors)."""
    import chromadb
    from chromadb.config import Settings

    rng = random.Random(seed)
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection("notes", embedding_function=None)
    docs = [_prose(rng, 300).decode() for _ in range(50)]
    col.add(ids=[f"n{i}" for i in range(50)], documents=docs,
            embeddings=[[rng.random() for _ in range(384)] for _ in docs])
    client.close()


_RUN = ("import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
        "w = time.perf_counter() - t\n"
        "sys.stderr.buffer.write(p.stderr)\n"
        "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "sys.stdout.buffer.write(f'{w} {r.ru_maxrss} {p.returncode} {r.ru_utime + r.ru_stime}\\n'"
        ".encode() + p.stdout)\n")


_CPU: dict[tuple[str, ...], float] = {}
"""Least CPU seconds (user and system, the command's processes and the workers they
waited for) of each command timed, by its arguments."""


def _time(cmd: list[str], repeat: int, ok: tuple[int, ...] = (0, 1, 3)) -> tuple[float, float, str]:
    """Best wall seconds of ``repeat`` runs, the largest peak RSS (MiB) of the command's
    process tree, and its output (of the last run); the least CPU seconds go to
    :data:`_CPU`."""
    best, rss, out, cpu = float("inf"), 0.0, "", float("inf")
    for _ in range(repeat):
        p = subprocess.run([sys.executable, "-c", _RUN, *cmd], capture_output=True, text=True, check=False)
        head, _, out = p.stdout.partition("\n")
        wall, maxrss, rc, used = head.split()
        if int(rc) not in ok:
            raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({rc}): {p.stderr[-2000:]}")
        best, rss, cpu = min(best, float(wall)), max(rss, int(maxrss) / 1024), min(cpu, float(used))
    _CPU[tuple(cmd)] = cpu
    return best, rss, out


_RAW = re.compile(r"@\d+")


def _memkit_counts(report: str, top: str) -> dict[str, int]:
    """Copies per file in a ``memkit residue --json`` report, counted by their bytes
    (a hit at ``file@offset``, in UTF-8 or a wide encoding), labels made paths."""
    body = json.loads(report)
    out: dict[str, int] = {}
    for hits in body["surfaces"].values():
        for h in hits:
            loc = h["location"]
            m = _RAW.search(loc)
            if m and "!" not in loc:
                name = loc[:m.start()]
                path = name if name.startswith("/") else f"{top}/{name}"
                out[path] = out.get(path, 0) + 1
    return out


_ENGINE = r"""
import json, sys
from pathlib import Path
secrets_file, *files = sys.argv[1:]
secrets = [s for s in Path(secrets_file).read_text().splitlines() if s]
from memkit.scan.engine import scan_files
print(json.dumps({f: sum(c.values()) for f, c in scan_files(secrets, files).items()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=128, help="size of the directory's files, and of the large file (MiB)")
    ap.add_argument("--secrets", default="1,100,10000", help="comma-separated secret counts")
    ap.add_argument("--copies", type=int, default=48, help="planted copies (half verbatim)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command; the best is shown")
    ap.add_argument("--huge", type=int, default=0, help="also time the large file at this many secrets (100000)")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--dir", type=Path, default=None, help="where to build (default: a temp dir)")
    args = ap.parse_args()
    grep = shutil.which("grep")
    if grep is None:
        sys.exit("GNU grep not found")
    memkit = [sys.executable, "-m", "evaluators.cli", "residue"]
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{_REPO}{os.pathsep}{env_path}" if env_path else str(_REPO)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="memkit-bench-scan-", dir=args.dir))
    counts = [int(x) for x in args.secrets.split(",")]
    try:
        small = root / "store"
        store(small, args.seed)
        one = root / "one.dat"
        one.write_bytes(b"\n")
        print(f"{'secrets':>8} | {'file grep':>9} {'memkit':>7} {'less 1 B':>8} {'ratio':>5} | "
              f"{'dir grep':>8} {'memkit':>7} {'less store':>10} {'ratio':>5} | {'engine':>7} {'ratio':>5} | "
              f"{'RSS MiB':>7}  found", flush=True)
        for k in counts + ([args.huge] if args.huge else []):
            huge = bool(args.huge) and k == args.huge and k not in counts
            secrets = secrets_for(k, args.seed)
            sfile = root / "secrets.txt"
            sfile.write_text("\n".join(secrets) + "\n")
            data = root / "dir"
            if data.exists():
                shutil.rmtree(data)
            shutil.copytree(small, data)
            planted = build(data, args.mib, secrets, args.copies, args.seed)
            files = sorted(planted)
            big = root / "big.dat"
            with open(big, "wb") as out:  # text first: one large file of text, JSON and binary
                for f in sorted(files, key=lambda f: (Path(f).suffix == ".db", f)):
                    out.write(Path(f).read_bytes())
            mib = sum(Path(f).stat().st_size for f in files) / 2**20
            many = ["--secrets-file", str(sfile), "--json", "--no-embeddings"]
            m_big, rss_big, rep = _time([*memkit, str(small), *many, "--also", str(big)], args.repeat)
            m_one, _, _ = _time([*memkit, str(small), *many, "--also", str(one)], args.repeat)
            found_big = _memkit_counts(rep, str(root)).get(str(big), 0)
            want_all = sum(a for _, a, _ in planted.values())
            if huge:
                print(f"{k:>8} | {'':>9} {m_big:7.2f} {m_big - m_one:8.2f} {'':>5} | {'':>8} {'':>7} {'':>10} "
                      f"{'':>5} | {'':>7} {'':>5} | {rss_big:7.0f}  {found_big} of {want_all} planted copies "
                      f"({mib:.0f} MiB)", flush=True)
                continue
            g_big, _, g_out = _time([grep, "-c", "-a", "-F", "-f", str(sfile), str(big)], args.repeat)
            g_dir, _, gd_out = _time([grep, "-r", "-c", "-a", "-F", "-f", str(sfile), str(data)], args.repeat)
            m_dir, rss_dir, rep_dir = _time([*memkit, str(data), *many], args.repeat)
            m_store, _, _ = _time([*memkit, str(small), *many], args.repeat)
            e_wall, rss_e, e_out = _time([sys.executable, "-c", _ENGINE, str(sfile), *files], args.repeat)
            g_counts = {ln.rsplit(":", 1)[0]: int(ln.rsplit(":", 1)[1]) for ln in gd_out.splitlines()}
            d_counts = _memkit_counts(rep_dir, str(data))
            e_counts = json.loads(e_out)
            problems = []
            verbatim = sum(v for v, _, _ in planted.values())
            if int(g_out.strip() or 0) != verbatim:
                problems.append(f"grep found {g_out.strip()} lines in the large file")
            if any(g_counts.get(f, 0) != v for f, (v, _, _) in planted.items()):
                problems.append("grep -r counts differ from the verbatim copies")
            if found_big != want_all:
                problems.append(f"memkit found {found_big} of {want_all} in the large file")
            if any(d_counts.get(f, 0) != a for f, (_, a, _) in planted.items()):
                problems.append(f"memkit found {sum(d_counts.get(f, 0) for f in planted)} of {want_all} in the directory")
            if any(e_counts.get(f, 0) != u for f, (_, _, u) in planted.items()):
                problems.append("the engine's counts differ from the UTF-8 copies")
            note = f"all {want_all} planted copies ({verbatim} verbatim)"
            cpu = [_CPU[tuple(c)] for c in ([*memkit, str(small), *many, "--also", str(big)],
                                             [*memkit, str(small), *many, "--also", str(one)],
                                             [grep, "-c", "-a", "-F", "-f", str(sfile), str(big)],
                                             [*memkit, str(data), *many], [*memkit, str(small), *many],
                                             [grep, "-r", "-c", "-a", "-F", "-f", str(sfile), str(data)])]
            note += (f"; CPU s: file {cpu[0] - cpu[1]:.2f} (grep {cpu[2]:.2f}, {(cpu[0] - cpu[1]) / cpu[2]:.1f}x), "
                     f"directory {cpu[3] - cpu[4]:.2f} (grep {cpu[5]:.2f}, {(cpu[3] - cpu[4]) / cpu[5]:.1f}x)")
            d_less = m_dir - m_store
            print(f"{k:>8} | {g_big:9.2f} {m_big:7.2f} {m_big - m_one:8.2f} {(m_big - m_one) / g_big:5.1f} | "
                  f"{g_dir:8.2f} {m_dir:7.2f} {d_less:10.2f} {d_less / g_dir:5.1f} | {e_wall:7.2f} "
                  f"{e_wall / g_dir:5.1f} | {max(rss_big, rss_dir, rss_e):7.0f}  "
                  f"{'; '.join(problems) if problems else note} ({mib:.0f} MiB)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s)")
