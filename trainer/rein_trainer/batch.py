"""The `rein-batch/1` artifact (src/samples/batch-artifact.ts): reading, verifying and (for tests and checks) writing.

The file is safetensors; tensors (N tokens, S sequences): input_ids I32[N], loss_mask U8[N],
advantages F32[N], old_logprobs F32[N], loss_weights F32[N], cu_seqlens I32[S+1],
sequence_rollout I32[S], token_policy I32[N]. Metadata: format, iteration, policy_version,
config_hash, content_hash, rollouts, policy_versions, the optional off-policy correction
(importance_sampling truncate|mask, importance_level token|sequence, importance_weight_cap,
importance_band_low/high; or a bare importance_weight_cap, as batches before masking) and
tokenizer_sha256. The content hash is `tensorsHash` of src/samples/safetensors.ts, with the
correction's keys hashed in when importance_sampling is set (`batchContentHash` of
src/samples/importance-sampling.ts).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import BadInput

FORMAT = "rein-batch/1"

_DTYPES: dict[str, np.dtype] = {
    "I32": np.dtype("<i4"),
    "F32": np.dtype("<f4"),
    "U8": np.dtype("u1"),
    "I64": np.dtype("<i8"),
}
_EXPECTED: dict[str, str] = {
    "input_ids": "I32",
    "loss_mask": "U8",
    "advantages": "F32",
    "old_logprobs": "F32",
    "loss_weights": "F32",
    "cu_seqlens": "I32",
    "sequence_rollout": "I32",
    "token_policy": "I32",
}


@dataclass(frozen=True)
class ImportanceSampling:
    """The batch's off-policy correction (src/samples/importance-sampling.ts)."""

    mode: str  # truncate | mask
    level: str  # token | sequence
    cap: float
    band: tuple[float, float] | None = None  # [low, high] with low < 1 < high; mask only


_IMPORTANCE_KEYS = ("importance_band_high", "importance_band_low", "importance_level", "importance_sampling", "importance_weight_cap")


@dataclass(frozen=True)
class RawTensor:
    dtype: str
    shape: tuple[int, ...]
    data: bytes


@dataclass
class Batch:
    """A decoded batch: flat per-token arrays and the sequence boundaries."""

    path: str
    metadata: dict[str, str]
    content_hash: str
    input_ids: np.ndarray  # int64 [N]
    loss_mask: np.ndarray  # uint8 [N]
    advantages: np.ndarray  # float32 [N]
    old_logprobs: np.ndarray  # float32 [N]
    loss_weights: np.ndarray  # float32 [N]
    cu_seqlens: np.ndarray  # int64 [S+1]
    trained: np.ndarray = field(init=False)  # bool [N]: loss_mask and not a sequence's first token

    def __post_init__(self) -> None:
        trained = self.loss_mask.astype(bool).copy()
        trained[self.cu_seqlens[:-1][self.cu_seqlens[:-1] < len(trained)]] = False
        self.trained = trained

    @property
    def num_sequences(self) -> int:
        return len(self.cu_seqlens) - 1

    @property
    def num_tokens(self) -> int:
        return len(self.input_ids)

    def span(self, s: int) -> tuple[int, int]:
        return int(self.cu_seqlens[s]), int(self.cu_seqlens[s + 1])

    def length(self, s: int) -> int:
        a, b = self.span(s)
        return b - a

    def trained_tokens(self, s: int) -> int:
        a, b = self.span(s)
        return int(self.trained[a:b].sum())

    @property
    def iteration(self) -> int | None:
        value = self.metadata.get("iteration")
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    @property
    def importance_weight_cap(self) -> float | None:
        value = self.metadata.get("importance_weight_cap")
        return None if value is None else float(value)

    @property
    def importance_sampling(self) -> ImportanceSampling | None:
        return importance_sampling_of(self.metadata, self.path)

    @property
    def tokenizer_sha256(self) -> str | None:
        return self.metadata.get("tokenizer_sha256")


