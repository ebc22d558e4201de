"""`python -m rein_trainer train|logprobs`: exit 0 on success, 2 on bad input, 3 out of memory, 1 otherwise.
Errors are one stderr line starting with `rein-trainer: `; a result is one JSON line, last on stdout."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from .config import CONFIG_ENV, FIELDS, Field, job_settings, property_schema, read_config
from .errors import EXIT_FAILURE, EXIT_OUT_OF_MEMORY, OOM_ADVICE, BadInput, TrainerError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise BadInput(f"{message}; see `python -m rein_trainer {self.prog.split()[-1]} --help`")


def _modules(value: str) -> tuple[str, ...]:
    return tuple(m.strip() for m in value.split(",") if m.strip())


def _override(field: Field) -> dict[str, Any]:
    """A flag that overrides one setting of the config: its type, choices and help from the config's schema."""
    setting = property_schema(field.path)
    kind = {"integer": int, "number": float, "array": _modules, "string": str}[setting["type"]]
    # Without a config, the defaults are the command line's own (trainer/README.md), not Rein's config's.
    help_text = f"{setting.get('description', '')} (overrides the config's {field.path})"
    return {"type": kind, "help": help_text, **({"choices": setting["enum"]} if "enum" in setting else {})}


def parser() -> argparse.ArgumentParser:
    root = _Parser(prog="rein_trainer", description="Rein's PyTorch trainer (docs/training-objective.md)")
    commands = root.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = commands.add_parser("train", help="one PPO update of a checkpoint on a rein-batch/1")
    train.add_argument("--checkpoint", required=True, help="parent: a Hugging Face model folder or a LoRA adapter folder")
    train.add_argument("--batch", required=True, help="the rein-batch/1 file (samples.safetensors)")
    train.add_argument("--out", required=True, help="the new checkpoint folder (must not hold another result)")
    train.add_argument("--config", help="the update's settings as Rein writes them (rein-trainer-config/1); default: the JSON in $REIN_TRAINER_CONFIG_JSON, else the flags' defaults (trainer/README.md)")
    train.add_argument("--no-shuffle", action="store_true")
    for field in FIELDS:
        train.add_argument(field.flag, dest=field.job_field, default=None, **_override(field))
    train.add_argument("--attn-implementation", default="auto", help="auto (packed varlen attention), sdpa, eager, flash_attention_2")
    train.add_argument("--gradient-checkpointing", action="store_true")

    logprobs = commands.add_parser("logprobs", help="log π(x_t | x_<t), t ≥ 1, for each sequence of a JSON file")
    logprobs.add_argument("--checkpoint", required=True)
    logprobs.add_argument("--input", required=True, help='JSON {"sequences": [[ids...], ...]}')
    logprobs.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    logprobs.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto")
    logprobs.add_argument("--max-tokens-per-micro-batch", type=int, default=16384)
    logprobs.add_argument("--attn-implementation", default="auto")
    return root


def _train(args: argparse.Namespace) -> dict[str, Any]:
    from .train import TrainJob, run

    config = read_config(args.config, os.environ.get(CONFIG_ENV))
    settings = job_settings(config) if config is not None else {}
    # A flag overrides the config (an operator's one-off change); without either, TrainJob's defaults.
    settings.update({field.job_field: getattr(args, field.job_field) for field in FIELDS if getattr(args, field.job_field) is not None})
    job = TrainJob(
        checkpoint=args.checkpoint,
        batch=args.batch,
        out=args.out,
        shuffle=not args.no_shuffle,
        attn_implementation=args.attn_implementation,
        gradient_checkpointing=args.gradient_checkpointing,
        **settings,
    )
    return run(job)


def _logprobs(args: argparse.Namespace) -> dict[str, Any]:
    try:
        with open(args.input, encoding="utf-8") as f:
            payload = json.load(f)
    except OSError as err:
        raise BadInput(f"cannot read {args.input} ({err.strerror}); pass a JSON file to --input") from err
    except ValueError as err:
        raise BadInput(f"{args.input} is not JSON ({err}); pass {{\"sequences\": [[ids...], ...]}}") from err
    sequences = payload.get("sequences") if isinstance(payload, dict) else None
    if not isinstance(sequences, list) or not all(isinstance(s, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in s) for s in sequences):
        raise BadInput(f'{args.input} must hold {{"sequences": [[ids...], ...]}} with integer token ids; fix the input file')
    from .checkpoint import check_batch_fits, resolve_parent

    parent = resolve_parent(args.checkpoint)
    flat = [t for s in sequences for t in s]
    if flat:
        check_batch_fits(parent, max(flat), min(flat), None, args.input)
    from .forward import sequence_logprobs
    from .modeling import Precision, load_for_inference, resolve_device, resolve_dtype

    device = resolve_device(args.device)
    precision = Precision(device=device, compute_dtype=resolve_dtype(args.dtype, device))
    model = load_for_inference(parent, precision, args.attn_implementation)
    return {"logprobs": sequence_logprobs(model, sequences, device, precision.compute_dtype, args.max_tokens_per_micro_batch)}


def _is_oom(err: BaseException) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return isinstance(err, torch.cuda.OutOfMemoryError) or "CUDA out of memory" in str(err)


def _quiet() -> None:
    """No hub lookups (checkpoints are local folders), no progress bars or advisory warnings on stderr."""
    import os
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="peft")


def main(argv: Sequence[str] | None = None) -> int:
    _quiet()
    try:
        args = parser().parse_args(argv)
        result = _train(args) if args.command == "train" else _logprobs(args)
    except TrainerError as err:
        print(f"rein-trainer: {err}", file=sys.stderr, flush=True)
        return err.exit_code
    except KeyboardInterrupt:
        print("rein-trainer: interrupted", file=sys.stderr, flush=True)
        return EXIT_FAILURE
    except Exception as err:  # noqa: BLE001 - every other failure is exit 1 with its traceback
        if _is_oom(err):
            print(f"rein-trainer: {OOM_ADVICE} ({str(err).splitlines()[0] if str(err) else 'out of memory'})", file=sys.stderr, flush=True)
            return EXIT_OUT_OF_MEMORY
        traceback.print_exc()
        print(f"rein-trainer: unexpected failure: {type(err).__name__}: {err}".splitlines()[0], file=sys.stderr, flush=True)
        return EXIT_FAILURE
    if _is_main_process():
        line = json.dumps(result)
        print(line, flush=True)
        # In a Kubernetes Job Rein reads the result from the termination message file it names.
        result_file = os.environ.get("REIN_RESULT_FILE")
        if result_file and args.command == "train":
            with open(result_file, "w", encoding="utf-8") as f:
                f.write(line)
    return 0


def _is_main_process() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"


