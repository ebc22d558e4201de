"""The parent policy's log-prob of each token of the batch as the trainer computes it, before any step,
and how far it is from the behaviour log-probs the batch carries (src/samples/token-logprobs.ts).

A gap between the two is the train/inference mismatch to look at first when a run misbehaves (other
kernels, another precision, a stale sampler), so the values are written beside the checkpoint as
TOKEN_LOGPROBS_FILE and summarized in the result as `trainerLogprobs`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .batch import Batch

# In a subfolder: vLLM and SGLang load every top-level *.safetensors of a full checkpoint that has no index.
TOKEN_LOGPROBS_FILE = "rein/token-logprobs.safetensors"
# What src/samples/token-logprobs.ts writes and checks when it reads the file back.
TOKEN_LOGPROBS_FORMAT = "rein-token-logprobs/1"


def parent_logprobs(
    model: Any,
    batch: Batch,
    plans: list[list[int]],
    count: int,
    device: Any,
    compute_dtype: Any,
    reduce_sum: Callable[[Any], Any],
) -> np.ndarray:
    """float32 [N]: the model's log-prob of each trained token past its sequence's first, 0 elsewhere.

    `plans` are this rank's micro-batches and `count` the most any rank has: a rank with fewer runs the
    dummy micro-batch so every rank makes the same collective calls (FSDP gathers in the forward pass).
    Each token is computed on one rank only, so the sum across ranks is exact.
    """
    import torch

    from .forward import build_micro_batch, dummy_micro_batch, forward_logprobs

    model.eval()  # no dropout: the parent's own distribution
    values = torch.zeros(batch.num_tokens, dtype=torch.float32, device=device)
    with torch.no_grad():
        for i in range(count):
            real = i < len(plans)
            mb = build_micro_batch(batch.input_ids, batch.cu_seqlens, plans[i], batch.trained) if real else dummy_micro_batch()
            lp, _ = forward_logprobs(model, mb, device, compute_dtype, with_entropy=False)
            if real:
                values[torch.from_numpy(mb.token_index).to(device)] = lp
    return reduce_sum(values).cpu().numpy().astype(np.float32)


def logprob_agreement(trainer: np.ndarray, behaviour: np.ndarray, trained: np.ndarray) -> dict[str, Any]:
    """|trainer − behaviour| over the trained tokens (float64, as logprobAgreement in TypeScript)."""
    diff = np.abs(trainer[trained].astype(np.float64) - behaviour[trained].astype(np.float64))
    tokens = int(diff.size)
    return {
        "tokens": tokens,
        "meanAbsDiff": float(diff.sum() / tokens) if tokens else 0.0,
        "maxAbsDiff": float(diff.max()) if tokens else 0.0,
    }


def write_token_logprobs(folder: Path, values: np.ndarray, batch_content_hash: str) -> None:
    """TOKEN_LOGPROBS_FILE: trainer_logprobs F32 [N] aligned with the batch's input_ids."""
    from safetensors.numpy import save_file

    tensor = np.ascontiguousarray(values, dtype=np.float32)
    (folder / TOKEN_LOGPROBS_FILE).parent.mkdir(parents=True, exist_ok=True)
    save_file({"trainer_logprobs": tensor}, str(folder / TOKEN_LOGPROBS_FILE), metadata={"format": TOKEN_LOGPROBS_FORMAT, "batch_content_hash": batch_content_hash})
