"""Packed-sequence attention: sequences laid back to back in one row never attend to each other.

`rein_varlen` is registered with transformers' AttentionInterface. It reads the packing from the
`cu_seq_lens_q` / `max_length_q` keyword arguments that the forward pass hands every layer (the
names transformers' flash-attention path uses too). On CUDA it calls PyTorch's varlen flash
attention (`torch.nn.attention.varlen.varlen_attn`, no padding, no N² mask); elsewhere it runs
causal SDPA on each sequence's slice. Since it has no mask function registered, transformers builds
no attention mask for it.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch
import torch.nn.functional as F

NAME = "rein_varlen"

try:  # PyTorch >= 2.10
    from torch.nn.attention.varlen import varlen_attn as _varlen_attn
except ImportError:  # pragma: no cover - older PyTorch
    _varlen_attn = None


def varlen_available() -> bool:
    return _varlen_attn is not None


def flash_attn_installed() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


def _sequence_causal_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float | None, sliding_window: int | None) -> torch.Tensor:
    """q (H, L, D), k/v (Hkv, L, D) of one sequence → (H, L, D)."""
    if k.shape[0] != q.shape[0]:
        repeat = q.shape[0] // k.shape[0]
        k = k.repeat_interleave(repeat, dim=0)
        v = v.repeat_interleave(repeat, dim=0)
    if sliding_window is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling)
    positions = torch.arange(q.shape[1], device=q.device)
    distance = positions[:, None] - positions[None, :]
    mask = (distance >= 0) & (distance < sliding_window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scaling)


_native_gqa = True


def _varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, max_len: int, scaling: float | None, window: tuple[int, int]) -> torch.Tensor:
    """varlen flash attention, (T, H, D) in and out; grouped KV heads natively, or repeated where the
    kernel refuses them."""
    global _native_gqa
    assert _varlen_attn is not None
    if k.shape[1] != q.shape[1]:
        if _native_gqa:
            try:
                return _varlen_attn(q, k, v, cu, cu, max_len, max_len, scale=scaling, window_size=window, enable_gqa=True)
            except (RuntimeError, TypeError, NotImplementedError):
                _native_gqa = False
        repeat = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    return _varlen_attn(q, k, v, cu, cu, max_len, max_len, scale=scaling, window_size=window)


def rein_varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """query (1, H, T, D), key/value (1, Hkv, T, D) → (1, T, H, D)."""
    if query.shape[0] != 1:
        raise ValueError("rein_varlen attention takes one packed row (batch size 1)")
    cu = kwargs.get("cu_seq_lens_q")
    total = query.shape[2]
    if cu is None:
        cu = torch.tensor([0, total], dtype=torch.int32, device=query.device)
        max_len = total
    else:
        max_len = int(kwargs.get("max_length_q") or total)
    q = query[0].transpose(0, 1)  # (T, H, D)
    k = key[0].transpose(0, 1)
    v = value[0].transpose(0, 1)
    half = (torch.float16, torch.bfloat16)
    autocast_half = q.is_cuda and torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") in half
    if q.is_cuda and _varlen_attn is not None and (v.dtype in half or autocast_half):
        # Flash kernels take 16-bit inputs; under autocast q/k come out of the float32 norms in float32.
        target = v.dtype if v.dtype in half else torch.get_autocast_dtype("cuda")
        q, k, v = q.to(target), k.to(target), v.to(target)
        window = (-1, 0) if sliding_window is None else (sliding_window - 1, 0)
        cu32 = cu.to(device=q.device, dtype=torch.int32)
        return _varlen(q, k, v, cu32, max_len, scaling, window).unsqueeze(0), None
    # float32 without autocast (exact, as on CPU), or no varlen kernel: causal SDPA per sequence.
    bounds = cu.tolist()
    outputs = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        if end > start:
            qs, ks, vs = (x[start:end].transpose(0, 1) for x in (q, k, v))
            outputs.append(_sequence_causal_sdpa(qs, ks, vs, scaling, sliding_window).transpose(0, 1))
    return torch.cat(outputs, dim=0).unsqueeze(0), None


def register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, rein_varlen_attention)


def choose(requested: str, device: torch.device) -> str:
    """The attention implementation: `auto` is rein_varlen (PyTorch varlen flash attention on CUDA)."""
    if requested != "auto":
        return requested
    if device.type == "cuda" and not varlen_available() and flash_attn_installed():
        return "flash_attention_2"
    return NAME


register()
