"""The 22 focus losses (25 registry names) in image space.

For every registered loss:
1. its value equals a direct, unoptimized transcription of the paper's formula written
   here with numpy / scipy (``mode="constant"`` = zero padding), on random images with
   and without polarity and on a real DAVIS240C event image;
2. its gradient image equals central finite differences of the value at corner, edge,
   extreme and random pixels;
3. the registry facts hold, and a sharp image scores better (sign · value) than its
   blurred copy (synthetic edges and real events).

Adding a loss: one reference function in ``REFERENCES`` (and its Table 1 goal in
``GOALS``); the parametrized tests pick it up from the registry.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import ndimage, special

from conftest import slice_folder
from focus_ros.losses import LOSSES, FocusLoss, LossOptions, get_loss

OPTIONS = LossOptions()
SENSOR_SHAPE = (180, 240)


# ----------------------------------------------------------------------------------------
# Reference formulas (paper equation numbers as in focus_ros.losses), written independently.
# ----------------------------------------------------------------------------------------

def smooth_abs(values, options=OPTIONS):
    """log(cosh(k x)) / k, stably as logaddexp(kx, −kx) − log 2."""
    k = options.abs_sharpness_per_event
    return (np.logaddexp(k * values, -k * values) - math.log(2.0)) / k


def blur(image, sigma, truncate=None):
    return ndimage.gaussian_filter(image, sigma, mode="constant",
                                   truncate=OPTIONS.gaussian_truncate_sigmas if truncate is None else truncate)


def sobel_x(image):
    return ndimage.sobel(image, axis=1, mode="constant") / 8.0


def sobel_y(image):
    return ndimage.sobel(image, axis=0, mode="constant") / 8.0


def laplace(image):
    return ndimage.laplace(image, mode="constant")


def quadratic_bspline(distance):
    """Centred quadratic B-spline of unit support width 3 (bins)."""
    distance = np.abs(distance)
    return np.where(distance <= 0.5, 0.75 - distance ** 2,
                    np.where(distance <= 1.5, 0.5 * (1.5 - distance) ** 2, 0.0))


def smoothed_pdf(image, options=OPTIONS):
    """(p at the nodes, node spacing Δz): soft histogram over [min(I,0), max(I,0)],
    B bins, quadratic B-spline binning, then a Gaussian of σ bins (Supp. Eq. (48))."""
    bins = options.histogram_bins
    low, high = min(image.min(), 0.0), max(image.max(), 0.0)
    spacing = (high - low) / bins if high > low else 1.0 / bins
    radius = int(options.gaussian_truncate_sigmas * options.histogram_smoothing_sigma_bins + 0.5)
    nodes = np.arange(-1 - radius, bins + 2 + radius)
    positions = (image.ravel() - low) / spacing
    masses = np.zeros(nodes.size)
    for shift in range(-2, 3):
        node = np.floor(positions).astype(int) + shift
        inside = (node >= nodes[0]) & (node <= nodes[-1])
        np.add.at(masses, node[inside] - nodes[0], quadratic_bspline(node[inside] - positions[inside]))
    masses /= image.size
    smoothed = ndimage.gaussian_filter1d(masses, options.histogram_smoothing_sigma_bins, mode="constant",
                                         truncate=options.gaussian_truncate_sigmas)
    return smoothed / spacing, spacing


def reference_entropy(image):
    density, spacing = smoothed_pdf(image)
    density = density[density > 0]
    return -np.sum(density * np.log(density)) * spacing


def reference_range(image):
    density, spacing = smoothed_pdf(image)
    return np.sum(1.0 - np.exp(-density / OPTIONS.range_density_scale_per_event)) * spacing


def reference_area(primitive):
    def area(image):
        level = image / OPTIONS.area_scale_events
        return np.sum(primitive(level) - primitive(0.0))
    return area


def spatial_weight_kernel(sigma):
    """2-D w̃ of Supp. Eq. (33): sampled Gaussian without its centre, over (1 − G(0))."""
    radius = int(OPTIONS.gaussian_truncate_sigmas * sigma + 0.5)
    offsets = np.arange(-radius, radius + 1)
    gaussian_1d = np.exp(-offsets ** 2 / (2 * sigma ** 2))
    gaussian_2d = np.outer(gaussian_1d, gaussian_1d) / gaussian_1d.sum() ** 2
    centre = gaussian_2d[radius, radius]
    gaussian_2d[radius, radius] = 0.0
    return gaussian_2d / (1.0 - centre)


def pair_weights(shape, sigma):
    """Dense N_p × N_p matrix w_ij = w̃(x_i − x_j) (pairs inside the image only)."""
    kernel = spatial_weight_kernel(sigma)
    radius = kernel.shape[0] // 2
    rows, columns = np.indices(shape)
    dy = rows.ravel()[:, None] - rows.ravel()[None, :]
    dx = columns.ravel()[:, None] - columns.ravel()[None, :]
    near = (np.abs(dy) <= radius) & (np.abs(dx) <= radius)
    weights = np.zeros(dy.shape)
    weights[near] = kernel[dy[near] + radius, dx[near] + radius]
    return weights


def reference_moran(image):
    """Eq. (17) literally: a dense weight matrix on small images, a 2-D correlation on big ones."""
    centred = image.ravel() - image.mean()
    if image.size <= 2000:
        weights = pair_weights(image.shape, OPTIONS.spatial_weight_sigma_px)
        cross, total_weight = centred @ weights @ centred, weights.sum()
    else:
        kernel = spatial_weight_kernel(OPTIONS.spatial_weight_sigma_px)
        cross = np.sum(centred.reshape(image.shape)
                       * ndimage.correlate(centred.reshape(image.shape), kernel, mode="constant"))
        total_weight = ndimage.correlate(np.ones(image.shape), kernel, mode="constant").sum()
    return (cross / total_weight) / (np.sum(centred ** 2) / image.size)


def reference_geary(image):
    """Eq. (18) literally: Σ_ij w_ij (z_i − z_j)² (dense on small images)."""
    values = image.ravel()
    spread = np.sum((values - values.mean()) ** 2) / (image.size - 1)
    if image.size <= 2000:
        weights = pair_weights(image.shape, OPTIONS.spatial_weight_sigma_px)
        differences = np.sum(weights * (values[:, None] - values[None, :]) ** 2)
        total_weight = weights.sum()
    else:
        kernel = spatial_weight_kernel(OPTIONS.spatial_weight_sigma_px)
        differences = 0.0
        radius = kernel.shape[0] // 2
        padded = np.pad(image, radius)
        inside = np.pad(np.ones(image.shape), radius)
        height, width = image.shape
        for dy in range(-radius, radius + 1):
            for dx in range(-radius, radius + 1):
                neighbour = padded[radius + dy:radius + dy + height, radius + dx:radius + dx + width]
                valid = inside[radius + dy:radius + dy + height, radius + dx:radius + dx + width]
                differences += kernel[dy + radius, dx + radius] * np.sum(valid * (image - neighbour) ** 2)
        total_weight = ndimage.correlate(np.ones(image.shape), kernel, mode="constant").sum()
    return 0.5 * (differences / total_weight) / spread


def reference_hessian(image):
    image_xx = ndimage.correlate1d(image, [1.0, -2.0, 1.0], axis=1, mode="constant")
    image_yy = ndimage.correlate1d(image, [1.0, -2.0, 1.0], axis=0, mode="constant")
    image_xy = ndimage.correlate1d(ndimage.correlate1d(image, [-0.5, 0.0, 0.5], axis=1, mode="constant"),
                                   [-0.5, 0.0, 0.5], axis=0, mode="constant")
    return np.sum(image_xx ** 2) + np.sum(image_yy ** 2) + 2 * np.sum(image_xy ** 2)


def reference_log(image):
    sigma, ratio = OPTIONS.log_sigma_px, OPTIONS.log_sigma_ratio
    return np.sum(((blur(image, ratio * sigma) - blur(image, sigma)) / ((ratio - 1) * sigma ** 2)) ** 2)


def reference_mean_timestamp(counts, timestamps):
    return np.var(timestamps / (counts + OPTIONS.mean_timestamp_count_epsilon_events))


REFERENCES = {
    "variance": lambda image: np.var(image),
    "mean_square": lambda image: np.mean(image ** 2),
    "mean_absolute_deviation": lambda image: np.mean(smooth_abs(image - image.mean())),
    "mean_absolute_value": lambda image: np.mean(smooth_abs(image)),
    "entropy": reference_entropy,
    "area_exponential": reference_area(lambda level: 1.0 - np.exp(-level)),
    "area_gaussian": reference_area(special.erf),
    "area_lorentzian": reference_area(lambda level: 2.0 / np.pi * np.arctan(level)),
    "area_hyperbolic": reference_area(np.tanh),
    "range_exponential": reference_range,
    "local_variance": lambda image: np.sum(blur(image ** 2, OPTIONS.local_sigma_px)
                                           - blur(image, OPTIONS.local_sigma_px) ** 2),
    "local_mean_square": lambda image: np.sum(blur(image ** 2, OPTIONS.local_sigma_px)),
    "local_mean_absolute_deviation": lambda image: np.sum(
        blur(smooth_abs(image - blur(image, OPTIONS.local_sigma_px)), OPTIONS.local_sigma_px)),
    "local_mean_absolute_value": lambda image: np.sum(blur(smooth_abs(image), OPTIONS.local_sigma_px)),
    "morans_index": reference_moran,
    "gearys_contiguity_ratio": reference_geary,
    "gradient_magnitude": lambda image: np.sum(sobel_x(image) ** 2 + sobel_y(image) ** 2),
    "laplacian_magnitude": lambda image: np.sum(laplace(image) ** 2),
    "hessian_magnitude": reference_hessian,
    "difference_of_gaussians": lambda image: np.sum(
        (blur(image, OPTIONS.dog_sigma1_px, OPTIONS.dog_truncate_sigmas)
         - blur(image, OPTIONS.dog_sigma_ratio * OPTIONS.dog_sigma1_px, OPTIONS.dog_truncate_sigmas)) ** 2),
    "laplacian_of_gaussian": reference_log,
    "variance_of_laplacian": lambda image: np.var(laplace(image)),
    "variance_of_gradient": lambda image: np.var(np.sqrt(
        sobel_x(image) ** 2 + sobel_y(image) ** 2 + OPTIONS.gradient_magnitude_epsilon ** 2)),
    "variance_of_squared_gradient": lambda image: np.var(sobel_x(image) ** 2 + sobel_y(image) ** 2),
    "mean_timestamp": reference_mean_timestamp,
}

# Table 1's Goal column.
GOALS = {name: "max" for name in REFERENCES}
GOALS.update({name: "min" for name in ("area_exponential", "area_gaussian", "area_lorentzian",
                                       "area_hyperbolic", "morans_index", "mean_timestamp")})

# Finite differences from above at the empty pixels of a count image for: the histogram
# losses (the PDF's layout spans [min(I, 0), max(I, 0)], so the derivative there is
# one-sided) and the losses that reject negative counts (area, mean timestamp).
HISTOGRAM_LOSSES = {"entropy", "range_exponential"}


def one_sided_at(loss: FocusLoss, mode: str, pixel_value: float) -> bool:
    counts_only = "with" not in loss.polarity_modes
    return pixel_value == 0.0 and mode == "without" and (counts_only or loss.name in HISTOGRAM_LOSSES)

CASES = [(name, mode) for name, loss in LOSSES.items() for mode in loss.polarity_modes]
CASE_IDS = [f"{name}-{mode}" for name, mode in CASES]


# ----------------------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------------------

def random_counts(rng, shape):
    """Non-negative IWE-like values: Poisson counts with bilinear-like fractions, many exact zeros."""
    return rng.poisson(0.8, shape) * rng.uniform(0.5, 1.5, shape)


def random_image(rng, shape, mode):
    counts = random_counts(rng, shape)
    return counts if mode == "without" else counts - random_counts(rng, shape)


def timestamps_for(rng, counts, duration_s=0.005):
    """Σ of event times (s) per pixel: each pixel's count times a mean time in the window."""
    return counts * rng.uniform(0.0, duration_s, counts.shape)


