"""Pictures of depth maps: colour-coded depth over the event image, and the confidence map.

Colours as in the paper's Fig. (slider_depth): near red, far blue (OpenCV's JET map on
inverse depth between 1/z_max and 1/z_min), drawn over the grey event image of the
reference view. The confidence map is drawn in negative form like the paper: dark =
high focus, white = low.
"""

from __future__ import annotations

import cv2
import numpy as np

from focus_ros.visualization import iwe_to_rgb


def depth_colors(depth_m: np.ndarray, z_min_m: float, z_max_m: float) -> np.ndarray:
    """RGB uint8 (..., 3) for depths (m): red at z_min_m, blue at z_max_m (linear in 1/Z)."""
    depth = np.asarray(depth_m, dtype=np.float64)
    if depth.size == 0:
        return np.empty(depth.shape + (3,), np.uint8)
    level = (1.0 / np.clip(depth, z_min_m, z_max_m) - 1.0 / z_max_m) / (1.0 / z_min_m - 1.0 / z_max_m)
    grey = np.round(np.nan_to_num(level) * 255.0).astype(np.uint8).reshape(-1, 1)
    bgr = cv2.applyColorMap(grey, cv2.COLORMAP_JET).reshape(depth.shape + (3,))
    return np.ascontiguousarray(bgr[..., ::-1])


def event_image(votes: np.ndarray) -> np.ndarray:
    """A sharp grey image of the reference view from DSI votes (height, width, planes):
    the largest |vote| along every ray (the in-focus slice of every pixel)."""
    return np.abs(votes).max(axis=2)


def depth_picture(depth_m: np.ndarray, background: np.ndarray | None, z_min_m: float, z_max_m: float) -> np.ndarray:
    """RGB uint8 (height, width, 3): the known depths in colour over the grey background
    (an event image; None = white)."""
    if background is None:
        picture = np.full(depth_m.shape + (3,), 255, np.uint8)
    else:
        picture = iwe_to_rgb(np.abs(background), signed=False)
        picture = (0.5 * picture + 127).astype(np.uint8)  # lighter, so that colours stand out
    known = np.isfinite(depth_m)
    picture[known] = depth_colors(depth_m[known], z_min_m, z_max_m)
    return picture


def confidence_picture(confidence: np.ndarray) -> np.ndarray:
    """Grey uint8 (height, width): the confidence map in negative form (dark = high focus),
    scaled between the lowest and the 99th percentile of the known values; NaN white."""
    confidence = np.asarray(confidence, dtype=np.float64)
    known = np.isfinite(confidence)
    picture = np.full(confidence.shape, 255, np.uint8)
    if known.any():
        low = confidence[known].min()
        high = np.percentile(confidence[known], 99.0)
        level = np.clip((confidence[known] - low) / max(high - low, 1e-30), 0.0, 1.0)
        picture[known] = np.round(255.0 * (1.0 - level)).astype(np.uint8)
    return picture


def write_png(path, rgb_or_grey: np.ndarray) -> None:
    """Write an RGB (height, width, 3) or grey (height, width) uint8 picture as PNG."""
    image = rgb_or_grey[..., ::-1] if rgb_or_grey.ndim == 3 else rgb_or_grey
    if not cv2.imwrite(str(path), np.ascontiguousarray(image)):
        raise ValueError(f"cannot write picture {path}")
