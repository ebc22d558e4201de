from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(PACKAGE_ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One torch thread, here and in the processes the tests start (before torch loads): the models are
# tiny, and on a busy 2-core CI runner a second OpenMP thread spin-waits, several times the CPU time.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("WORLD_SIZE", None)
    env.pop("RANK", None)
    return env


def run_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """`python -m rein_trainer ...` in a fresh process (exit code and stderr as the TypeScript side sees them)."""
    return subprocess.run([sys.executable, "-m", "rein_trainer", *args], capture_output=True, text=True, env=cli_env(), timeout=timeout)


def main_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    """cli.main in this process (no interpreter start): (exit code, last stdout JSON line or None, stderr)."""
    from rein_trainer.cli import main

    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if line.strip()]
    return code, (json.loads(lines[-1]) if code == 0 and lines else None), captured.err


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rein")


@pytest.fixture(scope="session")
def base(workdir: Path) -> Path:
    from tiny import make_checkpoint

    return make_checkpoint(workdir / "base", seed=0)


@pytest.fixture(scope="session")
def batch_file(workdir: Path) -> Path:
    from tiny import make_batch

    path = workdir / "batch.safetensors"
    make_batch(path, iteration=3)
    return path
