"""Pictures of a patch-flow estimate: arrows over the motion-compensated image, and the flow as
colours (the usual optical-flow colour wheel: hue = direction, saturation = speed, so zero flow
is white).

Both are rgb8 arrays of the sensor's size times ``scale`` with a legend strip below (for
``focus-ros flow``'s PNGs and the node's ``optical_flow/image`` topic). What is drawn, so that
"no flow known" never looks like "zero flow":

- colours: a valid patch in its flow's colour (white = 0 px/s, full colour = the legend's top
  speed); a patch with events but no valid flow: grey with dark diagonal hatching; a patch given
  only its normal flow (aperture): the normal flow's colour with grey horizontal stripes; no
  events: black. The legend: a colour wheel with its top speed in px/s and these swatches.
- arrows: one arrow per valid patch (a dot where the arrow is shorter than a pixel: a measured
  zero), cyan arrows for normal flows, grey crosses for invalid patches with events; the legend
  strip holds a scale arrow of a round speed in px/s drawn at the same scale.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from focus_ros.visualization import iwe_to_rgb

#: colours (RGB) of the pictures
VALID_ARROW = (255, 60, 0)
NORMAL_ARROW = (0, 170, 230)
INVALID_MARK = (90, 90, 90)
INVALID_FILL = (128, 128, 128)
INVALID_HATCH = (60, 60, 60)
NO_EVENTS = (0, 0, 0)
#: height (px) of the legend strip below each picture
LEGEND_ROWS = 44


def compensated_image(estimator, estimate) -> np.ndarray:
    """(height, width) image of warped events: each patch's IWE at its estimated flow (0 where
    invalid: the raw events), pasted at the patch's place. Uses the estimator's objective, which
    must still hold the estimate's window (call right after ``estimate``)."""
    grid = estimator.grid
    flows = np.where(np.isfinite(estimate.flow), estimate.flow, 0.0) / estimate.binning  # binned px/s
    tiles = estimator.objective.images(flows)
    image = np.zeros((grid.height, grid.width))
    border, size = grid.border, grid.size
    for (x0, y0), tile in zip(grid.origins, tiles):  # P paste operations of a small array: display only
        image[y0:y0 + size, x0:x0 + size] = tile[border:border + size, border:border + size]
    return image


def round_speed(speed_px_s: float) -> float:
    """The largest of 1, 2, 5 times a power of ten not above ``speed_px_s`` (px/s; 1 for <= 0)."""
    if not (math.isfinite(speed_px_s) and speed_px_s > 0):
        return 1.0
    power = 10.0 ** math.floor(math.log10(speed_px_s))
    return max(step * power for step in (1.0, 2.0, 5.0) if step * power <= speed_px_s * (1 + 1e-9))


def top_speed(estimate) -> float:
    """The colour wheel's rim (px/s): the largest finite speed of the valid or normal flows,
    rounded up to two significant digits (1 when there is none)."""
    speeds = np.concatenate([np.hypot(estimate.flow[:, 0], estimate.flow[:, 1]),
                             np.hypot(estimate.normal_flow[:, 0], estimate.normal_flow[:, 1])])
    speeds = speeds[np.isfinite(speeds)]
    if not speeds.size or speeds.max() <= 0:
        return 1.0
    top = float(speeds.max())
    power = 10.0 ** (math.floor(math.log10(top)) - 1)
    return math.ceil(top / power) * power


def flow_colors(flow: np.ndarray, max_speed_px_s: float | None = None) -> np.ndarray:
    """(N, 3) uint8 RGB per flow vector (N, 2) px/s: hue = direction, saturation = speed / max
    (white = 0 px/s; max = the largest finite speed unless given). NaN rows get white too: the
    caller draws unknown flows apart (``flow_color_image``)."""
    flow = np.asarray(flow, dtype=np.float64).reshape(-1, 2)
    speed = np.hypot(flow[:, 0], flow[:, 1])
    finite = np.isfinite(speed)
    top = max_speed_px_s if max_speed_px_s else (float(speed[finite].max()) if finite.any() else 1.0)
    top = top if top > 0 else 1.0
    hue = (np.degrees(np.arctan2(np.nan_to_num(flow[:, 1]), np.nan_to_num(flow[:, 0]))) % 360.0) / 2.0
    saturation = np.clip(np.nan_to_num(speed) / top, 0.0, 1.0) * 255.0
    hsv = np.stack([hue, saturation, np.full_like(hue, 255.0)], axis=-1).astype(np.uint8)
    return cv2.cvtColor(hsv[None], cv2.COLOR_HSV2RGB)[0]


