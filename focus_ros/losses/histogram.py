"""Losses on the PDF of the IWE values: entropy (Eq. (12)) and range (Eq. (13)).

The PDF p_I(z) of the pixel values (Supp. Eq. (28)) is approximated as in the
supplementary (Sec. K, entropy paragraph, Supp. Eq. (48)): a histogram of
B = ``histogram_bins`` bins over [min(I, 0), max(I, 0)], normalized to unit mass, smoothed by
a Gaussian of σ = ``histogram_smoothing_sigma_bins`` bins. To make it differentiable
w.r.t. every pixel we bin softly: each pixel spreads its 1/N_p mass over the three
nearest histogram nodes with the quadratic B-spline weights (C¹ in the pixel value;
the B-spline adds only 1/12 bin² to the Gaussian's variance). Node j sits at
z_j = z_min + j Δz, Δz = (z_max − z_min) / B, j = −1 − r … B + 1 + r (r = Gaussian
radius) so no mass leaves the grid. q_j is the smoothed mass of node j (Σ q_j = 1) and
p_I(z_j) ≈ q_j / Δz.

The range [z_min, z_max] always contains 0, the value of empty pixels: for a count
image (without polarity, I ≥ 0) z_min stays 0 however many pixels are empty, so the
layout does not hinge on which of the tied empty pixels is the minimum. Otherwise the
layout depends on the image through its minimum (if < 0) and maximum (if > 0); the
gradient includes that dependence (it lands on the arg-min and arg-max pixels), so it
is the exact derivative wherever these extremes are attained by single pixels (and the
derivative from above at empty pixels of a count image). An all-zero image gets
Δz = 1 / B (range 1 event) and no layout term.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .filters import gaussian_kernel
from .options import LossOptions
from .reductions import inner_product


@njit(cache=True, nogil=True)
def min_max_positions(image: np.ndarray):
    """Flat indices (first minimum, first maximum, first non-finite pixel or −1)."""
    flat = image.ravel()
    min_index = 0
    max_index = 0
    for index in range(flat.size):
        value = flat[index]
        if not math.isfinite(value):
            return min_index, max_index, index
        if value < flat[min_index]:
            min_index = index
        elif value > flat[max_index]:
            max_index = index
    return min_index, max_index, -1


@njit(cache=True, nogil=True, inline="always")
def _deposit(masses: np.ndarray, node_offset: int, position: float, mass: float) -> None:
    """Add ``mass`` at ``position`` (in bins) with quadratic B-spline weights on 3 nodes."""
    nearest = int(math.floor(position + 0.5))
    fraction = position - nearest
    index = node_offset + nearest
    masses[index - 1] += mass * 0.5 * (0.5 - fraction) ** 2
    masses[index] += mass * (0.75 - fraction * fraction)
    masses[index + 1] += mass * 0.5 * (0.5 + fraction) ** 2


@njit(cache=True, nogil=True, inline="always")
def _deposit_slope(node_values: np.ndarray, node_offset: int, position: float) -> float:
    """d/dposition of Σ_j node_values[j] · weight_j(position) for the B-spline weights."""
    nearest = int(math.floor(position + 0.5))
    fraction = position - nearest
    index = node_offset + nearest
    return (-(0.5 - fraction) * node_values[index - 1] - 2.0 * fraction * node_values[index]
            + (0.5 + fraction) * node_values[index + 1])


@njit(cache=True, nogil=True)
def correlate_1d(values: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Zero-padded correlation of a 1-D array with an odd-length kernel."""
    radius = kernel.size // 2
    result = np.zeros_like(values)
    for index in range(values.size):
        total = 0.0
        for tap in range(max(0, radius - index), min(kernel.size, values.size - index + radius)):
            total += kernel[tap] * values[index + tap - radius]
        result[index] = total
    return result


@njit(cache=True, nogil=True)
def smoothed_histogram(image: np.ndarray, minimum: float, bin_width: float, bin_count: int,
                       kernel: np.ndarray) -> np.ndarray:
    """Node masses q (sum 1) of the soft, Gaussian-smoothed histogram of ``image``.

    Pixels equal to 0 (most of an IWE) are deposited together, once.
    """
    radius = kernel.size // 2
    node_offset = 1 + radius
    masses = np.zeros(bin_count + 3 + 2 * radius)
    zero_pixels = 0
    for pixel in image.ravel():
        if pixel == 0.0:
            zero_pixels += 1
        else:
            _deposit(masses, node_offset, (pixel - minimum) / bin_width, 1.0)
    if zero_pixels:
        _deposit(masses, node_offset, -minimum / bin_width, float(zero_pixels))
    masses *= 1.0 / image.size
    return correlate_1d(masses, kernel)


