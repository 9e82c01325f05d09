"""Third-party noise stays off the terminal unless ``--verbose``
(:mod:`evaluators.cli.quiet`).

A command on memkit's own app class (``evaluators.cli._App``, what the ``memkit``
script runs) calls the real libraries the way memkit's targets do: ``import
pgserver`` with ``XDG_RUNTIME_DIR`` unset (platformdirs' ``RuntimeDirWarning``), a
Chroma collection with a legacy embedding function (Chroma's ``DeprecationWarning``)
and mem0's spaCy loader without spaCy (mem0's log line). Each runs in a fresh
process, so every library warns as it would for a user.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SCRIPT = r'''
import sys, warnings
import typer
from evaluators.cli import _App

app = _App()

@app.command()
def noise(path: str, verbose: bool = typer.Option(False, "--verbose")) -> None:
    import numpy as np
    import chromadb
    from chromadb.config import Settings
    import pgserver  # noqa: F401
    from mem0.utils.spacy_models import get_nlp_lemma

    class EF:
        def __call__(self, input):
            return [np.ones(4, dtype=np.float32) for _ in input]

    client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    client.create_collection("notes", embedding_function=EF())
    get_nlp_lemma()
    import memkit.store.tiered
    warnings.warn_explicit("memkit's own warning", UserWarning, memkit.store.tiered.__file__, 1, module="memkit.store.tiered")
    typer.echo("done")

@app.command()
def other() -> None:
    pass

app()
'''


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "MEMKIT_VERBOSE")}
    env.update(PYTHONPATH=str(REPO), PYTHONWARNINGS="default", ANONYMIZED_TELEMETRY="False")
    store = tmp_path / f"store{len(extra)}"
    return subprocess.run([sys.executable, "-c", SCRIPT, "noise", str(store), *extra], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path)


@pytest.mark.timeout(600)
def test_third_party_noise_only_with_verbose(tmp_path):
    loud = _run(tmp_path, "--verbose")
    assert loud.returncode == 0, loud.stderr
    assert "RuntimeDirWarning" in loud.stderr and "DeprecationWarning" in loud.stderr, loud.stderr
    assert "Failed to load spaCy" in loud.stderr, loud.stderr
    quiet = _run(tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == "done"
    for noise in ("RuntimeDirWarning", "DeprecationWarning", "spaCy"):
        assert noise not in quiet.stderr, quiet.stderr
    assert "memkit's own warning" in quiet.stderr  # memkit's own warnings still reach the user
