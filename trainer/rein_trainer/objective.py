"""The PPO-clip objective of docs/training-objective.md, per trained token, and the importance-weight
correction. Pure functions over tensors / arrays so they can be checked by hand."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


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
    weights: np.ndarray  # float64 [N]: w_t · min(exp(lp⁰_t − old_t), c) on trained tokens
    old_logprobs: np.ndarray  # float32 [N]: lp⁰_t on trained tokens, the sampler's elsewhere
    report: dict[str, float]


def importance_correction(trained: np.ndarray, weights: np.ndarray, old: np.ndarray, trainer_logprobs: np.ndarray, cap: float) -> ImportanceCorrection:
    """w_t ← w_t·min(exp(lp⁰_t − old_t), c), old_t ← lp⁰_t on trained tokens (float64 arithmetic, as JavaScript's)."""
    lp0 = trainer_logprobs.astype(np.float32).astype(np.float64)
    ratio = np.exp(lp0 - old.astype(np.float64))
    factor = np.minimum(ratio, cap)
    new_weights = weights.astype(np.float64).copy()
    new_weights[trained] = new_weights[trained] * factor[trained]
    new_old = old.astype(np.float32).copy()
    new_old[trained] = lp0[trained].astype(np.float32)
    count = int(trained.sum())
    report = {
        "cap": float(cap),
        "mean": float(factor[trained].sum() / count) if count else 1.0,
        "cappedFraction": float((ratio[trained] > cap).sum() / count) if count else 0.0,
    }
    return ImportanceCorrection(weights=new_weights, old_logprobs=new_old, report=report)


def minibatch_weights(weights: np.ndarray, minibatches: int) -> np.ndarray:
    """M·w_t, computed in float64 and rounded once to float32 (as the tfjs trainer's numbers are)."""
    return (weights.astype(np.float64) * minibatches).astype(np.float32)
