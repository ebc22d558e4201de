"""Packing sequences into micro-batches and the forward pass that gives per-token log-probs.

A micro-batch is one row: its sequences back to back, `position_ids` restarting at 0 for each,
and the sequence boundaries (cu_seqlens) handed to the attention (see attention.py), so no
sequence sees another. Logits are computed only at the positions whose next token is wanted
(`logits_to_keep`), so prompt tokens cost no vocabulary projection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from . import attention as _attention  # noqa: F401 - registers the rein_varlen attention
from .objective import token_logprobs


@dataclass
class MicroBatch:
    sequences: list[int]
    input_ids: torch.Tensor  # (1, T) int64
    position_ids: torch.Tensor  # (1, T) int64
    cu_seqlens: torch.Tensor  # (n+1,) int32
    max_length: int
    keep: torch.Tensor  # (K,) int64: row positions whose next token is predicted
    targets: torch.Tensor  # (K,) int64: those next tokens
    token_index: np.ndarray  # (K,) index of each predicted token in the batch's flat arrays

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[1])

    def to(self, device: torch.device) -> MicroBatch:
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        return MicroBatch(
            self.sequences,
            move(self.input_ids),
            move(self.position_ids),
            move(self.cu_seqlens),
            self.max_length,
            move(self.keep),
            move(self.targets),
            self.token_index,
        )


def plan_micro_batches(lengths: dict[int, int], max_tokens: int) -> list[list[int]]:
    """First-fit decreasing: sequences into micro-batches of at most max_tokens tokens (a longer
    sequence gets one of its own). Deterministic for given lengths."""
    bins: list[list[int]] = []
    room: list[int] = []
    for s in sorted(lengths, key=lambda s: (-lengths[s], s)):
        n = lengths[s]
        for i, free in enumerate(room):
            if n <= free:
                bins[i].append(s)
                room[i] -= n
                break
        else:
            bins.append([s])
            room.append(max(0, max_tokens - n))
    for b in bins:
        b.sort()
    return bins


def build_micro_batch(ids: np.ndarray, cu_seqlens: np.ndarray, sequences: Sequence[int], select: np.ndarray) -> MicroBatch:
    """Packs `sequences`; predicted tokens are those t ≥ 1 of each sequence where `select[t]`."""
    rows: list[np.ndarray] = []
    positions: list[np.ndarray] = []
    keep: list[np.ndarray] = []
    index: list[np.ndarray] = []
    cu = [0]
    offset = 0
    longest = 0
    for s in sequences:
        a, b = int(cu_seqlens[s]), int(cu_seqlens[s + 1])
        n = b - a
        rows.append(ids[a:b])
        positions.append(np.arange(n, dtype=np.int64))
        chosen = np.nonzero(select[a + 1 : b])[0] + 1  # offsets within the sequence, ≥ 1
        keep.append(offset + chosen - 1)
        index.append(a + chosen)
        offset += n
        cu.append(offset)
        longest = max(longest, n)
    flat_ids = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    flat_keep = np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)
    flat_index = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
    return MicroBatch(
        sequences=list(sequences),
        input_ids=torch.from_numpy(flat_ids.astype(np.int64)).unsqueeze(0),
        position_ids=torch.from_numpy(np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)).unsqueeze(0),
        cu_seqlens=torch.tensor(cu, dtype=torch.int32),
        max_length=longest,
        keep=torch.from_numpy(flat_keep.astype(np.int64)),
        targets=torch.from_numpy(flat_ids[flat_keep + 1].astype(np.int64)) if len(flat_keep) else torch.zeros(0, dtype=torch.int64),
        token_index=flat_index,
    )


def dummy_micro_batch() -> MicroBatch:
    """Two tokens, one prediction: what a rank with no share of a step runs (its loss times 0), so that
    every rank makes the same collective calls."""
    return build_micro_batch(np.zeros(2, dtype=np.int64), np.array([0, 2]), [0], np.array([False, True]))


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[object]:
    if dtype is None or dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def forward_logprobs(
    model: torch.nn.Module,
    mb: MicroBatch,
    device: torch.device,
    compute_dtype: torch.dtype | None,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(lp (K,) float32 with gradient, entropy (K,) or None) for the micro-batch's predicted tokens."""
    on = mb.to(device)
    with autocast(device, compute_dtype):
        out = model(
            input_ids=on.input_ids,
            position_ids=on.position_ids,
            use_cache=False,
            logits_to_keep=on.keep,
            cu_seq_lens_q=on.cu_seqlens,
            cu_seq_lens_k=on.cu_seqlens,
            max_length_q=on.max_length,
            max_length_k=on.max_length,
        )
    logits = out.logits[0]  # (K, V)
    return token_logprobs(logits, on.targets, with_entropy)


def sequence_logprobs(
    model: torch.nn.Module,
    sequences: Sequence[Sequence[int]],
    device: torch.device,
    compute_dtype: torch.dtype | None,
    max_tokens: int,
) -> list[list[float]]:
    """log π(x_t | x_<t) for t ≥ 1 of each sequence (the `logprobs` command)."""
    ids = np.array([t for s in sequences for t in s], dtype=np.int64)
    cu = np.concatenate([[0], np.cumsum([len(s) for s in sequences])]).astype(np.int64)
    select = np.ones(len(ids), dtype=bool)
    values = np.zeros(len(ids), dtype=np.float32)
    lengths = {i: len(s) for i, s in enumerate(sequences) if len(s) >= 2}
    with torch.no_grad():
        for group in plan_micro_batches(lengths, max_tokens):
            mb = build_micro_batch(ids, cu, group, select)
            lp, _ = forward_logprobs(model, mb, device, compute_dtype, with_entropy=False)
            values[mb.token_index] = lp.float().cpu().numpy()
    return [[float(v) for v in values[cu[i] + 1 : cu[i + 1]]] for i in range(len(sequences))]
