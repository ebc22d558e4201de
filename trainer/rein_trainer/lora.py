"""LoRA with PEFT: a new adapter on a full model, or the continuation of an adapter parent."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import BadInput

DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class LoraOptions:
    rank: int
    alpha: float | None = None  # default 2·rank
    dropout: float = 0.0
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES

    @property
    def effective_alpha(self) -> float:
        return float(self.alpha) if self.alpha is not None else float(2 * self.rank)

    def as_json(self) -> dict[str, object]:
        return {"rank": self.rank, "alpha": self.effective_alpha, "dropout": self.dropout, "targetModules": list(self.target_modules)}


def check_target_modules(model: torch.nn.Module, targets: tuple[str, ...]) -> None:
    linear_names = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear) and name})
    missing = [t for t in targets if t not in linear_names]
    if missing:
        raise BadInput(
            f"LoRA target modules {', '.join(missing)} are not linear layers of this model; "
            f"set trainer.pytorch.lora.targetModules (--lora-target-modules) to names from: {', '.join(linear_names)}"
        )


def new_adapter(model: torch.nn.Module, options: LoraOptions) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    check_target_modules(model, options.target_modules)
    config = LoraConfig(
        r=options.rank,
        lora_alpha=options.effective_alpha,
        lora_dropout=options.dropout,
        target_modules=list(options.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def continue_adapter(model: torch.nn.Module, adapter_dir: str, requested: LoraOptions | None) -> torch.nn.Module:
    """The parent adapter, trainable. Its rank, alpha and targets are kept; a different --lora-rank is an error."""
    from peft import PeftModel

    try:
        peft_model = PeftModel.from_pretrained(model, adapter_dir, is_trainable=True)
    except (RuntimeError, ValueError, KeyError) as err:
        raise BadInput(f"adapter {adapter_dir} does not load onto its base ({str(err).splitlines()[0]}); restore the base model it was trained on, or train from a full checkpoint") from err
    config = peft_model.peft_config["default"]
    if requested is not None and requested.rank != config.r:
        raise BadInput(f"the parent adapter {adapter_dir} has rank {config.r}, not {requested.rank}; pass --lora-rank {config.r} to continue it, or train a new adapter from its base")
    return peft_model


def merged(model: torch.nn.Module, adapter_dir: str) -> torch.nn.Module:
    """The base with the adapter folded in (to train the full model from an adapter parent)."""
    from peft import PeftModel

    try:
        peft_model = PeftModel.from_pretrained(model, adapter_dir)
    except (RuntimeError, ValueError, KeyError) as err:
        raise BadInput(f"adapter {adapter_dir} does not load onto its base ({str(err).splitlines()[0]}); restore the base model it was trained on") from err
    return peft_model.merge_and_unload()


def adapter_options(model: torch.nn.Module) -> LoraOptions:
    config = model.peft_config["default"]  # type: ignore[attr-defined, index]
    targets = config.target_modules
    names = tuple(sorted(targets)) if isinstance(targets, (set, list, tuple)) else (str(targets),)
    return LoraOptions(rank=int(config.r), alpha=float(config.lora_alpha), dropout=float(config.lora_dropout), target_modules=names)
