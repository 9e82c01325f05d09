"""The sweep with crypto_shred, forget requests in words and vector weighing: the
default configuration keeps its identity (old runs resume), and a run that asks for
them gets their rows in metrics.json and tables in report.md."""

from __future__ import annotations

import json

import pytest

from evaluators.sweep import SweepConfig, run_sweep
from graphs.forget import STUDY_MODES


def test_the_default_configuration_keeps_its_identity() -> None:
    ident = SweepConfig().identity()
    assert ident["deletion_modes"] == list(STUDY_MODES)  # crypto_shred runs when named
    assert not {"forget_requests", "forget_about", "forget_resolver", "weigh_vectors"} & set(ident)
    asked = SweepConfig(deletion_modes=["crypto_shred"], forget_requests=["zh", "exact"], forget_about=["fact"],
                        weigh_vectors=True).identity()
    assert asked["forget_requests"] == ["exact", "zh"] and asked["forget_about"] == ["fact"]
    assert asked["weigh_vectors"] is True and asked["deletion_modes"] == ["crypto_shred"]
    with pytest.raises(ValueError, match="unknown forget request kinds"):
        SweepConfig(forget_requests=["klingon"])


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_sweep_with_crypto_shred_requests_and_vectors(tmp_path) -> None:
    cfg = SweepConfig(n=1, seed=3, summary_levels=[1], ks=[3], deletion_modes=["raw_only", "crypto_shred"],
                      forget_requests=["exact", "es"], forget_about=["secret"], weigh_vectors=True,
                      n_resamples=20)
    metrics = run_sweep(cfg, tmp_path / "out", progress=False)
    rows = {(r["mode"], r["request"]): r for r in metrics["forget_requests"]}
    assert set(rows) == {(m, k) for m in ("raw_only", "crypto_shred") for k in ("exact", "es")}
    assert rows[("crypto_shred", "exact")]["found"] == 1.0 and rows[("crypto_shred", "exact")]["residue"] == 0.0
    assert rows[("crypto_shred", "es")]["found"] == 0.0
    frs = {r["mode"]: r for r in metrics["frs"]}
    assert set(frs) == {"raw_only", "crypto_shred"}
    shred = frs["crypto_shred"]
    assert shred["forensic_total"] == 0  # no plaintext copy of the canary on any surface
    assert "surfaces" in shred["vectors"] and shred["vectors"]["surfaces"]["disk_log"]["attributed"] >= 1
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Forgetting as users ask for it" in report and "## What the leftover vectors reveal" in report
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["forget_requests"] == ["exact", "es"] and config["weigh_vectors"] is True
