"""Focus losses on a stack of patch images at once (patch optical flow).

The patch engine (``focus_ros.flow.patches``) keeps the images of warped events of all P patches of
a grid in one array ``stack`` of shape (P, tile + gap, tile): plane p holds patch p's tile in
its first ``tile`` rows and ``gap`` rows of zeros below. Seen as one tall image
(``stack.reshape(P * (tile + gap), tile)``), the zero-padded filters of
``focus_ros.losses.filters`` (one OpenCV call for the whole grid) give, inside every tile,
exactly what they give on that tile alone with zero padding, as long as the gap is at least the
filter's radius and the gap rows are set back to zero after each filter (``tile_filter``).
The per-patch reductions (sums, means over the tile's N_p = tile² pixels) are numpy reductions
over axes (1, 2).

So each function here is the registry loss of ``focus_ros.losses`` evaluated on every tile,
value (P,) and gradient image (P, tile + gap, tile) (zero in the gap rows), built from the same
filters; ``test/test_patch_flow.py`` checks every one against ``get_loss(name).evaluate`` tile by
tile. Losses without a batched form here are evaluated tile by tile through the registry
(``evaluate_stack``'s fallback: correct for any registry loss, but a Python loop over the patches
that carry events, one registry call per patch and evaluation).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from focus_ros.losses import filters, support
from focus_ros.losses.options import DEFAULT_OPTIONS, LossOptions

#: zero rows between the tiles of a stack: at least the radius of every filter applied to it
#: (3x3 derivative filters: 1; the IWE blur of 1 px: 2, see focus_ros.iwe.BLUR_TRUNCATION)
GAP_ROWS = 3


def tile_filter(stack: np.ndarray, tile: int, function) -> np.ndarray:
    """``function`` (a zero-padded 2-D filter) applied to every tile of ``stack`` (P, R, tile)
    at once; the result has the stack's shape with its gap rows (``tile`` .. R - 1) zero."""
    planes, rows, width = stack.shape
    result = function(np.ascontiguousarray(stack).reshape(planes * rows, width)).reshape(planes, rows, width)
    result[:, tile:, :] = 0.0
    return result


def _sums(stack: np.ndarray) -> np.ndarray:
    """Per-plane sums over the tile (gap rows are zero, so over the whole plane)."""
    return stack.sum(axis=(1, 2))


def _centered_in_tile(stack: np.ndarray, tile: int) -> np.ndarray:
    """stack minus each tile's mean, zero in the gap rows."""
    centered = stack - (_sums(stack) / (tile * tile))[:, None, None]
    centered[:, tile:, :] = 0.0
    return centered


def _variance_and_slope(response, tile):
    """Per-tile Var(response) and its derivative 2 (response - mean) / N_p (zero in the gap)."""
    pixels = tile * tile
    centered = _centered_in_tile(response, tile)
    values = _sums(centered * centered) / pixels
    centered *= 2.0 / pixels
    return values, centered


def variance(stack, tile, options):
    """Var of each tile (Eq. (4)); gradient 2 (I - mu) / N_p."""
    return _variance_and_slope(stack, tile)


def mean_square(stack, tile, options):
    """Mean square of each tile (Eq. (9)); gradient 2 I / N_p."""
    pixels = tile * tile
    return _sums(stack * stack) / pixels, stack * (2.0 / pixels)


def gradient_magnitude(stack, tile, options):
    """Sum of I_x^2 + I_y^2 per tile (Eq. (5)); gradient -2 D_x I_x - 2 D_y I_y."""
    image_x = tile_filter(stack, tile, filters.derivative_x)
    image_y = tile_filter(stack, tile, filters.derivative_y)
    values = _sums(image_x * image_x + image_y * image_y)
    gradient = tile_filter(image_x, tile, filters.derivative_x)
    gradient += tile_filter(image_y, tile, filters.derivative_y)
    gradient *= -2.0
    return values, gradient


def laplacian_magnitude(stack, tile, options):
    """Sum of (Delta I)^2 per tile (Eq. (6)); gradient 2 Delta(Delta I)."""
    laplacian = tile_filter(stack, tile, filters.laplacian)
    gradient = tile_filter(laplacian, tile, filters.laplacian)
    gradient *= 2.0
    return _sums(laplacian * laplacian), gradient


def hessian_magnitude(stack, tile, options):
    """Sum of I_xx^2 + I_yy^2 + 2 I_xy^2 per tile (Eq. (7))."""
    image_xx = tile_filter(stack, tile, filters.second_derivative_xx)
    image_yy = tile_filter(stack, tile, filters.second_derivative_yy)
    image_xy = tile_filter(stack, tile, filters.second_derivative_xy)
    values = _sums(image_xx * image_xx + image_yy * image_yy + 2.0 * image_xy * image_xy)
    gradient = tile_filter(image_xx, tile, filters.second_derivative_xx)
    gradient += tile_filter(image_yy, tile, filters.second_derivative_yy)
    gradient += 2.0 * tile_filter(image_xy, tile, filters.second_derivative_xy)
    gradient *= 2.0
    return values, gradient


