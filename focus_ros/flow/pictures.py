"""Pictures of a patch-flow estimate: arrows over the motion-compensated image, and the flow as
colours (hue = direction, brightness = speed: the usual optical-flow colour wheel).

Both are rgb8 arrays of the sensor's size times ``scale`` (for ``focus-ros flow``'s PNGs and the
node's ``optical_flow/image`` topic).
"""

from __future__ import annotations

import cv2
import numpy as np

from focus_ros.visualization import iwe_to_rgb


def compensated_image(estimator, estimate) -> np.ndarray:
    """(height, width) image of warped events: each patch's IWE at its estimated flow (0 where
    invalid: the raw events), pasted at the patch's place. Uses the estimator's objective, which
    must still hold the estimate's window (call right after ``estimate``)."""
    grid = estimator.grid
    flows = np.where(np.isfinite(estimate.flow), estimate.flow, 0.0)
    tiles = estimator.objective.images(flows)
    image = np.zeros((grid.height, grid.width))
    border, size = grid.border, grid.size
    for (x0, y0), tile in zip(grid.origins, tiles):  # P paste operations of a small array: display only
        image[y0:y0 + size, x0:x0 + size] = tile[border:border + size, border:border + size]
    return image


def flow_colors(flow: np.ndarray, max_speed_px_s: float | None = None) -> np.ndarray:
    """(N, 3) uint8 RGB per flow vector (N, 2) px/s: hue = direction, value = speed / max
    (max = the largest finite speed unless given); black for NaN."""
    flow = np.asarray(flow, dtype=np.float64).reshape(-1, 2)
    speed = np.hypot(flow[:, 0], flow[:, 1])
    finite = np.isfinite(speed)
    top = max_speed_px_s if max_speed_px_s else (float(speed[finite].max()) if finite.any() else 1.0)
    top = top if top > 0 else 1.0
    hue = (np.degrees(np.arctan2(np.nan_to_num(flow[:, 1]), np.nan_to_num(flow[:, 0]))) % 360.0) / 2.0
    value = np.clip(np.nan_to_num(speed) / top, 0.0, 1.0) * 255.0
    hsv = np.stack([hue, np.full_like(hue, 255.0), np.where(finite, value, 0.0)], axis=-1).astype(np.uint8)
    return cv2.cvtColor(hsv[None], cv2.COLOR_HSV2RGB)[0]


def flow_color_image(estimate, scale: int = 2, max_speed_px_s: float | None = None) -> np.ndarray:
    """rgb8 image (height*scale, width*scale, 3): every patch filled with its flow colour, with a
    colour wheel in the top-left corner as the legend."""
    grid = estimate.grid
    colors = flow_colors(estimate.flow, max_speed_px_s)
    image = np.zeros((grid.height, grid.width, 3), dtype=np.uint8)
    for (x0, y0), color in zip(grid.origins, colors):
        image[y0:y0 + grid.stride, x0:x0 + grid.stride] = color
    image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    radius = 12 * scale
    offsets = np.arange(-radius, radius + 1, dtype=np.float64)
    wheel_x, wheel_y = np.meshgrid(offsets, offsets)
    inside = wheel_x ** 2 + wheel_y ** 2 <= radius ** 2
    wheel = flow_colors(np.stack([wheel_x.ravel(), wheel_y.ravel()], axis=1), float(radius)).reshape(
        len(offsets), len(offsets), 3)
    corner = image[2:2 + len(offsets), 2:2 + len(offsets)]
    corner[inside] = wheel[inside]
    return image


def flow_arrows_image(background: np.ndarray, estimate, scale: int = 3, arrow_seconds: float | None = None,
                      valid_color=(255, 60, 0), invalid_color=(90, 90, 90)) -> np.ndarray:
    """rgb8 image: ``background`` (an IWE, (height, width)) in grey with one arrow per valid patch
    from its centre along its flow (length = flow * arrow_seconds px; default: the longest arrow
    is one patch stride), a small grey cross on invalid patches with events."""
    grid = estimate.grid
    base = iwe_to_rgb(background)
    gray = cv2.cvtColor(base, cv2.COLOR_RGB2GRAY)
    image = cv2.cvtColor(255 - (255 - gray) // 2, cv2.COLOR_GRAY2RGB)
    image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    flow = estimate.flow
    speed = np.hypot(flow[:, 0], flow[:, 1])
    finite = np.isfinite(speed)
    if arrow_seconds is None:
        top = float(speed[finite].max()) if finite.any() else 0.0
        arrow_seconds = grid.stride / top if top > 0 else 0.0
    for center, vector, ok, count in zip(grid.centers, flow, finite, estimate.event_counts):
        start = (int(round((center[0] + 0.5) * scale)), int(round((center[1] + 0.5) * scale)))
        if ok:
            end = (int(round(start[0] + vector[0] * arrow_seconds * scale)),
                   int(round(start[1] + vector[1] * arrow_seconds * scale)))
            cv2.arrowedLine(image, start, end, valid_color, 1, cv2.LINE_AA, tipLength=0.3)
        elif count > 0:
            cv2.drawMarker(image, start, invalid_color, cv2.MARKER_TILTED_CROSS, max(3, scale * 2), 1)
    return image


def arrow_scale_label(estimate) -> str:
    """Text for a caption: the speed of the longest arrow (px/s)."""
    speed = np.hypot(estimate.flow[:, 0], estimate.flow[:, 1])
    finite = speed[np.isfinite(speed)]
    return f"longest arrow {finite.max():.0f} px/s" if finite.size else "no valid patch"


__all__ = ["compensated_image", "flow_colors", "flow_color_image", "flow_arrows_image", "arrow_scale_label"]
