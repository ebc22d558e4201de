"""The PPO-clip objective of docs/training-objective.md, per trained token, and the importance-weight
correction. Pure functions over tensors / arrays so they can be checked by hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .batch import ImportanceSampling


@dataclass
class TokenTerms:
    """Sums over the trained tokens of one micro-batch (tensors, so no host sync per micro-batch)."""

    loss: torch.Tensor  # Σ (M·w_t)·ℓ_t: what backward differentiates
    clipped: torch.Tensor  # count of tokens where the clipped and unclipped terms differ
    kl: torch.Tensor  # Σ (r − 1) − log r
    tokens: int


def ppo_terms(logprobs: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor, weights: torch.Tensor, clip_epsilon: float) -> TokenTerms:
    """ℓ_t = −min(r_t·A_t, clip(r_t, 1−ε, 1+ε)·A_t), r_t = exp(lp_t − old_t); `weights` are M·w_t."""
    log_ratio = logprobs - old
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    loss = (per_token * weights).sum()
    with torch.no_grad():
        clip_count = (unclipped != clipped).sum().to(torch.float32)
        kl = ((ratio - 1) - log_ratio).sum()
    return TokenTerms(loss=loss, clipped=clip_count, kl=kl, tokens=int(logprobs.numel()))


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, with_entropy: bool, chunk: int = 4096) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(target) per row of `logits` (K, V), in float32; and the entropy per row (no gradient).

    lp = logit[target] − logsumexp(logits): autograd keeps the float32 logits, not a second K×V tensor.
    """
    logits32 = logits.float()
    lse = torch.logsumexp(logits32, dim=-1)
    lp = logits32.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    entropy = None
    if with_entropy:
        with torch.no_grad():
            parts = []
            for start in range(0, logits32.shape[0], chunk):
                piece = torch.log_softmax(logits32[start : start + chunk].detach(), dim=-1)
                parts.append(-(piece.exp() * piece).sum(-1))
            entropy = torch.cat(parts) if parts else lse.new_zeros(0)
    return lp, entropy


@dataclass
class ImportanceCorrection:
    weights: np.ndarray  # float64 [N]: w_t · min(r_t, c) on kept trained tokens, 0 on masked ones
    old_logprobs: np.ndarray  # float32 [N]: lp⁰_t on trained tokens, the sampler's elsewhere
    report: dict[str, Any]


def _stats(values: np.ndarray) -> dict[str, float]:
    if len(values) == 0:
        return {"mean": 1.0, "min": 1.0, "max": 1.0}
    return {"mean": float(values.sum() / len(values)), "min": float(values.min()), "max": float(values.max())}


def importance_correction(trained: np.ndarray, weights: np.ndarray, old: np.ndarray, trainer_logprobs: np.ndarray, cu_seqlens: np.ndarray, sampling: ImportanceSampling) -> ImportanceCorrection:
    """docs/training-objective.md: r_t = exp(lp⁰_t − old_t); the sequence ratio exp(mean of its trained log-ratios);
    kept tokens w_t·min(r_t, c), masked ones (ratio judged outside the band) 0; old_t ← lp⁰_t. Float64 arithmetic and
    the report of src/samples/importance-weights.ts."""
    lp0 = trainer_logprobs.astype(np.float32).astype(np.float64)
    log_ratio = lp0 - old.astype(np.float64)
    ratio = np.exp(log_ratio)
    cu = np.asarray(cu_seqlens, dtype=np.int64)
    sequence_of = np.repeat(np.arange(len(cu) - 1), np.diff(cu))
    counts = np.bincount(sequence_of[trained], minlength=len(cu) - 1)
    # bincount adds in token order, as the TypeScript loop does.
    sums = np.bincount(sequence_of[trained], weights=log_ratio[trained], minlength=len(cu) - 1)
    sequence_ratio = np.exp(np.where(counts > 0, sums / np.maximum(counts, 1), 0.0))
    judged = sequence_ratio[sequence_of] if sampling.level == "sequence" else ratio
    masked = np.zeros_like(trained)
    if sampling.band is not None:
        masked = trained & ((judged < sampling.band[0]) | (judged > sampling.band[1]))
    kept = trained & ~masked
    factor = np.where(kept, np.minimum(ratio, sampling.cap), 0.0)
    new_weights = weights.astype(np.float64).copy()
    new_weights[trained] = new_weights[trained] * factor[trained]
    new_old = old.astype(np.float32).copy()
    new_old[trained] = lp0[trained].astype(np.float32)
    count = int(trained.sum())
    with_tokens = counts > 0
    masked_sequences = np.bincount(sequence_of[masked], minlength=len(cu) - 1) > 0
    report: dict[str, Any] = {"mode": sampling.mode, "level": sampling.level, "cap": float(sampling.cap)}
    if sampling.band is not None:
        report["band"] = [float(sampling.band[0]), float(sampling.band[1])]
    report.update(
        mean=float(factor[trained].sum() / count) if count else 1.0,
        cappedFraction=float((kept & (ratio > sampling.cap)).sum() / count) if count else 0.0,
        maskedFraction=float(masked.sum() / count) if count else 0.0,
        ratio=_stats(ratio[trained]),
        tokens=count,
        sequences={
            "count": int(with_tokens.sum()),
            "ratio": _stats(sequence_ratio[with_tokens]),
            "maskedFraction": float(masked_sequences[with_tokens].sum() / with_tokens.sum()) if with_tokens.any() else 0.0,
        },
    )
    return ImportanceCorrection(weights=new_weights, old_logprobs=new_old, report=report)


def minibatch_weights(weights: np.ndarray, minibatches: int) -> np.ndarray:
    """M·w_t, computed in float64 and rounded once to float32 (as the tfjs trainer's numbers are)."""
    return (weights.astype(np.float64) * minibatches).astype(np.float32)
