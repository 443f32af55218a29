"""The measures behind a patch flow's validity and confidence, from its sharp image and its focus
score around the maximum (:mod:`focus_ros.estimators.optical_flow` applies them):

- ``aperture_ratio``: the structure tensor's eigenvalue ratio of a patch's sharp IWE (near 0 for
  one straight edge: only the flow along its normal is observable), and that normal;
- ``curvature_confidence``: the relative drop of the focus score for a probe-length move in the
  direction it drops least, times the square root of the patch's events.
"""

from __future__ import annotations

import numpy as np

__all__ = ["aperture_ratio", "curvature_confidence"]


def aperture_ratio(tiles: np.ndarray, border: int) -> tuple[np.ndarray, np.ndarray]:
    """Smaller over larger eigenvalue (P,) of each tile's structure tensor
    sum (I_x, I_y)' (I_x, I_y) over the patch (tiles (P, tile, tile), the sharp IWEs; gradients
    by the losses' Sobel filter after a 1-px blur): near 0 when all the patch's gradients are
    parallel (one straight edge: the flow along it is not observable), near 1 for corners and
    texture. NaN for a tile without gradient. Also the unit major axis (P, 2) (x, y): the edge's
    normal, the direction in which an aperture patch's flow is observable."""
    from focus_ros.iwe import gaussian_blur_kernel
    from focus_ros.losses import filters
    from focus_ros.flow.patch_losses import GAP_ROWS, tile_filter

    count, tile, _ = tiles.shape
    stack = np.zeros((count, tile + GAP_ROWS, tile))
    stack[:, :tile, :] = tiles
    kernel = gaussian_blur_kernel(1.0)
    smooth = tile_filter(stack, tile, lambda image: filters.correlate_separable(image, kernel, kernel))
    inner = (slice(None), slice(border, tile - border), slice(border, tile - border))
    image_x = tile_filter(smooth, tile, filters.derivative_x)[inner]
    image_y = tile_filter(smooth, tile, filters.derivative_y)[inner]
    a_xx = (image_x * image_x).sum(axis=(1, 2))
    a_yy = (image_y * image_y).sum(axis=(1, 2))
    a_xy = (image_x * image_y).sum(axis=(1, 2))
    mean = (a_xx + a_yy) / 2.0
    radius = np.sqrt(((a_xx - a_yy) / 2.0) ** 2 + a_xy ** 2)
    angle = 0.5 * np.arctan2(2.0 * a_xy, a_xx - a_yy)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (mean - radius) / (mean + radius), np.stack([np.cos(angle), np.sin(angle)], axis=1)


def curvature_confidence(score, along_x, along_y, diagonal, events=1) -> np.ndarray:
    """Confidence (P,) >= 0 of each patch from the curvature of its focus score at the maximum:
    the score's drop, relative to the score, for a move of one probe length in the direction in
    which it drops least (the smaller eigenvalue of minus the Hessian times probe² / 2 / |score|),
    times the square root of the patch's events (P,). Why both: the flow's standard error is
    about the score's noise over its curvature, and with n events the relative noise of a sum of
    n terms falls as 1 / sqrt(n), so sqrt(n) times the relative curvature grows as the inverse of
    the error. Inputs: score (P,) at the maximum u, along_x = (score(u + p e_x), score(u - p e_x)),
    along_y likewise, diagonal = score(u + p (e_x + e_y)). Near 0 for a flat landscape or a ridge
    (one edge: the flow along it is not determined); larger for a sharp, isolated maximum."""
    drop_xx = 2.0 * score - along_x[0] - along_x[1]  # -H_xx p^2
    drop_yy = 2.0 * score - along_y[0] - along_y[1]
    drop_xy = -(diagonal - along_x[0] - along_y[0] + score)  # -H_xy p^2 (forward differences)
    mean = (drop_xx + drop_yy) / 2.0
    radius = np.sqrt(((drop_xx - drop_yy) / 2.0) ** 2 + drop_xy ** 2)
    magnitude = np.where(np.abs(score) > 0, np.abs(score), 1.0)
    return np.maximum((mean - radius) / 2.0 / magnitude, 0.0) * np.sqrt(events)
