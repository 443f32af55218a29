"""Derivative-based losses (Sec. 3.2) and their dispersion (Sec. 3.4, Supp. Sec. K).

Filters and their adjoints are in ``filters`` (zero padding; Sobel first
derivatives, [1, −2, 1] second derivatives, 5-point Laplacian). Magnitudes are the
paper's squared L² norms, summed over pixels (Eqs. (5)-(7)); the variances are means
over the N_p pixels (Supp. Eqs. (69), (71), (73)). All are maximized.
"""

from __future__ import annotations

import numpy as np

from .filters import (derivative_x, derivative_y, gaussian_blur, laplacian, second_derivative_xx,
                      second_derivative_xy, second_derivative_yy)
from .options import LossOptions
from .reductions import inner_product


def gradient_magnitude(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """‖∇I‖²_{L²} = Σ (I_x² + I_y²) (Eq. (5)). Gradient −2 D_x I_x − 2 D_y I_y (D antisymmetric)."""
    image_x, image_y = derivative_x(image), derivative_y(image)
    value = inner_product(image_x, image_x) + inner_product(image_y, image_y)
    gradient = derivative_x(image_x)
    gradient += derivative_y(image_y)
    gradient *= -2.0
    return value, gradient


def laplacian_magnitude(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """‖ΔI‖²_{L²} = Σ (I_xx + I_yy)² (Eq. (6)). Gradient 2 Δ(ΔI) (Δ self-adjoint)."""
    image_laplacian = laplacian(image)
    gradient = laplacian(image_laplacian)
    gradient *= 2.0
    return inner_product(image_laplacian, image_laplacian), gradient


def hessian_magnitude(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """‖Hess I‖²_{L²} = Σ (I_xx² + I_yy² + 2 I_xy²) (Eq. (7), Supp. Eq. (65)).

    Gradient 2 D_xx I_xx + 2 D_yy I_yy + 4 D_xy I_xy (all three self-adjoint).
    """
    image_xx = second_derivative_xx(image)
    image_yy = second_derivative_yy(image)
    image_xy = second_derivative_xy(image)
    value = (inner_product(image_xx, image_xx) + inner_product(image_yy, image_yy)
             + 2.0 * inner_product(image_xy, image_xy))
    gradient = second_derivative_xx(image_xx)
    gradient += second_derivative_yy(image_yy)
    gradient += 2.0 * second_derivative_xy(image_xy)
    gradient *= 2.0
    return value, gradient


def _squared_band_pass(image: np.ndarray, sigma1_px: float, sigma2_px: float, gain: float,
                       truncate: float) -> tuple[float, np.ndarray]:
    """Σ (gain · (G_σ1 ∗ I − G_σ2 ∗ I))² and its gradient 2 gain (G_σ1 − G_σ2) ∗ response,
    kernels cut at ``truncate`` σ."""
    response = gaussian_blur(image, sigma1_px, truncate)
    response -= gaussian_blur(image, sigma2_px, truncate)
    if gain != 1.0:
        response *= gain
    gradient = gaussian_blur(response, sigma1_px, truncate)
    gradient -= gaussian_blur(response, sigma2_px, truncate)
    gradient *= 2.0 * gain
    return inner_product(response, response), gradient


def difference_of_gaussians(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Σ ((G_σ1 − G_σ2) ∗ I)², σ1 = 1 px, σ2 = 3 σ1 (Supp. Sec. K, Eq. (67)), Gaussians cut at
    ``dog_truncate_sigmas`` (3 σ)."""
    sigma1 = options.dog_sigma1_px
    return _squared_band_pass(image, sigma1, options.dog_sigma_ratio * sigma1, 1.0, options.dog_truncate_sigmas)


def laplacian_of_gaussian(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Σ (∇²G_σ ∗ I)² with ∇²G_σ ≈ (G_{1.6σ} − G_σ) / (0.6 σ²) (Supp. Sec. K, LoG paragraph).

    (∂G_σ/∂σ = σ ∇²G_σ gives the DoG-to-LoG gain 1 / ((ratio − 1) σ²), events/px².)
    """
    sigma = options.log_sigma_px
    ratio = options.log_sigma_ratio
    return _squared_band_pass(image, ratio * sigma, sigma, 1.0 / ((ratio - 1.0) * sigma * sigma),
                              options.gaussian_truncate_sigmas)


def _variance_and_slope(values: np.ndarray) -> tuple[float, np.ndarray]:
    """(Var(values), dVar/dvalues = 2 (values − mean) / N_p)."""
    centered = values - values.mean()
    value = inner_product(centered, centered) / values.size
    centered *= 2.0 / values.size
    return value, centered


def variance_of_laplacian(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Var(ΔI) (Supp. Eq. (69)). Gradient Δ(2 (ΔI − μ) / N_p)."""
    value, slope = _variance_and_slope(laplacian(image))
    return value, laplacian(slope)


def variance_of_gradient(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Var(‖∇I‖) (Supp. Eq. (73)), ‖∇I‖ ≈ sqrt(I_x² + I_y² + ε²), ε = ``gradient_magnitude_epsilon``.

    With v = dVar/d‖∇I‖: gradient −D_x (v I_x / ‖∇I‖) − D_y (v I_y / ‖∇I‖).
    """
    image_x, image_y = derivative_x(image), derivative_y(image)
    magnitude = np.sqrt(image_x * image_x + image_y * image_y + options.gradient_magnitude_epsilon ** 2)
    value, slope = _variance_and_slope(magnitude)
    slope /= magnitude
    gradient = derivative_x(slope * image_x)
    gradient += derivative_y(slope * image_y)
    np.negative(gradient, out=gradient)
    return value, gradient


def variance_of_squared_gradient(image: np.ndarray, options: LossOptions) -> tuple[float, np.ndarray]:
    """Var(I_x² + I_y²) (Supp. Eq. (71)). With v = dVar/d‖∇I‖²: gradient −2 D_x (v I_x) − 2 D_y (v I_y)."""
    image_x, image_y = derivative_x(image), derivative_y(image)
    value, slope = _variance_and_slope(image_x * image_x + image_y * image_y)
    gradient = derivative_x(slope * image_x)
    gradient += derivative_y(slope * image_y)
    gradient *= -2.0
    return value, gradient
