"""Depth from events and known camera poses: the pieces of the depth estimator.

One keyframe flows through them in this order: ``dsi`` (the disparity space image: events
back-projected into the depth planes of a reference view), ``focus`` (focus curves of a
patch loss along every pixel's ray, their peaks, the confidence map; EMVS's max-vote
baseline), ``semidense`` (the selection rules: adaptive threshold on the relative focus contrast, median
filter, radius outlier removal, back-projection to 3-D points); then ``fusion`` merges the
keyframes' clouds into one bounded world-frame map where keyframes agree. Around them: ``ply``
(point clouds as PLY files), ``pictures`` (depth and confidence maps as images, with their
scales) and ``synthetic`` (events made from geometry, for tests and benchmarks).

The estimator that ties them together, and its settings, is
:mod:`focus_ros.estimators.depth`. Where things go: a new focus measure on patches is a
registry loss plus its patch form in ``focus`` (see :mod:`focus_ros.losses`); a new way to
pick the semi-dense pixels goes in ``semidense``. Conventions: docs/design.md, section 5.

The submodules are compiled with numba and imported on demand (``from focus_ros.depth.dsi
import DisparitySpaceImage``); this package imports none of them.
"""

__all__ = ["dsi", "focus", "semidense", "fusion", "ply", "pictures", "synthetic"]
