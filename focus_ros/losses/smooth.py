"""Smooth stand-ins for |x| and sign(x), as the paper suggests (Supp. Sec. K, MAV).

sign(x) ≈ tanh(k x) (k ≫ 1, 1/event), and its primitive
|x| ≈ log(cosh(k x)) / k, so that the smooth |x| has exactly the smooth sign as
derivative. Evaluated stably as (|k x| + log1p(exp(−2|k x|)) − log 2) / k: one exp
and one log1p per pixel, shared by value and derivative. Exactly 0 at x = 0.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_LOG_2 = math.log(2.0)


@njit(cache=True, nogil=True, inline="always")
def smooth_abs_and_sign(x: float, sharpness: float):
    """(log(cosh(k x)) / k, tanh(k x)) for k = ``sharpness`` (1/event)."""
    scaled = abs(sharpness * x)
    decay = math.exp(-2.0 * scaled)
    value = (scaled + math.log1p(decay) - _LOG_2) / sharpness
    sign = (1.0 - decay) / (1.0 + decay)
    return value, (sign if x >= 0.0 else -sign)


@njit(cache=True, nogil=True)
def smooth_abs_sum(image: np.ndarray, offset: float, sharpness: float, sign_out: np.ndarray) -> float:
    """Σ_pixels |image − offset| (smooth); writes tanh(k (image − offset)) into ``sign_out``.

    Pixels equal to ``offset`` contribute 0 and get sign 0 without a transcendental.
    """
    height, width = image.shape
    total = 0.0
    for y in range(height):
        for x in range(width):
            centered = image[y, x] - offset
            if centered == 0.0:
                sign_out[y, x] = 0.0
                continue
            value, sign = smooth_abs_and_sign(centered, sharpness)
            total += value
            sign_out[y, x] = sign
    return total


@njit(cache=True, nogil=True)
def weighted_smooth_abs_sum(image: np.ndarray, weight: np.ndarray, sharpness: float,
                            weighted_sign_out: np.ndarray) -> float:
    """Σ weight · |image| (smooth); writes weight · tanh(k image) into ``weighted_sign_out``."""
    height, width = image.shape
    total = 0.0
    for y in range(height):
        for x in range(width):
            pixel = image[y, x]
            if pixel == 0.0:
                weighted_sign_out[y, x] = 0.0
                continue
            value, sign = smooth_abs_and_sign(pixel, sharpness)
            total += weight[y, x] * value
            weighted_sign_out[y, x] = weight[y, x] * sign
    return total
