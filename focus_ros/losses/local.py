"""Spatial statistical losses: aggregated local variance / MS / MAD / MAV (Eqs. (14)-(16),
Supp. Sec. F) and the spatial autocorrelation indices Moran's I and Geary's C
(Eqs. (17), (18), Supp. Sec. E).

Local windows are the zero-padded Gaussian G_σ of ``filters`` (σ = ``local_sigma_px``).
Aggregation is the paper's integral over Ω, i.e. a sum over pixels (px²·events²
or px²·events). Σ_x (f ∗ G_σ)(x) = Σ_u f(u) ω(u) with the border weight ω = G_σ ∗ 1.
"""

from __future__ import annotations

import numpy as np

from .filters import gaussian_blur, gaussian_border_weight, gaussian_kernel
from .options import LossOptions
from .reductions import inner_product
from .smooth import smooth_abs_and_sign


def _local_window(image: np.ndarray, options: LossOptions):
    """(blur function, border weight ω) of the local windows for this image."""
    sigma, truncate = options.local_sigma_px, options.gaussian_truncate_sigmas
    return (lambda values: gaussian_blur(values, sigma, truncate),
            gaussian_border_weight(image.shape, sigma, truncate))


def local_variance(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """ALV(I) = Σ_x [(I² ∗ G_σ)(x) − ((I ∗ G_σ)(x))²] (Eqs. (14), (16)).

    Gradient: 2 I ω − 2 G_σ ∗ (G_σ ∗ I) (G_σ is self-adjoint).
    """
    blur, border_weight = _local_window(image, options)
    local_mean = blur(image)
    squared = image * image
    value = inner_product(squared, border_weight) - inner_product(local_mean, local_mean)
    gradient = image * border_weight
    gradient -= blur(local_mean)
    gradient *= 2.0
    return value, gradient


def local_mean_square(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Σ_x (I² ∗ G_σ)(x): Eq. (16) without the local mean (Supp. Sec. F). Gradient 2 I ω."""
    _, border_weight = _local_window(image, options)
    gradient = image * border_weight
    value = inner_product(gradient, image)
    gradient *= 2.0
    return value, gradient


def local_mean_absolute_deviation(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """ALMAD(I) = Σ_x (|I − I ∗ G_σ| ∗ G_σ)(x) (Supp. Eqs. (36), (38)), |·| smooth.

    With c = I − G_σ ∗ I and w = ω · tanh(k c): gradient = w − G_σ ∗ w.
    """
    blur, border_weight = _local_window(image, options)
    centered = image - blur(image)
    magnitude, sign = smooth_abs_and_sign(centered, options.abs_sharpness_per_event)
    sign *= border_weight
    return inner_product(magnitude, border_weight), sign - blur(sign)


def local_mean_absolute_value(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Σ_x (|I| ∗ G_σ)(x): Supp. Eq. (38) without the local mean (Supp. Sec. F), |·| smooth.

    Gradient ω · tanh(k I). Degenerate without polarity, like the MAV.
    """
    _, border_weight = _local_window(image, options)
    magnitude, sign = smooth_abs_and_sign(image, options.abs_sharpness_per_event)
    sign *= border_weight
    return inner_product(magnitude, border_weight), sign


def _spatial_weights(image: np.ndarray, options: LossOptions):
    """(apply w̃, w̃ ∗ 1, W) for Moran's and Geary's weights (Supp. Eq. (33)).

    w̃ = (G_σ − G_σ(0) δ) / (1 − G_σ(0)): the 2-D sampled Gaussian with σ =
    ``spatial_weight_sigma_px`` and its centre removed, so w_ii = 0 and
    w_ij = w̃(x_i − x_j) for pixel pairs inside the image (zero padding).
    W = Σ_ij w_ij = Σ_i (w̃ ∗ 1)(i).
    """
    sigma, truncate = options.spatial_weight_sigma_px, options.gaussian_truncate_sigmas
    centre = float(gaussian_kernel(sigma, truncate)[int(truncate * sigma + 0.5)]) ** 2
    normalization = 1.0 / (1.0 - centre)

    def apply_weights(values: np.ndarray) -> np.ndarray:
        result = gaussian_blur(values, sigma, truncate)
        result -= centre * values
        result *= normalization
        return result

    neighbour_weight = (gaussian_border_weight(image.shape, sigma, truncate) - centre) * normalization
    return apply_weights, neighbour_weight, float(neighbour_weight.sum())


def morans_index(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Moran's I = (N_p / W) Σ_ij w_ij c_i c_j / Σ_i c_i², c = I − μ_I (Eq. (17), minimize).

    With S = Σ c (w̃ ∗ c), V = Σ c²: dI/dc = (N_p / W)(2 w̃ ∗ c / V − 2 S c / V²),
    then dI/dI_pixel = dI/dc − mean(dI/dc). A constant image has V = 0: ValueError.
    """
    apply_weights, _, total_weight = _spatial_weights(image, options)
    pixel_count = image.size
    centered = image - image.mean()
    neighbours = apply_weights(centered)
    cross = inner_product(centered, neighbours)
    spread = inner_product(centered, centered)
    if not spread > 0.0:
        raise ValueError("morans_index: the image is constant (zero variance), Moran's I is undefined")
    factor = pixel_count / total_weight
    gradient = neighbours * (2.0 * factor / spread)
    gradient -= centered * (2.0 * factor * cross / spread ** 2)
    gradient -= gradient.mean()
    return factor * cross / spread, gradient


def gearys_contiguity_ratio(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Geary's C = ((N_p − 1) / (2 W)) Σ_ij w_ij (z_i − z_j)² / Σ_i (z_i − z̄)² (Eq. (18), maximize).

    With c = z − z̄: A = Σ_ij w_ij (c_i − c_j)² = 2 Σ c² (w̃ ∗ 1) − 2 Σ c (w̃ ∗ c),
    dA/dc = 4 c (w̃ ∗ 1) − 4 w̃ ∗ c. A constant image has zero variance: ValueError.
    """
    apply_weights, neighbour_weight, total_weight = _spatial_weights(image, options)
    pixel_count = image.size
    centered = image - image.mean()
    neighbours = apply_weights(centered)
    weighted_centered = centered * neighbour_weight
    differences = 2.0 * inner_product(centered, weighted_centered) - 2.0 * inner_product(centered, neighbours)
    spread = inner_product(centered, centered)
    if not spread > 0.0:
        raise ValueError("gearys_contiguity_ratio: the image is constant (zero variance), Geary's C is undefined")
    factor = (pixel_count - 1) / (2.0 * total_weight)
    gradient = weighted_centered - neighbours
    gradient *= 4.0 * factor / spread
    gradient -= centered * (2.0 * factor * differences / spread ** 2)
    gradient -= gradient.mean()
    return factor * differences / spread, gradient