def evaluate(loss: FocusLoss, image, timestamps=None):
    return loss.evaluate(image, OPTIONS, timestamp_image=timestamps)


def reference_value(loss: FocusLoss, image, timestamps=None):
    if loss.uses_timestamps:
        return REFERENCES[loss.name](image, timestamps)
    return REFERENCES[loss.name](image)


_REAL_EVENTS = {}


def real_events():
    """(x, y, t seconds, p ±1) of the boxes_rotation slice (30,000 events), read once."""
    if "boxes" not in _REAL_EVENTS:
        table = np.loadtxt(slice_folder("boxes_rotation") / "events.txt")
        _REAL_EVENTS["boxes"] = (table[:, 1].astype(int), table[:, 2].astype(int), table[:, 0],
                                 np.where(table[:, 3] > 0, 1.0, -1.0))
    return _REAL_EVENTS["boxes"]


def real_image(mode):
    """Unwarped image of the real slice (nearest pixel, integer counts), with or without polarity."""
    x, y, _, polarity = real_events()
    image = np.zeros(SENSOR_SHAPE)
    np.add.at(image, (y, x), polarity if mode == "with" else 1.0)
    return image


def real_timestamp_image():
    x, y, t, _ = real_events()
    image = np.zeros(SENSOR_SHAPE)
    np.add.at(image, (y, x), t - t[0])
    return image