@njit(cache=True, nogil=True)
def smoothed_histogram_backward(image: np.ndarray, minimum: float, bin_width: float,
                                kernel: np.ndarray, dvalue_dmass: np.ndarray,
                                gradient_out: np.ndarray):
    """Back-propagate dvalue/dq_j to the pixels at a fixed layout.

    Writes dvalue/dI into ``gradient_out`` and returns (Σ_x dvalue/du_x,
    Σ_x u_x dvalue/du_x), u_x = (I_x − min) / Δz, for the layout terms.
    """
    radius = kernel.size // 2
    node_offset = 1 + radius
    node_values = correlate_1d(dvalue_dmass, kernel)  # the Gaussian is self-adjoint
    scale = 1.0 / image.size
    zero_position = -minimum / bin_width
    zero_slope = scale * _deposit_slope(node_values, node_offset, zero_position)
    sum_slope = 0.0
    sum_position_slope = 0.0
    zero_pixels = 0
    flat_image = image.ravel()
    flat_gradient = gradient_out.ravel()
    for index in range(flat_image.size):
        pixel = flat_image[index]
        if pixel == 0.0:
            zero_pixels += 1
            flat_gradient[index] = zero_slope / bin_width
            continue
        position = (pixel - minimum) / bin_width
        slope = scale * _deposit_slope(node_values, node_offset, position)
        flat_gradient[index] = slope / bin_width
        sum_slope += slope
        sum_position_slope += slope * position
    sum_slope += zero_pixels * zero_slope
    sum_position_slope += zero_pixels * zero_slope * zero_position
    return sum_slope, sum_position_slope


def _histogram_loss(image: np.ndarray, options: LossOptions, objective) -> tuple[float, np.ndarray]:
    """Evaluate ``objective(q, Δz, options) -> (value, dvalue/dq, dvalue/dΔz)`` on the
    smoothed PDF of ``image`` and return (value, dvalue/dI), layout terms included."""
    bin_count = options.histogram_bins
    kernel = gaussian_kernel(options.histogram_smoothing_sigma_bins, options.gaussian_truncate_sigmas)
    min_index, max_index, non_finite_index = min_max_positions(image)
    if non_finite_index >= 0:  # would send the pixel off the histogram's grid
        y, x = np.unravel_index(non_finite_index, image.shape)
        raise ValueError(f"image has non-finite value {image[y, x]} at (y={y}, x={x})")
    flat = image.ravel()
    minimum, maximum = min(float(flat[min_index]), 0.0), max(float(flat[max_index]), 0.0)
    value_range = maximum - minimum
    empty_image = not value_range > 0.0
    bin_width = (1.0 if empty_image else value_range) / bin_count
    masses = smoothed_histogram(image, minimum, bin_width, bin_count, kernel)
    value, dvalue_dmass, dvalue_dbin_width = objective(masses, bin_width, options)
    gradient = np.empty_like(image)
    sum_slope, sum_position_slope = smoothed_histogram_backward(
        image, minimum, bin_width, kernel, dvalue_dmass, gradient)
    if not empty_image:
        # u = B (I − z_min) / (z_max − z_min): du/dz_min = (u − B) / range,
        # du/dz_max = −u / range; Δz = (z_max − z_min) / B.
        flat_gradient = gradient.ravel()
        if minimum < 0.0:
            flat_gradient[min_index] += ((sum_position_slope - bin_count * sum_slope) / value_range
                                         - dvalue_dbin_width / bin_count)
        if maximum > 0.0:
            flat_gradient[max_index] += -sum_position_slope / value_range + dvalue_dbin_width / bin_count
    return value, gradient


def _entropy_objective(masses: np.ndarray, bin_width: float, options: LossOptions):
    """H = −Σ q log q + log Δz (differential entropy of p = q / Δz, in nats)."""
    occupied = masses > 0.0
    log_masses = np.zeros_like(masses)
    np.log(masses, out=log_masses, where=occupied)
    value = -inner_product(masses, log_masses) + math.log(bin_width)
    dvalue_dmass = np.where(occupied, -(log_masses + 1.0), 0.0)
    return value, dvalue_dmass, 1.0 / bin_width


def _range_objective(masses: np.ndarray, bin_width: float, options: LossOptions):
    """supp(p_I) = Σ_j (F(p_j / λ_r) − F(0)) Δz with F(λ) = 1 − e^{−λ}, p_j = q_j / Δz."""
    level = masses / (bin_width * options.range_density_scale_per_event)
    decay = np.exp(-level)
    value = float(np.sum(1.0 - decay)) * bin_width
    dvalue_dmass = decay / options.range_density_scale_per_event
    dvalue_dbin_width = float(np.sum(1.0 - decay - level * decay))
    return value, dvalue_dmass, dvalue_dbin_width


def entropy(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Shannon differential entropy of the IWE's smoothed PDF (Eq. (12), Supp. Eq. (27), nats).

    H = −∫ p_I(z) log p_I(z) dz ≈ −Σ_j q_j log(q_j / Δz) (maximize).
    """
    return _histogram_loss(image, options, _entropy_objective)


def range_exponential(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Image range as the support of its PDF, exponential weighting (Eq. (13), Supp. Eq. (31), events).

    supp(p_I) = ∫ (F(p_I(z) / λ_r) − F(0)) dz, F(λ) = 1 − e^{−λ}, λ_r =
    ``options.range_density_scale_per_event`` (maximize).
    """
    return _histogram_loss(image, options, _range_objective)
