"""The trainer config (rein-trainer-config/1): one JSON object of an update's settings, which Rein
writes from its own `trainer` config section (src/training/trainer-config.ts) and passes as
`--config FILE`, or in a Kubernetes Job as the JSON text of $REIN_TRAINER_CONFIG_JSON.

Its JSON Schema (trainer_config.schema.json) is generated from Rein's zod schema, where each
setting is declared once, and committed here; a test on Rein's side fails when it is stale. The
trainer validates a config against it with the small validator below (the keywords zod emits),
since the pinned environment has no JSON Schema package. FIELDS says which TrainJob field and
which operator flag each setting is; tests check that it covers the schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .errors import BadInput

SCHEMA_FILE = Path(__file__).with_name("trainer_config.schema.json")
CONFIG_ENV = "REIN_TRAINER_CONFIG_JSON"


@dataclass(frozen=True)
class Field:
    """One setting: where it sits in the config, the TrainJob field it sets, the flag that overrides it."""

    path: str
    job_field: str
    flag: str


FIELDS = (
    Field("seed", "seed", "--seed"),
    Field("learningRate", "learning_rate", "--lr"),
    Field("epochs", "epochs", "--epochs"),
    Field("minibatchSize", "minibatch_size", "--minibatch"),
    Field("clipEpsilon", "clip_epsilon", "--clip"),
    Field("maxGradNorm", "max_grad_norm", "--max-grad-norm"),
    Field("pytorch.device", "device", "--device"),
    Field("pytorch.dtype", "dtype", "--dtype"),
    Field("pytorch.maxTokensPerMicroBatch", "max_tokens_per_micro_batch", "--max-tokens-per-micro-batch"),
    Field("pytorch.lora.rank", "lora_rank", "--lora-rank"),
    Field("pytorch.lora.alpha", "lora_alpha", "--lora-alpha"),
    Field("pytorch.lora.dropout", "lora_dropout", "--lora-dropout"),
    Field("pytorch.lora.targetModules", "lora_target_modules", "--lora-target-modules"),
)
# Settings FIELDS does not map one to one: the file's version, and the adapter's own rate (job_settings).
OTHER_SETTINGS = ("format", "pytorch.lora.learningRate")


@cache
def schema() -> dict[str, Any]:
    with SCHEMA_FILE.open(encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def property_schema(path: str) -> dict[str, Any]:
    """The schema of one setting, by its dotted path."""
    node = schema()
    for key in path.split("."):
        node = node["properties"][key]
    return node


def read_config(file: str | None, env_text: str | None) -> dict[str, Any] | None:
    """The config of `--config FILE`, else of $REIN_TRAINER_CONFIG_JSON, validated and with defaults; None without either."""
    if file is not None:
        where = file
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as err:
            raise BadInput(f"cannot read the trainer config {file} ({err.strerror}); pass the file Rein wrote to --config") from err
    elif env_text:
        where, text = f"${CONFIG_ENV}", env_text
    else:
        return None
    try:
        config = json.loads(text)
    except ValueError as err:
        raise BadInput(f"the trainer config {where} is not JSON ({err}); pass the file Rein wrote") from err
    problems = validate(config, schema(), "config")
    if problems:
        raise BadInput(f"the trainer config {where} does not fit trainer_config.schema.json: {'; '.join(problems[:5])}; use the config Rein of this version writes")
    completed: dict[str, Any] = with_defaults(config, schema())
    return completed


def job_settings(config: dict[str, Any]) -> dict[str, Any]:
    """TrainJob keyword arguments for a validated config. Without `pytorch.lora`, full fine-tuning (rank 0)."""
    settings: dict[str, Any] = {}
    for field in FIELDS:
        value = _lookup(config, field.path)
        if value is not None:
            settings[field.job_field] = tuple(value) if isinstance(value, list) else value
    lora = config["pytorch"].get("lora")
    if lora is None:
        settings["lora_rank"] = 0
    elif "learningRate" in lora:
        settings["learning_rate"] = lora["learningRate"]
    return settings


def _lookup(config: dict[str, Any], path: str) -> Any:
    node: Any = config
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def with_defaults(value: Any, node: dict[str, Any]) -> Any:
    """The value with every missing property that has a default filled in, recursively."""
    if not isinstance(value, dict) or "properties" not in node:
        return value
    completed = dict(value)
    for key, child in node["properties"].items():
        if key not in completed and "default" in child:
            completed[key] = child["default"]
        if key in completed:
            completed[key] = with_defaults(completed[key], child)
    return completed


_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float)}
# Keywords that only describe; every other keyword must be one `validate` checks.
_ANNOTATIONS = frozenset({"$schema", "description", "default"})
CHECKED_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "minLength"})


def validate(value: Any, node: dict[str, Any], where: str) -> list[str]:
    """What is wrong with `value` under the schema `node`: the keywords zod's JSON Schema uses."""
    unknown = set(node) - CHECKED_KEYWORDS - _ANNOTATIONS
    if unknown:
        raise ValueError(f"trainer_config.schema.json uses {sorted(unknown)} at {where}, which this validator does not check")
    expected = node.get("type")
    if expected is not None and not _is_type(value, expected):
        return [f"{where} must be of type {expected}, not {json.dumps(value)}"]
    problems = _value_problems(value, node, where)
    if isinstance(value, dict):
        problems += _object_problems(value, node, where)
    if isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            problems += validate(item, node["items"], f"{where}[{i}]")
    return problems


def _is_type(value: Any, expected: str) -> bool:
    if isinstance(value, bool) and expected != "boolean":
        return False
    return isinstance(value, _TYPES[expected])


def _value_problems(value: Any, node: dict[str, Any], where: str) -> list[str]:
    bounds = [
        ("const", lambda v, c: v == c, "must be"),
        ("enum", lambda v, e: v in e, "must be one of"),
        ("minimum", lambda v, m: v >= m, "must be at least"),
        ("maximum", lambda v, m: v <= m, "must be at most"),
        ("exclusiveMinimum", lambda v, m: v > m, "must be more than"),
        ("exclusiveMaximum", lambda v, m: v < m, "must be less than"),
        ("minItems", lambda v, n: len(v) >= n, "must have at least this many items:"),
        ("minLength", lambda v, n: len(v) >= n, "must have at least this many characters:"),
    ]
    return [f"{where} {message} {json.dumps(node[keyword])} (it is {json.dumps(value)})" for keyword, holds, message in bounds if keyword in node and not holds(value, node[keyword])]


def _object_problems(value: dict[str, Any], node: dict[str, Any], where: str) -> list[str]:
    properties: dict[str, Any] = node.get("properties", {})
    problems = [f"{where}.{key} is missing" for key in node.get("required", []) if key not in value]
    if node.get("additionalProperties") is False:
        problems += [f"{where}.{key} is not a setting" for key in value if key not in properties]
    for key, child in properties.items():
        if key in value:
            problems += validate(value[key], child, f"{where}.{key}")
    return problems
