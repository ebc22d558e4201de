"""scripts/gpu-check.sh --quick: the GPU check's own CPU self test runs through the trainer."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_script_starts_its_python() -> None:
    # A real process for the wrapper (--help stops before torch loads: no import cost).
    env = {**cli_env(), "PYTHON": sys.executable}
    run = subprocess.run(["bash", str(REPO / "scripts" / "gpu-check.sh"), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--quick" in run.stdout and "--peak-tflops" in run.stdout


def test_gpu_check_quick_self_test(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # In this process (torch is loaded already): the wrapper above only starts this main.
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    report = tmp_path / "report.json"
    monkeypatch.setattr(sys, "argv", ["gpu_check.py", "--repo", str(REPO), "--quick", "--json", str(report)])
    code = gpu_check.main()
    stdout = capsys.readouterr().out
    assert code == 0, stdout[-2000:]
    numbers = json.loads(report.read_text())
    assert [r["format"] for r in numbers["runs"]] == ["lora", "full"]
    assert all(r["steps"] == 2 and r["tokensPerSecond"] > 0 for r in numbers["runs"])
    assert numbers["agreement"]["packedVsAloneMaxAbsDiff"] < 1e-4
    assert numbers["agreement"]["maxAbsDiff"] < 0.5  # bf16 against float32
    assert "tokens/s=" in stdout and os.path.exists(REPO / "trainer" / "fsdp.yaml")
