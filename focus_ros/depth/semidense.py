"""From a dense depth guess and its confidence map to a semi-dense depth map and 3-D points.

- :func:`adaptive_threshold_mask`: the paper's adaptive thresholding (Gonzalez & Woods,
  p. 780) of the confidence map: a pixel is kept where its confidence exceeds the
  Gaussian-weighted mean of its ``block_px``×``block_px`` neighbourhood, and ranks in
  the top share of the observed pixels (confidences compared by rank, so that the same
  settings give the same density whatever the loss);
- :func:`relative_contrast`: the confidence over the scene's typical confidence (its median
  over the observed pixels), a unitless focus contrast that one threshold serves for every
  loss and every scene (:func:`contrast_threshold_mask` is EMVS's adaptive threshold on it:
  a local Gaussian mean plus an offset);
- :func:`median_filter_depth`: a median over the kept neighbours (removes spikes);
- :func:`neighbour_support_mask`: radius outlier removal on the depth map: a kept pixel
  needs enough kept neighbours whose depth agrees with its own (a 3-D radius that scales
  with depth, found on the pixel grid instead of a k-d tree);
- :func:`back_project`: kept pixels of the undistorted reference grid → world points.
"""

from __future__ import annotations

import cv2
import numpy as np
from numba import njit

from focus_ros.camera import Calibration


