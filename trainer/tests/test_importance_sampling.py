"""The off-policy correction (truncate / mask, token / sequence): the batch metadata, and the arithmetic on the
cases src/samples/importance-weights.test.ts writes (same generator, same numbers), plus seeded properties."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rein_trainer.batch import ImportanceSampling, SequenceSpec, encode_batch, read_batch, write_batch
from rein_trainer.errors import BadInput
from rein_trainer.objective import importance_correction
from rein_trainer.rng import seeded_random
from reference import assert_reports_close

FIXTURE = Path(__file__).parent / "fixtures" / "importance_cases.json"
SAMPLINGS = [
    ImportanceSampling("truncate", "token", 1.5),
    ImportanceSampling("mask", "token", 1.4, (0.7, 1.4)),
    ImportanceSampling("mask", "sequence", 2.0, (0.8, 1.25)),
    ImportanceSampling("mask", "token", 1.2, (0.5, 2.0)),
]
TWO = [
    SequenceSpec([1, 2, 3, 4], [0, 0, 1, 1], 0.5, [0, 0, -1.25, -0.5], 0.25, "a", "v7"),
    SequenceSpec([5, 6, 7], [0, 1, 1], -0.5, [0, -2.0, -0.125], 0.25, "b", "v7"),
]


def f32(x: float) -> float:
    return float(np.float32(x))


def seeded_case(seed: int) -> dict[str, Any]:
    """seededCase of the TypeScript test, draw for draw."""
    random = seeded_random(seed)

    def pick(n: int) -> int:
        return math.floor(random() * n)

    sequences = []
    for _ in range(1 + pick(4)):
        length = 2 + pick(9)
        prompt = pick(length)
        weight = f32(0.01 + 0.1 * random())
        mask: list[int] = []
        old: list[float] = []
        parent: list[float] = []
        for t in range(length):
            m = 1 if t >= prompt and random() < 0.85 else 0
            o = f32(-0.1 - 4 * random()) if m else 0.0
            mask.append(m)
            old.append(o)
            parent.append(0.0 if t == 0 else f32((o if m else -1.0) + 1.6 * random() - 0.8))
        sequences.append({"lossMask": mask, "lossWeights": [weight if m else 0.0 for m in mask], "oldLogprobs": old, "parentLogprobs": parent})
    return {"sampling": SAMPLINGS[seed % len(SAMPLINGS)], "sequences": sequences}


def correct(sequences: list[dict[str, Any]], sampling: ImportanceSampling) -> tuple[list[list[float]], dict[str, Any]]:
    """importance_correction on the flat arrays a batch of these sequences holds; the weights split back per sequence."""
    flat = {k: np.array([v for s in sequences for v in s[k]], dtype=np.float64) for k in ("lossMask", "lossWeights", "oldLogprobs", "parentLogprobs")}
    cu = np.concatenate([[0], np.cumsum([len(s["lossMask"]) for s in sequences])])
    trained = flat["lossMask"].astype(bool)
    trained[cu[:-1]] = False
    c = importance_correction(trained, flat["lossWeights"], flat["oldLogprobs"].astype(np.float32), flat["parentLogprobs"], cu, sampling)
    return [c.weights[a:b].tolist() for a, b in zip(cu[:-1], cu[1:], strict=True)], c.report


def test_same_numbers_as_the_typescript_trainer_on_the_shared_cases() -> None:
    cases = json.loads(FIXTURE.read_text())["cases"]
    assert len(cases) == 16
    for case in cases:
        mine = seeded_case(case["seed"])
        assert mine["sequences"] == case["sequences"], "the generator drew other numbers than TypeScript's"
        s = case["sampling"]
        assert mine["sampling"] == ImportanceSampling(s["mode"], s["level"], s["cap"], tuple(s["band"]) if "band" in s else None)
        weights, report = correct(mine["sequences"], mine["sampling"])
        expected = case["expected"]
        for got, want in zip(weights, expected["lossWeights"], strict=True):
            assert [w == 0 for w in got] == [w == 0 for w in want], f"case {case['seed']}: another token masked"
            assert got == pytest.approx(want, rel=1e-12, abs=0)
        assert_reports_close(report, expected["report"], rel=1e-12)


def test_seeded_properties() -> None:
    for seed in range(100, 400):
        case = seeded_case(seed)
        sampling = case["sampling"]
        weights, report = correct(case["sequences"], sampling)
        for s, got in zip(case["sequences"], weights, strict=True):
            trained = [t for t, m in enumerate(s["lossMask"]) if m and t > 0]
            log_ratio = {t: s["parentLogprobs"][t] - s["oldLogprobs"][t] for t in trained}
            rho = math.exp(sum(log_ratio.values()) / len(trained)) if trained else 1.0
            for t, w in enumerate(s["lossWeights"]):
                if t not in log_ratio:
                    assert got[t] == w
                    continue
                r = math.exp(log_ratio[t])
                judged = rho if sampling.level == "sequence" else r
                inside = sampling.band is None or sampling.band[0] <= judged <= sampling.band[1]
                assert got[t] == pytest.approx(w * min(r, sampling.cap) if inside else 0.0, rel=1e-12, abs=1e-300)
            if sampling.level == "sequence" and trained:
                assert len({got[t] == 0 for t in trained}) == 1, "a sequence is masked whole"
        assert 0 <= report["cappedFraction"] + report["maskedFraction"] <= 1
        assert report["ratio"]["min"] <= report["ratio"]["mean"] * (1 + 1e-12) <= report["ratio"]["max"] * (1 + 1e-12)
        if sampling.mode == "truncate":
            assert report["maskedFraction"] == 0


def test_metadata_round_trip_enters_the_content_hash(tmp_path: Path) -> None:
    path = tmp_path / "b.safetensors"
    mask = ImportanceSampling("mask", "sequence", 2, (0.5, 2))
    masked_hash = write_batch(path, TWO, importance_sampling=mask)
    batch = read_batch(path)
    assert batch.importance_sampling == ImportanceSampling("mask", "sequence", 2.0, (0.5, 2.0))
    assert batch.metadata["importance_band_low"] == "0.5" and batch.metadata["importance_band_high"] == "2"
    # Same tensors, another objective: another batch. A bare cap hashes as it always did (tensors only).
    assert masked_hash != encode_batch(TWO, importance_sampling=ImportanceSampling("mask", "token", 2, (0.5, 2)))[1]
    assert encode_batch(TWO, importance_weight_cap=2)[1] == encode_batch(TWO)[1]
    assert read_batch(path).importance_sampling is not None
    write_batch(path, TWO, importance_weight_cap=1.5)
    assert read_batch(path).importance_sampling == ImportanceSampling("truncate", "token", 1.5)


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({"importance_sampling": "clip", "importance_level": "token", "importance_weight_cap": "2"}, "importance_sampling 'clip' is not truncate or mask"),
        ({"importance_sampling": "mask", "importance_level": "word", "importance_weight_cap": "2"}, "importance_level 'word'"),
        ({"importance_sampling": "mask", "importance_level": "token", "importance_weight_cap": "2", "importance_band_low": "1.1", "importance_band_high": "2"}, "does not hold 1 strictly inside"),
        ({"importance_sampling": "mask", "importance_level": "token", "importance_weight_cap": "2"}, "importance_band_low None is not a positive number"),
        ({"importance_sampling": "truncate", "importance_level": "sequence", "importance_weight_cap": "2"}, "truncate takes level token"),
        ({"importance_level": "token"}, "importance_level without importance_sampling"),
        ({"importance_weight_cap": "-1"}, "importance_weight_cap '-1' is not a positive number"),
    ],
)
def test_bad_correction_metadata_is_refused_naming_the_key(tmp_path: Path, metadata: dict[str, str], problem: str) -> None:
    path = tmp_path / "b.safetensors"
    # The content hash is computed over what is written, so only the key itself is wrong.
    from rein_trainer.batch import batch_content_hash

    data, tensors_only = encode_batch(TWO)
    data, _ = encode_batch(TWO, extra_metadata={**metadata, "content_hash": batch_content_hash(tensors_only, metadata)})
    path.write_bytes(data)
    with pytest.raises(BadInput, match=problem):
        read_batch(path)
