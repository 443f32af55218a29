"""Depth from focus on a DSI: focus curves of patch losses, their peaks, the confidence map.

"Focus Is All You Need" (supplementary, "Semi-dense 3D Reconstruction"): for every pixel
of the reference view the focus loss is computed on a small patch of every DSI slice
(3×3 px, Gaussian-weighted to favour the centre), depth is the slice of extremal focus,
and the focus value at the peak is the confidence.

**Definition.** The focus value of pixel (x, y) at plane i is the *registry* loss
(:mod:`focus_ros.losses`) of the weighted patch ``w ⊙ crop(slice_i, x, y)``: the k×k
crop of the slice centred on the pixel, zero outside the image, multiplied element-wise
by the patch weights w. :func:`reference_patch_value` evaluates exactly that, one patch
at a time; :class:`PatchFocus` computes the same numbers for every pixel and plane at
once, by two routes that the tests check against the reference:

- *quadratic losses* (variance, mean square, local variance, local mean square, the
  gradient / Laplacian / Hessian magnitudes, DoG, LoG): on a fixed k×k patch the loss is
  a quadratic form ``q^T A q`` of the weighted patch q. A is read off the registry
  function itself by polarization on basis patches, checked on random patches, and
  evaluated for every voxel as Σ_m λ_m (v_m ⋆ slice)² from its eigen-decomposition
  (one zero-padded correlation per eigenvector and slice; no formula is written twice);
- *other patch losses* (MAD, MAV, the four areas, local MAD / MAV, variance of the
  Laplacian / gradient / squared gradient): the registry's own building blocks (its
  smooth |·|, its area primitives, its zero-padded filters turned into k×k matrices)
  applied to all patches at once.

Not available on patches, with the reason: entropy and range (a histogram of k² values),
Moran's I and Geary's C (undefined on the constant patches that fill most of a DSI
slice), mean timestamp (a DSI has no timestamps).

Scores are ``loss.sign · value`` (higher is sharper). The max-vote baseline of EMVS
scores each voxel by its own votes (|votes| with polarity).
"""

from __future__ import annotations

import math

import cv2
import numpy as np
from numba import njit, prange

from focus_ros.losses import LOSSES, LossOptions, get_loss
from focus_ros.losses import filters as loss_filters
from focus_ros.losses.options import DEFAULT_OPTIONS
from focus_ros.losses.smooth import smooth_abs_and_sign
from focus_ros.losses.support import (EXPONENTIAL, GAUSSIAN, HYPERBOLIC, LORENTZIAN,
                                      primitive_and_weight)

QUADRATIC_LOSSES = ("variance", "mean_square", "local_variance", "local_mean_square",
                    "gradient_magnitude", "laplacian_magnitude", "hessian_magnitude",
                    "difference_of_gaussians", "laplacian_of_gaussian")
_AREA_WEIGHTINGS = {"area_exponential": EXPONENTIAL, "area_gaussian": GAUSSIAN,
                    "area_lorentzian": LORENTZIAN, "area_hyperbolic": HYPERBOLIC}
ELEMENTWISE_LOSSES = ("mean_absolute_deviation", "mean_absolute_value", *_AREA_WEIGHTINGS,
                      "local_mean_absolute_deviation", "local_mean_absolute_value",
                      "variance_of_laplacian", "variance_of_gradient", "variance_of_squared_gradient")
#: registry losses that have a patch version, in registry order
PATCH_LOSSES = tuple(name for name in LOSSES if name in QUADRATIC_LOSSES + ELEMENTWISE_LOSSES)
#: registry losses without a patch version, and why
NOT_ON_PATCHES = {
    "entropy": "a histogram of the 9 values of a 3x3 patch is no density estimate",
    "range_exponential": "a histogram of the 9 values of a 3x3 patch is no density estimate",
    "morans_index": "undefined on constant patches, which fill most of a DSI slice",
    "gearys_contiguity_ratio": "undefined on constant patches, which fill most of a DSI slice",
    "mean_timestamp": "a DSI holds no timestamps",
}
MAX_VOTE = "max_vote"