def confidence_rank(confidence: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The rank of every observed pixel's confidence among the observed pixels, in (0, 1]
    (float32; 1 = the most confident, ties in pixel order), 0 where unobserved. Ranks do
    not depend on the loss's units or power (a variance is a squared count, a vote count
    is not), so one threshold means the same density for every loss."""
    result = np.zeros(confidence.shape, np.float32)
    values = np.asarray(confidence)[observed]
    if values.size == 0:
        return result
    ranks = np.empty(values.size, np.float64)
    ranks[np.argsort(values, kind="stable")] = np.arange(1, values.size + 1)
    result[observed] = ranks / values.size
    return result


def adaptive_threshold_mask(confidence: np.ndarray, observed: np.ndarray, block_px: int = 5,
                            offset: float = 0.0, min_rank: float = 0.8) -> np.ndarray:
    """Pixels whose confidence rank r (see :func:`confidence_rank`) exceeds the
    Gaussian-weighted mean rank of its block_px × block_px neighbourhood plus ``offset``
    (the adaptive threshold, Gonzalez & Woods p. 780; OpenCV's Gaussian σ for the block)
    and is at least ``min_rank`` (0.8: at most the top 20 % of the observed pixels);
    only observed pixels. block_px: odd ≥ 3."""
    if block_px < 3 or block_px % 2 == 0:
        raise ValueError(f"threshold block must be an odd number of px >= 3, got {block_px}")
    rank = confidence_rank(confidence, observed)
    local_mean = cv2.GaussianBlur(rank, (block_px, block_px), 0, borderType=cv2.BORDER_REPLICATE)
    return observed & (rank > local_mean + offset) & (rank >= min_rank)


def relative_contrast(confidence: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """confidence / (median confidence of the observed pixels) (float32; 0 where not observed).
    Unitless: 1 is a typical observed pixel of this keyframe, whatever the loss and its units."""
    result = np.zeros(confidence.shape, np.float32)
    values = np.asarray(confidence)[observed]
    if values.size == 0:
        return result
    scale = float(np.median(values))
    if not scale > 0:
        scale = float(values.max()) if values.max() > 0 else 1.0
    result[observed] = values / scale
    return result


def contrast_threshold_mask(contrast: np.ndarray, observed: np.ndarray, block_px: int = 5,
                            offset: float = 0.0, minimum: float = 0.0) -> np.ndarray:
    """EMVS's adaptive threshold on the relative contrast (:func:`relative_contrast`): kept
    where it exceeds the Gaussian-weighted mean of its block_px × block_px neighbourhood
    (unobserved pixels count 0) plus ``offset``, and is at least ``minimum``; only observed
    pixels. block_px: odd ≥ 3."""
    if block_px < 3 or block_px % 2 == 0:
        raise ValueError(f"threshold block must be an odd number of px >= 3, got {block_px}")
    local_mean = cv2.GaussianBlur(contrast, (block_px, block_px), 0, borderType=cv2.BORDER_REPLICATE)
    return observed & (contrast > local_mean + offset) & (contrast >= minimum)


@njit(cache=True, nogil=True)
def _support(depth, mask, radius, tolerance, min_neighbours, out):
    height, width = depth.shape
    for y in range(height):
        for x in range(width):
            out[y, x] = False
            if not mask[y, x]:
                continue
            z = depth[y, x]
            count = 0
            for yy in range(max(0, y - radius), min(height, y + radius + 1)):
                for xx in range(max(0, x - radius), min(width, x + radius + 1)):
                    if (yy != y or xx != x) and mask[yy, xx] and abs(depth[yy, xx] - z) <= tolerance * z:
                        count += 1
            out[y, x] = count >= min_neighbours


def neighbour_support_mask(depth: np.ndarray, mask: np.ndarray, radius_px: int = 2, tolerance: float = 0.02,
                           min_neighbours: int = 3) -> np.ndarray:
    """Radius outlier removal: the kept pixels with at least ``min_neighbours`` other kept pixels
    within ``radius_px`` (a square window) whose depth differs from theirs by at most
    ``tolerance`` (fraction of the depth). The neighbours of a point within radius_px pixels and
    that depth band lie within about (radius_px / f + tolerance) · Z of it in 3-D, so this is
    3-D radius outlier removal with a radius proportional to depth. min_neighbours 0 = keep all."""
    if min_neighbours <= 0:
        return np.asarray(mask, bool).copy()
    out = np.empty(depth.shape, np.bool_)
    _support(np.ascontiguousarray(depth, dtype=np.float32), np.ascontiguousarray(mask, dtype=np.bool_),
             int(radius_px), float(tolerance), int(min_neighbours), out)
    return out


@njit(cache=True, nogil=True)
def _masked_median(depth, mask, radius, out):
    height, width = depth.shape
    window = np.empty((2 * radius + 1) ** 2, np.float32)
    for y in range(height):
        for x in range(width):
            if not mask[y, x]:
                out[y, x] = np.nan
                continue
            count = 0
            for yy in range(max(0, y - radius), min(height, y + radius + 1)):
                for xx in range(max(0, x - radius), min(width, x + radius + 1)):
                    if mask[yy, xx]:
                        window[count] = depth[yy, xx]
                        count += 1
            out[y, x] = np.median(window[:count])


def median_filter_depth(depth: np.ndarray, mask: np.ndarray, size_px: int = 5) -> np.ndarray:
    """Median of the kept depths in the size_px × size_px window of every kept pixel
    (float32, NaN elsewhere). size_px 1 returns the masked depth unchanged."""
    if size_px < 1 or size_px % 2 == 0:
        raise ValueError(f"median filter size must be an odd number of px >= 1, got {size_px}")
    out = np.empty(depth.shape, np.float32)
    _masked_median(np.ascontiguousarray(depth, dtype=np.float32), np.ascontiguousarray(mask),
                   size_px // 2, out)
    return out


def back_project(depth: np.ndarray, calibration: Calibration, world_from_camera: np.ndarray):
    """(points_world (M, 3) float32 m, pixels (M, 2) int32 (x, y)) of every finite depth.

    Pixel (x, y) of the depth map is on the undistorted (pinhole K) grid of the reference
    view; its point is ((x − cx)/fx · Z, (y − cy)/fy · Z, Z) in the camera frame, then
    X_world = R · X + p with world_from_camera = [R p; 0 1].
    """
    rows, columns = np.nonzero(np.isfinite(depth))
    z = depth[rows, columns].astype(np.float64)
    camera = np.stack([(columns - calibration.cx) / calibration.fx * z,
                       (rows - calibration.cy) / calibration.fy * z, z], axis=1)
    world = camera @ np.asarray(world_from_camera)[:3, :3].T + np.asarray(world_from_camera)[:3, 3]
    return world.astype(np.float32), np.stack([columns, rows], axis=1).astype(np.int32)
