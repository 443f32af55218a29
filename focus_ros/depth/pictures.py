"""Pictures of depth maps: colour-coded depth over the event image, and the confidence map.

Colours as in the paper's Fig. (slider_depth): near red, far blue (OpenCV's JET map on
inverse depth between 1/z_max and 1/z_min), drawn over the grey event image of the
reference view. The confidence map is drawn in negative form like the paper: dark =
high focus, white = low. :func:`with_depth_colour_bar` and :func:`with_confidence_scale` add
the scale beside a picture (ticks in metres, in the loss's confidence units), so that a
picture can be read alone.
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


#: height of the text rows and width of the scale strip added beside a picture (px, before scaling)
_SCALE_WIDTH_PX = 70


def _with_scale(picture: np.ndarray, strip: np.ndarray, labels: list[tuple[float, str]], title: str,
                upscale: int) -> np.ndarray:
    """picture (H, W, 3) enlarged ``upscale`` times with a vertical colour strip (256, 3: top
    colour first) and its labels ((position 0 top .. 1 bottom, text)) on the right, a title above."""
    picture = cv2.resize(picture, None, fx=upscale, fy=upscale, interpolation=cv2.INTER_NEAREST)
    height, width = picture.shape[:2]
    top = 22
    canvas = np.full((height + top, width + _SCALE_WIDTH_PX + 10, 3), 255, np.uint8)
    canvas[top:, :width] = picture
    bar = cv2.resize(strip[:, None, :], (14, height), interpolation=cv2.INTER_LINEAR)
    canvas[top:, width + 6:width + 20] = bar
    font = cv2.FONT_HERSHEY_SIMPLEX
    for position, text in labels:
        y = top + int(round(position * (height - 1)))
        cv2.line(canvas, (width + 20, y), (width + 24, y), (0, 0, 0), 1)
        cv2.putText(canvas, text, (width + 26, min(max(y + 4, top + 8), top + height - 2)), font, 0.35, (0, 0, 0), 1,
                    cv2.LINE_AA)
    cv2.putText(canvas, title, (4, 15), font, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
    return canvas


def with_depth_colour_bar(picture: np.ndarray, z_min_m: float, z_max_m: float, upscale: int = 2) -> np.ndarray:
    """A depth picture (from :func:`depth_picture` with the same range) with its colour bar:
    near (red, top) to far (blue, bottom), ticks in metres (linear in inverse depth, as the colours)."""
    levels = np.linspace(1.0, 0.0, 256)  # top: near
    depths = 1.0 / (1.0 / z_max_m + levels * (1.0 / z_min_m - 1.0 / z_max_m))
    strip = depth_colors(depths, z_min_m, z_max_m)
    ticks = []
    for fraction in np.linspace(0.0, 1.0, 6):
        depth = 1.0 / (1.0 / z_min_m - fraction * (1.0 / z_min_m - 1.0 / z_max_m))
        ticks.append((fraction, f"{depth:.2f} m"))
    return _with_scale(picture, strip, ticks, "depth (m along the optical axis)", upscale)


def with_confidence_scale(confidence: np.ndarray, upscale: int = 2) -> np.ndarray:
    """The confidence picture (:func:`confidence_picture`, dark = high) with its grey scale in
    the confidence's own units (the focus curve's peak contrast, loss units)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    picture = confidence_picture(confidence)
    known = confidence[np.isfinite(confidence)]
    low, high = (known.min(), np.percentile(known, 99.0)) if known.size else (0.0, 1.0)
    strip = np.repeat(np.linspace(0, 255, 256).astype(np.uint8)[:, None], 3, axis=1)  # top: dark = high
    ticks = [(fraction, f"{high - fraction * (high - low):.3g}") for fraction in np.linspace(0.0, 1.0, 5)]
    return _with_scale(np.repeat(picture[..., None], 3, axis=2), strip, ticks,
                       "focus confidence (peak contrast; dark = high)", upscale)


def write_png(path, rgb_or_grey: np.ndarray) -> None:
    """Write an RGB (height, width, 3) or grey (height, width) uint8 picture as PNG."""
    image = rgb_or_grey[..., ::-1] if rgb_or_grey.ndim == 3 else rgb_or_grey
    if not cv2.imwrite(str(path), np.ascontiguousarray(image)):
        raise ValueError(f"cannot write picture {path}")
