"""Synthetic event scenes with a known optical flow, for the patch-flow tests.

Each scene is a set of points translating at a constant velocity v (px/s); an event is one
point (with its own polarity, alternating between points) seen at a random time, at its position rounded to the pixel grid (the sensor's
quantisation) after a small Gaussian position noise.
"""

from __future__ import annotations

import numpy as np

from focus_ros.events import Events

T0_NS = 1_000_000_000


def events_of_points(points, velocity, events: int, duration_s: float, seed: int, width: int = 240,
                     height: int = 180, noise_px: float = 0.2) -> Events:
    """Events of points (M, 2) px (positions at the window start) moving at velocity (2,) px/s."""
    rng = np.random.default_rng(seed)
    points = np.asarray(points, dtype=np.float64)
    which = rng.integers(0, len(points), events)
    t = np.sort(rng.uniform(0.0, duration_s, events))
    position = points[which] + np.asarray(velocity, dtype=np.float64)[None, :] * t[:, None]
    pixel = np.round(position + rng.normal(0.0, noise_px, position.shape)).astype(np.int64)
    inside = (pixel[:, 0] >= 0) & (pixel[:, 0] < width) & (pixel[:, 1] >= 0) & (pixel[:, 1] < height)
    pixel, t = pixel[inside], t[inside]
    point_polarity = np.where(np.arange(len(points)) % 2 == 0, 1, -1)  # each point keeps its polarity
    polarity = point_polarity[which[inside]]
    return Events.from_arrays(pixel[:, 0], pixel[:, 1], np.round(t * 1e9).astype(np.int64) + T0_NS, polarity)


def translating_dots(velocity, dots: int = 2000, events: int = 30_000, duration_s: float = 0.02, seed: int = 0,
                     width: int = 240, height: int = 180) -> Events:
    """Random dots over (and a little beyond) the sensor, all moving at ``velocity`` px/s."""
    rng = np.random.default_rng(seed + 1000)
    points = rng.uniform([-10.0, -10.0], [width + 10.0, height + 10.0], size=(dots, 2))
    return events_of_points(points, velocity, events, duration_s, seed, width, height)


def translating_edge(velocity, angle_rad: float, center=(120.0, 90.0), events: int = 30_000,
                     duration_s: float = 0.02, seed: int = 0, width: int = 240, height: int = 180) -> Events:
    """One straight edge through ``center`` at ``angle_rad`` (densely sampled points along the
    line, across the whole sensor) moving at ``velocity`` px/s: the aperture problem."""
    half_length = np.hypot(width, height) / 2.0 + 20.0  # the edge crosses the whole sensor
    along = np.linspace(-half_length, half_length, int(40 * half_length) + 1)
    points = np.asarray(center)[None, :] + along[:, None] * np.array([np.cos(angle_rad), np.sin(angle_rad)])[None, :]
    return events_of_points(points, velocity, events, duration_s, seed, width, height)
