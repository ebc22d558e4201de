"""Errors the CLI turns into exit codes: 2 for bad input, 3 for out of memory, 1 for anything else."""

from __future__ import annotations

EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_OUT_OF_MEMORY = 3


class TrainerError(Exception):
    """A failure with a message for the operator; `exit_code` is what the CLI exits with."""

    exit_code: int = EXIT_FAILURE


class BadInput(TrainerError):
    """The batch, checkpoint or options are wrong: the message names the problem and the fix."""

    exit_code = EXIT_BAD_INPUT


class OutOfMemory(TrainerError):
    exit_code = EXIT_OUT_OF_MEMORY


OOM_ADVICE = (
    "the accelerator ran out of memory; lower trainer.pytorch.maxTokensPerMicroBatch (--max-tokens-per-micro-batch: tokens packed per forward pass), "
    "or train a LoRA adapter (trainer.pytorch.lora, --lora-rank 16) instead of the full model, or shard the model over more GPUs "
    "(accelerate launch --config_file trainer/fsdp.yaml)"
)
