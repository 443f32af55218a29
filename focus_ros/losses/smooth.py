"""Smooth stand-ins for |x| and sign(x), as the paper suggests (Supp. Sec. K, MAV).

sign(x) ≈ tanh(k x) (k ≫ 1, 1/event), and its primitive
|x| ≈ log(cosh(k x)) / k, so that the smooth |x| has exactly the smooth sign as
derivative. Evaluated stably from d = exp(−2|k x|):
|x| ≈ (|k x| + log1p(d) − log 2) / k and tanh(k x) = sign(x) (1 − d) / (1 + d),
one exp and one log1p per pixel (numpy's vectorized ones), exactly 0 at x = 0.
"""

from __future__ import annotations

import math

import numpy as np

_LOG_2 = math.log(2.0)


def smooth_abs_and_sign(values: np.ndarray, sharpness: float) -> tuple[np.ndarray, np.ndarray]:
    """(log(cosh(k x)) / k, tanh(k x)) element-wise, for k = ``sharpness`` (1/event)."""
    scaled = np.abs(values)
    scaled *= sharpness
    decay = np.multiply(scaled, -2.0)
    np.exp(decay, out=decay)
    sign = np.subtract(1.0, decay)
    sign /= np.add(1.0, decay)
    np.copysign(sign, values, out=sign)
    np.log1p(decay, out=decay)
    scaled += decay
    scaled -= _LOG_2
    scaled *= 1.0 / sharpness
    return scaled, sign
