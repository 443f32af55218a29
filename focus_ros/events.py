"""Events as numpy arrays, never as per-event Python objects.

An :class:`Events` batch holds four aligned arrays:

- ``x``, ``y``: pixel coordinates (uint16, px), (0, 0) is the top-left pixel;
- ``t``: timestamps (int64, nanoseconds);
- ``p``: polarity (int8, +1 brightness increase, -1 decrease).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NANOSECONDS_PER_SECOND = 1_000_000_000


@dataclass(frozen=True)
class Events:
    """A batch of events in time order (x, y in px; t in ns; p in {-1, +1})."""

    x: np.ndarray
    y: np.ndarray
    t: np.ndarray
    p: np.ndarray

    @classmethod
    def from_arrays(cls, x, y, t, p) -> "Events":
        """Build a batch, converting to the canonical dtypes (uint16, uint16, int64, int8).

        Polarity may be given as {0, 1} or {-1, +1}; both become {-1, +1}.
        Raises ValueError when the lengths differ.
        """
        x = np.asarray(x)
        y = np.asarray(y)
        t = np.asarray(t)
        p = np.asarray(p)
        if not (len(x) == len(y) == len(t) == len(p)):
            raise ValueError(
                f"event arrays differ in length: x {len(x)}, y {len(y)}, t {len(t)}, p {len(p)}")
        p = np.where(p > 0, 1, -1).astype(np.int8)
        return cls(x.astype(np.uint16, copy=False), y.astype(np.uint16, copy=False),
                   t.astype(np.int64, copy=False), p)

    @classmethod
    def empty(cls) -> "Events":
        return cls(np.empty(0, np.uint16), np.empty(0, np.uint16),
                   np.empty(0, np.int64), np.empty(0, np.int8))

    def __len__(self) -> int:
        return len(self.t)

    def __getitem__(self, index) -> "Events":
        """Slice or mask all four arrays at once."""
        return Events(self.x[index], self.y[index], self.t[index], self.p[index])

    @staticmethod
    def concatenate(batches) -> "Events":
        batches = [b for b in batches if len(b)]
        if not batches:
            return Events.empty()
        return Events(np.concatenate([b.x for b in batches]),
                      np.concatenate([b.y for b in batches]),
                      np.concatenate([b.t for b in batches]),
                      np.concatenate([b.p for b in batches]))

    @property
    def duration_s(self) -> float:
        """Time from the first to the last event, in seconds (0 for fewer than 2 events)."""
        if len(self) < 2:
            return 0.0
        return float(self.t[-1] - self.t[0]) / NANOSECONDS_PER_SECOND

    def equals(self, other: "Events") -> bool:
        """True when both batches hold exactly the same events."""
        return (len(self) == len(other)
                and np.array_equal(self.x, other.x) and np.array_equal(self.y, other.y)
                and np.array_equal(self.t, other.t) and np.array_equal(self.p, other.p))
