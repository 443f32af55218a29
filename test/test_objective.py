"""The full chain warp -> IWE -> loss: adjoint gradient w.r.t. omega against central
finite differences on real events (boxes_rotation), for every registered loss."""

import numpy as np
import pytest

from conftest import slice_folder
from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.losses import LOSSES, get_loss
from focus_ros.iwe import accumulate, blur_image, gaussian_blur_kernel
from focus_ros.objective import Objective, supported_polarity_modes
from focus_ros.warps import ROTATION_EXACT, warp_events

#: a point away from the optimum (about 3 rad/s from it), where the gradient is not small
OMEGA = np.array([1.0, 2.0, -1.0])


def load_slice(name: str) -> tuple[Events, Calibration]:
    folder = slice_folder(name)
    table = np.loadtxt(folder / "events.txt")
    events = Events.from_arrays(table[:, 1], table[:, 2], np.round(table[:, 0] * 1e9).astype(np.int64),
                                table[:, 3])
    return events, Calibration.from_ecd_calib(folder / "calib.txt")


@pytest.fixture(scope="module")
def boxes():
    return load_slice("boxes_rotation")


def _cases():
    for name in LOSSES:
        loss = get_loss(name)
        for polarity in (True, False):
            if ("with" if polarity else "without") not in supported_polarity_modes(loss) and not loss.uses_timestamps:
                continue
            for kernel in ("bilinear", "gaussian"):
                yield pytest.param(name, kernel, polarity, id=f"{name}-{kernel}-{'pol' if polarity else 'nopol'}")


def central_differences(objective, omega, step):
    gradient = np.zeros(3)
    for axis in range(3):
        shift = np.zeros(3)
        shift[axis] = step
        gradient[axis] = (objective.value(omega + shift) - objective.value(omega - shift)) / (2 * step)
    return gradient


@pytest.mark.parametrize("name, kernel, polarity", list(_cases()))
def test_adjoint_gradient_matches_finite_differences(boxes, name, kernel, polarity):
    events, calibration = boxes
    objective = Objective(calibration, get_loss(name), kernel=kernel, use_polarity=polarity)
    objective.set_events(events, int(events.t[0]))
    analytic = objective.evaluate(OMEGA).gradient
    # Step 1e-6 rad/s moves an event by at most ~200 px * 1e-6 * 5.5 ms ~ 1e-6 px. Two
    # non-smooth places exist: events dropped when they cross the image border (a jump of
    # one event) and, for the bilinear kernel, pixel lines (a kink). With 1e-6 px about
    # 3e-4 events are expected to cross the border and ~0.1 event a pixel line (whose kink
    # moves the quotient by ~1e-3 of the norm for the sharpest loss, mean timestamp, at
    # 1e-5); roundoff (values ~1e-16 relative, divided by 2e-6) is < 1e-9 of the norm.
    # Tolerances: 1e-4 (Gaussian, smooth) and 1e-3 (bilinear) of the gradient norm; a
    # wrong Jacobian, sign or missing term is off by O(1).
    # (Steps of 1e-3 rad/s are dominated by border crossings: errors of several %.)
    numeric = central_differences(objective, OMEGA, 1e-6)
    tolerance = 1e-4 if kernel == "gaussian" else 1e-3
    scale = np.linalg.norm(numeric)
    assert scale > 0
    assert np.linalg.norm(analytic - numeric) <= tolerance * scale, (analytic, numeric)


def test_flow_warp_gradient(boxes):
    events, calibration = boxes
    objective = Objective(calibration, get_loss("variance"), warp="flow", kernel="gaussian")
    objective.set_events(events, int(events.t[0]))
    velocity = np.array([300.0, -200.0])
    analytic = objective.evaluate(velocity).gradient
    numeric = np.array([(objective.value(velocity + s) - objective.value(velocity - s)) / 2e-2
                        for s in np.eye(2) * 1e-2])
    assert np.linalg.norm(analytic - numeric) <= 1e-4 * np.linalg.norm(numeric)


def test_events_outside_the_sensor_are_rejected():
    calibration = Calibration.davis240c()
    objective = Objective(calibration, get_loss("variance"))
    events = Events.from_arrays([10, 300], [10, 20], [0, 1000], [1, 0])
    with pytest.raises(ValueError, match="event 1 at pixel \\(300, 20\\)"):
        objective.set_events(events, 0)