# ----------------------------------------------------------------------------------------
# 1. Values against the reference formulas
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,mode", CASES, ids=CASE_IDS)
def test_value_matches_reference_on_random_images(name, mode):
    loss = get_loss(name)
    rng = np.random.default_rng(7)
    for shape in [(24, 32), (31, 17)]:
        image = random_image(rng, shape, mode)
        timestamps = timestamps_for(rng, image) if loss.uses_timestamps else None
        value, gradient, gradient_timestamps = evaluate(loss, image, timestamps)
        expected = reference_value(loss, image, timestamps)
        assert value == pytest.approx(expected, rel=1e-9, abs=1e-12 * abs(expected) + 1e-300)
        assert gradient.shape == image.shape and gradient.dtype == np.float64
        assert (gradient_timestamps is not None) == loss.uses_timestamps


@pytest.mark.parametrize("name,mode", CASES, ids=CASE_IDS)
def test_value_matches_reference_on_real_events(name, mode):
    loss = get_loss(name)
    image = real_image(mode)
    timestamps = real_timestamp_image() if loss.uses_timestamps else None
    value, _, _ = evaluate(loss, image, timestamps)
    assert value == pytest.approx(reference_value(loss, image, timestamps), rel=1e-9)


# ----------------------------------------------------------------------------------------
# 2. Gradients against finite differences
# ----------------------------------------------------------------------------------------

