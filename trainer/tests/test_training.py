"""Training runs on a tiny Qwen3 (in this process through cli.main, except where the exit code of a
real process matters): the objective against a plain reference, outputs, LoRA, reuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import main_in_process
from safetensors.torch import load_file

from rein_trainer.batch import ImportanceSampling, read_batch
from rein_trainer.token_logprobs import TOKEN_LOGPROBS_FILE
from tiny import make_batch, random_sequences

TRAIN = ["--seed", "7", "--lr", "0.01", "--epochs", "2", "--minibatch", "4", "--clip", "0.2", "--max-grad-norm", "0.5"]


@pytest.fixture(scope="session")
def capped_batch(workdir: Path) -> Path:
    # Sequence-level masked importance sampling: the band masks 4 of these 10 sequences (ratios 0.60–0.69) and the
    # kept ones' tokens are capped at 1.5 (the truncate-only path is the same function with no band).
    path = workdir / "capped.safetensors"
    make_batch(path, random_sequences(10, seed=1), iteration=5, importance_sampling=ImportanceSampling("mask", "sequence", 1.5, (0.7, 1.5)))
    return path


@pytest.fixture(scope="session")
def full_run(workdir: Path, base: Path, capped_batch: Path) -> dict[str, Any]:
    """Trained once for the tests below (a session fixture cannot take capsys, so stdout is redirected)."""
    import contextlib
    import io

    from rein_trainer.cli import main

    out = workdir / "full"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["train", "--checkpoint", str(base), "--batch", str(capped_batch), "--out", str(out), *TRAIN])
    assert code == 0
    return {"out": out, "result": json.loads(stdout.getvalue().strip().splitlines()[-1])}


def test_packed_logprobs_equal_each_sequence_alone(base: Path) -> None:
    from transformers import AutoModelForCausalLM

    from rein_trainer.forward import build_micro_batch, forward_logprobs
    from reference import sequence_logprobs

    sequences = random_sequences(6, seed=3)
    ids = np.array([t for s in sequences for t in s.ids])
    cu = np.concatenate([[0], np.cumsum([len(s.ids) for s in sequences])])
    for implementation in ("rein_varlen", "sdpa"):
        model = AutoModelForCausalLM.from_pretrained(str(base), attn_implementation=implementation, dtype=torch.float32).eval()
        with torch.no_grad():
            mb = build_micro_batch(ids, cu, list(range(len(sequences))), np.ones(len(ids), dtype=bool))
            lp, entropy = forward_logprobs(model, mb, torch.device("cpu"), torch.float32, with_entropy=True)
            packed = dict(zip(mb.token_index.tolist(), zip(lp.tolist(), entropy.tolist(), strict=True), strict=True))
            for s, seq in enumerate(sequences):
                alone, alone_entropy = sequence_logprobs(model, np.array(seq.ids))
                for t in range(1, len(seq.ids)):
                    got_lp, got_entropy = packed[int(cu[s]) + t]
                    assert got_lp == pytest.approx(alone[t - 1].item(), abs=2e-5), implementation
                    assert got_entropy == pytest.approx(alone_entropy[t - 1].item(), abs=2e-5), implementation


def test_update_matches_the_objective_restated_plainly(full_run: dict[str, Any], base: Path, capped_batch: Path) -> None:
    from transformers import AutoModelForCausalLM

    from reference import assert_reports_close, reference_update

    model = AutoModelForCausalLM.from_pretrained(str(base), attn_implementation="eager", dtype=torch.float32)
    expected = reference_update(model, read_batch(capped_batch), seed=7, lr=0.01, epochs=2, minibatch=4, clip=0.2, max_grad_norm=0.5)
    result = full_run["result"]
    assert result["steps"] == expected["steps"] == 6
    assert result["skippedMinibatches"] == expected["skippedMinibatches"] == 0
    for key in ("loss", "clipFraction", "approxKl", "entropy", "gradNorm"):
        assert result["metrics"][key] == pytest.approx(expected["metrics"][key], rel=1e-4, abs=1e-6), key
    assert result["metrics"]["tokens"] == expected["metrics"]["tokens"]
    # Each step's own values, in the order taken.
    assert [s["epoch"] for s in result["stepMetrics"]] == [s["epoch"] for s in expected["stepMetrics"]] == [0, 0, 0, 1, 1, 1]
    for got, want in zip(result["stepMetrics"], expected["stepMetrics"], strict=True):
        assert list(got) == ["epoch", "loss", "clipFraction", "approxKl", "entropy", "gradNorm", "tokens"]
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
        assert isinstance(got["tokens"], int) and got["tokens"] == want["tokens"]
    assert_reports_close(result["importanceWeights"], expected["importanceWeights"], rel=1e-6)
    assert result["importanceWeights"]["sequences"]["maskedFraction"] == 0.4
    assert 0 < result["importanceWeights"]["cappedFraction"] < 1
    assert result["metrics"]["clipFraction"] > 0  # the clip is exercised
    trained = load_file(str(full_run["out"] / "model.safetensors"))
    reference = {k: v.detach() for k, v in model.state_dict().items()}
    parent = load_file(str(base / "model.safetensors"))
    moved = max((reference[k] - parent[k]).abs().max().item() for k in parent)
    worst = max((trained[k] - reference[k]).abs().max().item() for k in trained)
    assert moved > 1e-2
    # Two float32 implementations of the same update differ by ~1e-4 here (Adam at lr 0.01 turns
    # rounding in near-zero gradients into whole steps; eager vs sdpa in the reference alone: 9e-5).
    assert worst < 0.01 * moved, (worst, moved)


def test_step_metrics_average_to_the_metrics(full_run: dict[str, Any]) -> None:
    from rein_trainer.metrics import summarize_steps

    result = full_run["result"]
    steps = result["stepMetrics"]
    assert len(steps) == result["steps"]
    for key in ("loss", "clipFraction", "approxKl", "entropy", "gradNorm"):
        assert sum(s[key] for s in steps) / len(steps) == pytest.approx(result["metrics"][key], rel=1e-12), key
    assert sum(s["tokens"] for s in steps) == result["metrics"]["tokens"]
    assert summarize_steps(np.zeros((0, 6)), []) == ({"loss": 0.0, "clipFraction": 0.0, "approxKl": 0.0, "entropy": 0.0, "gradNorm": 0.0, "tokens": 0}, [])


def read_token_logprobs(folder: Path) -> tuple[np.ndarray, dict[str, str]]:
    from safetensors import safe_open

    with safe_open(str(folder / TOKEN_LOGPROBS_FILE), "np") as f:
        assert list(f.keys()) == ["trainer_logprobs"]
        return f.get_tensor("trainer_logprobs"), f.metadata()


def check_token_logprobs(folder: Path, result: dict[str, Any], batch_path: Path, parent: torch.nn.Module) -> np.ndarray:
    """The file and the result's trainerLogprobs against the parent's log-probs computed one sequence at a time."""
    from reference import parent_token_logprobs

    batch = read_batch(batch_path)
    values, metadata = read_token_logprobs(folder)
    assert metadata == {"format": "rein-token-logprobs/1", "batch_content_hash": batch.content_hash}
    assert values.dtype == np.float32 and values.shape == (batch.num_tokens,)
    trained = batch.trained
    assert not values[~trained].any()  # untrained tokens and each sequence's first: 0
    assert values[trained] == pytest.approx(parent_token_logprobs(parent, batch)[trained], abs=2e-5)
    diff = np.abs(values[trained].astype(np.float64) - batch.old_logprobs[trained].astype(np.float64))
    assert result["trainerLogprobs"] == {"tokens": int(trained.sum()), "meanAbsDiff": pytest.approx(diff.mean(), rel=1e-9), "maxAbsDiff": pytest.approx(diff.max(), rel=1e-9)}
    return values


def test_token_logprobs_are_the_parents_before_any_step(full_run: dict[str, Any], base: Path, capped_batch: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from rein_trainer.checkpoint import copy_side_files

    parent = AutoModelForCausalLM.from_pretrained(str(base), attn_implementation="eager", dtype=torch.float32).eval()
    values = check_token_logprobs(full_run["out"], full_run["result"], capped_batch, parent)
    # The corrected importance weights came from these same values.
    trained = read_batch(capped_batch).trained
    ratio = np.exp(values[trained].astype(np.float64) - read_batch(capped_batch).old_logprobs[trained])
    assert full_run["result"]["importanceWeights"]["ratio"]["max"] == pytest.approx(ratio.max(), rel=1e-6)
    # A child trained from this output does not take its parent's values along.
    copy_side_files([full_run["out"]], tmp_path)
    assert (tmp_path / "tokenizer.json").is_file() and not (tmp_path / TOKEN_LOGPROBS_FILE).exists() and not (tmp_path / "rein").exists()


def test_full_output_folder(full_run: dict[str, Any], base: Path, capped_batch: Path) -> None:
    from transformers import AutoModelForCausalLM

    out: Path = full_run["out"]
    model = AutoModelForCausalLM.from_pretrained(str(out))
    assert model.config.dtype == torch.float32 and model.config.tie_word_embeddings
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (out / name).is_file()
    assert (out / "tokenizer.json").read_bytes() == (base / "tokenizer.json").read_bytes()
    lineage = json.loads((out / "rein.json").read_text())
    assert lineage["parent"] == str(base) and lineage["base"] == str(base)
    assert lineage["batchContentHash"] == read_batch(capped_batch).content_hash
    assert lineage["iteration"] == 5 and lineage["format"] == "full"
    assert lineage["trainer"]["engine"] == "pytorch" and lineage["trainer"]["versions"]["torch"] == torch.__version__
    assert lineage["trainer"]["settings"]["minibatchSize"] == 4
    assert json.loads((out / "metrics.json").read_text()) == full_run["result"]
    keys = ["parent", "format", "base", "batchContentHash", "steps", "skippedMinibatches", "seconds", "metrics", "stepMetrics", "trainerLogprobs", "reused"]
    assert list(full_run["result"]) == [*keys, "importanceWeights"]
    assert (full_run["result"]["format"], full_run["result"]["base"]) == ("full", str(base))
    assert full_run["result"]["reused"] is False
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith((".full", "full.lock"))]
    assert leftovers == []


def test_same_batch_and_parent_is_reused_another_is_refused(full_run: dict[str, Any], base: Path, capped_batch: Path, batch_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(full_run["out"])
    before = (full_run["out"] / "model.safetensors").stat().st_mtime_ns
    code, result, _ = main_in_process(capsys, "train", "--checkpoint", str(base), "--batch", str(capped_batch), "--out", out)
    assert code == 0 and result == {**full_run["result"], "reused": True}
    assert result["stepMetrics"] and result["trainerLogprobs"]["tokens"] > 0  # reused with the new fields
    code, _, err = main_in_process(capsys, "train", "--checkpoint", str(base), "--batch", str(batch_file), "--out", out)
    assert code == 2 and "already holds a checkpoint trained from another batch or parent" in err
    assert (full_run["out"] / "model.safetensors").stat().st_mtime_ns == before


def test_zero_advantage_minibatches_are_skipped(workdir: Path, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sequences = random_sequences(6, seed=4)
    flat = random_sequences(6, seed=5, zero_advantage=True)
    path = workdir / "sparse.safetensors"
    # Unshuffled minibatches of 2: [signal, flat], [flat, flat], [flat, signal] → the middle one is skipped.
    make_batch(path, [sequences[0], flat[0], flat[1], flat[2], flat[3], sequences[1]])
    code, result, _ = main_in_process(capsys, "train", "--checkpoint", str(base), "--batch", str(path), "--out", str(workdir / "sparse"), "--minibatch", "2", "--no-shuffle")
    assert code == 0 and result is not None
    assert (result["steps"], result["skippedMinibatches"]) == (2, 1)
    assert "importanceWeights" not in result
    assert [s["epoch"] for s in result["stepMetrics"]] == [0, 0]
    # Without a correction the parent's log-probs are still computed (the same pass) and written.
    values, _ = read_token_logprobs(workdir / "sparse")
    trained = read_batch(path).trained
    assert result["trainerLogprobs"]["tokens"] == int(trained.sum()) and (values[trained] < 0).all() and not values[~trained].any()


def test_lora_adapter_new_continued_and_merged(workdir: Path, base: Path, batch_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    first = workdir / "lora1"
    code, result, err = main_in_process(capsys, "train", "--checkpoint", str(base), "--batch", str(batch_file), "--out", str(first), "--lora-rank", "4", "--lr", "0.01", "--minibatch", "4")
    assert code == 0, err
    assert result is not None and result["steps"] == 3
    assert (result["format"], result["base"]) == ("lora", str(base))  # what the registry records
    config = json.loads((first / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8
    assert config["base_model_name_or_path"] == str(base)
    assert sorted(config["target_modules"]) == ["k_proj", "o_proj", "q_proj", "v_proj"]
    weights = load_file(str(first / "adapter_model.safetensors"))
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in weights
    assert all(".lora_A.weight" in k or ".lora_B.weight" in k for k in weights) and len(weights) == 2 * 4 * 2
    assert any(v.abs().max() > 0 for k, v in weights.items() if "lora_B" in k)  # trained (B starts at zero)
    assert not (first / "model.safetensors").exists() and (first / "tokenizer.json").is_file()
    lineage = json.loads((first / "rein.json").read_text())
    assert (lineage["format"], lineage["base"], lineage["parent"]) == ("lora", str(base), str(base))
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(base)), str(first))
    assert loaded.peft_config["default"].r == 4
    # A new adapter starts with B = 0: the parent's log-probs are the base's.
    check_token_logprobs(first, result, batch_file, AutoModelForCausalLM.from_pretrained(str(base), attn_implementation="eager").eval())

    second = workdir / "lora2"
    code, result, err = main_in_process(capsys, "train", "--checkpoint", str(first), "--batch", str(batch_file), "--out", str(second), "--lora-rank", "4", "--lr", "0.01", "--minibatch", "4")
    assert code == 0, err
    lineage = json.loads((second / "rein.json").read_text())
    assert (lineage["format"], lineage["base"], lineage["parent"]) == ("lora", str(base), str(first))
    assert json.loads((second / "adapter_config.json").read_text())["base_model_name_or_path"] == str(base)
    continued = load_file(str(second / "adapter_model.safetensors"))
    assert set(continued) == set(weights)
    assert 0 < max((continued[k] - weights[k]).abs().max().item() for k in weights) < 1  # moved on from the parent's
    check_token_logprobs(second, result, batch_file, loaded.eval())  # the adapter parent's, as trained

    merged = workdir / "merged"
    code, result, err = main_in_process(capsys, "train", "--checkpoint", str(first), "--batch", str(batch_file), "--out", str(merged), "--lr", "0.0", "--max-grad-norm", "1")
    assert code == 2 and "--lr 0.0 must be positive" in err  # options are checked first
    code, result, err = main_in_process(capsys, "train", "--checkpoint", str(first), "--batch", str(batch_file), "--out", str(merged), "--lr", "1e-9")
    assert code == 0, err
    lineage = json.loads((merged / "rein.json").read_text())
    assert (lineage["format"], lineage["base"], lineage["parent"]) == ("full", str(base), str(first))
    # With a negligible step the merged full model computes what base + adapter computes.
    ids = torch.tensor([[5, 9, 17, 33, 60, 100]])
    full = AutoModelForCausalLM.from_pretrained(str(merged)).eval()
    with torch.no_grad():
        assert torch.allclose(full(input_ids=ids).logits, loaded.eval()(input_ids=ids).logits, atol=1e-4)