def gaussian_patch_weights(size_px: int = 3, sigma_px: float = 1.0) -> np.ndarray:
    """k×k weights exp(−r² / (2σ²)) (centre weight 1), r the distance (px) from the centre.
    ValueError unless size_px is odd and positive and sigma_px > 0 (σ = inf: all ones)."""
    if not (isinstance(size_px, (int, np.integer)) and size_px >= 1 and size_px % 2 == 1):
        raise ValueError(f"patch size must be an odd number of px >= 1, got {size_px!r}")
    if not sigma_px > 0:
        raise ValueError(f"patch sigma must be > 0 px, got {sigma_px!r}")
    offsets = np.arange(size_px) - size_px // 2
    squared = offsets[:, None] ** 2 + offsets[None, :] ** 2
    return np.exp(-0.5 * squared / sigma_px ** 2)


def crop_patch(image: np.ndarray, x: int, y: int, size_px: int) -> np.ndarray:
    """The size×size crop of ``image`` centred on pixel (x, y), zero outside the image."""
    radius = size_px // 2
    patch = np.zeros((size_px, size_px))
    height, width = image.shape
    for row in range(size_px):
        for column in range(size_px):
            yy, xx = y + row - radius, x + column - radius
            if 0 <= yy < height and 0 <= xx < width:
                patch[row, column] = image[yy, xx]
    return patch


def reference_patch_value(loss_name: str, image: np.ndarray, x: int, y: int, weights: np.ndarray,
                          options: LossOptions | None = None) -> float:
    """The definition: the registry loss of ``weights ⊙ crop(image, x, y)`` (one patch)."""
    patch = weights * crop_patch(image, x, y, weights.shape[0])
    return get_loss(loss_name).evaluate(patch, options)[0]


def check_patch_loss(loss_name: str, use_polarity: bool) -> None:
    """ValueError naming the problem when ``loss_name`` cannot score DSI patches (unknown,
    no patch version, or not meant for this polarity mode, e.g. areas need counts)."""
    if loss_name == MAX_VOTE:
        return
    if loss_name in NOT_ON_PATCHES:
        raise ValueError(f"loss {loss_name!r} has no patch version for depth: {NOT_ON_PATCHES[loss_name]}; "
                         f"choose one of {', '.join(PATCH_LOSSES)}")
    loss = get_loss(loss_name)
    mode = "with" if use_polarity else "without"
    if mode not in loss.polarity_modes:
        need = "event counts (use_polarity off)" if use_polarity else "polarity (use_polarity on)"
        raise ValueError(f"loss {loss_name!r} needs {need} on the DSI")


# ------------------------------------------------------------------------------ kernels


@njit(cache=True, nogil=True)
def _area_rows(patches, weighting, scale_events, out):
    """out[n] = Σ_j (F(q_nj / λ0) − F(0)) with the registry's area primitives."""
    for n in range(patches.shape[0]):
        total = 0.0
        for j in range(patches.shape[1]):
            value = patches[n, j]
            if value != 0.0:
                total += primitive_and_weight(weighting, value / scale_events)[0]
        out[n] = total


def _filter_matrix(apply, size_px: int) -> np.ndarray:
    """The k²×k² matrix of a zero-padded linear filter on k×k images (row-major pixels)."""
    taps = size_px * size_px
    matrix = np.empty((taps, taps))
    for j in range(taps):
        basis = np.zeros(taps)
        basis[j] = 1.0
        matrix[:, j] = np.asarray(apply(basis.reshape(size_px, size_px)), dtype=np.float64).ravel()
    return matrix


def _variance_rows(values: np.ndarray) -> np.ndarray:
    centered = values - values.mean(axis=-1, keepdims=True)
    return (centered * centered).sum(axis=-1) / values.shape[-1]