def probe_pixels(image, rng, count=12):
    """Corners, edge midpoints, the arg-min / arg-max and random pixels."""
    height, width = image.shape
    pixels = {(0, 0), (0, width - 1), (height - 1, 0), (height - 1, width - 1),
              (0, width // 2), (height // 2, 0), (height - 1, width // 3), (height // 3, width - 1),
              np.unravel_index(int(np.argmax(image)), image.shape),
              np.unravel_index(int(np.argmin(image)), image.shape)}
    pixels |= {(int(rng.integers(height)), int(rng.integers(width))) for _ in range(count)}
    return sorted((int(y), int(x)) for y, x in pixels)


def finite_difference(function, image, pixel, step, one_sided=False):
    """Derivative of ``function`` w.r.t. image[pixel]: central, or second-order forward."""
    def value_at(offset):
        perturbed = image.copy()
        perturbed[pixel] += offset
        return function(perturbed)
    if one_sided:
        return (-3.0 * value_at(0.0) + 4.0 * value_at(step) - value_at(2.0 * step)) / (2.0 * step)
    return (value_at(step) - value_at(-step)) / (2.0 * step)


@pytest.mark.parametrize("name,mode", CASES, ids=CASE_IDS)
def test_gradient_matches_finite_differences(name, mode):
    loss = get_loss(name)
    rng = np.random.default_rng(11)
    image = random_image(rng, (24, 32), mode)
    timestamps = timestamps_for(rng, image) if loss.uses_timestamps else None
    _, gradient, gradient_timestamps = evaluate(loss, image, timestamps)
    scale = np.abs(gradient).max()
    assert scale > 0
    step = 1e-6 * np.abs(image).max()
    for pixel in probe_pixels(image, rng):
        one_sided = one_sided_at(loss, mode, image[pixel])
        expected = finite_difference(lambda changed: evaluate(loss, changed, timestamps)[0],
                                     image, pixel, step, one_sided)
        assert gradient[pixel] == pytest.approx(expected, abs=1e-5 * scale), f"pixel {pixel}"
    if loss.uses_timestamps:
        scale = np.abs(gradient_timestamps).max()
        step = 1e-6 * np.abs(timestamps).max()
        for pixel in probe_pixels(timestamps, rng):
            expected = finite_difference(lambda changed: evaluate(loss, image, changed)[0],
                                         timestamps, pixel, step)
            assert gradient_timestamps[pixel] == pytest.approx(expected, abs=1e-5 * scale), f"pixel {pixel}"


def test_histogram_gradient_includes_the_layout_of_signed_images():
    """With polarity the PDF's range is [min I, max I]: the extreme pixels carry the layout
    term, checked here at both extremes of a real-sized image."""
    rng = np.random.default_rng(3)
    image = random_image(rng, SENSOR_SHAPE, "with")
    for name in ("entropy", "range_exponential"):
        loss = get_loss(name)
        _, gradient, _ = evaluate(loss, image)
        scale = np.abs(gradient).max()
        for pixel in [np.unravel_index(int(np.argmax(image)), image.shape),
                      np.unravel_index(int(np.argmin(image)), image.shape)]:
            expected = finite_difference(lambda changed: evaluate(loss, changed)[0], image, pixel, 1e-6)
            assert gradient[pixel] == pytest.approx(expected, abs=1e-5 * scale)


# ----------------------------------------------------------------------------------------
# 3. Registry facts and sharpness ranking
# ----------------------------------------------------------------------------------------

def test_registry_holds_every_loss_of_table_1():
    assert list(LOSSES) == list(REFERENCES)
    assert len(LOSSES) == 25
    for name, loss in LOSSES.items():
        assert loss.name == name
        assert loss.goal == GOALS[name]
        assert loss.sign == (1.0 if GOALS[name] == "max" else -1.0)
        assert loss.title and loss.equation.startswith(("Eq.", "Supp.", "Sec."))
        assert set(loss.polarity_modes) <= {"with", "without"} and loss.polarity_modes
    assert get_loss("area_gaussian").title == "Area (Gaussian)"
    assert [name for name, loss in LOSSES.items() if loss.uses_timestamps] == ["mean_timestamp"]
    assert sorted(name for name, loss in LOSSES.items() if loss.degenerate_without_polarity) == [
        "local_mean_absolute_value", "mean_absolute_value"]
    assert LOSSES["mean_timestamp"].polarity_modes == ("without",)
    assert LOSSES["mean_absolute_value"].polarity_modes == ("with",)


def test_unknown_name_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown focus loss 'sharpness'.*variance.*mean_timestamp"):
        get_loss("sharpness")


def test_bad_input_raises_one_line_errors():
    with pytest.raises(ValueError, match="2-D"):
        get_loss("variance").evaluate(np.zeros(10))
    image = np.ones((4, 5))
    image[2, 3] = np.nan
    with pytest.raises(ValueError, match=r"non-finite value nan at \(y=2, x=3\)"):
        get_loss("gradient_magnitude").evaluate(image)
    for name in ("entropy", "range_exponential", "area_exponential", "local_mean_absolute_deviation"):
        with pytest.raises(ValueError, match=r"non-finite value (nan|inf) at \(y=2, x=3\)"), \
                np.errstate(invalid="ignore"):
            get_loss(name).evaluate(image)
        image[2, 3] = np.inf if np.isnan(image[2, 3]) else np.nan
    mean_timestamp = get_loss("mean_timestamp")
    with pytest.raises(ValueError, match="needs timestamp_image"):
        mean_timestamp.evaluate(np.ones((4, 5)))
    with pytest.raises(ValueError, match="shape"):
        mean_timestamp.evaluate(np.ones((4, 5)), timestamp_image=np.ones((5, 4)))
    signed = np.ones((4, 5))
    signed[1, 2] = -1.0
    with pytest.raises(ValueError, match=r"without polarity.*\(y=1, x=2\)"):
        mean_timestamp.evaluate(signed, timestamp_image=np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"area_gaussian: image must count events.*\(y=1, x=2\)"):
        get_loss("area_gaussian").evaluate(signed)
    with pytest.raises(ValueError, match="constant"):
        get_loss("morans_index").evaluate(np.full((6, 6), 2.0))
    with pytest.raises(ValueError, match="histogram_bins"):
        LossOptions(histogram_bins=1)
    with pytest.raises(ValueError, match="local_sigma_px"):
        LossOptions(local_sigma_px=-1.0)


def synthetic_edges(mode):
    """Outlines of two rectangles, 3 events per pixel; with polarity each edge is a
    positive line beside a negative one (a moving edge's leading and trailing sides)."""
    image = np.zeros((60, 80))
    for top, left, bottom, right in [(10, 12, 40, 50), (25, 30, 52, 72)]:
        image[top, left:right] += 3.0
        image[bottom, left:right] += 3.0
        image[top:bottom + 1, left] += 3.0
        image[top:bottom + 1, right] += 3.0
        if mode == "with":
            image[top + 1, left + 1:right - 1] -= 3.0
            image[bottom - 1, left + 1:right - 1] -= 3.0
            image[top + 2:bottom - 1, left + 1] -= 3.0
            image[top + 2:bottom - 1, right - 1] -= 3.0
    return image


def moving_edge_images(aligned: bool):
    """Count and timestamp images of 4,000 events on a vertical edge moving 12 px in 5 ms:
    aligned (motion compensated) they pile up on one column, else they trail over 12."""
    rng = np.random.default_rng(5)
    times = rng.uniform(0.0, 0.005, 4000)
    rows = rng.integers(10, 50, times.size)
    columns = 30 + (0 if aligned else np.floor(times / 0.005 * 12).astype(int))
    counts, stamps = np.zeros((60, 80)), np.zeros((60, 80))
    np.add.at(counts, (rows, columns), 1.0)
    np.add.at(stamps, (rows, columns), times)
    return counts, stamps


@pytest.mark.parametrize("name,mode", CASES, ids=CASE_IDS)
def test_sharp_image_scores_better_than_blurred(name, mode):
    """Synthetic edges and the real slice's IWE drawn with the paper's Gaussian kernel
    (ε = 1 px, Sec. 3.1: continuous values, as the engine's IWEs) against copies blurred
    by 1.5 px. The mean timestamp is checked on an aligned vs a trailing moving edge: a
    blur is no proxy for misalignment there (it averages the timestamps), and ranking the
    real slice needs a warp."""
    loss = get_loss(name)
    if loss.uses_timestamps:
        pairs = [(moving_edge_images(aligned=True), moving_edge_images(aligned=False))]
    else:
        real = blur(real_image(mode), 1.0)
        pairs = [((image, None), (blur(image, 1.5), None)) for image in (synthetic_edges(mode), real)]
    for (sharp_image, sharp_stamps), (blurred_image, blurred_stamps) in pairs:
        sharp_score = loss.sign * evaluate(loss, sharp_image, sharp_stamps)[0]
        blurred_score = loss.sign * evaluate(loss, blurred_image, blurred_stamps)[0]
        assert sharp_score > blurred_score, f"{name} ({mode}): sharp {sharp_score} <= blurred {blurred_score}"


def test_mean_absolute_value_is_the_event_count_without_polarity():
    """Why MAV is marked degenerate without polarity: on an integer count image it is the
    mean count less log(2)/k per occupied pixel (smooth |n| = n − log 2 / k for n ≥ 1)."""
    image = real_image("without")
    value = get_loss("mean_absolute_value").evaluate(image)[0]
    occupied = np.count_nonzero(image) / image.size
    expected = image.mean() - math.log(2.0) / OPTIONS.abs_sharpness_per_event * occupied
    assert value == pytest.approx(expected, rel=1e-9)


def test_spatial_flags_follow_table_1_and_set_the_default_blur():
    """Table 1's "Spatial?" column; spatial losses see the paper's 1-px smooth IWE by default."""
    from focus_ros.camera import Calibration
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings

    table_1_spatial = {"local_variance", "local_mean_square", "local_mean_absolute_deviation",
                       "local_mean_absolute_value", "morans_index", "gearys_contiguity_ratio",
                       "gradient_magnitude", "laplacian_magnitude", "hessian_magnitude",
                       "difference_of_gaussians", "laplacian_of_gaussian", "variance_of_laplacian",
                       "variance_of_gradient", "variance_of_squared_gradient"}
    assert {name for name, loss in LOSSES.items() if loss.spatial} == table_1_spatial
    calibration = Calibration.davis240c()
    blur = {name: AngularVelocityEstimator(calibration, AngularVelocitySettings(loss=name)).objective.blur_sigma_px
            for name in ("variance", "gradient_magnitude")}
    assert blur == {"variance": 0.0, "gradient_magnitude": 1.0}
    explicit = AngularVelocityEstimator(calibration, AngularVelocitySettings(loss="variance", blur_sigma_px=1.5))
    assert explicit.objective.blur_sigma_px == 1.5
