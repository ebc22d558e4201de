"""No model: the PRNG, the batch artifact, the objective's arithmetic, micro-batch packing."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from rein_trainer.batch import ImportanceSampling, SequenceSpec, encode_batch, read_batch, write_batch
from rein_trainer.errors import BadInput
from rein_trainer.forward import build_micro_batch, plan_micro_batches
from rein_trainer.objective import importance_correction, minibatch_weights, ppo_terms
from rein_trainer.rng import seeded_random, shuffled

TWO = [
    SequenceSpec([1, 2, 3, 4], [0, 0, 1, 1], 0.5, [0, 0, -1.25, -0.5], 0.25, "a", "v7"),
    SequenceSpec([5, 6, 7], [0, 1, 1], -0.5, [0, -2.0, -0.125], 0.25, "b", "v7"),
]


def test_mulberry32_and_shuffle_match_the_typescript_code() -> None:
    # Printed by src/random.ts's seededRandom and local-trainer.ts's shuffle under Node.
    random = seeded_random(7)
    assert [random() for _ in range(3)] == [0.011704753153026104, 0.06195825757458806, 0.97690763277933]
    random = seeded_random(7)
    assert shuffled(10, random) == [6, 5, 8, 1, 2, 3, 4, 7, 9, 0]
    assert shuffled(10, random) == [8, 6, 4, 9, 0, 3, 5, 1, 2, 7]  # one generator for the whole run
    assert seeded_random(-1)() == seeded_random(4294967295)() == 0.8964226141106337


def test_batch_round_trip_and_content_hash(tmp_path: Path) -> None:
    path = tmp_path / "b.safetensors"
    content_hash = write_batch(path, TWO, iteration=4, importance_weight_cap=2)
    # The same tensors hashed by tensorsHash (src/samples/safetensors.ts) under Node.
    assert content_hash == "7d55a0df09a0b2b0adb4626949bdb3de3d2f5d3480dc3f405ce071a08f8df8c7"
    batch = read_batch(path)
    assert batch.content_hash == content_hash
    assert batch.cu_seqlens.tolist() == [0, 4, 7]
    assert batch.input_ids.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert batch.trained.tolist() == [False, False, True, True, False, True, True]
    assert batch.loss_weights.tolist() == [0, 0, 0.25, 0.25, 0, 0.25, 0.25]
    assert batch.iteration == 4 and batch.importance_weight_cap == 2.0
    # The header starts the data 8-byte aligned, as encodeSafetensors pads it.
    (length,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert (8 + length) % 8 == 0


def test_batch_errors_name_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "b.safetensors"
    data, _ = encode_batch(TWO)
    tampered = bytearray(data)
    tampered[-1] ^= 1
    path.write_bytes(bytes(tampered))
    with pytest.raises(BadInput, match="content hash mismatch"):
        read_batch(path)
    data, _ = encode_batch(TWO, extra_metadata={"format": "rein-batch/2"})
    path.write_bytes(data)
    with pytest.raises(BadInput, match=r"format 'rein-batch/2'.*reads 'rein-batch/1'"):
        read_batch(path)
    path.write_bytes(b"not a safetensors file at all")
    with pytest.raises(BadInput, match="not a safetensors file"):
        read_batch(path)


def test_ppo_terms_by_hand() -> None:
    lp = torch.tensor([math.log(0.5), math.log(0.5), math.log(0.5)], dtype=torch.float32)
    old = torch.tensor([math.log(0.25), math.log(0.5), math.log(0.25)], dtype=torch.float32)
    adv = torch.tensor([1.0, -1.0, -1.0])
    weights = torch.tensor([0.5, 0.25, 1.0])
    terms = ppo_terms(lp, old, adv, weights, 0.2)
    # r = 2, 1, 2. Token 0: A>0 → min(2, 1.2)·1 = 1.2, ℓ = −1.2 (clipped). Token 1: r=1, ℓ = 1.
    # Token 2: A<0 → min(−2, −1.2) = −2, ℓ = 2 (clip terms differ: counted as clipped).
    assert terms.loss.item() == pytest.approx(0.5 * -1.2 + 0.25 * 1 + 1.0 * 2, rel=1e-6)
    assert terms.clipped.item() == 2
    assert terms.kl.item() == pytest.approx(2 * ((2 - 1) - math.log(2)), rel=1e-5)
    assert terms.tokens == 3
    # The gradient only flows through the unclipped side: token 0 contributes nothing.
    lp.requires_grad_(True)
    ppo_terms(lp, old, adv, weights, 0.2).loss.backward()
    assert lp.grad is not None
    assert lp.grad.tolist() == pytest.approx([0.0, 0.25 * -1 * -1.0, 1.0 * -2 * -1.0])


def test_importance_correction_caps_weights_and_replaces_old_logprobs() -> None:
    trained = np.array([False, True, True, True])
    weights = np.array([0.0, 0.5, 0.5, 0.5], dtype=np.float32)
    old = np.array([0.0, -1.0, -2.0, -3.0], dtype=np.float32)
    trainer = np.array([0.0, -1.0, -1.0, -3.5], dtype=np.float32)
    c = importance_correction(trained, weights, old, trainer, np.array([0, 4]), ImportanceSampling("truncate", "token", 2.0))
    # ratios 1, e (capped at 2), e^-0.5
    assert c.weights.tolist() == pytest.approx([0.0, 0.5, 1.0, 0.5 * math.exp(-0.5)])
    assert c.old_logprobs.tolist() == [0.0, -1.0, -1.0, -3.5]
    assert c.report["mean"] == pytest.approx((1 + 2 + math.exp(-0.5)) / 3)
    assert c.report["cappedFraction"] == pytest.approx(1 / 3) and c.report["maskedFraction"] == 0
    assert minibatch_weights(np.array([0.1]), 3).tolist() == [np.float32(0.1 * 3)]


def test_packing_positions_and_targets() -> None:
    ids = np.array([10, 11, 12, 13, 20, 21, 22, 30, 31])
    cu = np.array([0, 4, 7, 9])
    select = np.array([0, 0, 1, 1, 0, 1, 1, 1, 1], dtype=bool)
    mb = build_micro_batch(ids, cu, [0, 2], select)
    assert mb.input_ids.tolist() == [[10, 11, 12, 13, 30, 31]]
    assert mb.position_ids.tolist() == [[0, 1, 2, 3, 0, 1]]
    assert mb.cu_seqlens.tolist() == [0, 4, 6]
    # Token 30 is a sequence's first token: never predicted, even with its mask set.
    assert mb.keep.tolist() == [1, 2, 4] and mb.targets.tolist() == [12, 13, 31]
    assert mb.token_index.tolist() == [2, 3, 8]
    assert plan_micro_batches({0: 5, 1: 3, 2: 4, 3: 9}, 8) == [[3], [0, 1], [2]]