class PatchFocus:
    """Focus values of one registry loss on the weighted k×k patches of every DSI voxel.

    loss_name: a name of :data:`PATCH_LOSSES`; weights: k×k patch weights (see
    :func:`gaussian_patch_weights`); options: the losses' :class:`LossOptions`.
    ValueError for a loss without a patch version.
    """

    def __init__(self, loss_name: str, weights: np.ndarray, options: LossOptions | None = None):
        if loss_name in NOT_ON_PATCHES:
            raise ValueError(f"loss {loss_name!r} has no patch version for depth: {NOT_ON_PATCHES[loss_name]}")
        self.loss = get_loss(loss_name)
        if loss_name not in PATCH_LOSSES:
            raise ValueError(f"loss {loss_name!r} has no patch version for depth")
        self.weights = np.asarray(weights, dtype=np.float64)
        if self.weights.ndim != 2 or self.weights.shape[0] != self.weights.shape[1] or self.weights.shape[0] % 2 == 0:
            raise ValueError(f"patch weights must be k x k with k odd, got shape {self.weights.shape}")
        self.options = DEFAULT_OPTIONS if options is None else options
        self.size_px = self.weights.shape[0]
        radius = self.size_px // 2
        grid_y, grid_x = np.mgrid[-radius:radius + 1, -radius:radius + 1]
        self.offset_y = grid_y.ravel().astype(np.int64)
        self.offset_x = grid_x.ravel().astype(np.int64)
        self._flat_weights = self.weights.ravel()
        if loss_name in QUADRATIC_LOSSES:
            self._prepare_quadratic()

    @property
    def sign(self) -> float:
        return self.loss.sign

    # ---------------------------------------------------------------- quadratic route

    def _registry_value(self, weighted_patch: np.ndarray) -> float:
        return self.loss.evaluate(weighted_patch.reshape(self.size_px, self.size_px), self.options)[0]

    def _prepare_quadratic(self) -> None:
        """A with f(q) = qᵀ A q from the registry by polarization; then fold in the weights
        and keep the eigen-decomposition. ValueError if the loss is not a quadratic form."""
        taps = self.size_px * self.size_px
        basis = np.eye(taps)
        diagonal = np.array([self._registry_value(basis[j]) for j in range(taps)])
        form = np.diag(diagonal)
        for i in range(taps):
            for j in range(i + 1, taps):
                form[i, j] = form[j, i] = 0.5 * (self._registry_value(basis[i] + basis[j])
                                                 - diagonal[i] - diagonal[j])
        generator = np.random.default_rng(0)
        for _ in range(8):
            q = generator.uniform(0.0, 5.0, taps)
            expected = self._registry_value(q)
            if not math.isclose(q @ form @ q, expected, rel_tol=1e-9, abs_tol=1e-12 * (1 + abs(expected))):
                raise ValueError(f"loss {self.loss.name!r} is not a quadratic form on patches")
        weighted = self._flat_weights[:, None] * form * self._flat_weights[None, :]
        eigenvalues, vectors = np.linalg.eigh(weighted)
        keep = np.abs(eigenvalues) > 1e-14 * max(1.0, np.abs(eigenvalues).max())
        self._eigenvalues = np.ascontiguousarray(eigenvalues[keep])
        self._vectors = np.ascontiguousarray(vectors[:, keep])

    # ---------------------------------------------------------------- evaluation

    def values(self, votes: np.ndarray) -> np.ndarray:
        """Focus values (height, width, planes) float32 — the registry value, not signed —
        of every voxel of ``votes`` (height, width, planes), see the module docstring.
        (Computed slice by slice: a C-contiguous (planes, height, width) array, e.g.
        ``DisparitySpaceImage.slices``, is best passed as ``np.moveaxis(slices, 0, -1)``,
        which is what ``DisparitySpaceImage.votes`` is; the result is such a view.)"""
        slices = np.moveaxis(np.asarray(votes), -1, 0)
        planes, height, width = slices.shape
        out = np.empty((planes, height, width), np.float32)
        size, radius = self.size_px, self.size_px // 2
        if self.loss.name in QUADRATIC_LOSSES:
            # Σ_m λ_m (v_m ⋆ slice)²: one zero-padded correlation per eigenvector
            kernels = [self._vectors[:, m].reshape(size, size) for m in range(len(self._eigenvalues))]
            for plane in range(planes):
                image = slices[plane].astype(np.float64)
                total = np.zeros((height, width))
                for eigenvalue, kernel in zip(self._eigenvalues, kernels):
                    projection = cv2.filter2D(image, cv2.CV_64F, kernel, borderType=cv2.BORDER_CONSTANT)
                    total += eigenvalue * projection * projection
                out[plane] = total
            return np.moveaxis(out, 0, -1)
        padded = np.zeros((height + 2 * radius, width + 2 * radius))
        for plane in range(planes):
            padded[radius:radius + height, radius:radius + width] = slices[plane]
            patches = np.stack([padded[radius + dy:radius + dy + height, radius + dx:radius + dx + width]
                                for dy, dx in zip(self.offset_y, self.offset_x)], axis=-1)
            patches *= self._flat_weights
            out[plane] = self._elementwise(patches.reshape(-1, len(self._flat_weights))).reshape(height, width)
        return np.moveaxis(out, 0, -1)

    def scores(self, votes: np.ndarray) -> np.ndarray:
        """``sign · values``: higher is sharper (float32, height × width × planes)."""
        values = self.values(votes)
        if self.sign < 0:
            np.negative(values, out=values)
        return values

    def _elementwise(self, q: np.ndarray) -> np.ndarray:
        """Values of the non-quadratic patch losses for weighted patches q (M, k²)."""
        name, options, size = self.loss.name, self.options, self.size_px
        taps = q.shape[1]
        sharpness = options.abs_sharpness_per_event
        if name == "mean_absolute_deviation":
            return smooth_abs_and_sign(q - q.mean(axis=1, keepdims=True), sharpness)[0].sum(axis=1) / taps
        if name == "mean_absolute_value":
            return smooth_abs_and_sign(q, sharpness)[0].sum(axis=1) / taps
        if name in _AREA_WEIGHTINGS:
            out = np.empty(len(q))
            _area_rows(np.ascontiguousarray(q), _AREA_WEIGHTINGS[name], options.area_scale_events, out)
            return out
        if name in ("local_mean_absolute_deviation", "local_mean_absolute_value"):
            sigma, truncate = options.local_sigma_px, options.gaussian_truncate_sigmas
            border = loss_filters.gaussian_border_weight((size, size), sigma, truncate).ravel()
            if name == "local_mean_absolute_value":
                centered = q
            else:
                blur = _filter_matrix(lambda image: loss_filters.gaussian_blur(image, sigma, truncate), size)
                centered = q - q @ blur.T
            return smooth_abs_and_sign(centered, sharpness)[0] @ border
        if name == "variance_of_laplacian":
            return _variance_rows(q @ _filter_matrix(loss_filters.laplacian, size).T)
        derivative_x = q @ _filter_matrix(loss_filters.derivative_x, size).T
        derivative_y = q @ _filter_matrix(loss_filters.derivative_y, size).T
        squared = derivative_x * derivative_x + derivative_y * derivative_y
        if name == "variance_of_squared_gradient":
            return _variance_rows(squared)
        if name == "variance_of_gradient":
            epsilon = options.gradient_magnitude_epsilon
            return _variance_rows(np.sqrt(squared + epsilon * epsilon))
        raise ValueError(f"loss {name!r} has no patch version for depth")  # pragma: no cover