def variance_of_laplacian(stack, tile, options):
    """Var(Delta I) per tile (Supp. Eq. (69)); gradient Delta(slope)."""
    values, slope = _variance_and_slope(tile_filter(stack, tile, filters.laplacian), tile)
    return values, tile_filter(slope, tile, filters.laplacian)


def variance_of_gradient(stack, tile, options):
    """Var(sqrt(I_x^2 + I_y^2 + eps^2)) per tile (Supp. Eq. (73))."""
    image_x = tile_filter(stack, tile, filters.derivative_x)
    image_y = tile_filter(stack, tile, filters.derivative_y)
    magnitude = np.sqrt(image_x * image_x + image_y * image_y + options.gradient_magnitude_epsilon ** 2)
    magnitude[:, tile:, :] = 0.0
    values, slope = _variance_and_slope(magnitude, tile)
    slope[:, :tile, :] /= magnitude[:, :tile, :]
    gradient = tile_filter(slope * image_x, tile, filters.derivative_x)
    gradient += tile_filter(slope * image_y, tile, filters.derivative_y)
    np.negative(gradient, out=gradient)
    return values, gradient


def variance_of_squared_gradient(stack, tile, options):
    """Var(I_x^2 + I_y^2) per tile (Supp. Eq. (71))."""
    image_x = tile_filter(stack, tile, filters.derivative_x)
    image_y = tile_filter(stack, tile, filters.derivative_y)
    values, slope = _variance_and_slope(image_x * image_x + image_y * image_y, tile)
    gradient = tile_filter(slope * image_x, tile, filters.derivative_x)
    gradient += tile_filter(slope * image_y, tile, filters.derivative_y)
    gradient *= -2.0
    return values, gradient


@njit(cache=True, nogil=True)
def _area_kernel(stack, tile, weighting, scale_events, values, gradient):
    """Per tile sum of F(I / lambda0) - F(0) and gradient rho(I / lambda0) / lambda0 over the tile's
    pixels (``focus_ros.losses.support.primitive_and_weight``); gap rows get a zero gradient."""
    empty_weight = support.primitive_and_weight(weighting, 0.0)[1] / scale_events
    planes, rows, width = stack.shape
    for p in range(planes):
        total = 0.0
        for y in range(rows):
            for x in range(width):
                if y >= tile:
                    gradient[p, y, x] = 0.0
                    continue
                pixel = stack[p, y, x]
                if pixel == 0.0:
                    gradient[p, y, x] = empty_weight
                    continue
                area, weight = support.primitive_and_weight(weighting, pixel / scale_events)
                total += area
                gradient[p, y, x] = weight / scale_events
        values[p] = total


def _area(weighting):
    def area(stack, tile, options):
        """Image area of each tile (Eq. (8)), counts only (b_k = 1: the stack is >= 0)."""
        values = np.empty(stack.shape[0])
        gradient = np.empty_like(stack)
        _area_kernel(np.ascontiguousarray(stack), tile, weighting, options.area_scale_events, values, gradient)
        return values, gradient
    return area


#: registry name -> batched function (stack, tile, options) -> (values (P,), gradient stack)
BATCHED = {
    "variance": variance,
    "mean_square": mean_square,
    "gradient_magnitude": gradient_magnitude,
    "laplacian_magnitude": laplacian_magnitude,
    "hessian_magnitude": hessian_magnitude,
    "variance_of_laplacian": variance_of_laplacian,
    "variance_of_gradient": variance_of_gradient,
    "variance_of_squared_gradient": variance_of_squared_gradient,
    "area_exponential": _area(support.EXPONENTIAL),
    "area_gaussian": _area(support.GAUSSIAN),
    "area_lorentzian": _area(support.LORENTZIAN),
    "area_hyperbolic": _area(support.HYPERBOLIC),
}


def evaluate_stack(loss, stack: np.ndarray, tile: int, active: np.ndarray,
                   options: LossOptions | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The registry ``loss`` on every tile of ``stack`` (P, tile + gap, tile).

    Returns (values (P,), gradient stack of the same shape, zero in the gap rows). ``active``
    (P,) bool: tiles whose value is needed; the others get value 0 and a zero gradient on the
    fallback route (the batched route computes them anyway: cheaper than selecting).
    Timestamp losses are not supported (ValueError).
    """
    options = DEFAULT_OPTIONS if options is None else options
    if getattr(loss, "uses_timestamps", False):
        raise ValueError(f"loss '{loss.name}' needs timestamp images, which patch flow does not build")
    batched = BATCHED.get(loss.name)
    if batched is not None:
        return batched(stack, tile, options)
    values = np.zeros(stack.shape[0])
    gradient = np.zeros_like(stack)
    for patch in np.flatnonzero(active):
        value, grad_image, _ = loss.evaluate(stack[patch, :tile, :], options)
        values[patch] = value
        gradient[patch, :tile, :] = grad_image
    return values, gradient
