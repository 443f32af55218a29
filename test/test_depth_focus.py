"""Focus on DSI patches: every patch loss equals the registry loss of the cropped, weighted
slice; peaks and their refinement; losses without a patch version are refused with the reason."""

import numpy as np
import pytest

from focus_ros.depth.focus import (NOT_ON_PATCHES, PATCH_LOSSES, PatchFocus, check_patch_loss, crop_patch,
                                   focus_peaks, gaussian_patch_weights, max_vote_scores, reference_patch_value)
from focus_ros.losses import LOSSES, LossOptions, get_loss


def _random_dsi(signed: bool, seed: int = 0, shape=(9, 11, 6)) -> np.ndarray:
    """Sparse bilinear-like votes: zero on most voxels, fractional counts elsewhere."""
    generator = np.random.default_rng(seed)
    votes = generator.gamma(0.6, 1.5, shape) * (generator.random(shape) < 0.5)
    if signed:
        votes *= generator.choice([-1.0, 1.0], shape)
    return votes.astype(np.float32)


def test_every_loss_is_either_on_patches_or_refused_with_a_reason():
    assert set(PATCH_LOSSES) | set(NOT_ON_PATCHES) == set(LOSSES)
    assert not set(PATCH_LOSSES) & set(NOT_ON_PATCHES)
    for name, reason in NOT_ON_PATCHES.items():
        with pytest.raises(ValueError, match="no patch version"):
            check_patch_loss(name, False)
        with pytest.raises(ValueError, match="no patch version"):
            PatchFocus(name, gaussian_patch_weights())
    with pytest.raises(ValueError, match="needs polarity"):
        check_patch_loss("mean_absolute_value", False)
    with pytest.raises(ValueError, match="needs event counts"):
        check_patch_loss("area_exponential", True)


@pytest.mark.parametrize("name", PATCH_LOSSES)
@pytest.mark.parametrize("size, sigma", [(3, 1.0), (5, 1.5)])
def test_patch_loss_equals_registry_loss_of_the_cropped_weighted_slice(name, size, sigma):
    signed = "with" in get_loss(name).polarity_modes and "without" not in get_loss(name).polarity_modes
    votes = _random_dsi(signed, seed=size)
    weights = gaussian_patch_weights(size, sigma)
    options = LossOptions(local_sigma_px=0.8)
    values = PatchFocus(name, weights, options).values(votes)
    height, width, planes = votes.shape
    for y, x in [(0, 0), (4, 5), (8, 10), (0, 7), (5, 0), (2, 3)]:  # corners, borders, inside
        for plane in range(planes):
            image = votes[:, :, plane].astype(np.float64)
            expected = reference_patch_value(name, image, x, y, weights, options)
            assert values[y, x, plane] == pytest.approx(expected, rel=2e-5, abs=1e-6 * (1 + abs(expected))), \
                (name, x, y, plane)


def test_crop_and_weights():
    image = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(crop_patch(image, 0, 0, 3), [[0, 0, 0], [0, 0, 1], [0, 4, 5]])
    weights = gaussian_patch_weights(3, 1.0)
    assert weights[1, 1] == 1.0 and weights[0, 0] == pytest.approx(np.exp(-1.0))
    with pytest.raises(ValueError, match="odd"):
        gaussian_patch_weights(4, 1.0)


def test_peaks_parabola_refinement_and_max_vote():
    inverse_depths = np.linspace(2.0, 0.5, 31)
    # a parabola in plane index peaking at 12.3: the refinement recovers it exactly
    index = np.arange(31.0)
    scores = (10.0 - (index - 12.3) ** 2).astype(np.float32).reshape(1, 1, 31)
    depth, confidence, position = focus_peaks(scores, inverse_depths)
    assert position[0, 0] == pytest.approx(12.3, abs=1e-4)
    rho = 2.0 + 12.3 * (0.5 - 2.0) / 30
    assert depth[0, 0] == pytest.approx(1 / rho, rel=1e-5)
    # confidence: the peak's contrast, best sample minus the curve's median
    assert confidence[0, 0] == pytest.approx(10.0 - 0.3 ** 2 - np.median(scores), rel=1e-6)
    depth, _, position = focus_peaks(scores, inverse_depths, refine=False)
    assert position[0, 0] == 12.0
    votes = np.zeros((1, 1, 31), np.float32)
    votes[0, 0, 7] = -3.0
    votes[0, 0, 3] = 2.0
    assert np.argmax(max_vote_scores(votes)[0, 0]) == 7