def max_vote_scores(votes: np.ndarray) -> np.ndarray:
    """EMVS's baseline: each voxel scored by its own votes (|votes| when they carry polarity)."""
    return np.abs(votes) if (votes < 0).any() else votes


# ------------------------------------------------------------------------------ peaks


#: planes either side of the peak that belong to it when looking for a rival peak along the ray (at least)
RIVAL_SEPARATION_PLANES = 3


@njit(cache=True, nogil=True, parallel=True)
def _peaks(scores, inverse_depths, refine, separation, depth_out, confidence_out, index_out, rival_out, width_out):
    """Rows shared among numba's threads (each row writes its own outputs)."""
    height, width, planes = scores.shape
    rho0 = inverse_depths[0]
    drho = (inverse_depths[planes - 1] - rho0) / (planes - 1)
    for y in prange(height):
        curve = np.empty(planes, np.float64)
        for x in range(width):
            best = 0
            best_score = scores[y, x, 0]
            for i in range(1, planes):
                if scores[y, x, i] > best_score:
                    best_score = scores[y, x, i]
                    best = i
            position = float(best)
            # the parabola through the peak and its neighbours: its curvature (score per plane²; < 0 at a peak)
            curvature = 0.0
            if 0 < best < planes - 1:
                left = scores[y, x, best - 1]
                right = scores[y, x, best + 1]
                curvature = left - 2.0 * best_score + right
                if refine and curvature < 0.0:
                    shift = 0.5 * (left - right) / curvature
                    position += min(0.5, max(-0.5, shift))
            depth_out[y, x] = 1.0 / (rho0 + position * drho)
            for i in range(planes):
                curve[i] = scores[y, x, i]
            # the peak's own hill: ±separation planes, and on as long as the curve keeps falling
            low = max(0, best - separation)
            while low > 0 and curve[low - 1] <= curve[low]:
                low -= 1
            high = min(planes - 1, best + separation)
            while high < planes - 1 and curve[high + 1] <= curve[high]:
                high += 1
            rival = -np.inf
            for i in range(planes):
                if (i < low or i > high) and curve[i] > rival:
                    rival = curve[i]
            median = np.median(curve)
            contrast = best_score - median
            confidence_out[y, x] = contrast
            index_out[y, x] = position
            rival_out[y, x] = (rival - median) / contrast if contrast > 0.0 and rival > median else 0.0
            # the peak's width: where the parabola falls to the curve's median (planes); degenerate (a flat
            # top, a peak at the DSI's end, no contrast): half the hill's extent
            if curvature < 0.0 and contrast > 0.0:
                width_out[y, x] = math.sqrt(contrast / -curvature)
            else:
                width_out[y, x] = 0.5 * (high - low)