def test_dropped_events_are_counted(boxes):
    events, calibration = boxes
    objective = Objective(calibration, get_loss("variance"))
    objective.set_events(events, int(events.t[0]))
    evaluation = objective.evaluate(np.zeros(3), with_gradient=False)
    lut = calibration.bearing_lut()[events.y, events.x]
    x = calibration.fx * lut[:, 0] + calibration.cx
    y = calibration.fy * lut[:, 1] + calibration.cy
    outside = ~((x >= 0) & (x <= 239) & (y >= 0) & (y <= 179))
    assert evaluation.dropped == int(outside.sum())
    assert evaluation.kept + evaluation.dropped == len(events)


@pytest.mark.parametrize("warp, omega", [("small_angle", OMEGA), ("exact", np.array([2.0, -3.0, 95.0]))])
def test_other_warp_paths_gradient(boxes, warp, omega):
    """Small-angle warp, and the exact warp beyond the series range (|omega| dt up to
    0.52 rad: the per-event trigonometric path), against central differences."""
    events, calibration = boxes
    objective = Objective(calibration, get_loss("variance"), warp=warp, kernel="gaussian", use_polarity=False)
    objective.set_events(events, int(events.t[0]))
    if warp == "exact":
        assert np.linalg.norm(omega) * objective.dt_bound > 0.5
    analytic = objective.evaluate(omega).gradient
    numeric = central_differences(objective, omega, 1e-6)
    assert np.linalg.norm(analytic - numeric) <= 1e-4 * np.linalg.norm(numeric), (analytic, numeric)


@pytest.mark.parametrize("name", ["area_exponential", "area_hyperbolic"])
def test_area_with_polarity_is_the_sum_over_positive_and_negative_count_images(boxes, name):
    """Paper, footnote of the area (Supp. Sec. B): with polarity, the area is applied to the
    images of positive and negative events separately, and the results are added."""
    events, calibration = boxes
    loss = get_loss(name)
    objective = Objective(calibration, loss, use_polarity=True)
    assert objective.split_polarity
    objective.set_events(events, int(events.t[0]))
    points, _ = warp_events(ROTATION_EXACT, calibration.bearing_lut()[events.y, events.x],
                            (events.t - events.t[0]) / 1e9, OMEGA, calibration.fx, calibration.fy,
                            calibration.cx, calibration.cy)
    positive = accumulate(points[events.p > 0], calibration.width, calibration.height).image
    negative = accumulate(points[events.p < 0], calibration.width, calibration.height).image
    expected = loss.evaluate(positive)[0] + loss.evaluate(negative)[0]
    assert objective.value(OMEGA) == pytest.approx(expected, rel=1e-12)
    image = objective.image(OMEGA)
    assert np.allclose(image.polarity_images[0], positive, atol=1e-12)
    assert np.allclose(image.polarity_images[1], negative, atol=1e-12)
    assert np.allclose(image.image, positive - negative, atol=1e-12)
    # the split differs from the counts of all events (the loss without polarity)
    unsplit = Objective(calibration, loss, use_polarity=False)
    unsplit.set_events(events, int(events.t[0]))
    assert abs(unsplit.value(OMEGA) - expected) > 1e-3 * abs(expected)


def test_polarity_modes_of_the_engine():
    assert supported_polarity_modes(get_loss("area_gaussian")) == ("with", "without")
    assert supported_polarity_modes(get_loss("variance")) == ("with", "without")
    assert supported_polarity_modes(get_loss("mean_absolute_value")) == ("with",)
    assert supported_polarity_modes(get_loss("mean_timestamp")) == ("without",)


# ---------------------------------------------------------------- IWE blur (blur_sigma_px)

BLUR_CASES = [("variance", False, 1.0), ("variance", True, 0.7), ("entropy", False, 1.0),
              ("area_exponential", True, 1.0), ("morans_index", False, 1.0), ("laplacian_magnitude", True, 1.0),
              ("local_mean_absolute_deviation", False, 1.5), ("mean_timestamp", False, 1.0)]


@pytest.mark.parametrize("name, polarity, blur", BLUR_CASES,
                         ids=[f"{n}-{'pol' if p else 'nopol'}-blur{b:g}" for n, p, b in BLUR_CASES])
def test_blurred_objective_gradient_matches_finite_differences(boxes, name, polarity, blur):
    """Bilinear voting, Gaussian blur of the IWE, loss, and back through the blur (the
    adjoint of the zero-padded symmetric blur is the blur): against central differences,
    same step and tolerance as the bilinear rows above."""
    events, calibration = boxes
    objective = Objective(calibration, get_loss(name), use_polarity=polarity, blur_sigma_px=blur)
    objective.set_events(events, int(events.t[0]))
    analytic = objective.evaluate(OMEGA).gradient
    numeric = central_differences(objective, OMEGA, 1e-6)
    scale = np.linalg.norm(numeric)
    assert scale > 0
    assert np.linalg.norm(analytic - numeric) <= 1e-3 * scale, (analytic, numeric)


