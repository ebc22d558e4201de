"""Checkpoints: what a parent folder is (full model or LoRA adapter), checks against the batch, and
atomic output folders with their lineage (rein.json), result (metrics.json) and lock."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BadInput, TrainerError

# Fields of config.json that decide whether an adapter fits a base model.
ARCHITECTURE_FIELDS = (
    "model_type",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "tie_word_embeddings",
)

# Files of a checkpoint folder that are not copied into a new one (weights, configs the trainer writes, bookkeeping).
_NOT_COPIED_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".index.json", ".lock", ".tmp")
_NOT_COPIED_NAMES = {"config.json", "adapter_config.json", "rein.json", "metrics.json", "README.md"}


@dataclass(frozen=True)
class Parent:
    """The checkpoint a run starts from."""

    dir: Path  # absolute
    kind: str  # "full" | "lora"
    base: Path  # the full model folder (== dir for a full parent)
    base_config: dict[str, Any]
    adapter_config: dict[str, Any] | None
    lineage: dict[str, Any]  # the parent's rein.json ({} when it has none)

    @property
    def vocab_size(self) -> int | None:
        value = self.base_config.get("vocab_size")
        if value is None and isinstance(self.base_config.get("text_config"), dict):
            value = self.base_config["text_config"].get("vocab_size")
        return int(value) if value is not None else None

    @property
    def tokenizer_file(self) -> Path | None:
        for folder in (self.dir, self.base):
            if (folder / "tokenizer.json").is_file():
                return folder / "tokenizer.json"
        return None


def _read_json(path: Path, what: str, fix: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise BadInput(f"cannot read {path} ({err.strerror}); {fix}") from err
    except ValueError as err:
        raise BadInput(f"{path} is not valid JSON ({err}); {fix}") from err
    if not isinstance(value, dict):
        raise BadInput(f"{path} is not a JSON object ({what}); {fix}")
    return value


def architecture(config: dict[str, Any]) -> dict[str, Any]:
    return {k: config[k] for k in ARCHITECTURE_FIELDS if k in config}


def resolve_parent(path: str | os.PathLike[str]) -> Parent:
    folder = Path(path).resolve()
    if not folder.is_dir():
        raise BadInput(f"checkpoint {folder} does not exist or is not a folder; pass a Hugging Face model folder or a LoRA adapter folder to --checkpoint")
    if (folder / "config.json").is_file():
        config = _read_json(folder / "config.json", "a model config", "pass a Hugging Face model folder to --checkpoint")
        lineage = _read_json(folder / "rein.json", "the lineage", "fix or remove the checkpoint's rein.json") if (folder / "rein.json").is_file() else {}
        return Parent(dir=folder, kind="full", base=folder, base_config=config, adapter_config=None, lineage=lineage)
    if (folder / "adapter_config.json").is_file():
        adapter = _read_json(folder / "adapter_config.json", "a PEFT adapter config", "pass a PEFT LoRA adapter folder to --checkpoint")
        lineage: dict[str, Any] = {}
        if (folder / "rein.json").is_file():
            lineage = _read_json(folder / "rein.json", "the lineage", "restore the adapter's rein.json")
        base_name = lineage.get("base") or adapter.get("base_model_name_or_path")
        if not base_name:
            raise BadInput(f"adapter {folder} names no base model (rein.json base / adapter_config.json base_model_name_or_path); train it again from its base, or add the base's absolute path to its rein.json")
        base = Path(str(base_name))
        if not base.is_absolute():
            base = (folder / base).resolve()
        if not (base / "config.json").is_file():
            raise BadInput(
                f"adapter {folder} is for base model {base}, which is missing (no config.json there); "
                "restore that base model folder at that path, or train from a full checkpoint"
            )
        base_config = _read_json(base / "config.json", "a model config", f"restore the base model {base}")
        expected = lineage.get("baseConfig")
        if isinstance(expected, dict):
            found = architecture(base_config)
            differs = {k: (expected.get(k), found.get(k)) for k in set(expected) | set(found) if expected.get(k) != found.get(k)}
            if differs:
                detail = ", ".join(f"{k}: adapter expects {a!r}, base has {b!r}" for k, (a, b) in sorted(differs.items()))
                raise BadInput(
                    f"adapter {folder} does not fit its base {base} ({detail}); "
                    "restore the base model the adapter was trained on, or train from a full checkpoint"
                )
        if adapter.get("peft_type", "LORA") != "LORA":
            raise BadInput(f"adapter {folder} is a {adapter.get('peft_type')} adapter; only LoRA adapters are supported, train from a full checkpoint")
        return Parent(dir=folder, kind="lora", base=base.resolve(), base_config=base_config, adapter_config=adapter, lineage=lineage)
    raise BadInput(
        f"{folder} is not a checkpoint (it has neither config.json nor adapter_config.json); "
        "pass a Hugging Face model folder or a LoRA adapter folder written by this trainer to --checkpoint"
    )


def check_causal_lm(parent: Parent) -> None:
    """BadInput unless transformers can load the base folder as a causal LM."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    model_type = parent.base_config.get("model_type")
    fix = "convert it to a Hugging Face causal LM folder (config.json with a model_type such as qwen3, and safetensors weights)"
    try:
        config = AutoConfig.from_pretrained(str(parent.base))
    except (ValueError, KeyError, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BadInput(f"{parent.base} is not a model transformers can load (model_type {model_type!r}: {first}); {fix}") from err
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise BadInput(f"{parent.base} holds a {type(config).__name__} (model_type {model_type!r}), which is not a causal LM in transformers; {fix}")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_batch_fits(parent: Parent, max_token_id: int, min_token_id: int, tokenizer_sha256: str | None, batch_path: str, longest: int = 0) -> None:
    vocab = parent.vocab_size
    positions = parent.base_config.get("max_position_embeddings")
    if isinstance(positions, int) and longest > positions:
        raise BadInput(
            f"batch {batch_path} holds a sequence of {longest} tokens, past the context of {parent.base} (max_position_embeddings {positions}); "
            "lower samples.maxPromptTokens / samples.maxResponseTokens and rebuild the batch"
        )
    if min_token_id < 0:
        raise BadInput(f"batch {batch_path} holds a negative token id ({min_token_id}); the batch is damaged, rebuild it")
    if vocab is not None and max_token_id >= vocab:
        raise BadInput(
            f"batch {batch_path} holds token id {max_token_id}, but checkpoint {parent.base} has vocab_size {vocab}: "
            "the batch was built for another tokenizer; train on a batch sampled from this checkpoint's model, or pass the checkpoint it was sampled from"
        )
    if tokenizer_sha256 is not None:
        file = parent.tokenizer_file
        if file is None:
            raise BadInput(
                f"batch {batch_path} was built with tokenizer sha256 {tokenizer_sha256}, and checkpoint {parent.dir} has no tokenizer.json to check it against; "
                "copy the model's tokenizer.json into the checkpoint folder"
            )
        actual = sha256_file(file)
        if actual != tokenizer_sha256.lower():
            raise BadInput(
                f"batch {batch_path} was built for another tokenizer (its tokenizer_sha256 is {tokenizer_sha256}, {file} hashes to {actual}); "
                "train on a batch sampled from this checkpoint's model, or pass the checkpoint it was sampled from"
            )


# ---------------------------------------------------------------------------------------------
# Output folders


def read_result(out: Path) -> dict[str, Any] | None:
    """The result in a complete output folder, or None when there is none."""
    metrics = out / "metrics.json"
    complete = (out / "config.json").is_file() or (out / "adapter_config.json").is_file()
    if not (metrics.is_file() and complete):
        return None
    try:
        value = json.loads(metrics.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def check_output(out: Path, parent: Path, batch_hash: str) -> dict[str, Any] | None:
    """The previous result to reuse, None to train, or BadInput when the folder holds something else."""
    previous = read_result(out)
    if previous is not None:
        if previous.get("batchContentHash") == batch_hash and previous.get("parent") == str(parent):
            return {**previous, "reused": True}
        raise BadInput(
            f"{out} already holds a checkpoint trained from another batch or parent "
            f"(batch {previous.get('batchContentHash')}, parent {previous.get('parent')}); choose a new output directory"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInput(f"{out} exists and is not a checkpoint written by this trainer; choose a new output directory or remove it")
    return None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def output_lock(out: Path, poll_s: float = 0.25) -> Iterator[None]:
    """One trainer per output folder: `OUT.lock` holds the pid; a lock whose pid is dead is stale."""
    lock = out.parent / f"{out.name}.lock"
    out.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(lock.read_text().strip() or "0")
            except (OSError, ValueError):
                holder = 0
            if holder and _alive(holder):
                time.sleep(poll_s)
            else:
                # Left by a trainer that died (or being written right now: give it a moment first).
                time.sleep(poll_s)
                with contextlib.suppress(OSError, ValueError):
                    if int(lock.read_text().strip() or "0") == holder:
                        lock.unlink()
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        break
    try:
        _remove_stale_staging(out)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()


def staging_dir(out: Path) -> Path:
    return out.parent / f".{out.name}.tmp-{os.getpid()}"


def _remove_stale_staging(out: Path) -> None:
    for candidate in out.parent.glob(f".{out.name}.tmp-*"):
        try:
            pid = int(candidate.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if pid == os.getpid() or not _alive(pid):
            shutil.rmtree(candidate, ignore_errors=True)


def copy_side_files(sources: list[Path], dest: Path) -> None:
    """Tokenizer and other non-weight files (generation_config.json, chat template …), later sources win."""
    for source in sources:
        for item in sorted(source.iterdir()):
            if not item.is_file() or item.name.startswith("."):
                continue
            if item.name in _NOT_COPIED_NAMES or item.name.endswith(_NOT_COPIED_SUFFIXES):
                continue
            if item.name.startswith(("adapter_model", "pytorch_model", "model-", "model.")):
                continue
            shutil.copy2(item, dest / item.name)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps(value, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def publish(stage: Path, out: Path, marker: str) -> None:
    """Makes the staged folder the output: `marker` (config.json / adapter_config.json) is written last
    inside the stage, then the stage is renamed onto `out` in one step."""
    pending = stage / f".{marker}.pending"
    for file in stage.iterdir():
        if file.is_file():
            file.chmod(0o644)  # savers write some files 0600; servers in other containers read them
            with file.open("rb") as f:
                os.fsync(f.fileno())
    if pending.exists():
        os.replace(pending, stage / marker)
    _fsync_dir(stage)
    if out.exists():
        out.rmdir()  # empty (checked before training)
    try:
        os.rename(stage, out)
    except OSError as err:
        raise TrainerError(f"could not move the new checkpoint into {out} ({err.strerror}); it is left at {stage}") from err
    _fsync_dir(out.parent)


def hold_back_marker(stage: Path, marker: str) -> None:
    """Moves the marker file aside so it can be put back last by `publish`."""
    if (stage / marker).exists():
        os.replace(stage / marker, stage / f".{marker}.pending")