#: depth standard deviation of a focus peak (:func:`peak_sigma_planes`): the calibration factors of its three
#: parts, the curve's (per plane of peak width over the square root of the relative contrast), the pose
#: batches' (per plane of their vote displacement) and the floor (planes: the parabola's own interpolation
#: error on the sharpest peaks), chosen on the tune sequences (slider and six_dof, seed 0, 3 s) so that about
#: 68 % of the published points' true depths lie within 1 sigma, overall, by sigma and by confidence
#: (benchmarks/eval_depth_sigma.py; docs/evaluation/depth_sigma.md)
SIGMA_CURVE = 0.21
SIGMA_POSE_BATCH = 0.11
SIGMA_FLOOR_PLANES = 0.12


def peak_sigma_planes(width_planes, relative_contrast, batch_error_planes=0.0, curve_factor: float | None = None,
                      batch_factor: float | None = None, floor_planes: float | None = None):
    """Standard deviation (planes, i.e. in units of the DSI's inverse-depth step) of a focus peak's
    position: three independent parts added in quadrature,

        sigma = sqrt((curve_factor · width / sqrt(relative_contrast))² + (batch_factor · batch)² + floor²)

    - the curve: ``width_planes`` (:func:`focus_peaks`' ``with_width``: the parabola through the peak
      falls to the curve's median that many planes either side; a flat, wide hill is uncertain, a sharp
      one certain) over the square root of ``relative_contrast`` (the peak's contrast over the keyframe's
      median, :func:`focus_ros.depth.semidense.relative_contrast`: more evidence, less noise);
    - the poses: ``batch_error_planes``, the bound on the votes' displacement from sharing one pose per
      batch of events (DisparitySpaceImage.pose_batch_error_px), in planes (px over the px of parallax per
      plane);
    - a floor (planes).

    The factors default to :data:`SIGMA_CURVE`, :data:`SIGMA_POSE_BATCH`, :data:`SIGMA_FLOOR_PLANES`
    (read at each call). Arrays broadcast; float64. NaN where the relative contrast is not > 0."""
    curve_factor = SIGMA_CURVE if curve_factor is None else curve_factor
    batch_factor = SIGMA_POSE_BATCH if batch_factor is None else batch_factor
    floor_planes = SIGMA_FLOOR_PLANES if floor_planes is None else floor_planes
    width = np.asarray(width_planes, np.float64)
    contrast = np.asarray(relative_contrast, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        curve = np.where(contrast > 0.0, curve_factor * width / np.sqrt(np.where(contrast > 0.0, contrast, 1.0)),
                         np.nan)
    return np.sqrt(curve * curve + (batch_factor * np.asarray(batch_error_planes, np.float64)) ** 2
                   + floor_planes * floor_planes)


def focus_peaks(scores: np.ndarray, inverse_depths: np.ndarray, refine: bool = True, with_rival: bool = False,
                rival_separation_planes: int = RIVAL_SEPARATION_PLANES, with_width: bool = False):
    """For scores (H, W, planes): (depth (H, W) float32 m, confidence (H, W) float32, plane position (H, W) float32,
    fractional) of the highest score along every pixel's ray. ``refine``: a parabola through
    the peak and its two neighbours (in plane index, i.e. inverse depth).

    Confidence is the peak's contrast, the score at the peak minus the median score along
    the ray (score units). The paper takes the focus value at the peak; for the losses to
    maximise the two differ by the curve's floor, but for those to minimise (the areas) the
    value at the peak is highest on empty patches, so the contrast is used for all.

    ``with_rival`` adds a fourth array, the rival ratio (H, W) float32 in [0, 1]: the contrast
    of the best score outside the peak's own hill, over the peak's contrast (0: one clear peak;
    near 1: two depths focus about equally well, as on a pixel that only sees other edges' rays
    pass by, or on a repeated texture). The hill: ``rival_separation_planes`` either side of
    the peak (at least :data:`RIVAL_SEPARATION_PLANES`; the estimator widens it to two pixels
    of parallax, since a peak is as wide as the patch's image sweeps), then on as long as the
    curve keeps falling.

    ``with_width`` adds one more array (after the rival ratio, if asked for), the peak's width
    (H, W) float32 in planes: sqrt(contrast / −curvature), the curvature ``left − 2·peak + right``
    of the parabola through the peak and its two neighbours, i.e. how far either side of the peak
    that parabola falls to the curve's median; where there is no such parabola (a flat top, a
    peak at the DSI's end, no contrast) half the extent of the peak's hill. The depth's standard
    deviation follows from it (:func:`peak_sigma_planes`)."""
    height, width, _ = scores.shape
    depth = np.empty((height, width), np.float32)
    confidence = np.empty((height, width), np.float32)
    index = np.empty((height, width), np.float32)
    rival = np.empty((height, width), np.float32)
    peak_width = np.empty((height, width), np.float32)
    rays = np.ascontiguousarray(scores, dtype=np.float32)  # one ray per (y, x), planes contiguous
    _peaks(rays, np.asarray(inverse_depths, np.float64), bool(refine), int(rival_separation_planes), depth,
           confidence, index, rival, peak_width)
    outputs = (depth, confidence, index) + ((rival,) if with_rival else ()) + ((peak_width,) if with_width else ())
    return outputs
