"""``memkit --help`` and option errors import no command's work (each command's module
is imported when that command runs or shows its help), and the command list reads as
it did when every module was imported."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

HEAVY = ("sklearn", "scipy", "langchain_core", "langgraph", "torch", "chromadb", "sentence_transformers", "numpy")

PROBE = r"""
import json, sys
from evaluators.cli import app
try:
    app(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)}))
""".replace("HEAVY", repr(HEAVY))


def _probe(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_help_and_option_errors_import_no_command_work():
    res = _probe("--help")
    assert res["code"] == 0 and res["loaded"] == []
    res = _probe("residue", "--no-such-option")
    assert res["code"] == 2
    assert not {m.split(".")[0] for m in res["loaded"]} & {"sklearn", "scipy", "langchain_core", "torch",
                                                             "chromadb", "sentence_transformers"}
    for command in ("report", "judge", "compare"):
        res = _probe(command, "--no-such-option")
        assert res["code"] == 2
        assert not {m.split(".")[0] for m in res["loaded"]} & {"sklearn", "torch", "chromadb"}, command


def test_command_list_is_each_commands_own_help():
    from evaluators.cli import COMMANDS, app

    listed = CliRunner().invoke(app, ["--help"]).output
    import typer.main

    group = typer.main.get_group(app)
    for name in COMMANDS:
        cmd = group.commands[name]  # built now: its module imported
        assert cmd.name == name
        head = cmd.get_short_help_str(80 - 6 - max(map(len, COMMANDS)))
        line = next(ln for ln in listed.splitlines() if ln.strip().startswith(name + " "))
        assert line.split(None, 1)[1].strip() == head.strip(), name
    res = CliRunner().invoke(app, ["nope"])
    assert res.exit_code == 2 and "No such command" in res.output


FORK_PROBE = r"""
import json, sys
import memkit.residue.pool as pool
seen = {}
real = pool.prefork
def prefork(m, paths=None):
    seen.setdefault("at_fork", sorted(m for m in sys.modules if m != "memkit.postgres.uri"
                                      and m.startswith(("memkit.store", "memkit.postgres.", "chromadb"))))
    return real(m, paths)
pool.prefork = prefork
from evaluators.cli import app
try:
    app(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(seen))
"""


def test_residue_forks_its_workers_before_the_store_and_database_readers_load(tmp_path):
    """The workers read files while the parent imports what only it needs (chromadb,
    the store's classes, the PostgreSQL readers): none of those is loaded when they fork."""
    import chromadb
    from chromadb.config import Settings

    store = tmp_path / "store"
    client = chromadb.PersistentClient(path=str(store), settings=Settings(anonymized_telemetry=False))
    client.create_collection("notes", embedding_function=None).add(ids=["a"], documents=["x"], embeddings=[[0.1, 0.2]])
    client.close()
    out = subprocess.run([sys.executable, "-c", FORK_PROBE, "residue", str(store), "XQ7-VIOLET-3829",
                          "--no-embeddings", "--json"], capture_output=True, text=True, timeout=120)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["at_fork"] == [], seen
