"""The command line as the TypeScript side runs it: exit codes, stderr lines, the logprobs command,
two trainers on one output, and two processes (gloo) against one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import cli_env, main_in_process, run_cli
from reference import assert_reports_close
from safetensors.numpy import load_file as load_numpy
from safetensors.torch import load_file

from rein_trainer.batch import encode_batch
from rein_trainer.checkpoint import architecture, sha256_file
from rein_trainer.token_logprobs import TOKEN_LOGPROBS_FILE
from tiny import make_batch, random_sequences


@pytest.fixture(scope="session")
def adapter(workdir: Path, base: Path) -> Path:
    """A LoRA adapter on the tiny base with random (non-zero) weights, lineage as the trainer writes it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(3)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(str(base)),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM"),
    )
    folder = workdir / "adapter"
    model.save_pretrained(str(folder))
    shutil.copy(base / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((base / "config.json").read_text())
    (folder / "rein.json").write_text(json.dumps({"parent": str(base), "base": str(base), "format": "lora", "baseConfig": architecture(config)}))
    return folder


def assert_refused(code: int, err: str, out: Path, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("rein-trainer: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not out.exists()
    assert not out.with_name(out.name + ".lock").exists()


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(workdir: Path, base: Path, batch_file: Path, adapter: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = workdir / "refused"
    bad = workdir / "bad"
    bad.mkdir()

    # In a real process: the content hash (the exit code and stderr the TypeScript side reads).
    tampered = bytearray(batch_file.read_bytes())
    tampered[-1] ^= 1
    (bad / "tampered.safetensors").write_bytes(bytes(tampered))
    result = run_cli("train", "--checkpoint", str(base), "--batch", str(bad / "tampered.safetensors"), "--out", str(out))
    assert_refused(result.returncode, result.stderr, out, "content hash mismatch", "rebuild the batch")
    assert result.stdout == ""

    def refused(*needles: str, checkpoint: Path = base, batch: Path = batch_file, extra: tuple[str, ...] = ()) -> None:
        code, _, err = main_in_process(capsys, "train", "--checkpoint", str(checkpoint), "--batch", str(batch), "--out", str(out), *extra)
        assert_refused(code, err, out, *needles)

    data, _ = encode_batch(random_sequences(2), extra_metadata={"format": "rein-batch/0"})
    (bad / "old.safetensors").write_bytes(data)
    refused("format 'rein-batch/0'", "reads 'rein-batch/1'", batch=bad / "old.safetensors")

    sequences = random_sequences(2)
    sequences[1].ids[3] = 300
    make_batch(bad / "vocab.safetensors", sequences)
    refused("token id 300", "vocab_size 264", "built for another tokenizer", batch=bad / "vocab.safetensors")

    make_batch(bad / "long.safetensors", random_sequences(2, min_len=1100, max_len=1100))
    refused("sequence of 1100 tokens", "max_position_embeddings 1024", batch=bad / "long.safetensors")

    make_batch(bad / "tokenizer.safetensors", random_sequences(2), tokenizer_sha256="0" * 64)
    refused("built for another tokenizer", "tokenizer_sha256", batch=bad / "tokenizer.safetensors")

    tfjs = bad / "tfjs"
    tfjs.mkdir()
    (tfjs / "config.json").write_text(json.dumps({"model_type": "rein-tiny-decoder", "vocab_size": 264}))
    refused("not a model transformers can load", "rein-tiny-decoder", "convert it", checkpoint=tfjs)

    orphan = bad / "orphan"
    shutil.copytree(adapter, orphan)
    lineage = json.loads((orphan / "rein.json").read_text())
    (orphan / "rein.json").write_text(json.dumps({**lineage, "base": str(bad / "gone")}))
    refused("missing", "restore that base model", checkpoint=orphan)

    misfit = bad / "misfit"
    shutil.copytree(adapter, misfit)
    (misfit / "rein.json").write_text(json.dumps({**lineage, "baseConfig": {**lineage["baseConfig"], "hidden_size": 128}}))
    refused("does not fit its base", "hidden_size", checkpoint=misfit)

    refused("LoRA target modules gate_up", "q_proj", extra=("--lora-rank", "4", "--lora-target-modules", "q_proj,gate_up"))
    refused("has rank 4, not 8", checkpoint=adapter, extra=("--lora-rank", "8"))

    # The right tokenizer hash is accepted.
    make_batch(bad / "same-tokenizer.safetensors", random_sequences(2), tokenizer_sha256=sha256_file(base / "tokenizer.json"))
    code, result_json, err = main_in_process(capsys, "train", "--checkpoint", str(base), "--batch", str(bad / "same-tokenizer.safetensors"), "--out", str(out), "--lr", "1e-4")
    assert code == 0, err
    assert result_json is not None and result_json["steps"] == 1


def test_out_of_memory_exits_3_naming_the_micro_batch_option(workdir: Path, base: Path, batch_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import rein_trainer.train as train

    def oom(*_args: object) -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(train, "_train", oom)
    code, _, err = main_in_process(capsys, "train", "--checkpoint", str(base), "--batch", str(batch_file), "--out", str(workdir / "oom"))
    assert code == 3
    assert err.startswith("rein-trainer: ") and "--max-tokens-per-micro-batch" in err and "--lora-rank" in err


def test_logprobs_command_for_full_and_adapter_checkpoints(workdir: Path, base: Path, adapter: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from reference import sequence_logprobs

    sequences = [[5, 9, 17, 33, 60], [7, 8], [100, 3, 250, 4, 4, 4, 12]]
    request = workdir / "logprobs.json"
    request.write_text(json.dumps({"sequences": sequences}))
    # In this process: the exit code and stdout a real process gives are the refusal test's and the
    # two trainers' concern; here what matters is the numbers.
    code, via_full, err = main_in_process(capsys, "logprobs", "--checkpoint", str(base), "--input", str(request))
    assert code == 0, err
    assert via_full is not None
    got = via_full["logprobs"]
    code, via_adapter, err = main_in_process(capsys, "logprobs", "--checkpoint", str(adapter), "--input", str(request))
    assert code == 0, err
    assert via_adapter is not None
    models = {
        "full": AutoModelForCausalLM.from_pretrained(str(base)).eval(),
        "adapter": PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(base)), str(adapter)).eval(),
    }
    for name, values in (("full", got), ("adapter", via_adapter["logprobs"])):
        assert [len(v) for v in values] == [len(s) - 1 for s in sequences]
        with torch.no_grad():
            for seq, lp in zip(sequences, values, strict=True):
                expected, _ = sequence_logprobs(models[name], torch.tensor(seq).numpy())
                assert lp == pytest.approx(expected.tolist(), abs=1e-5), name
    assert got != via_adapter["logprobs"]  # the adapter changes the model


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def wait_until_idle(process: subprocess.Popen[str]) -> None:
    """Until the process sleeps (polling a lock) or exits: its CPU time stops growing for 0.6 s."""
    seen: list[int] = []
    while process.poll() is None and len(seen) < 600 and (len(seen) < 4 or len(set(seen[-4:])) > 1):
        seen.append(cpu_ticks(process.pid))
        time.sleep(0.2)


def test_two_trainers_on_one_output_train_once(workdir: Path, base: Path, batch_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rein_trainer.cli import main

    out = workdir / "contended"
    lock = out.with_name("contended.lock")
    args = ["train", "--checkpoint", str(base), "--batch", str(batch_file), "--out", str(out), "--lr", "1e-4"]
    # One trainer in a real process, one in a thread here (no second torch import). The lock is held
    # (this live pid, as a trainer holds it) until the real one waits on it, then both race for it:
    # one trains while the other waits, then finds the output and reuses it.
    lock.write_text(str(os.getpid()))
    other = subprocess.Popen([sys.executable, "-m", "rein_trainer", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    wait_until_idle(other)
    capsys.readouterr()
    codes: list[int] = []
    here = threading.Thread(target=lambda: codes.append(main(args)))
    here.start()
    lock.unlink()
    other_out, other_err = other.communicate(timeout=300)
    here.join(timeout=300)
    captured = capsys.readouterr()
    assert (codes, other.returncode) == ([0], 0), (captured.err, other_err)
    results = [json.loads(stdout.strip().splitlines()[-1]) for stdout in (captured.out, other_out)]
    assert sorted(r["reused"] for r in results) == [False, True]
    assert results[0]["metrics"] == results[1]["metrics"]
    assert not lock.exists()
    assert [p.name for p in workdir.iterdir() if p.name.startswith(".contended")] == []


def test_two_processes_over_gloo_match_one(workdir: Path, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = workdir / "dist.safetensors"
    # 11 sequences in minibatches of 5: the last has one, so one rank runs a stand-in micro-batch.
    make_batch(batch, random_sequences(11, seed=9), importance_weight_cap=2.0)
    common = ["--checkpoint", str(base), "--batch", str(batch), "--seed", "3", "--lr", "0.01", "--minibatch", "5", "--epochs", "2", "--max-tokens-per-micro-batch", "48"]
    code, single, err = main_in_process(capsys, "train", *common, "--out", str(workdir / "one"))
    assert code == 0, err
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(29400 + os.getpid() % 500), "-m", "rein_trainer", "train", *common, "--out", str(workdir / "two")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # rank 0 alone prints
    double = json.loads(lines[0])
    assert single is not None
    assert (double["steps"], double["skippedMinibatches"], double["metrics"]["tokens"]) == (single["steps"], single["skippedMinibatches"], single["metrics"]["tokens"])
    for key in ("loss", "clipFraction", "approxKl", "entropy", "gradNorm"):
        assert double["metrics"][key] == pytest.approx(single["metrics"][key], rel=1e-4, abs=1e-6), key
    assert_reports_close(double["importanceWeights"], single["importanceWeights"], rel=1e-6)
    assert [s["epoch"] for s in double["stepMetrics"]] == [s["epoch"] for s in single["stepMetrics"]]
    for got, want in zip(double["stepMetrics"], single["stepMetrics"], strict=True):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    # Each rank computes its share of the parent's log-probs; rank 0 writes them all.
    assert double["trainerLogprobs"] == pytest.approx(single["trainerLogprobs"], rel=1e-5)
    one_lp, two_lp = (load_numpy(str(workdir / name / TOKEN_LOGPROBS_FILE))["trainer_logprobs"] for name in ("one", "two"))
    assert np.array_equal(one_lp == 0, two_lp == 0) and np.abs(one_lp - two_lp).max() < 1e-5
    lineage = json.loads((workdir / "two" / "rein.json").read_text())
    assert (lineage["trainer"]["settings"]["worldSize"], lineage["trainer"]["settings"]["distributed"]) == (2, "MULTI_CPU")
    one = load_file(str(workdir / "one" / "model.safetensors"))
    two = load_file(str(workdir / "two" / "model.safetensors"))
    parent = load_file(str(base / "model.safetensors"))
    moved = max((one[k] - parent[k]).abs().max().item() for k in one)
    assert max((one[k] - two[k]).abs().max().item() for k in one) < 0.01 * moved
