"""A plain re-statement of docs/training-objective.md, one sequence at a time, no packing, no
micro-batches, float64 bookkeeping: what the trainer's result is checked against."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rein_trainer.batch import Batch, ImportanceSampling
from rein_trainer.rng import seeded_random, shuffled


def sequence_logprobs(model: torch.nn.Module, ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    logits = model(input_ids=torch.tensor(ids[None], dtype=torch.long)).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    lp = logp[:-1].gather(-1, torch.tensor(ids[1:], dtype=torch.long)[:, None])[:, 0]
    entropy = -(logp.exp() * logp).sum(-1)[:-1]
    return lp, entropy  # index t-1 ↔ token t


def flattened(report: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} → {"a.b": 1}, lists as "a.0": what pytest.approx can compare."""
    out: dict = {}
    for key, value in report.items():
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
        if items is None:
            out[prefix + str(key)] = value
        else:
            out.update(flattened(dict((str(k), v) for k, v in items), f"{prefix}{key}."))
    return out


def assert_reports_close(got: dict, want: dict, rel: float) -> None:
    """Same keys, same words, numbers within `rel` (nested reports: pytest.approx takes flat ones only)."""
    a, b = flattened(got), flattened(want)
    assert sorted(a) == sorted(b)
    words = {k for k, v in b.items() if isinstance(v, str)}
    assert {k: a[k] for k in words} == {k: b[k] for k in words}
    assert {k: v for k, v in a.items() if k not in words} == pytest.approx({k: v for k, v in b.items() if k not in words}, rel=rel)


def reference_importance(model: torch.nn.Module, batch: Batch, weights: np.ndarray, old: np.ndarray, sampling: ImportanceSampling) -> dict:
    """The correction token by token, sequence by sequence (weights and old updated in place); its report."""
    cu, mask = batch.cu_seqlens, batch.trained
    factors: list[float] = []
    ratios: list[float] = []
    sequence_ratios: list[float] = []
    capped = masked = masked_sequences = 0
    with torch.no_grad():
        for s in range(batch.num_sequences):
            a, b = int(cu[s]), int(cu[s + 1])
            lp, _ = sequence_logprobs(model, batch.input_ids[a:b])
            trained = [t for t in range(1, b - a) if mask[a + t]]
            lp0 = {t: float(np.float32(lp[t - 1].item())) for t in trained}
            log_ratio = {t: lp0[t] - old[a + t] for t in trained}
            if not trained:
                continue
            rho = math.exp(sum(log_ratio.values()) / len(trained))
            sequence_ratios.append(rho)
            any_masked = False
            for t in trained:
                r = math.exp(log_ratio[t])
                ratios.append(r)
                judged = rho if sampling.level == "sequence" else r
                out = sampling.band is not None and not (sampling.band[0] <= judged <= sampling.band[1])
                factor = 0.0 if out else min(r, sampling.cap)
                masked += out
                any_masked |= out
                capped += (not out) and r > sampling.cap
                factors.append(factor)
                weights[a + t] *= factor
                old[a + t] = lp0[t]
            masked_sequences += any_masked
    n = len(ratios)
    stats = lambda v: {"mean": sum(v) / len(v), "min": min(v), "max": max(v)}  # noqa: E731
    return {
        "mode": sampling.mode,
        "level": sampling.level,
        "cap": sampling.cap,
        **({"band": list(sampling.band)} if sampling.band else {}),
        "mean": sum(factors) / n,
        "cappedFraction": capped / n,
        "maskedFraction": masked / n,
        "ratio": stats(ratios),
        "tokens": n,
        "sequences": {"count": len(sequence_ratios), "ratio": stats(sequence_ratios), "maskedFraction": masked_sequences / len(sequence_ratios)},
    }


def reference_update(model: torch.nn.Module, batch: Batch, *, seed: int, lr: float, epochs: int, minibatch: int, clip: float, max_grad_norm: float, shuffle: bool = True) -> dict:
    S = batch.num_sequences
    cu = batch.cu_seqlens
    mask = batch.trained
    weights = batch.loss_weights.astype(np.float64)
    old = batch.old_logprobs.astype(np.float64)
    report = None
    sampling = batch.importance_sampling
    if sampling is not None:
        report = reference_importance(model, batch, weights, old, sampling)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    M = max(1, math.ceil(S / minibatch))
    random = seeded_random(seed)
    rows = []
    epochs_of_rows: list[int] = []
    skipped = 0
    for epoch in range(epochs):
        order = shuffled(S, random) if shuffle else list(range(S))
        for m in range(M):
            part = order[m * minibatch : (m + 1) * minibatch]
            if not any(mask[a] and batch.advantages[a] != 0 for s in part for a in range(int(cu[s]), int(cu[s + 1]))):
                skipped += 1
                continue
            loss = torch.zeros((), dtype=torch.float32)
            clipped = kl = entropy = 0.0
            tokens = 0
            for s in part:
                a, b = int(cu[s]), int(cu[s + 1])
                lp, ent = sequence_logprobs(model, batch.input_ids[a:b])
                for t in range(1, b - a):
                    if not mask[a + t]:
                        continue
                    A = float(batch.advantages[a + t])
                    log_ratio = lp[t - 1] - float(np.float32(old[a + t]))
                    r = torch.exp(log_ratio)
                    unclipped = r * A
                    clipped_term = torch.clamp(r, 1 - clip, 1 + clip) * A
                    loss = loss + float(np.float32(M * weights[a + t])) * -torch.minimum(unclipped, clipped_term)
                    clipped += float(unclipped.item() != clipped_term.item())
                    kl += float((r - 1 - log_ratio).item())
                    entropy += float(ent[t - 1].item())
                    tokens += 1
            optimizer.zero_grad()
            loss.backward()
            norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params if p.grad is not None))
            scale = max_grad_norm / norm if norm > max_grad_norm else 1.0
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(scale)
            optimizer.step()
            rows.append([float(loss.item()), clipped / tokens, kl / tokens, entropy / tokens, norm, tokens])
            epochs_of_rows.append(epoch)
    table = np.array(rows) if rows else np.zeros((0, 6))
    metrics = {
        "loss": float(table[:, 0].mean()) if rows else 0.0,
        "clipFraction": float(table[:, 1].mean()) if rows else 0.0,
        "approxKl": float(table[:, 2].mean()) if rows else 0.0,
        "entropy": float(table[:, 3].mean()) if rows else 0.0,
        "gradNorm": float(table[:, 4].mean()) if rows else 0.0,
        "tokens": int(table[:, 5].sum()) if rows else 0,
    }
    names = ("loss", "clipFraction", "approxKl", "entropy", "gradNorm", "tokens")
    steps = [{"epoch": e, **dict(zip(names, row, strict=True))} for e, row in zip(epochs_of_rows, rows, strict=True)]
    return {"steps": len(rows), "skippedMinibatches": skipped, "metrics": metrics, "stepMetrics": steps, "importanceWeights": report}


def parent_token_logprobs(model: torch.nn.Module, batch: Batch) -> np.ndarray:
    """float64 [N]: the model's log-prob of every token past its sequence's first, one sequence at a time."""
    values = np.zeros(batch.num_tokens)
    with torch.no_grad():
        for s in range(batch.num_sequences):
            a, b = batch.span(s)
            if b - a >= 2:
                values[a + 1 : b] = sequence_logprobs(model, batch.input_ids[a:b])[0].double().numpy()
    return values