def reference_blur(image: np.ndarray, sigma: float) -> np.ndarray:
    """Direct 2-D sum: out(y, x) = sum over pixels (v, u) within 2 sigma of (y, x) (the
    documented truncation) of image(v, u) g(y - v) g(x - u), g the unit-sum Gaussian taps;
    outside pixels are 0."""
    radius = int(np.ceil(2 * sigma))
    offsets = np.arange(-radius, radius + 1)
    taps = np.exp(-offsets ** 2 / (2 * sigma ** 2))
    taps /= taps.sum()
    height, width = image.shape
    padded = np.zeros((height + 2 * radius, width + 2 * radius))
    padded[radius:radius + height, radius:radius + width] = image
    out = np.zeros_like(image)
    for i, dy in enumerate(offsets):
        for j, dx in enumerate(offsets):
            out += taps[i] * taps[j] * padded[radius + dy:radius + dy + height, radius + dx:radius + dx + width]
    return out


@pytest.mark.parametrize("polarity", [False, True])
def test_blurred_iwe_is_the_bilinear_iwe_convolved_with_a_gaussian(boxes, polarity):
    events, calibration = boxes
    points, _ = warp_events(ROTATION_EXACT, calibration.bearing_lut()[events.y, events.x],
                            (events.t - events.t[0]) / 1e9, OMEGA, calibration.fx, calibration.fy,
                            calibration.cx, calibration.cy)
    weights = events.p.astype(np.float64) if polarity else None
    bilinear = accumulate(points, calibration.width, calibration.height, weights).image
    objective = Objective(calibration, get_loss("variance"), use_polarity=polarity, blur_sigma_px=1.0)
    objective.set_events(events, int(events.t[0]))
    image = objective.image(OMEGA).image
    assert np.allclose(image, reference_blur(bilinear, 1.0), atol=1e-12)
    assert not np.allclose(image, bilinear, atol=1e-3)
    # the loss sees the blurred image
    assert objective.value(OMEGA) == pytest.approx(get_loss("variance").evaluate(image)[0], rel=1e-12)


def test_blur_is_self_adjoint_with_zero_padding():
    rng = np.random.default_rng(0)
    first, second = rng.random((2, 180, 240))
    kernel = gaussian_blur_kernel(1.0)
    blurred_first = blur_image(first, kernel, np.empty_like(first))
    blurred_second = blur_image(second, kernel, np.empty_like(second))
    assert np.sum(blurred_first * second) == pytest.approx(np.sum(first * blurred_second), rel=1e-13)
    assert np.allclose(blurred_first, reference_blur(first, 1.0), atol=1e-13)


def test_blur_kernel_and_bad_sigma():
    kernel = gaussian_blur_kernel(1.0)
    assert len(kernel) == 5 and kernel.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.allclose(kernel, kernel[::-1]) and kernel[2] == kernel.max()
    assert kernel[3] / kernel[2] == pytest.approx(np.exp(-0.5))
    assert kernel[4] / kernel[2] == pytest.approx(np.exp(-2.0))
    assert len(gaussian_blur_kernel(1.5)) == 7
    with pytest.raises(ValueError, match="blur sigma"):
        gaussian_blur_kernel(0.0)
    with pytest.raises(ValueError, match="IWE blur sigma must be >= 0"):
        Objective(Calibration.davis240c(), get_loss("variance"), blur_sigma_px=-1.0)
    with pytest.raises(ValueError, match="IWE blur sigma must be >= 0"):
        Objective(Calibration.davis240c(), get_loss("variance"), blur_sigma_px=float("nan"))


@pytest.mark.parametrize("name, polarity, blur", [("area_exponential", True, 0.0), ("variance", True, 1.0),
                                                  ("mean_timestamp", False, 1.0)])
def test_loss_step_alone_gives_the_objective_value(boxes, name, polarity, blur):
    """``evaluate_loss`` (the loss step the evaluation times) on the planes of the last
    evaluation: the same value as the objective, polarity split and blur included."""
    events, calibration = boxes
    objective = Objective(calibration, get_loss(name), use_polarity=polarity, blur_sigma_px=blur)
    objective.set_events(events, int(events.t[0]))
    value = objective.evaluate(OMEGA, with_gradient=False).value
    assert objective.evaluate_loss() == pytest.approx(value, rel=1e-12)
    assert objective.evaluate_loss() != pytest.approx(objective.value(np.zeros(3)), rel=1e-6)