def tensors_hash(tensors: Mapping[str, RawTensor]) -> str:
    """SHA-256 over names, dtypes, shapes and bytes, in name order: `tensorsHash` in TypeScript."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        digest.update(f"{name}:{t.dtype}:{'x'.join(str(d) for d in t.shape)};".encode())
        digest.update(t.data)
    return digest.hexdigest()


def batch_content_hash(tensors_digest: str, metadata: Mapping[str, str]) -> str:
    """The tensors' hash, and with importance_sampling set, the correction's keys too (`batchContentHash`)."""
    if "importance_sampling" not in metadata:
        return tensors_digest
    objective = "".join(f"{k}={metadata[k]};" for k in _IMPORTANCE_KEYS if k in metadata)
    return hashlib.sha256(f"{tensors_digest}\n{objective}".encode()).hexdigest()


def importance_sampling_of(metadata: Mapping[str, str], where: str) -> ImportanceSampling | None:
    """The correction the metadata asks for, or BadInput naming the key a trainer cannot honour."""
    fix = "rebuild the batch with this version of Rein"

    def number(key: str) -> float:
        text = metadata.get(key)
        try:
            value = float(text) if text is not None else math.nan
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise BadInput(f"{where}: batch metadata {key} {text!r} is not a positive number; {fix}")
        return value

    mode = metadata.get("importance_sampling")
    if mode is None:
        strays = [k for k in _IMPORTANCE_KEYS if k != "importance_weight_cap" and k in metadata]
        if strays:
            raise BadInput(f"{where}: batch metadata has {', '.join(strays)} without importance_sampling; {fix}")
        return None if "importance_weight_cap" not in metadata else ImportanceSampling("truncate", "token", number("importance_weight_cap"))
    if mode not in ("truncate", "mask"):
        raise BadInput(f"{where}: batch metadata importance_sampling {mode!r} is not truncate or mask; {fix}")
    level = metadata.get("importance_level")
    if level not in ("token", "sequence"):
        raise BadInput(f"{where}: batch metadata importance_level {level!r} is not token or sequence; {fix}")
    cap = number("importance_weight_cap")
    if mode == "truncate":
        if level != "token" or "importance_band_low" in metadata or "importance_band_high" in metadata:
            raise BadInput(f"{where}: batch metadata: importance_sampling truncate takes level token and no band; {fix}")
        return ImportanceSampling(mode, level, cap)
    band = (number("importance_band_low"), number("importance_band_high"))
    if not (band[0] < 1 < band[1]):
        raise BadInput(f"{where}: batch metadata importance band [{band[0]}, {band[1]}] does not hold 1 strictly inside; {fix}")
    return ImportanceSampling(mode, level, cap, band)


def read_safetensors(path: str | os.PathLike[str]) -> tuple[dict[str, RawTensor], dict[str, str]]:
    """The raw tensors and metadata of a safetensors file, or BadInput naming what is wrong."""
    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise BadInput(f"cannot read the batch {where} ({err.strerror}); pass the path of a rein-batch/1 file to --batch") from err
    fix = "pass a rein-batch/1 file written by Rein's batch stage (samples.safetensors)"
    if len(raw) < 8:
        raise BadInput(f"{where} is not a safetensors file (shorter than its header length); {fix}")
    (length,) = struct.unpack("<Q", raw[:8])
    if 8 + length > len(raw):
        raise BadInput(f"{where} is not a safetensors file (its header runs past the end); {fix}")
    try:
        header = json.loads(raw[8 : 8 + length].decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
    except (UnicodeDecodeError, ValueError) as err:
        raise BadInput(f"{where} is not a safetensors file (header: {err}); {fix}") from err
    metadata = header.pop("__metadata__", None) or {}
    start = 8 + length
    tensors: dict[str, RawTensor] = {}
    for name, entry in header.items():
        try:
            dtype = str(entry["dtype"])
            shape = tuple(int(d) for d in entry["shape"])
            begin, end = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as err:
            raise BadInput(f"{where}: tensor {name} has a malformed header entry; {fix}") from err
        if start + end > len(raw) or begin > end:
            raise BadInput(f"{where}: tensor {name} runs past the end of the file (truncated?); {fix}")
        tensors[name] = RawTensor(dtype, shape, raw[start + begin : start + end])
    return tensors, {str(k): str(v) for k, v in metadata.items()}


def read_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    return read_safetensors(path)[1]


def read_batch(path: str | os.PathLike[str]) -> Batch:
    where = str(path)
    tensors, metadata = read_safetensors(path)
    fmt = metadata.get("format")
    if fmt != FORMAT:
        found = f"format {fmt!r}" if fmt is not None else "no format in its metadata"
        raise BadInput(
            f"{where} is not a Rein batch: it has {found}, and this trainer reads {FORMAT!r} only; "
            "pass the samples.safetensors artifact of a Rein batch stage (rebuild it with this version of Rein)"
        )
    for name, dtype in _EXPECTED.items():
        t = tensors.get(name)
        if t is None:
            raise BadInput(f"{where} lacks tensor {name}; rebuild the batch with this version of Rein")
        if t.dtype != dtype or len(t.shape) != 1:
            raise BadInput(f"{where}: tensor {name} is {t.dtype}{list(t.shape)}, expected a 1-D {dtype}; rebuild the batch with this version of Rein")
        if len(t.data) != t.shape[0] * _DTYPES[dtype].itemsize:
            raise BadInput(f"{where}: tensor {name} holds {len(t.data)} bytes, not {t.shape[0]} {dtype} values; the file is damaged, rebuild the batch")
    actual = batch_content_hash(tensors_hash(tensors), metadata)
    claimed = metadata.get("content_hash")
    if claimed != actual:
        raise BadInput(
            f"{where}: content hash mismatch (metadata says {claimed}, the tensors hash to {actual}); "
            "the file was changed or damaged after it was written, rebuild the batch"
        )

    def array(name: str) -> np.ndarray:
        t = tensors[name]
        return np.frombuffer(t.data, dtype=_DTYPES[t.dtype])

    ids = array("input_ids").astype(np.int64)
    n = len(ids)
    cu = array("cu_seqlens").astype(np.int64)
    for name in ("loss_mask", "advantages", "old_logprobs", "loss_weights", "token_policy"):
        if len(array(name)) != n:
            raise BadInput(f"{where}: tensor {name} has {len(array(name))} values for {n} tokens; rebuild the batch")
    if len(cu) < 1 or cu[0] != 0 or cu[-1] != n or np.any(np.diff(cu) < 0):
        raise BadInput(f"{where}: cu_seqlens does not cut the {n} tokens into sequences (it must rise from 0 to {n}); rebuild the batch")
    if len(array("sequence_rollout")) != len(cu) - 1:
        raise BadInput(f"{where}: sequence_rollout has {len(array('sequence_rollout'))} entries for {len(cu) - 1} sequences; rebuild the batch")
    importance_sampling_of(metadata, where)
    return Batch(
        path=os.path.abspath(where),
        metadata=metadata,
        content_hash=actual,
        input_ids=ids,
        loss_mask=array("loss_mask").copy(),
        advantages=array("advantages").copy(),
        old_logprobs=array("old_logprobs").copy(),
        loss_weights=array("loss_weights").copy(),
        cu_seqlens=cu,
    )


@dataclass
class SequenceSpec:
    """One sequence to write: what the batch stage produces per sequence."""

    ids: Sequence[int]
    loss_mask: Sequence[int]
    advantage: float
    old_logprobs: Sequence[float]
    weight: float
    rollout_id: str = "r0"
    policy_version: str = "v0"


def encode_safetensors(tensors: Mapping[str, tuple[str, np.ndarray]], metadata: Mapping[str, str]) -> bytes:
    """safetensors bytes laid out as encodeSafetensors in TypeScript does (sorted names, space padding)."""
    header: dict[str, object] = {"__metadata__": dict(metadata)}
    offset = 0
    names = sorted(tensors)
    blobs: list[bytes] = []
    for name in names:
        dtype, values = tensors[name]
        data = np.ascontiguousarray(values, dtype=_DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(values.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    text += " " * ((8 - (8 + len(text.encode())) % 8) % 8)
    encoded = text.encode()
    return struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs)


def encode_batch(
    sequences: Sequence[SequenceSpec],
    *,
    iteration: int = 0,
    policy_version: str = "v0",
    config_hash: str = "test",
    importance_weight_cap: float | None = None,
    importance_sampling: ImportanceSampling | None = None,
    tokenizer_sha256: str | None = None,
    extra_metadata: Mapping[str, str] | None = None,
) -> tuple[bytes, str]:
    """A rein-batch/1 file as encodeBatch in src/samples/batch-artifact.ts writes it; returns (bytes, content hash)."""
    ids: list[int] = []
    mask: list[int] = []
    adv: list[float] = []
    old: list[float] = []
    weights: list[float] = []
    cu = [0]
    owners: list[int] = []
    token_policy: list[int] = []
    rollouts: list[str] = []
    policies: list[str] = []
    for s in sequences:
        if not (len(s.ids) == len(s.loss_mask) == len(s.old_logprobs)):
            raise ValueError("ids, loss_mask and old_logprobs must have one entry per token")
        if s.policy_version not in policies:
            policies.append(s.policy_version)
        if s.rollout_id not in rollouts:
            rollouts.append(s.rollout_id)
        ids.extend(int(i) for i in s.ids)
        mask.extend(int(m) for m in s.loss_mask)
        adv.extend([float(s.advantage)] * len(s.ids))
        old.extend(float(o) for o in s.old_logprobs)
        weights.extend(float(s.weight) if m else 0.0 for m in s.loss_mask)
        token_policy.extend(policies.index(s.policy_version) if m else -1 for m in s.loss_mask)
        cu.append(len(ids))
        owners.append(rollouts.index(s.rollout_id))
    arrays: dict[str, tuple[str, np.ndarray]] = {
        "input_ids": ("I32", np.array(ids, dtype=np.int32)),
        "loss_mask": ("U8", np.array(mask, dtype=np.uint8)),
        "advantages": ("F32", np.array(adv, dtype=np.float32)),
        "old_logprobs": ("F32", np.array(old, dtype=np.float32)),
        "loss_weights": ("F32", np.array(weights, dtype=np.float32)),
        "cu_seqlens": ("I32", np.array(cu, dtype=np.int32)),
        "sequence_rollout": ("I32", np.array(owners, dtype=np.int32)),
        "token_policy": ("I32", np.array(token_policy, dtype=np.int32)),
    }
    raw = {
        name: RawTensor(dtype, tuple(values.shape), np.ascontiguousarray(values, dtype=_DTYPES[dtype]).tobytes())
        for name, (dtype, values) in arrays.items()
    }
    objective: dict[str, str] = {}
    if importance_weight_cap is not None:
        objective["importance_weight_cap"] = _js_number(importance_weight_cap)
    if importance_sampling is not None:
        objective.update(importance_sampling=importance_sampling.mode, importance_level=importance_sampling.level, importance_weight_cap=_js_number(importance_sampling.cap))
        if importance_sampling.band is not None:
            objective.update(importance_band_low=_js_number(importance_sampling.band[0]), importance_band_high=_js_number(importance_sampling.band[1]))
    content_hash = batch_content_hash(tensors_hash(raw), objective)
    metadata: dict[str, str] = {
        "format": FORMAT,
        "iteration": str(iteration),
        "policy_version": policy_version,
        "config_hash": config_hash,
        "content_hash": content_hash,
        "rollouts": json.dumps(rollouts, separators=(",", ":")),
        "policy_versions": json.dumps(policies, separators=(",", ":")),
    }
    metadata.update(objective)
    if tokenizer_sha256 is not None:
        metadata["tokenizer_sha256"] = tokenizer_sha256
    if extra_metadata:
        metadata.update(extra_metadata)
    return encode_safetensors(arrays, metadata), content_hash


def write_batch(path: str | os.PathLike[str], sequences: Sequence[SequenceSpec], **identity: object) -> str:
    data, content_hash = encode_batch(sequences, **identity)  # type: ignore[arg-type]
    Path(path).write_bytes(data)
    return content_hash


def _js_number(value: float) -> str:
    """String(n) in JavaScript for the numbers a cap takes (integers print without a fraction)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
