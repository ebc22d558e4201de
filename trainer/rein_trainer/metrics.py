"""The result's step metrics: each optimizer step's own values (`stepMetrics`) and their means
(`metrics`), as the tfjs trainer reports them (src/policy/local-trainer.ts)."""

from __future__ import annotations

from typing import Any

import numpy as np

# The columns of a step's row, in order; `tokens` is a count, the rest are per-step values.
COLUMNS = ("loss", "clipFraction", "approxKl", "entropy", "gradNorm", "tokens")


def summarize_steps(table: np.ndarray, epochs: list[int]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(means over the steps with the token total, one entry per step) for `table` [steps, 6] in COLUMNS order."""
    if len(table) == 0:
        return {name: 0 if name == "tokens" else 0.0 for name in COLUMNS}, []
    table = np.asarray(table, dtype=np.float64)
    means = table.mean(axis=0)
    metrics: dict[str, Any] = {name: float(means[i]) for i, name in enumerate(COLUMNS[:-1])}
    metrics["tokens"] = int(round(table[:, -1].sum()))
    steps = [{"epoch": int(epoch), **{name: float(row[i]) for i, name in enumerate(COLUMNS[:-1])}, "tokens": int(round(row[-1]))} for epoch, row in zip(epochs, table, strict=True)]
    return metrics, steps
