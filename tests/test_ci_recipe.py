"""docs/ci.md's GitHub Actions workflow, run as written, in a new virtual environment.

The workflow's shell steps run one after the other with ``bash -e`` in a clone of the
repository (its tracked and new files, as a checkout gives them) and a new virtual
environment on the ``PATH``; the steps GitHub runs itself (checkout, Python set-up,
SARIF upload) are checked, not run. Tests reach no network, so pip installs from what
this machine holds: the virtual environment sees the test environment's packages
(a ``.pth`` file, as ``--system-site-packages`` does), ``PIP_NO_INDEX`` keeps pip off
the index and ``PIP_NO_BUILD_ISOLATION`` lets it build memkit with the setuptools it
sees. memkit itself is installed into the new environment from the clone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "ci.md"
SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
GITHUB_ACTIONS = ("actions/checkout@", "actions/setup-python@", "github/codeql-action/upload-sarif@")


def workflow() -> dict:
    """The workflow: the first YAML block of docs/ci.md."""
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert block, "docs/ci.md has no ```yaml block"
    return yaml.safe_load(block.group(1))


def steps() -> list[dict]:
    [job] = workflow()["jobs"].values()
    return job["steps"]


def _clone(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for f in files:
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """Run every shell step of the workflow; yields ``(clone, venv, env, results)``."""
    root = tmp_path_factory.mktemp("ci")
    clone, venv = root / "clone", root / "venv"
    _clone(clone)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "zz-test-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv), PIP_NO_INDEX="1",
               PIP_NO_BUILD_ISOLATION="0", TIKTOKEN_CACHE_DIR=str(root / "tiktoken"))
    results = []
    for step in steps():
        if "run" in step:
            results.append((step, subprocess.run(["bash", "-e", "-c", step["run"]], cwd=clone, env=env,
                                                 capture_output=True, text=True, timeout=1200)))
    yield clone, venv, env, results


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_workflow_runs_as_written(recipe):
    clone, venv, _, results = recipe
    uses = [s["uses"] for s in steps() if "uses" in s]
    assert len(uses) == 3 and all(u.startswith(GITHUB_ACTIONS) for u in uses), uses
    for step, proc in results:
        assert proc.returncode == 0, f"{step['name']}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    memkit_exe = subprocess.run(["bash", "-c", "command -v memkit"], env=recipe[2], capture_output=True, text=True)
    assert memkit_exe.stdout.strip() == str(venv / "bin" / "memkit")  # the clone's memkit, not the test's
    upload = next(s for s in steps() if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    sarif = clone / upload["with"]["sarif_file"]
    doc = json.loads(sarif.read_text())
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    results_ = doc["runs"][0]["results"]
    assert results_ and {r["ruleId"] for r in results_} == {"checkpoint"}
    assert {r["baselineState"] for r in results_} == {"unchanged"}  # the committed baseline's known residue
    suite = ET.parse(clone / "memkit-audit.xml").getroot().find("testsuite")
    assert suite.get("failures") == "0" and suite.get("tests") == "2"
    audit = next(p for s, p in results if "memkit audit" in s["run"])
    assert "known (in the baseline): checkpoint" in audit.stdout


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_recipe_installs_cpu_pytorch_first_and_no_cuda_package(recipe):
    _, venv, env, _ = recipe
    install = next(s["run"] for s in steps() if "run" in s and "pip install" in s["run"])
    lines = [x.strip() for x in install.splitlines() if "pip install" in x]
    assert "torch" in lines[0] and "--index-url https://download.pytorch.org/whl/cpu" in lines[0], lines
    code = ("import json, importlib.metadata as md, torch; print(json.dumps({'dists': sorted({d.metadata['Name']"
            ".lower() for d in md.distributions()}), 'torch': torch.__version__, 'cuda': torch.version.cuda}))")
    seen = json.loads(subprocess.run([str(venv / "bin" / "python"), "-c", code], env=env, capture_output=True,
                                     text=True, check=True, timeout=300).stdout)
    cuda = [d for d in seen["dists"] if d.startswith(("nvidia-", "nvidia_", "cuda-", "cupy")) or "triton" in d]
    assert cuda == [] and seen["cuda"] is None and seen["torch"].endswith("+cpu"), (cuda, seen["torch"])
    assert "memkit" in seen["dists"]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_inspect_eval_finds_the_task_in_the_new_environment(recipe, tmp_path):
    """``inspect eval memkit/memory_privacy --model mockllm/model`` (inspect's CLI, as
    ``python -m inspect_ai``), and the log read back with inspect's reader."""
    from inspect_ai.log import read_eval_log

    clone, venv, env, _ = recipe
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "inspect_ai", "eval", "memkit/memory_privacy",
                           "--model", "mockllm/model", "-T", "n=2", "-T", "n_resamples=100",
                           "--log-dir", str(tmp_path), "--display", "none"],
                          cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [path] = list(tmp_path.glob("*.eval"))
    log = read_eval_log(str(path))
    assert log.status == "success" and log.eval.task == "memkit/memory_privacy"
    names = {s.name for s in log.results.scores}
    assert names == {"pr", "aer", "frs"}
    metrics = {k: m.value for s in log.results.scores for k, m in s.metrics.items()}
    # mockllm answers "Default output from mockllm/model": it never recalls, never leaks
    assert metrics["PR"] == 0.0 and metrics["AER_max"] == 0.0 and metrics["FRS_worst"] == 0.0
    assert all(s.metadata["canary"] and len(s.metadata["probes"]) == 9 for s in log.samples)
