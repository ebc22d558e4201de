"""mulberry32, bit-exact with src/random.ts, and the Fisher–Yates shuffle of the tfjs trainer."""

from __future__ import annotations

from collections.abc import Callable

_MASK = 0xFFFFFFFF


def _imul(a: int, b: int) -> int:
    """Math.imul as an unsigned 32-bit result (the low 32 bits of the product)."""
    return (a * b) & _MASK


def seeded_random(seed: int) -> Callable[[], float]:
    """Uniform in [0, 1), the same sequence as seededRandom(seed) in TypeScript."""
    state = seed & _MASK

    def next_value() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & _MASK
        t = state
        t = _imul(t ^ (t >> 15), t | 1)
        t ^= (t + _imul(t ^ (t >> 7), t | 61)) & _MASK
        return ((t ^ (t >> 14)) & _MASK) / 4294967296

    return next_value


def shuffled(n: int, random: Callable[[], float]) -> list[int]:
    """0..n-1 shuffled from the last index down, j = floor(u·(i+1)), as the tfjs trainer does."""
    items = list(range(n))
    for i in range(n - 1, 0, -1):
        j = int(random() * (i + 1))
        items[i], items[j] = items[j], items[i]
    return items
