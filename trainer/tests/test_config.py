"""The trainer config Rein writes (rein-trainer-config/1): its schema as generated from Rein's zod
schema, validation, defaults, how it maps onto a TrainJob, and flags overriding it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import main_in_process

from rein_trainer.config import CONFIG_ENV, FIELDS, OTHER_SETTINGS, job_settings, read_config, schema, validate
from rein_trainer.errors import BadInput
from rein_trainer.train import TrainJob

FORMAT = "rein-trainer-config/1"


def leaves(node: dict[str, Any], prefix: str = "") -> set[str]:
    found: set[str] = set()
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        found |= leaves(child, f"{path}.") if child.get("type") == "object" else {path}
    return found


def write(workdir: Path, name: str, config: dict[str, Any]) -> str:
    path = workdir / name
    path.write_text(json.dumps(config))
    return str(path)


def test_every_setting_of_the_schema_reaches_the_trainer() -> None:
    # A setting added to Rein's zod schema fails here until the trainer maps it.
    assert leaves(schema()) == {f.path for f in FIELDS} | set(OTHER_SETTINGS)
    job_fields = {f.name for f in dataclasses.fields(TrainJob)}
    assert {f.job_field for f in FIELDS} <= job_fields
    assert len({f.flag for f in FIELDS}) == len(FIELDS)


def test_a_minimal_config_gets_the_schemas_defaults(workdir: Path) -> None:
    config = read_config(write(workdir, "minimal.json", {"format": FORMAT}), None)
    assert config is not None
    assert (config["learningRate"], config["epochs"], config["seed"], config["pytorch"]["maxTokensPerMicroBatch"]) == (0.0003, 4, 1, 16384)
    assert job_settings(config) == {
        "seed": 1,
        "learning_rate": 0.0003,
        "epochs": 4,
        "minibatch_size": 32,
        "clip_epsilon": 0.2,
        "max_grad_norm": 1,
        "device": "auto",
        "dtype": "auto",
        "max_tokens_per_micro_batch": 16384,
        "lora_rank": 0,
    }


def test_lora_settings_and_the_adapters_own_learning_rate(workdir: Path) -> None:
    lora = {"rank": 8, "alpha": 16, "dropout": 0.1, "targetModules": ["q_proj", "v_proj"], "learningRate": 0.002}
    config = read_config(None, json.dumps({"format": FORMAT, "learningRate": 0.00001, "pytorch": {"lora": lora}}))
    assert config is not None
    settings = job_settings(config)
    assert (settings["lora_rank"], settings["lora_alpha"], settings["lora_dropout"], settings["lora_target_modules"]) == (8, 16, 0.1, ("q_proj", "v_proj"))
    assert settings["learning_rate"] == 0.002


def test_no_file_and_no_environment_is_no_config() -> None:
    assert read_config(None, None) is None
    assert read_config(None, "") is None


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"format": "rein-trainer-config/2"}, 'config.format must be "rein-trainer-config/1"'),
        ({}, "config.format is missing"),
        ({"format": FORMAT, "learningRate": 0}, "config.learningRate must be more than 0"),
        ({"format": FORMAT, "epochs": 2.5}, "config.epochs must be of type integer"),
        ({"format": FORMAT, "epochs": True}, "config.epochs must be of type integer"),
        ({"format": FORMAT, "momentum": 0.9}, "config.momentum is not a setting"),
        ({"format": FORMAT, "pytorch": {"device": "tpu"}}, 'config.pytorch.device must be one of ["auto", "cpu", "cuda"]'),
        ({"format": FORMAT, "pytorch": {"lora": {"targetModules": []}}}, "config.pytorch.lora.targetModules must have at least this many items: 1"),
        ({"format": FORMAT, "pytorch": {"lora": {"targetModules": [""]}}}, "config.pytorch.lora.targetModules[0] must have at least this many characters: 1"),
    ],
)
def test_a_config_outside_the_schema_is_bad_input(workdir: Path, config: dict[str, Any], problem: str) -> None:
    with pytest.raises(BadInput) as refused:
        read_config(write(workdir, "bad.json", config), None)
    assert problem in str(refused.value)
    assert "does not fit trainer_config.schema.json" in str(refused.value)


def test_unreadable_or_not_json_is_bad_input(workdir: Path) -> None:
    with pytest.raises(BadInput, match="cannot read the trainer config"):
        read_config(str(workdir / "no-such-config.json"), None)
    with pytest.raises(BadInput, match=f"the trainer config \\${CONFIG_ENV} is not JSON"):
        read_config(None, "{not json")


def test_the_validator_refuses_keywords_it_does_not_check() -> None:
    with pytest.raises(ValueError, match="pattern"):
        validate("x", {"type": "string", "pattern": "^x$"}, "config.name")


def test_training_from_a_config_is_training_from_the_same_flags(workdir: Path, base: Path, batch_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"format": FORMAT, "seed": 5, "learningRate": 0.01, "epochs": 2, "minibatchSize": 4, "clipEpsilon": 0.2, "maxGradNorm": 0.5, "pytorch": {"device": "cpu", "maxTokensPerMicroBatch": 64}}
    common = ["train", "--checkpoint", str(base), "--batch", str(batch_file)]
    code, from_file, err = main_in_process(capsys, *common, "--out", str(workdir / "from-config"), "--config", write(workdir, "train.json", settings))
    assert code == 0, err
    flags = ["--seed", "5", "--lr", "0.01", "--epochs", "2", "--minibatch", "4", "--clip", "0.2", "--max-grad-norm", "0.5", "--device", "cpu", "--max-tokens-per-micro-batch", "64"]
    code, from_flags, err = main_in_process(capsys, *common, "--out", str(workdir / "from-flags"), *flags)
    assert code == 0, err
    assert from_file is not None and from_flags is not None
    assert (from_file["steps"], from_file["metrics"]) == (from_flags["steps"], from_flags["metrics"])
    lineage = json.loads((workdir / "from-config" / "rein.json").read_text())
    assert lineage["trainer"]["settings"]["learningRate"] == 0.01

    # The same config as a Kubernetes Job passes it (in the environment), a flag overriding one setting.
    monkeypatch.setenv(CONFIG_ENV, json.dumps(settings))
    code, overridden, err = main_in_process(capsys, *common, "--out", str(workdir / "from-env"), "--epochs", "1")
    assert code == 0, err
    assert overridden is not None and overridden["steps"] * 2 == from_file["steps"]


def test_a_bad_config_exits_2_before_training(workdir: Path, base: Path, batch_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(workdir, "bad-train.json", {"format": FORMAT, "clipEpsilon": 3})
    code, _, err = main_in_process(capsys, "train", "--checkpoint", str(base), "--batch", str(batch_file), "--out", str(workdir / "never"), "--config", config)
    assert code == 2
    assert err.startswith("rein-trainer: the trainer config") and "config.clipEpsilon must be at most 1" in err
    assert not (workdir / "never").exists()
