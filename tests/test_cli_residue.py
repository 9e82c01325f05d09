"""``memkit residue --secrets-file``: the table's "#" and the JSON ``line`` are the
secret's line in the file (blank lines counted), checked against ``grep -n``."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import chromadb
import pytest
import typer
from chromadb.config import Settings
from typer.testing import CliRunner

from evaluators.cli.residue import register as register_cli

PRESENT = ["XQ7-VIOLET-3829", "#HASH-LEADING-5512", "PLAIN-AMBER-7741"]
ABSENT = ["NOT-THERE-0001", "NOT-THERE-0002"]


@pytest.fixture
def cli():
    app = typer.Typer()
    register_cli(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps `residue` a named subcommand
        """Nothing."""

    return app


def grep_line(path: Path, secret: str) -> int:
    """The line ``grep -n -F -x`` gives ``secret`` in ``path`` (an independent count)."""
    out = subprocess.run(["grep", "-n", "-F", "-x", secret, str(path)], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split(":", 1)[0])


@pytest.mark.parametrize("layout", [
    "\n\n\n{0}\n{3}\n\n{1}\n\n\n{4}\n{2}\n",          # blank lines before and between
    "{3}\r\n\r\n{0}\r\n   \r\n{1}\r\n{4}\r\n\r\n{2}",   # CRLF, a blank-looking line, no final newline
    "{0}\n{1}\n{2}\n{3}\n{4}\n",                        # no blank line: numbers as before
])
def test_secrets_file_rows_number_the_files_lines(tmp_path, embedder, cli, layout):
    store = tmp_path / "store"
    client = chromadb.PersistentClient(path=str(store), settings=Settings(anonymized_telemetry=False))
    docs = [f"note {i}: {s}" for i, s in enumerate(PRESENT)]
    client.create_collection("notes", embedding_function=None).add(
        ids=[f"n{i}" for i in range(len(docs))], documents=docs, embeddings=embedder.encode(docs))
    client.close()
    secrets = tmp_path / "secrets.txt"
    secrets.write_bytes(layout.format(*PRESENT, *ABSENT).encode())
    plain = tmp_path / "plain.txt"  # grep -x would see a CRLF line's "\r"
    plain.write_bytes(secrets.read_bytes().replace(b"\r\n", b"\n"))
    want = {grep_line(plain, s) for s in PRESENT}

    runner = CliRunner()
    res = runner.invoke(cli, ["residue", str(store), "--secrets-file", str(secrets), "--json", "--no-embeddings"])
    assert res.exit_code == 1, res.output
    rows = json.loads(res.stdout)["per_secret"]
    assert {r["line"] for r in rows if r["total"]} == want
    assert {r["line"] for r in rows} == want | {grep_line(plain, s) for s in ABSENT}

    res = runner.invoke(cli, ["residue", str(store), "--secrets-file", str(secrets), "--no-embeddings"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    table = res.stdout.split("secrets that remain", 1)[1].split("\n\n", 1)[0]
    shown = {int(m.group(1)) for m in re.finditer(r"^│\s*(\d+)\s*│", table, re.M)}
    assert shown == want, table
