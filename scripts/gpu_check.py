"""GPU check of Rein's PyTorch trainer (run through scripts/gpu-check.sh).

Trains (a) the shipped base checkpoint (models/base, whatever Hugging Face causal LM folder is
there) and (b) a model of Qwen3-0.6B's shape with random weights (built from its config, nothing
downloaded), each with LoRA and in full, for a few steps on a synthetic packed rein-batch/1,
through the trainer's own run() (the CLI's code path). Prints tokens/s, peak memory and model
FLOPs utilisation per run, and how far GPU bf16 log-probs are from CPU float32 on the base.

--quick: CPU only, a tiny model and a few hundred tokens: a self test of this script.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QWEN3_0_6B = dict(
    vocab_size=151936,
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    tie_word_embeddings=True,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    max_position_embeddings=40960,
    hidden_act="silu",
    attention_bias=False,
    bos_token_id=151643,
    eos_token_id=151645,
)
TINY = dict(vocab_size=264, hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, max_position_embeddings=1024)
PEAKS = {"H100": 989.0, "H200": 989.0, "H800": 989.0, "A100": 312.0, "A800": 312.0}  # dense bf16 TFLOP/s


def log(message: str) -> None:
    print(message, flush=True)


def synthetic_batch(path: Path, vocab: int, tokens: int, min_len: int, max_len: int, seed: int) -> None:
    from rein_trainer.batch import SequenceSpec, write_batch

    rng = random.Random(seed)
    sequences = []
    total = 0
    while total < tokens:
        n = min(rng.randint(min_len, max_len), tokens - total) if tokens - total >= min_len else min_len
        prompt = max(1, n // 8)
        ids = [rng.randrange(vocab) for _ in range(n)]
        mask = [0] * prompt + [1] * (n - prompt)
        old = [0.0 if m == 0 else -math.log(vocab) + rng.uniform(-0.5, 0.5) for m in mask]
        sequences.append(SequenceSpec(ids, mask, rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 1.0), old, 1.0 / tokens, f"r{len(sequences)}", "v0"))
        total += n
    write_batch(path, sequences, iteration=0, policy_version="v0", config_hash="gpu-check")


def model_shape(config: Any) -> dict[str, int]:
    hidden = config.hidden_size
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", heads) or heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    layers = config.num_hidden_layers
    per_layer = hidden * head_dim * (heads + 2 * kv) + heads * head_dim * hidden + 3 * hidden * config.intermediate_size
    return {"layers": layers, "attn_width": heads * head_dim, "body": layers * per_layer, "embedding": config.vocab_size * hidden}


def flops_per_step(shape: dict[str, int], lengths: list[int], trained: int, lora: bool) -> float:
    """Model FLOPs of one step: matmul weights (6 per parameter per token; 4 for LoRA, which computes no
    weight gradients of the frozen base), the vocabulary projection at the trained positions only,
    and causal attention (QKᵀ and AV: 2·2·T²/2·width per layer forward, ×3 with backward)."""
    factor = 4 if lora else 6
    tokens = sum(lengths)
    attention = 3 * sum(2 * t * t * shape["attn_width"] for t in lengths) * shape["layers"]
    return factor * shape["body"] * tokens + factor * shape["embedding"] * trained + attention


def train_run(label: str, checkpoint: Path, batch: Path, out: Path, lora: bool, device: str, epochs: int, micro_tokens: int, peak: float | None) -> dict[str, Any]:
    import torch
    from transformers import AutoConfig

    from rein_trainer.train import TrainJob, run

    if out.exists():
        shutil.rmtree(out)
    profile: dict[str, Any] = {}
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    job = TrainJob(
        checkpoint=str(checkpoint),
        batch=str(batch),
        out=str(out),
        seed=0,
        learning_rate=1e-5,
        epochs=epochs,
        minibatch_size=1_000_000,  # the whole batch each step: one step per epoch
        lora_rank=16 if lora else 0,
        device=device,
        max_tokens_per_micro_batch=micro_tokens,
        profile=profile,
    )
    started = time.perf_counter()
    result = run(job)
    wall = time.perf_counter() - started
    steps = profile.get("steps", [])
    measured = steps[1:] if len(steps) > 1 else steps  # the first step warms kernels up
    seconds = sum(s["seconds"] for s in measured)
    tokens = sum(sum(s["sequenceLengths"]) for s in measured)
    shape = model_shape(AutoConfig.from_pretrained(str(checkpoint)))
    flops = sum(flops_per_step(shape, s["sequenceLengths"], s["trainedTokens"], lora) for s in measured)
    peak_memory = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    achieved = flops / seconds / 1e12 if seconds > 0 else float("nan")
    mfu = achieved / peak if peak else float("nan")
    log(
        f"{label:<28} {'lora' if lora else 'full':<4} attn={profile.get('attention')} steps={len(steps)} "
        f"tokens/step={sum(steps[0]['sequenceLengths']) if steps else 0} micro-batches/step={steps[0]['microBatches'] if steps else 0} "
        f"step={seconds / max(1, len(measured)):.3f}s tokens/s={tokens / seconds if seconds else float('nan'):,.0f} "
        f"TFLOP/s={achieved:.1f} MFU={mfu * 100:.1f}% peak-mem={peak_memory:.1f}GiB loss={result['metrics']['loss']:.4f} "
        f"grad-norm={result['metrics']['gradNorm']:.3f} wall={wall:.1f}s"
    )
    return {"label": label, "format": "lora" if lora else "full", "tokensPerSecond": tokens / seconds if seconds else None, "mfu": mfu, "tflops": achieved, "peakMemoryGiB": peak_memory, "steps": len(steps), "result": result}


def agreement(checkpoint: Path, device: str, tokens: int) -> dict[str, float]:
    """Log-probs of one set of sequences: accelerator bf16 (packed) vs CPU float32, and packed vs one
    sequence per forward on the accelerator."""
    import numpy as np
    import torch
    from transformers import AutoConfig

    from rein_trainer.checkpoint import resolve_parent
    from rein_trainer.forward import sequence_logprobs
    from rein_trainer.modeling import Precision, load_for_inference

    vocab = AutoConfig.from_pretrained(str(checkpoint)).vocab_size
    rng = random.Random(1)
    sequences = []
    while sum(map(len, sequences)) < tokens:
        sequences.append([rng.randrange(vocab) for _ in range(rng.randint(8, 200))])
    parent = resolve_parent(checkpoint)
    reference = sequence_logprobs(load_for_inference(parent, Precision(torch.device("cpu"), torch.float32), "auto"), sequences, torch.device("cpu"), torch.float32, 1 << 30)
    accel = torch.device(device)
    model = load_for_inference(parent, Precision(accel, torch.bfloat16), "auto")
    packed = sequence_logprobs(model, sequences, accel, torch.bfloat16, 1 << 30)
    alone = sequence_logprobs(model, sequences, accel, torch.bfloat16, 1)  # budget 1: one sequence per forward
    flat = lambda xs: np.array([v for s in xs for v in s])  # noqa: E731
    diff = np.abs(flat(packed) - flat(reference))
    pack_diff = np.abs(flat(packed) - flat(alone))
    out = {"maxAbsDiff": float(diff.max()), "meanAbsDiff": float(diff.mean()), "packedVsAloneMaxAbsDiff": float(pack_diff.max()), "tokens": int(diff.size)}
    log(f"log-probs {device} bf16 vs cpu float32 on {checkpoint.name}: max |Δ| {out['maxAbsDiff']:.4f}, mean |Δ| {out['meanAbsDiff']:.5f} over {out['tokens']} tokens; packed vs one sequence per forward: max |Δ| {out['packedVsAloneMaxAbsDiff']:.4f}")
    return out


def make_model(folder: Path, config_values: dict[str, Any], dtype: str, seed: int, tokenizer_from: Path | None) -> Path:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(**config_values)
    config.dtype = dtype
    started = time.perf_counter()
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen3ForCausalLM(config)
    model = model.to(getattr(torch, dtype))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    del model
    if tokenizer_from is not None and (tokenizer_from / "tokenizer.json").exists():
        shutil.copy(tokenizer_from / "tokenizer.json", folder / "tokenizer.json")
    log(f"built {folder.name} ({sum(1 for _ in folder.iterdir())} files) in {time.perf_counter() - started:.1f}s")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--quick", action="store_true", help="CPU-only self test: tiny model, a few hundred tokens")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense bf16 peak, when it is not an H100/H200/A100")
    parser.add_argument("--tokens", type=int, default=65536, help="tokens in each synthetic batch")
    parser.add_argument("--epochs", type=int, default=4, help="optimizer steps per run (one per epoch; the first is warm-up)")
    parser.add_argument("--max-tokens-per-micro-batch", type=int, default=16384)
    parser.add_argument("--skip-0.6b", dest="skip_big", action="store_true")
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    args = parser.parse_args()

    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    import torch

    sys.path.insert(0, str(Path(args.repo) / "trainer"))
    from rein_trainer import attention

    report: dict[str, Any] = {"runs": []}
    if args.quick:
        device, peak = "cpu", None
        tokens, epochs, micro = min(args.tokens, 400), 2, 128
        log("quick self test on CPU: tiny model, a few hundred tokens (MFU is not measured)")
    else:
        if not torch.cuda.is_available():
            log("gpu-check: no CUDA device; run on a machine with an NVIDIA GPU, or pass --quick for the CPU self test")
            return 2
        device = "cuda"
        name = torch.cuda.get_device_name(0)
        peak = args.peak_tflops or next((v for k, v in PEAKS.items() if k in name), None)
        tokens, epochs, micro = args.tokens, args.epochs, args.max_tokens_per_micro_batch
        log(f"GPU: {name}; bf16 dense peak {peak if peak else 'unknown (pass --peak-tflops)'} TFLOP/s; torch {torch.__version__}; varlen attention {'yes' if attention.varlen_available() else 'no'}")
        report["gpu"] = name
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="rein-gpu-check-"))
    try:
        base = Path(args.repo) / "models" / "base"
        checkpoints: list[tuple[str, Path, int, int]] = []
        try:
            from rein_trainer.checkpoint import check_causal_lm, resolve_parent

            check_causal_lm(resolve_parent(base))
            usable_base = True
        except Exception as err:  # noqa: BLE001 - reported, the rest of the check goes on
            log(f"models/base is not usable here ({err}); a tiny Qwen3 stands in for it")
            usable_base = False
        if not usable_base:
            base = make_model(work / "tiny-base", TINY, "float32", 0, None)
        from transformers import AutoConfig

        base_config = AutoConfig.from_pretrained(str(base))
        longest = 64 if args.quick else min(1024, base_config.max_position_embeddings)
        checkpoints.append(("models/base", base, base_config.vocab_size, longest))
        if not args.quick and not args.skip_big:
            big = make_model(work / "qwen3-0.6b-shape", QWEN3_0_6B, "bfloat16", 0, None)
            checkpoints.append(("qwen3-0.6b shape (random)", big, QWEN3_0_6B["vocab_size"], 4096))
        for label, folder, vocab, longest in checkpoints:
            batch = work / f"{folder.name}.safetensors"
            synthetic_batch(batch, vocab, tokens, min(16, longest), longest, seed=2)
            for lora in (True, False):
                report["runs"].append(train_run(label, folder, batch, work / f"out-{folder.name}-{'lora' if lora else 'full'}", lora, device, epochs, micro, peak))
        report["agreement"] = agreement(base, device, 400 if args.quick else 8192)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["seconds"] = time.perf_counter() - started
    log(f"gpu-check done in {report['seconds']:.0f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
