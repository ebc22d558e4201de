"""Test fixtures: a tiny Qwen3 checkpoint and rein-batch/1 files written the way Rein writes them."""

from __future__ import annotations

import json
import random
from pathlib import Path

from rein_trainer.batch import SequenceSpec, write_batch

VOCAB = 264


def tiny_config(**overrides: object) -> object:
    from transformers import Qwen3Config

    values: dict[str, object] = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
        max_position_embeddings=1024,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    values.update(overrides)
    return Qwen3Config(**values)


def write_tokenizer(folder: Path) -> None:
    """A byte-level WordLevel tokenizer over the tiny vocabulary (what matters: its exact bytes)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for i in range(4, VOCAB):
        vocab[f"t{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>", "pad_token": "<pad>"}))


def make_checkpoint(folder: Path, seed: int = 0, **overrides: object) -> Path:
    import torch
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(tiny_config(**overrides))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    write_tokenizer(folder)
    return folder


def random_sequences(count: int, seed: int = 0, min_len: int = 6, max_len: int = 24, zero_advantage: bool = False) -> list[SequenceSpec]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        n = rng.randint(min_len, max_len)
        prompt = rng.randint(2, n - 2)
        ids = [rng.randrange(4, VOCAB) for _ in range(n)]
        mask = [0] * prompt + [1] * (n - prompt)
        old = [0.0 if m == 0 else -rng.uniform(3.5, 7.0) for m in mask]
        advantage = 0.0 if zero_advantage else rng.choice([-1.0, -0.5, 0.5, 1.0])
        out.append(SequenceSpec(ids=ids, loss_mask=mask, advantage=advantage, old_logprobs=old, weight=1.0 / 200, rollout_id=f"r{i // 2}", policy_version="v1"))
    return out


def make_batch(path: Path, sequences: list[SequenceSpec] | None = None, **identity: object) -> str:
    return write_batch(path, sequences if sequences is not None else random_sequences(10), **identity)
