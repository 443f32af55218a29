"""Global statistical losses: variance, mean square, MAD, MAV (paper Eqs. (4), (9)-(11)),
and the mean timestamp on pixel (Sec. 4.4, after Mitrokhin et al., IROS 2018).

Every function takes the image of warped events I (float64, (height, width), events)
and returns ``(value, dvalue/dI)``. Means are over the N_p pixels of the image
(|Ω| = N_p, one pixel = one unit of area), as in the paper's discretized variance.
"""

from __future__ import annotations

import numpy as np

from .options import LossOptions
from .reductions import inner_product
from .smooth import smooth_abs_and_sign


def variance(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Var(I) = (1/N_p) Σ (I − μ_I)² (Eq. (4), events²); dVar/dI = 2 (I − μ_I) / N_p."""
    pixel_count = image.size
    centered = image - image.mean()
    value = inner_product(centered, centered) / pixel_count
    centered *= 2.0 / pixel_count
    return value, centered


def mean_square(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """MS(I) = (1/N_p) Σ I² (Eq. (9), events²); dMS/dI = 2 I / N_p."""
    pixel_count = image.size
    value = inner_product(image, image) / pixel_count
    return value, image * (2.0 / pixel_count)


def mean_absolute_deviation(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """MAD(I) = (1/N_p) Σ |I − μ_I| (Eq. (10), events), |·| smooth (see ``smooth``).

    dMAD/dI = (s − mean(s)) / N_p with s = tanh(k (I − μ_I)): μ_I depends on every pixel.
    """
    pixel_count = image.size
    magnitude, sign = smooth_abs_and_sign(image - image.mean(), options.abs_sharpness_per_event)
    sign -= sign.mean()
    sign *= 1.0 / pixel_count
    return float(magnitude.sum()) / pixel_count, sign


def mean_absolute_value(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """MAV(I) = (1/N_p) Σ |I| (Eq. (11), events), |·| smooth; dMAV/dI = tanh(k I) / N_p.

    Degenerate without polarity (I ≥ 0: MAV ≈ mean, i.e. the event count).
    """
    pixel_count = image.size
    magnitude, sign = smooth_abs_and_sign(image, options.abs_sharpness_per_event)
    sign *= 1.0 / pixel_count
    return float(magnitude.sum()) / pixel_count, sign


def mean_timestamp(count_image: np.ndarray, timestamp_image: np.ndarray,
                   options: LossOptions) -> tuple[float, np.ndarray, np.ndarray]:
    """Variance of the per-pixel mean timestamp of the warped events (Sec. 4.4, s²; minimize).

    The paper's "mean timestamp on pixel" loss is "the variance of the per-pixel
    average timestamp of warped events" (after Mitrokhin et al. IROS 2018):

        M(x) = T(x) / (N(x) + ε),   value = (1/N_p) Σ (M − μ_M)²,

    with N the count image WITHOUT polarity (b_k = 1, events), T(x) = Σ_k (t_k − t_start)
    · K(x − x'_k) accumulated with the same kernel (event·s) and ε =
    ``options.mean_timestamp_count_epsilon_events``: empty pixels have M = 0 and the
    derivatives stay bounded. Returns (value, dvalue/dN, dvalue/dT):
    dvalue/dT = g / (N + ε), dvalue/dN = −g M / (N + ε), with g = 2 (M − μ_M) / N_p.
    """
    pixel_count = count_image.size
    inverse_count = 1.0 / (count_image + options.mean_timestamp_count_epsilon_events)
    mean_time = timestamp_image * inverse_count
    centered = mean_time - mean_time.mean()
    value = inner_product(centered, centered) / pixel_count
    centered *= 2.0 / pixel_count
    grad_timestamp = centered * inverse_count
    grad_count = grad_timestamp * mean_time
    np.negative(grad_count, out=grad_count)
    return value, grad_count, grad_timestamp
