"""Zero-padded linear filters shared by the spatial losses, and their adjoints.

Every filter here is a *correlation* with ZERO padding at the image border
(``cv2.BORDER_CONSTANT`` with value 0, i.e. scipy.ndimage ``mode="constant"``).
With zero padding the filter is a matrix A acting on the pixels, and its adjoint Aᵀ
is the correlation with the mirrored kernel: a symmetric kernel (Gaussian,
second difference, 5-point Laplacian) is its own adjoint, an antisymmetric one
(central difference, Sobel derivative) has the negated kernel as adjoint. The
gradients of the losses apply these adjoints, so they are exact, border included.

Derivative conventions (x = column, y = row, results in events/px or events/px²):

- first derivatives: Sobel normalized to unit gain, I_x = [−½, 0, ½] along x
  smoothed by [¼, ½, ¼] along y (OpenCV's Sobel / 8);
- second derivatives: I_xx = [1, −2, 1] along x, I_yy likewise along y,
  I_xy = central difference along x then along y; hence I_xx + I_yy is the
  5-point Laplacian used by the Laplacian losses (trace of the Hessian).
"""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np

CENTRAL_DIFFERENCE = np.array([-0.5, 0.0, 0.5])
SECOND_DIFFERENCE = np.array([1.0, -2.0, 1.0])
SOBEL_SMOOTHING = np.array([0.25, 0.5, 0.25])
IDENTITY_3 = np.array([0.0, 1.0, 0.0])
LAPLACIAN_5_POINT = np.array([[0.0, 1.0, 0.0],
                              [1.0, -4.0, 1.0],
                              [0.0, 1.0, 0.0]])

for _kernel in (CENTRAL_DIFFERENCE, SECOND_DIFFERENCE, SOBEL_SMOOTHING, IDENTITY_3, LAPLACIAN_5_POINT):
    _kernel.setflags(write=False)


@lru_cache(maxsize=64)
def gaussian_kernel(sigma_px: float, truncate_sigmas: float = 4.0) -> np.ndarray:
    """Sampled 1-D Gaussian of standard deviation ``sigma_px``, unit sum (read-only).

    Radius ``int(truncate_sigmas * sigma_px + 0.5)`` taps, as scipy.ndimage.gaussian_filter.
    """
    radius = int(truncate_sigmas * sigma_px + 0.5)
    offsets = np.arange(-radius, radius + 1, dtype=np.float64)
    kernel = np.exp(-0.5 * (offsets / sigma_px) ** 2)
    kernel /= kernel.sum()
    kernel.setflags(write=False)
    return kernel


def correlate_separable(image: np.ndarray, kernel_x: np.ndarray, kernel_y: np.ndarray) -> np.ndarray:
    """Zero-padded separable correlation: ``kernel_x`` along x (columns), ``kernel_y`` along y."""
    return cv2.sepFilter2D(image, cv2.CV_64F, kernel_x, kernel_y, borderType=cv2.BORDER_CONSTANT)


def gaussian_blur(image: np.ndarray, sigma_px: float, truncate_sigmas: float = 4.0) -> np.ndarray:
    """G_σ ∗ image with zero padding (self-adjoint)."""
    kernel = gaussian_kernel(sigma_px, truncate_sigmas)
    return correlate_separable(image, kernel, kernel)


@lru_cache(maxsize=16)
def gaussian_border_weight(shape: tuple, sigma_px: float, truncate_sigmas: float = 4.0) -> np.ndarray:
    """G_σ ∗ 1 over an image of ``shape`` with zero padding (read-only).

    1 inside the image, less near the border: the weight of each pixel in
    Σ_x (f ∗ G_σ)(x) = Σ_u f(u) (G_σ ∗ 1)(u).
    """
    weight = gaussian_blur(np.ones(shape), sigma_px, truncate_sigmas)
    weight.setflags(write=False)
    return weight


def derivative_x(image: np.ndarray) -> np.ndarray:
    """I_x (events/px): normalized Sobel along x. Adjoint: ``-derivative_x``."""
    return correlate_separable(image, CENTRAL_DIFFERENCE, SOBEL_SMOOTHING)


def derivative_y(image: np.ndarray) -> np.ndarray:
    """I_y (events/px): normalized Sobel along y. Adjoint: ``-derivative_y``."""
    return correlate_separable(image, SOBEL_SMOOTHING, CENTRAL_DIFFERENCE)


def second_derivative_xx(image: np.ndarray) -> np.ndarray:
    """I_xx (events/px²): [1, −2, 1] along x. Self-adjoint."""
    return correlate_separable(image, SECOND_DIFFERENCE, IDENTITY_3)


def second_derivative_yy(image: np.ndarray) -> np.ndarray:
    """I_yy (events/px²): [1, −2, 1] along y. Self-adjoint."""
    return correlate_separable(image, IDENTITY_3, SECOND_DIFFERENCE)


def second_derivative_xy(image: np.ndarray) -> np.ndarray:
    """I_xy (events/px²): central difference along x and along y. Self-adjoint
    (the product of two antisymmetric kernels is symmetric)."""
    return correlate_separable(image, CENTRAL_DIFFERENCE, CENTRAL_DIFFERENCE)


def laplacian(image: np.ndarray) -> np.ndarray:
    """ΔI = I_xx + I_yy (events/px²), 5-point stencil, zero padding. Self-adjoint."""
    return cv2.filter2D(image, cv2.CV_64F, LAPLACIAN_5_POINT, borderType=cv2.BORDER_CONSTANT)
