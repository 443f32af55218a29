"""Image area (support) losses, Eq. (8) and Supp. Eq. (26), with four weightings.

    supp(I) = Σ_pixels ( F(I(x) / λ0) − F(0) )            (px², minimize)

F is the primitive of a decreasing weight ρ ≥ 0 (Sec. 3.2):
exponential F = 1 − e^{−λ}; Gaussian F = erf(λ); Lorentzian F = (2/π) arctan(λ);
hyperbolic F = tanh(λ). λ0 = ``options.area_scale_events`` sets the event count at
which a pixel counts as occupied. Gradient (Supp. Sec. K): d supp / dI = ρ(I / λ0) / λ0.

The area is defined for I ≥ 0, a count image (the registry rejects negative pixels).
With polarity, the paper (Supp. Sec. B, footnote) applies it "to images of positive and
negative events separately, and the results are added": evaluate it on the IWE of the
positive events and on that of the negative events (b_k = 1 in each) and add values and
gradients. (On a signed IWE, |I| would reward opposite polarities cancelling each other,
which blurring does.)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .options import LossOptions

EXPONENTIAL, GAUSSIAN, LORENTZIAN, HYPERBOLIC = 0, 1, 2, 3
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_TWO_OVER_PI = 2.0 / math.pi


@njit(cache=True, nogil=True, inline="always")
def primitive_and_weight(weighting: int, level: float):
    """(F(λ) − F(0), ρ(λ)) of one weighting, at λ = ``level`` ≥ 0 (dimensionless)."""
    if weighting == EXPONENTIAL:
        decay = math.exp(-level)
        return 1.0 - decay, decay
    if weighting == GAUSSIAN:
        return math.erf(level), _TWO_OVER_SQRT_PI * math.exp(-level * level)
    if weighting == LORENTZIAN:
        return _TWO_OVER_PI * math.atan(level), _TWO_OVER_PI / (1.0 + level * level)
    hyperbolic = math.tanh(level)
    return hyperbolic, 1.0 - hyperbolic * hyperbolic


@njit(cache=True, nogil=True)
def area_and_gradient(image: np.ndarray, weighting: int, scale_events: float,
                      gradient_out: np.ndarray) -> float:
    """Σ (F(I / λ0) − F(0)) for I ≥ 0; writes ρ(I / λ0) / λ0 into ``gradient_out``.

    Empty pixels (I = 0, about half of an IWE) contribute 0 and get ρ(0) / λ0 without
    a transcendental.
    """
    empty_weight = primitive_and_weight(weighting, 0.0)[1] / scale_events
    height, width = image.shape
    total = 0.0
    for y in range(height):
        for x in range(width):
            pixel = image[y, x]
            if pixel == 0.0:
                gradient_out[y, x] = empty_weight
                continue
            area, weight = primitive_and_weight(weighting, pixel / scale_events)
            total += area
            gradient_out[y, x] = weight / scale_events
    return total


def _area(image: np.ndarray, options: LossOptions, weighting: int) -> tuple[float, np.ndarray]:
    gradient = np.empty_like(image)
    value = area_and_gradient(image, weighting, options.area_scale_events, gradient)
    return value, gradient


def area_exponential(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Area with ρ(λ) = e^{−λ}, F(λ) = 1 − e^{−λ} (Eq. (8), px²)."""
    return _area(image, options, EXPONENTIAL)


def area_gaussian(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Area with ρ(λ) = (2/√π) e^{−λ²}, F(λ) = erf(λ) (Eq. (8), px²)."""
    return _area(image, options, GAUSSIAN)


def area_lorentzian(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Area with ρ(λ) = 2 / (π (1 + λ²)), F(λ) = (2/π) arctan(λ) (Eq. (8), px²)."""
    return _area(image, options, LORENTZIAN)


def area_hyperbolic(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Area with ρ(λ) = sech²(λ), F(λ) = tanh(λ) (Eq. (8), px²)."""
    return _area(image, options, HYPERBOLIC)