def _hatch(block: np.ndarray, color, step: int, diagonal: bool) -> None:
    """Lines of ``color`` every ``step`` px across ``block`` (in place): diagonal or horizontal."""
    rows, columns = np.indices(block.shape[:2])
    lines = ((rows + columns) % step == 0) if diagonal else (rows % step == 0)
    block[lines] = color


def _wheel(radius: int, max_speed_px_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The colour wheel (2 radius + 1 square rgb8) and its disc mask: the flow colour of the
    vector from the centre to each pixel, the rim at ``max_speed_px_s``."""
    offsets = np.arange(-radius, radius + 1, dtype=np.float64)
    wheel_x, wheel_y = np.meshgrid(offsets, offsets)
    inside = wheel_x ** 2 + wheel_y ** 2 <= radius ** 2
    vectors = np.stack([wheel_x.ravel(), wheel_y.ravel()], axis=1) * (max_speed_px_s / radius)
    wheel = flow_colors(vectors, max_speed_px_s).reshape(len(offsets), len(offsets), 3)
    return wheel, inside


def _text(image: np.ndarray, text: str, origin, color=(255, 255, 255), size: float = 0.4) -> None:
    cv2.putText(image, text, origin, cv2.FONT_HERSHEY_SIMPLEX, size, color, 1, cv2.LINE_AA)


def _swatch(strip: np.ndarray, x: int, label: str, fill, hatch=None, diagonal: bool = True) -> int:
    """A 14-px swatch and its label at x in the legend strip; returns the x after them."""
    block = strip[24:38, x:x + 14]
    block[:] = fill
    if hatch is not None:
        _hatch(block, hatch, 4, diagonal)
    _text(strip, label, (x + 18, 36))
    return x + 24 + 7 * len(label)


def flow_color_image(estimate, scale: int = 2, max_speed_px_s: float | None = None) -> np.ndarray:
    """rgb8 image (height*scale + LEGEND_ROWS, width*scale, 3): every patch filled as the module
    docstring says, the legend (colour wheel with its top speed, swatches) in the strip below."""
    grid = estimate.grid
    top = max_speed_px_s or top_speed(estimate)
    colors = flow_colors(estimate.flow, top)
    normal_colors = flow_colors(estimate.normal_flow, top)
    valid = np.isfinite(estimate.flow).all(axis=1)
    normal = np.asarray(estimate.normal, dtype=bool) & ~valid
    height, width = grid.height * scale, grid.width * scale
    image = np.zeros((height + LEGEND_ROWS, width, 3), dtype=np.uint8)
    step = grid.stride * scale
    # invalid patches first, valid ones over them (overlapping patches: a valid flow wins)
    order = np.argsort(valid, kind="stable")
    for index in order:
        x0, y0 = grid.origins[index] * scale
        block = image[y0:y0 + step, x0:x0 + step]
        if valid[index]:
            block[:] = colors[index]
        elif normal[index]:
            block[:] = normal_colors[index]
            _hatch(block, INVALID_FILL, 4, diagonal=False)
        elif estimate.event_counts[index] > 0:
            block[:] = INVALID_FILL
            _hatch(block, INVALID_HATCH, 5, diagonal=True)
    strip = image[height:]
    strip[:] = (30, 30, 30)
    radius = (LEGEND_ROWS - 6) // 2
    wheel, inside = _wheel(radius, top)
    corner = strip[3:3 + 2 * radius + 1, 4:4 + 2 * radius + 1]
    corner[inside] = wheel[inside]
    x = 2 * radius + 12
    _text(strip, f"rim {top:g} px/s, centre 0 px/s", (x, 15))
    x = _swatch(strip, x, "invalid", INVALID_FILL, INVALID_HATCH)
    x = _swatch(strip, x, "normal only", (200, 200, 255), INVALID_FILL, diagonal=False)
    _swatch(strip, x, "no events", NO_EVENTS)
    return image


def flow_arrows_image(background: np.ndarray, estimate, scale: int = 3, arrow_seconds: float | None = None,
                      valid_color=VALID_ARROW, invalid_color=INVALID_MARK) -> np.ndarray:
    """rgb8 image (height*scale + LEGEND_ROWS, width*scale, 3): ``background`` (an IWE, (height,
    width) of the patch grid's, binned, pixels) in grey with one arrow per valid patch from its
    centre along its flow (length = flow * arrow_seconds px; default: the longest arrow is one
    patch stride; a dot for an arrow shorter than a pixel), normal flows in cyan, a grey cross on
    invalid patches with events; below, a scale arrow of a round speed (raw px/s) at the same
    scale and what the marks mean."""
    grid = estimate.grid
    binning = estimate.binning
    base = iwe_to_rgb(background)
    gray = cv2.cvtColor(base, cv2.COLOR_RGB2GRAY)
    picture = cv2.cvtColor(255 - (255 - gray) // 2, cv2.COLOR_GRAY2RGB)
    picture = cv2.resize(picture, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    image = np.zeros((picture.shape[0] + LEGEND_ROWS, picture.shape[1], 3), dtype=np.uint8)
    image[:picture.shape[0]] = picture
    flow = estimate.flow / binning  # grid px/s
    speed = np.hypot(flow[:, 0], flow[:, 1])
    finite = np.isfinite(speed)
    if arrow_seconds is None:
        top = top_speed(estimate) / binning
        arrow_seconds = grid.stride / top if top > 0 else 0.0
    normal = np.asarray(estimate.normal, dtype=bool) & ~finite
    for index, center in enumerate(grid.centers):
        start = (int(round((center[0] + 0.5) * scale)), int(round((center[1] + 0.5) * scale)))
        vector = flow[index] if finite[index] else estimate.normal_flow[index] / binning
        if finite[index] or normal[index]:
            end = (int(round(start[0] + vector[0] * arrow_seconds * scale)),
                   int(round(start[1] + vector[1] * arrow_seconds * scale)))
            color = valid_color if finite[index] else NORMAL_ARROW
            if end == start:
                cv2.circle(image, start, 1, color, -1, cv2.LINE_AA)
            else:
                cv2.arrowedLine(image, start, end, color, 1, cv2.LINE_AA, tipLength=0.3)
        elif estimate.event_counts[index] > 0:
            cv2.drawMarker(image, start, invalid_color, cv2.MARKER_TILTED_CROSS, max(3, scale * 2), 1)
    strip = image[picture.shape[0]:]
    strip[:] = (30, 30, 30)
    reference = round_speed(grid.stride * binning / arrow_seconds) if arrow_seconds > 0 else 0.0  # raw px/s
    length = int(round(reference / binning * arrow_seconds * scale))
    if length > 0:
        cv2.arrowedLine(strip, (8, 22), (8 + length, 22), valid_color, 1, cv2.LINE_AA, tipLength=0.3)
    x = 16 + length
    _text(strip, f"= {reference:g} px/s" if length > 0 else "no flow", (x, 26))
    x += 110
    _text(strip, "flow", (x, 26), valid_color)
    _text(strip, "normal flow (aperture)", (x + 40, 26), NORMAL_ARROW)
    cv2.drawMarker(strip, (x + 225, 22), (170, 170, 170), cv2.MARKER_TILTED_CROSS, 8, 1)
    _text(strip, "invalid", (x + 235, 26), (170, 170, 170))
    return image


def arrow_scale_label(estimate) -> str:
    """Text for a caption: the speed of the longest arrow (px/s)."""
    speed = np.hypot(estimate.flow[:, 0], estimate.flow[:, 1])
    finite = speed[np.isfinite(speed)]
    return f"longest arrow {finite.max():.0f} px/s" if finite.size else "no valid patch"


__all__ = ["compensated_image", "flow_colors", "flow_color_image", "flow_arrows_image", "arrow_scale_label",
           "round_speed", "top_speed"]
