"""Loading the policy: device and dtype choices, the base model, LoRA wrapping or merging."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import attention
from .checkpoint import Parent, check_causal_lm
from .errors import BadInput
from .lora import LoraOptions, continue_adapter, merged, new_adapter


@dataclass(frozen=True)
class Precision:
    device: torch.device
    compute_dtype: torch.dtype  # what matmuls run in (autocast when not float32)


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda, but PyTorch sees no CUDA device; pass --device cpu (or auto), or run on a machine with a GPU")
    if requested not in ("cpu", "cuda"):
        raise BadInput(f"--device {requested} is not one of auto, cpu, cuda; pass one of those")
    return torch.device(requested)


def resolve_dtype(requested: str, device: torch.device) -> torch.dtype:
    if requested == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    if requested not in table:
        raise BadInput(f"--dtype {requested} is not one of auto, float32, bfloat16; pass one of those")
    return table[requested]


def checkpoint_dtype(parent: Parent) -> torch.dtype:
    """The dtype the parent's weights are stored in (config.json dtype / torch_dtype), float32 if unstated."""
    name = parent.base_config.get("dtype") or parent.base_config.get("torch_dtype") or "float32"
    value = getattr(torch, str(name).replace("torch.", ""), None)
    return value if isinstance(value, torch.dtype) else torch.float32


def load_base(parent: Parent, dtype: torch.dtype, attn: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    check_causal_lm(parent)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(parent.base), dtype=dtype, attn_implementation=attn)
    except (OSError, ValueError, KeyError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BadInput(f"cannot load the model in {parent.base} ({first}); pass a complete Hugging Face causal LM folder (config.json and safetensors weights)") from err
    model.config.use_cache = False
    return model


def load_for_training(parent: Parent, lora: LoraOptions | None, precision: Precision, attn: str) -> tuple[torch.nn.Module, str]:
    """(model, format): format is "lora" when an adapter is trained, "full" otherwise. Full training keeps
    float32 master weights (bf16 runs under autocast); LoRA keeps the frozen base in the compute dtype."""
    implementation = attention.choose(attn, precision.device)
    if lora is None:
        model = load_base(parent, torch.float32, implementation)
        if parent.kind == "lora":
            model = merged(model, str(parent.dir))
        for p in model.parameters():
            p.requires_grad_(True)
        return model, "full"
    model = load_base(parent, precision.compute_dtype, implementation)
    if parent.kind == "lora":
        return continue_adapter(model, str(parent.dir), lora if lora.rank else None), "lora"
    return new_adapter(model, lora), "lora"


def load_for_inference(parent: Parent, precision: Precision, attn: str) -> torch.nn.Module:
    implementation = attention.choose(attn, precision.device)
    dtype = precision.compute_dtype if precision.device.type == "cuda" else torch.float32
    model = load_base(parent, dtype, implementation)
    if parent.kind == "lora":
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(parent.dir))
    model.eval()
    return model.to(precision.device)
