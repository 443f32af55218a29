"""Turning images of warped events into pictures people look at (no ROS, no matplotlib)."""

from __future__ import annotations

import numpy as np


def saturation_scale(iwe: np.ndarray, saturation_percentile: float = 99.0) -> float:
    """The magnitude at which :func:`iwe_to_rgb` saturates: a percentile of the non-zero |values|."""
    magnitude = np.abs(np.asarray(iwe, dtype=np.float64))
    nonzero = magnitude[magnitude > 0]
    return float(np.percentile(nonzero, saturation_percentile)) if nonzero.size else 1.0


def iwe_to_rgb(iwe: np.ndarray, signed: bool | None = None, saturation_percentile: float = 99.0,
               scale: float | None = None) -> np.ndarray:
    """Render an image of warped events as an 8-bit RGB picture, (height, width, 3) uint8.

    Without polarity (all values >= 0): white background, events dark, like the paper's
    figures. With polarity (signed, values of both signs): white background, positive
    events red, negative events blue. ``signed=None`` decides from the values.
    Intensities saturate at ``scale`` (events per pixel), by default the given percentile
    of the non-zero magnitudes, so that one hot pixel does not turn the picture white; give
    several images the same ``scale`` to compare them.
    """
    iwe = np.asarray(iwe, dtype=np.float64)
    if signed is None:
        signed = bool((iwe < 0).any())
    magnitude = np.abs(iwe)
    if scale is None:
        scale = saturation_scale(iwe, saturation_percentile)
    strength = np.clip(magnitude / max(scale, 1e-12), 0.0, 1.0)
    rgb = np.ones(iwe.shape + (3,))
    if signed:
        positive = iwe > 0
        negative = iwe < 0
        rgb[positive, 1] -= strength[positive]
        rgb[positive, 2] -= strength[positive]
        rgb[negative, 0] -= strength[negative]
        rgb[negative, 1] -= strength[negative]
    else:
        rgb -= strength[..., None]
    return np.round(rgb * 255.0).astype(np.uint8)
