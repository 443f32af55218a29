"""The estimator in the calling thread, with :class:`~focus_ros.runtime.EstimatorProcess`'s interface.

For comparison with the process and for callers that want no process (a node's
``estimator_process: false``): same code, same inputs, identical estimates (tested).
"""

from __future__ import annotations

from collections import deque

from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.runtime.kinds import WorkerResult, configured_estimator, forget_warm_start, kind_named, run_job


class InlineEstimator:
    """The estimator in the calling thread, with :class:`~focus_ros.runtime.EstimatorProcess`'s interface.

    Blocking use: ``estimate(events, extra=...)``. The pipelined interface holds one job:
    ``submit`` queues it, ``collect`` estimates it there and then (in the collecting thread).
    """

    pid = None
    restarts = 0

    def __init__(self, calibration: Calibration, settings, *, kind: str = "angular_velocity"):
        self.kind = kind_named(kind)
        self.estimator = configured_estimator(self.kind, None, calibration, settings, keep_warm_start=False)
        self._queue: deque = deque()  # (events, images, extra) of the submitted job, estimated by collect()

    def configure(self, calibration: Calibration, settings, keep_warm_start: bool = True) -> None:
        """New calibration/settings; the warm start carries over when keep_warm_start."""
        self.estimator = configured_estimator(self.kind, self.estimator, calibration, settings, keep_warm_start)

    def reset(self) -> None:
        forget_warm_start(self.estimator)

    def estimate(self, events: Events, images: bool = False, extra=None) -> WorkerResult:
        return run_job(self.kind, self.estimator, events, extra, images)

    # ----------------------------------------------------------------- the pipelined interface
    @property
    def in_flight(self) -> int:
        return len(self._queue)

    def can_submit(self) -> bool:
        return not self._queue

    def fits(self, count: int) -> bool:
        return True

    def alive(self) -> bool:
        return True

    def ended(self) -> None:
        """Never ended: the calling thread is the estimator (EstimatorProcess.ended's counterpart)."""
        return None

    def submit(self, events: Events, images: bool = False, skippable: bool = False, extra=None) -> int:
        self._queue.append((events, images, extra))
        return 0

    def collect(self, timeout_s: float | None = None) -> WorkerResult | None:
        if not self._queue:
            return None
        events, images, extra = self._queue[0]
        try:
            return self.estimate(events, images, extra)
        finally:
            self._queue.popleft()

    def restart(self) -> None:
        pass

    def close(self, timeout_s: float = 0.0) -> None:
        pass
