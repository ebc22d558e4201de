"""scripts/gpu-check.sh --quick: the GPU check's own CPU self test runs through the trainer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import cli_env

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_quick_self_test(tmp_path: Path) -> None:
    env = {**cli_env(), "PYTHON": sys.executable}
    report = tmp_path / "report.json"
    run = subprocess.run(["bash", str(REPO / "scripts" / "gpu-check.sh"), "--quick", "--json", str(report)], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    numbers = json.loads(report.read_text())
    assert [r["format"] for r in numbers["runs"]] == ["lora", "full"]
    assert all(r["steps"] == 2 and r["tokensPerSecond"] > 0 for r in numbers["runs"])
    assert numbers["agreement"]["packedVsAloneMaxAbsDiff"] < 1e-4
    assert numbers["agreement"]["maxAbsDiff"] < 0.5  # bf16 against float32
    assert "tokens/s=" in run.stdout and os.path.exists(REPO / "trainer" / "fsdp.yaml")
