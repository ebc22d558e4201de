"""The training run: one PPO update of a checkpoint on a rein-batch/1 (docs/training-objective.md).

Single process or distributed (torchrun / accelerate launch, DDP or FSDP through
accelerate.Accelerator): each rank takes a token-balanced share of each minibatch's sequences,
the loss is a sum so gradients are summed over micro-batches and ranks, metrics are reduced
across ranks, and rank 0 alone writes the output folder.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .batch import Batch, read_batch
from .checkpoint import (
    Parent,
    architecture,
    check_batch_fits,
    check_output,
    copy_side_files,
    hold_back_marker,
    output_lock,
    publish,
    resolve_parent,
    staging_dir,
    write_json,
)
from .errors import BadInput, TrainerError
from .lora import DEFAULT_TARGET_MODULES, LoraOptions, adapter_options
from .metrics import summarize_steps
from .rng import seeded_random, shuffled
from .token_logprobs import logprob_agreement, parent_logprobs, write_token_logprobs


@dataclass
class TrainJob:
    checkpoint: str
    batch: str
    out: str
    seed: int = 0
    learning_rate: float = 1e-3
    epochs: int = 1
    minibatch_size: int = 32
    clip_epsilon: float = 0.2
    max_grad_norm: float = 1.0
    shuffle: bool = True
    lora_rank: int = 0
    lora_alpha: float | None = None
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES
    device: str = "auto"
    dtype: str = "auto"
    max_tokens_per_micro_batch: int = 16384
    attn_implementation: str = "auto"
    gradient_checkpointing: bool = False
    # Filled with step timings when set (the GPU check); the loop then synchronizes around each step.
    profile: dict[str, Any] | None = None

    def validate(self) -> None:
        checks = [
            (self.epochs >= 1, f"--epochs {self.epochs} must be at least 1"),
            (self.minibatch_size >= 1, f"--minibatch {self.minibatch_size} must be at least 1"),
            (self.learning_rate > 0, f"--lr {self.learning_rate} must be positive"),
            (0 <= self.clip_epsilon < 1, f"--clip {self.clip_epsilon} must be in [0, 1)"),
            (self.max_grad_norm > 0, f"--max-grad-norm {self.max_grad_norm} must be positive"),
            (self.lora_rank >= 0, f"--lora-rank {self.lora_rank} must be 0 (full fine-tune) or positive"),
            (0 <= self.lora_dropout < 1, f"--lora-dropout {self.lora_dropout} must be in [0, 1)"),
            (self.max_tokens_per_micro_batch >= 2, f"--max-tokens-per-micro-batch {self.max_tokens_per_micro_batch} must be at least 2"),
            (self.lora_rank == 0 or len(self.lora_target_modules) > 0, "--lora-target-modules names no module"),
        ]
        for ok, message in checks:
            if not ok:
                raise BadInput(f"{message}; fix the option")

    @property
    def lora(self) -> LoraOptions | None:
        if not self.lora_rank:
            return None
        return LoraOptions(self.lora_rank, self.lora_alpha, self.lora_dropout, tuple(self.lora_target_modules))

    def settings(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "learningRate": self.learning_rate,
            "epochs": self.epochs,
            "minibatchSize": self.minibatch_size,
            "clipEpsilon": self.clip_epsilon,
            "maxGradNorm": self.max_grad_norm,
            "shuffle": self.shuffle,
            "device": self.device,
            "dtype": self.dtype,
            "maxTokensPerMicroBatch": self.max_tokens_per_micro_batch,
            "attnImplementation": self.attn_implementation,
            "gradientCheckpointing": self.gradient_checkpointing,
        }


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def prepare(job: TrainJob) -> tuple[Batch, Parent, Path]:
    """Every check that needs no model weights; BadInput before anything is written."""
    job.validate()
    batch = read_batch(job.batch)
    parent = resolve_parent(job.checkpoint)
    ids = batch.input_ids
    longest = int(np.diff(batch.cu_seqlens).max()) if batch.num_sequences else 0
    check_batch_fits(parent, int(ids.max()) if len(ids) else 0, int(ids.min()) if len(ids) else 0, batch.tokenizer_sha256, batch.path, longest)
    out = Path(job.out).resolve()
    if out == parent.dir or out == parent.base:
        raise BadInput(f"--out {out} is the parent checkpoint; choose a new output directory")
    return batch, parent, out


def run(job: TrainJob) -> dict[str, Any]:
    batch, parent, out = prepare(job)
    if world_size() == 1:
        with output_lock(out):
            previous = check_output(out, parent.dir, batch.content_hash)
            if previous is not None:
                return previous
            from .checkpoint import check_causal_lm

            check_causal_lm(parent)
            return _train(job, batch, parent, out, _accelerator(job))
    accelerator = _accelerator(job)
    lock = output_lock(out) if accelerator.is_main_process else contextlib.nullcontext()
    with lock:
        accelerator.wait_for_everyone()
        try:
            previous = check_output(out, parent.dir, batch.content_hash)
            if previous is not None:
                return previous
            return _train(job, batch, parent, out, accelerator)
        finally:
            accelerator.wait_for_everyone()


def _accelerator(job: TrainJob) -> Any:
    import torch
    from accelerate import Accelerator

    from .modeling import resolve_device

    device = resolve_device(job.device)
    # Without CUDA, cpu=True is what makes accelerate set up gloo across torchrun's processes.
    accelerator = Accelerator(cpu=device.type == "cpu" or not torch.cuda.is_available(), mixed_precision="no")
    if accelerator.num_processes != world_size():
        raise TrainerError(f"launched as {world_size()} processes, but accelerate set up {accelerator.num_processes}; launch with torchrun or accelerate launch")
    return accelerator


class _Ranks:
    """Which sequences each rank takes, and the collectives the loop needs."""

    def __init__(self, accelerator: Any) -> None:
        self.acc = accelerator
        self.world = accelerator.num_processes
        self.rank = accelerator.process_index

    def share(self, sequences: list[int], lengths: np.ndarray) -> list[int]:
        """Longest first onto the least-loaded rank: every rank computes the same split."""
        if self.world == 1:
            return list(sequences)
        load = [0] * self.world
        mine: list[int] = []
        for s in sorted(sequences, key=lambda s: (-int(lengths[s]), s)):
            r = min(range(self.world), key=lambda r: (load[r], r))
            load[r] += int(lengths[s])
            if r == self.rank:
                mine.append(s)
        return sorted(mine)

    def max_count(self, count: int) -> int:
        if self.world == 1:
            return count
        import torch

        value = torch.tensor([count], device=self.acc.device)
        return int(self.acc.reduce(value, reduction="max").item())

    def sum(self, tensor: Any) -> Any:
        return tensor if self.world == 1 else self.acc.reduce(tensor, reduction="sum")


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _train(job: TrainJob, batch: Batch, parent: Parent, out: Path, accelerator: Any) -> dict[str, Any]:
    import torch

    from .forward import build_micro_batch, dummy_micro_batch, forward_logprobs, plan_micro_batches
    from .modeling import Precision, checkpoint_dtype, load_for_training, resolve_dtype
    from .objective import importance_correction, minibatch_weights, ppo_terms

    started = time.perf_counter()
    device = accelerator.device
    precision = Precision(device=device, compute_dtype=resolve_dtype(job.dtype, device))
    torch.manual_seed(job.seed)
    model, fmt = load_for_training(parent, job.lora, precision, job.attn_implementation)
    if job.profile is not None:
        job.profile.update(format=fmt, attention=getattr(getattr(model, "config", None), "_attn_implementation", None), parameters=sum(p.numel() for p in model.parameters()))
    if job.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    lora = adapter_options(model) if fmt == "lora" else None
    params = [p for p in model.parameters() if p.requires_grad]
    adam_extra: dict[str, Any] = {"fused": True} if device.type == "cuda" else {"foreach": False}
    optimizer = torch.optim.Adam(params, lr=job.learning_rate, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, **adam_extra)
    model, optimizer = accelerator.prepare(model, optimizer)
    params = [p for p in model.parameters() if p.requires_grad]
    ranks = _Ranks(accelerator)
    from accelerate.utils import DistributedType

    ddp = accelerator.distributed_type in (DistributedType.MULTI_CPU, DistributedType.MULTI_GPU)

    lengths = np.diff(batch.cu_seqlens)
    trained_per_sequence = np.add.reduceat(batch.trained.astype(np.int64), batch.cu_seqlens[:-1]) if batch.num_tokens else np.zeros(0, np.int64)
    trained_per_sequence = np.where(lengths > 0, trained_per_sequence, 0)
    with_tokens = [s for s in range(batch.num_sequences) if trained_per_sequence[s] > 0]

    def micro_batches(sequences: list[int]) -> tuple[list[list[int]], int]:
        mine = ranks.share(sequences, lengths)
        plans = plan_micro_batches({s: int(lengths[s]) for s in mine}, job.max_tokens_per_micro_batch)
        return plans, ranks.max_count(len(plans))

    weights = batch.loss_weights.astype(np.float64)
    old = batch.old_logprobs.astype(np.float32)
    # The parent's log-probs, before any step: written beside the checkpoint, set against the behaviour
    # log-probs, and what an off-policy correction is computed from.
    plans, count = micro_batches(with_tokens)
    values = parent_logprobs(model, batch, plans, count, device, precision.compute_dtype, ranks.sum)
    agreement = logprob_agreement(values, old, batch.trained)
    importance = None
    sampling = batch.importance_sampling
    if sampling is not None:
        correction = importance_correction(batch.trained, weights, old, values, batch.cu_seqlens, sampling)
        weights, old, importance = correction.weights, correction.old_logprobs, correction.report

    minibatches = max(1, math.ceil(batch.num_sequences / job.minibatch_size))
    scaled = torch.from_numpy(minibatch_weights(weights, minibatches))
    advantages = torch.from_numpy(batch.advantages.astype(np.float32))
    old_t = torch.from_numpy(old)
    has_signal = batch.trained & (batch.advantages != 0)
    random = seeded_random(job.seed)
    step_metrics: list[torch.Tensor] = []
    step_epochs: list[int] = []
    skipped = 0
    model.train()
    for epoch in range(job.epochs):
        order = shuffled(batch.num_sequences, random) if job.shuffle else list(range(batch.num_sequences))
        for m in range(minibatches):
            part = order[m * job.minibatch_size : (m + 1) * job.minibatch_size]
            if not any(has_signal[batch.cu_seqlens[s] : batch.cu_seqlens[s + 1]].any() for s in part):
                skipped += 1
                continue
            plans, count = micro_batches([s for s in part if trained_per_sequence[s] > 0])
            if job.profile is not None:
                _synchronize(device)
                step_started = time.perf_counter()
            sums = torch.zeros(5, dtype=torch.float32, device=device)  # loss, clipped, kl, entropy, tokens
            for i in range(count):
                real = i < len(plans)
                mb = build_micro_batch(batch.input_ids, batch.cu_seqlens, plans[i], batch.trained) if real else dummy_micro_batch()
                sync = not ddp or i == count - 1
                with contextlib.nullcontext() if sync else accelerator.no_sync(model):
                    lp, entropy = forward_logprobs(model, mb, device, precision.compute_dtype, with_entropy=real)
                    if real:
                        index = torch.from_numpy(mb.token_index)
                        terms = ppo_terms(
                            lp,
                            old_t[index].to(device, non_blocking=True),
                            advantages[index].to(device, non_blocking=True),
                            scaled[index].to(device, non_blocking=True),
                            job.clip_epsilon,
                        )
                        # DDP and FSDP average gradients over ranks; ×world turns that into the sum.
                        (terms.loss * ranks.world).backward()
                        assert entropy is not None
                        sums += torch.stack([terms.loss.detach().float(), terms.clipped, terms.kl.float(), entropy.sum(), torch.tensor(float(terms.tokens), device=device)])
                    else:
                        (lp.sum() * 0.0).backward()
            norm = accelerator.clip_grad_norm_(params, float("inf"))
            if hasattr(norm, "full_tensor"):  # a DTensor under FSDP2
                norm = norm.full_tensor()
            norm = torch.as_tensor(norm, device=device, dtype=torch.float32)
            scale = torch.where(norm > job.max_grad_norm, job.max_grad_norm / norm, torch.ones_like(norm))
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(scale.to(p.grad.dtype))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            totals = ranks.sum(sums)
            if job.profile is not None:
                _synchronize(device)
                job.profile.setdefault("steps", []).append(
                    {
                        "seconds": time.perf_counter() - step_started,
                        "sequenceLengths": [int(lengths[s]) for plan in plans for s in plan],
                        "trainedTokens": int(sum(int(trained_per_sequence[s]) for plan in plans for s in plan)),
                        "microBatches": len(plans),
                    }
                )
            tokens = totals[4].clamp(min=1)
            step_metrics.append(torch.stack([totals[0], totals[1] / tokens, totals[2] / tokens, totals[3] / tokens, norm, totals[4]]))
            step_epochs.append(epoch)

    steps = len(step_metrics)
    table = torch.stack(step_metrics).double().cpu().numpy() if steps else np.zeros((0, 6))
    metrics, per_step = summarize_steps(table, step_epochs)
    # base: the full model an adapter applies to; for a full output the lineage's root (as the tfjs trainer says).
    if fmt == "lora" or parent.kind == "lora":
        base = parent.base
    else:
        base = Path(str(parent.lineage.get("base"))) if isinstance(parent.lineage.get("base"), str) else parent.dir
    result: dict[str, Any] = {
        "parent": str(parent.dir),
        "format": fmt,
        "base": str(base),
        "batchContentHash": batch.content_hash,
        "steps": steps,
        "skippedMinibatches": skipped,
        "seconds": time.perf_counter() - started,
        "metrics": metrics,
        "stepMetrics": per_step,
        "trainerLogprobs": agreement,
        "reused": False,
    }
    if importance is not None:
        result["importanceWeights"] = importance

    state = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        import peft
        import transformers

        stage = staging_dir(out)
        stage.mkdir(parents=True)
        copy_side_files([parent.base, parent.dir] if parent.base != parent.dir else [parent.dir], stage)
        unwrapped = accelerator.unwrap_model(model)
        if fmt == "full":
            target = checkpoint_dtype(parent) if device.type == "cuda" else torch.float32
            cast: dict[int, torch.Tensor] = {}
            state = {k: cast.setdefault(id(v), v.detach().to("cpu", target) if v.is_floating_point() else v.detach().cpu()) for k, v in state.items()}
            unwrapped.config.dtype = target
            unwrapped.save_pretrained(stage, state_dict=state)
            marker = "config.json"
        else:
            unwrapped.peft_config["default"].base_model_name_or_path = str(base)
            unwrapped.save_pretrained(stage, state_dict=state)
            marker = "adapter_config.json"
        hold_back_marker(stage, marker)
        lineage = {
            "parent": str(parent.dir),
            "base": str(base),
            "batchContentHash": batch.content_hash,
            "iteration": batch.iteration,
            "format": fmt,
            "baseConfig": architecture(parent.base_config),
            "trainer": {
                "engine": "pytorch",
                "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
                "settings": {**job.settings(), "worldSize": ranks.world, "distributed": str(accelerator.distributed_type.value), **({"lora": lora.as_json()} if lora else {})},
            },
        }
        write_json(stage / "rein.json", lineage)
        write_token_logprobs(stage, values, batch.content_hash)
        write_json(stage / "metrics.json", result)
        publish(stage, out, marker)
    return result


def train_from_paths(**kwargs: Any) -> dict[str, Any]:
    """Programmatic entry (the GPU check): same path as the CLI."""
    return run(TrainJob(**kwargs))


__all__ = ["TrainJob", "run", "train_from_paths", "read_batch"]
