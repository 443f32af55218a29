"""Image of warped events (IWE), paper eq. (3): ``I(x; theta) = sum_k b_k K(x - x'_k)``.

- ``b_k = p_k`` (with polarity) or ``b_k = 1`` (without);
- kernel K: bilinear voting (each event splits its weight over the 4 nearest pixels) or
  a Gaussian of standard deviation sigma (px), the paper's smooth Dirac approximation
  with epsilon = 1 px by default. The Gaussian is truncated at 3 sigma, shifted to reach
  zero there (continuous in x'_k) and normalised per event and axis so that each
  event's weights sum to exactly 1 before clipping at the image border;
- the timestamp image of the "mean timestamp on pixel" loss:
  ``T(x) = sum_k tau_k K(x - x'_k)`` with tau_k = t_k - t_window_start (s).

Optional IWE smoothing (``blur_sigma_px`` of ``focus_ros.objective.Objective``): the
bilinear IWE convolved with a separable, truncated, unit-sum Gaussian of standard deviation
sigma px (``gaussian_blur_kernel``, ``blur_image``), with zero padding at the border. This
is the paper's smooth Dirac delta (Sec. 2, Gaussian of epsilon = 1 px) built as "bilinear
voting, then a blur" instead of a Gaussian per event: one image-space filter instead of
7x7 taps per event (BENCHMARKS.md, "Engine: warp + IWE + loss + gradient", compares the
costs). With zero padding and a symmetric kernel the blur matrix is symmetric, so the
adjoint of the blur is the blur itself.

An event is kept when its warped position lies inside the grid of pixel centres,
``0 <= x' <= width - 1`` and ``0 <= y' <= height - 1``; other events are dropped (no
votes) and counted. Pixel (x, y) is image[y, x]; pixel centres sit at integer coordinates.

Besides voting, the window kernels give each kernel's adjoint (``gather_bilinear_cells``,
``gather_gaussian_points``): the derivative of ``sum_pixels C(x) K(x - x')`` w.r.t. the
warped position x' (for the adjoint gradient of ``focus_ros.objective``).

Two layers: per-event functions (``vote_bilinear``, ``vote_gaussian``, …) with the
array version ``accumulate`` for tests and tools, and the engine's window kernels
(``bilinear_cells``, ``vote_bilinear_cells``, ``gather_bilinear_cells``,
``vote_gaussian_points``, ``gather_gaussian_points``). The window kernels take
structure-of-arrays inputs and a stack of image planes, flattened: event k votes into
plane ``plane_offset[k] / (height * width)`` (the objective's polarity split uses one
plane per polarity; otherwise every offset is 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numba
import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.warps import FASTMATH, KERNEL_OPTIONS

BILINEAR = 0
GAUSSIAN = 1

#: kernel name (settings, command line) -> kernel code
KERNELS = {"bilinear": BILINEAR, "gaussian": GAUSSIAN}

#: Gaussian truncation radius in standard deviations
GAUSSIAN_TRUNCATION = 3.0


def gaussian_scratch_size(sigma: float) -> int:
    """Largest number of Gaussian taps per axis for standard deviation sigma (px)."""
    return int(2 * math.ceil(GAUSSIAN_TRUNCATION * sigma) + 2)


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def inside_frame(x, y, width, height):
    """True when (x, y) (px) lies in the grid of pixel centres [0, w-1] x [0, h-1]."""
    return 0.0 <= x <= width - 1.0 and 0.0 <= y <= height - 1.0


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def _bilinear_cell(x, size):
    """Left tap index and fractional offset of coordinate x in [0, size - 1]."""
    left = int(x)
    if left >= size - 1:
        left = size - 2
    return left, x - left


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def vote_bilinear(image, x, y, weight):
    """Add ``weight`` at (x, y) (px, inside the frame) split bilinearly over 4 pixels."""
    height, width = image.shape
    left, fraction_x = _bilinear_cell(x, width)
    top, fraction_y = _bilinear_cell(y, height)
    image[top, left] += weight * (1.0 - fraction_x) * (1.0 - fraction_y)
    image[top, left + 1] += weight * fraction_x * (1.0 - fraction_y)
    image[top + 1, left] += weight * (1.0 - fraction_x) * fraction_y
    image[top + 1, left + 1] += weight * fraction_x * fraction_y


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def gaussian_axis_weights(center, sigma, weights, derivatives):
    """Normalised 1-D weights of the truncated Gaussian around ``center`` (px).

    Fills weights[n] for taps i = first + n, n < count, and their derivatives
    d weights[n] / d center; returns (first, count). Weights sum to 1 exactly.
    The samples g_n = exp(-(i - center)^2 / (2 sigma^2)) come from two exponentials and
    a recurrence: g_{n+1} = g_n r_n with r_n = exp(-(2 (i - center) + 1) / (2 sigma^2)),
    r_{n+1} = r_n exp(-1 / sigma^2) (relative error a few ulp per tap; the loop-invariant
    exp(-1 / sigma^2) is hoisted out of the event loops by the compiler).
    """
    radius = GAUSSIAN_TRUNCATION * sigma
    inverse_variance = 1.0 / (sigma * sigma)
    floor_value = math.exp(-0.5 * GAUSSIAN_TRUNCATION * GAUSSIAN_TRUNCATION)
    ratio_step = math.exp(-inverse_variance)
    first = int(math.floor(center - radius)) + 1
    last = int(math.ceil(center + radius)) - 1
    count = last - first + 1
    offset = first - center
    value = math.exp(-0.5 * offset * offset * inverse_variance)
    ratio = math.exp(-(offset + 0.5) * inverse_variance)
    total = 0.0
    total_derivative = 0.0
    for n in range(count):
        weights[n] = value - floor_value
        derivatives[n] = value * offset * inverse_variance
        total += weights[n]
        total_derivative += derivatives[n]
        value *= ratio
        ratio *= ratio_step
        offset += 1.0
    inverse_total = 1.0 / total
    for n in range(count):
        weights[n] *= inverse_total
        derivatives[n] = (derivatives[n] - weights[n] * total_derivative) * inverse_total
    return first, count


@numba.njit(cache=True, nogil=True, inline="always", fastmath=FASTMATH)
def vote_gaussian(image, x, y, weight, sigma, scratch):
    """Add ``weight`` at (x, y) (px) spread by the normalised truncated Gaussian; taps
    outside the image are dropped. scratch: (4, n) float64 work array."""
    height, width = image.shape
    first_x, count_x = gaussian_axis_weights(x, sigma, scratch[0], scratch[1])
    first_y, count_y = gaussian_axis_weights(y, sigma, scratch[2], scratch[3])
    for n in range(count_y):
        row = first_y + n
        if row < 0 or row >= height:
            continue
        row_weight = weight * scratch[2, n]
        for m in range(count_x):
            column = first_x + m
            if 0 <= column < width:
                image[row, column] += row_weight * scratch[0, m]


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _accumulate_kernel(kernel, sigma, points, weights, timestamps, with_timestamps,
                       image, timestamp_image, kept, scratch):
    height, width = image.shape
    kept_count = 0
    for k in range(points.shape[0]):
        x = points[k, 0]
        y = points[k, 1]
        if not inside_frame(x, y, width, height):
            kept[k] = False
            continue
        kept[k] = True
        kept_count += 1
        if kernel == BILINEAR:
            vote_bilinear(image, x, y, weights[k])
            if with_timestamps:
                vote_bilinear(timestamp_image, x, y, timestamps[k])
        else:
            vote_gaussian(image, x, y, weights[k], sigma, scratch)
            if with_timestamps:
                vote_gaussian(timestamp_image, x, y, timestamps[k], sigma, scratch)
    return kept_count


# ---------------------------------------------------------------- window kernels (engine)


@dataclass(frozen=True)
class VotingWorkArrays:
    """Per-event work arrays of one warp -> vote -> gather pass over N events (or patch
    memberships), allocated once per window and reused by every evaluation:

    warped_x, warped_y: warped positions x'_k (px); cell: flat index of the top-left pixel
    of the event's bilinear cell, fraction_x, fraction_y: its position inside the cell
    (``bilinear_cells``); kept: the event votes (warped inside the frame); d_x, d_y: the
    gathered derivative of the loss w.r.t. x'_k (``gather_bilinear_cells`` /
    ``gather_gaussian_points``). ``kept`` starts all False; the others are uninitialised.
    """

    warped_x: np.ndarray
    warped_y: np.ndarray
    cell: np.ndarray
    fraction_x: np.ndarray
    fraction_y: np.ndarray
    kept: np.ndarray
    d_x: np.ndarray
    d_y: np.ndarray

    @classmethod
    def allocate(cls, count: int) -> "VotingWorkArrays":
        """Work arrays for ``count`` events."""
        return cls(np.empty(count), np.empty(count), np.empty(count, dtype=np.int64), np.empty(count),
                   np.empty(count), np.zeros(count, dtype=np.bool_), np.empty(count), np.empty(count))

    def __len__(self) -> int:
        return len(self.kept)


@numba.njit(**KERNEL_OPTIONS)
def bilinear_cells(warped_x, warped_y, width, height, cell, fraction_x, fraction_y, kept):
    """Bilinear cell of every warped event: flat index top * width + left of its top-left
    pixel, fractional offsets (px) from it, and whether it lies in the frame (``kept``).
    Same cells as ``vote_bilinear`` (the right/bottom edge belongs to the last cell).
    Returns the number of kept events. Branch-free: the compiler vectorises it."""
    kept_count = 0
    last_x = width - 1.0
    last_y = height - 1.0
    for k in range(warped_x.shape[0]):
        x = warped_x[k]
        y = warped_y[k]
        inside = (x >= 0.0) & (x <= last_x) & (y >= 0.0) & (y <= last_y)
        left = int(min(x, last_x - 0.5) if inside else 0.0)
        top = int(min(y, last_y - 0.5) if inside else 0.0)
        fraction_x[k] = x - left
        fraction_y[k] = y - top
        cell[k] = top * width + left
        kept[k] = inside
        kept_count += inside
    return kept_count


@numba.njit(**KERNEL_OPTIONS)
def vote_bilinear_cells(cell, fraction_x, fraction_y, kept, weights, plane_offset, width, image):
    """Add weights[k] of every kept event to the flat image planes, split bilinearly."""
    for k in range(cell.shape[0]):
        if not kept[k]:
            continue
        index = cell[k] + plane_offset[k]
        weight = weights[k]
        right = fraction_x[k]
        below = fraction_y[k]
        upper = weight * (1.0 - below)
        lower = weight * below
        image[index] += upper * (1.0 - right)
        image[index + 1] += upper * right
        image[index + width] += lower * (1.0 - right)
        image[index + width + 1] += lower * right


@numba.njit(**KERNEL_OPTIONS)
def gather_bilinear_cells(cell, fraction_x, fraction_y, kept, weights, plane_offset, width, cotangent,
                          d_x, d_y, add):
    """Per event, weights[k] * d/dx' of ``sum_pixels cotangent * K_bilinear(pixel - x'_k)`` (the
    bilinear kernel's adjoint) into d_x, d_y (or added to them when ``add``); 0 for dropped events."""
    for k in range(cell.shape[0]):
        index = cell[k] + plane_offset[k]
        right = fraction_x[k]
        below = fraction_y[k]
        c00 = cotangent[index]
        c01 = cotangent[index + 1]
        c10 = cotangent[index + width]
        c11 = cotangent[index + width + 1]
        weight = weights[k]
        inside = kept[k]  # a dropped event's fractions may be NaN: select, don't multiply by 0
        along_x = weight * ((1.0 - below) * (c01 - c00) + below * (c11 - c10)) if inside else 0.0
        along_y = weight * ((1.0 - right) * (c10 - c00) + right * (c11 - c01)) if inside else 0.0
        if add:
            d_x[k] += along_x
            d_y[k] += along_y
        else:
            d_x[k] = along_x
            d_y[k] = along_y


@numba.njit(**KERNEL_OPTIONS)
def vote_gaussian_points(warped_x, warped_y, weights, plane_offset, width, height, sigma, image, kept, scratch):
    """Add weights[k] of every in-frame event to the flat image planes, spread by the
    normalised truncated Gaussian (``vote_gaussian``); sets ``kept``, returns its count.
    scratch: (4, n) float64 work array (``gaussian_scratch_size``)."""
    kept_count = 0
    for k in range(warped_x.shape[0]):
        x = warped_x[k]
        y = warped_y[k]
        inside = inside_frame(x, y, width, height)
        kept[k] = inside
        if not inside:
            continue
        kept_count += 1
        first_x, count_x = gaussian_axis_weights(x, sigma, scratch[0], scratch[1])
        first_y, count_y = gaussian_axis_weights(y, sigma, scratch[2], scratch[3])
        start_x = max(first_x, 0)
        stop_x = min(first_x + count_x, width)
        weight = weights[k]
        base = plane_offset[k]
        for n in range(count_y):
            row = first_y + n
            if row < 0 or row >= height:
                continue
            row_weight = weight * scratch[2, n]
            row_start = base + row * width
            for column in range(start_x, stop_x):
                image[row_start + column] += row_weight * scratch[0, column - first_x]
    return kept_count


@numba.njit(**KERNEL_OPTIONS)
def gather_gaussian_points(warped_x, warped_y, kept, weights, plane_offset, width, height, sigma, cotangent,
                           d_x, d_y, add, scratch):
    """Per event, weights[k] * d/dx' of ``sum_pixels cotangent * K_gaussian(pixel - x'_k)`` (the
    Gaussian kernel's adjoint) into d_x, d_y (or added when ``add``); 0 for dropped events."""
    for k in range(warped_x.shape[0]):
        along_x = 0.0
        along_y = 0.0
        if kept[k]:
            x = warped_x[k]
            y = warped_y[k]
            first_x, count_x = gaussian_axis_weights(x, sigma, scratch[0], scratch[1])
            first_y, count_y = gaussian_axis_weights(y, sigma, scratch[2], scratch[3])
            start_x = max(first_x, 0)
            stop_x = min(first_x + count_x, width)
            base = plane_offset[k]
            for n in range(count_y):
                row = first_y + n
                if row < 0 or row >= height:
                    continue
                row_start = base + row * width
                row_sum = 0.0
                row_derivative = 0.0
                for column in range(start_x, stop_x):
                    value = cotangent[row_start + column]
                    row_sum += value * scratch[0, column - first_x]
                    row_derivative += value * scratch[1, column - first_x]
                along_x += scratch[2, n] * row_derivative
                along_y += scratch[3, n] * row_sum
            weight = weights[k]
            along_x *= weight
            along_y *= weight
        if add:
            d_x[k] += along_x
            d_y[k] += along_y
        else:
            d_x[k] = along_x
            d_y[k] = along_y


# ---------------------------------------------------------------- image blur (IWE smoothing)


#: radius of the IWE blur's taps in standard deviations: sigma = 1 px gives 5 taps per axis.
#: The taps at 3 sigma that a 3-sigma truncation would add hold 0.9 % of the weight; leaving
#: them out makes each of the two blurs of an evaluation cheaper (5 taps per axis instead of 7).
BLUR_TRUNCATION = 2.0


def gaussian_blur_kernel(sigma_px: float) -> np.ndarray:
    """1-D taps of a Gaussian of standard deviation sigma_px (px) sampled at integer offsets
    -r..r, r = ceil(BLUR_TRUNCATION * sigma), normalised to unit sum (float64, (2r+1,))."""
    if not (math.isfinite(sigma_px) and sigma_px > 0):
        raise ValueError(f"blur sigma must be a positive number of pixels, got {sigma_px}")
    radius = int(math.ceil(BLUR_TRUNCATION * sigma_px))
    offsets = np.arange(-radius, radius + 1, dtype=np.float64)
    taps = np.exp(-0.5 * (offsets / sigma_px) ** 2)
    return taps / taps.sum()


def blur_image(image: np.ndarray, kernel: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = image convolved with ``kernel`` along x and along y (separable), zero padding
    outside the image (float64, (height, width)). Symmetric kernel + zero padding: the
    operator is its own adjoint, so the same call blurs the loss's gradient image."""
    result = cv2.sepFilter2D(image, cv2.CV_64F, kernel, kernel, dst=out, borderType=cv2.BORDER_CONSTANT)
    if not np.shares_memory(result, out):  # OpenCV reallocated (out not contiguous float64)
        out[...] = result
    return out


@dataclass
class WarpedEventImage:
    """An IWE and its bookkeeping.

    image: (height, width) float64; timestamp_image: same shape or None (seconds-weighted);
    kept: (N,) bool, events inside the frame; dropped: number of events outside;
    polarity_images: (2, height, width) count images of the positive and the negative
    events when the loss is evaluated per polarity (``image`` is then their difference,
    the IWE with polarity), else None.
    """

    image: np.ndarray
    timestamp_image: np.ndarray | None
    kept: np.ndarray
    dropped: int
    polarity_images: np.ndarray | None = None


def accumulate(points: np.ndarray, width: int, height: int, weights=None, kernel: str = "bilinear",
               sigma: float = 1.0, timestamps=None) -> WarpedEventImage:
    """Build the IWE of warped points (N, 2) (px) with per-event weights b_k (default 1).

    kernel: "bilinear" or "gaussian" (standard deviation ``sigma`` px). With timestamps
    (N,) (s since the window start) also builds the timestamp image.
    """
    if kernel not in KERNELS:
        raise ValueError(f"unknown IWE kernel '{kernel}': choose one of {', '.join(KERNELS)}")
    if not sigma > 0:
        raise ValueError(f"Gaussian sigma must be positive, got {sigma}")
    points = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 2)
    count = len(points)
    weights = np.ones(count) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    with_timestamps = timestamps is not None
    timestamps = (np.zeros(count) if timestamps is None
                  else np.ascontiguousarray(timestamps, dtype=np.float64))
    image = np.zeros((height, width))
    timestamp_image = np.zeros((height, width)) if with_timestamps else np.zeros((1, 1))
    kept = np.empty(count, dtype=np.bool_)
    scratch = np.empty((4, gaussian_scratch_size(sigma)))
    kept_count = _accumulate_kernel(KERNELS[kernel], float(sigma), points, weights, timestamps,
                                    with_timestamps, image, timestamp_image, kept, scratch)
    return WarpedEventImage(image, timestamp_image if with_timestamps else None, kept,
                            count - int(kept_count))


# ----------------------------------------------------------------- a coarser pixel grid

def coarse_grid_calibration(calibration: Calibration, factor: int) -> Calibration:
    """The camera seen on a grid of ``factor`` x ``factor`` pixel bins (factor 1: itself):
    size ceil(size / factor) px, focal lengths / factor, and the principal point where bin
    u' = (u - (factor - 1) / 2) / factor puts it (bin u' covers the pixels factor u' ..
    factor u' + factor - 1, its centre at pixel factor u' + (factor - 1) / 2). The distortion,
    in normalised coordinates, stays. With :func:`events_on_coarse_grid`, the IWE of a large
    sensor at a coarser grid: fewer pixels for the image passes of every evaluation, and more
    events per pixel of a thinned window; rad/s estimates are unchanged in meaning."""
    if factor == 1:
        return calibration
    if factor < 1:
        raise ValueError(f"pixel binning must be a positive integer, got {factor}")
    offset = (factor - 1) / 2
    return Calibration(-(-calibration.width // factor), -(-calibration.height // factor),
                       calibration.fx / factor, calibration.fy / factor, (calibration.cx - offset) / factor,
                       (calibration.cy - offset) / factor, tuple(calibration.distortion))


#: the coarse grid keeps at least this many bins (about twice a DAVIS346's pixels): 2x2 bins
#: on a 1280x720 sensor (230,400 bins), none below (EVALUATION.md, "Sensors": binning a
#: 640x480 sensor costs accuracy, a 1280x720 one none)
MIN_COARSE_GRID_BINS = 200_000


def coarse_grid_factor(width: int, height: int) -> int:
    """The largest bin size (px per side) whose grid keeps at least MIN_COARSE_GRID_BINS bins;
    1 (no binning) for sensors below twice that."""
    factor = 1
    while -(-width // (factor + 1)) * -(-height // (factor + 1)) >= MIN_COARSE_GRID_BINS:
        factor += 1
    return factor


def events_on_coarse_grid(events: Events, factor: int) -> Events:
    """The events with their pixel (x, y) replaced by its ``factor`` x ``factor`` bin (for
    :func:`coarse_grid_calibration`; times and polarities unchanged)."""
    if factor == 1:
        return events
    return Events(events.x // np.uint16(factor), events.y // np.uint16(factor), events.t, events.p)
