"""Evaluation of the three estimators against ground truth (``focus-ros evaluate``,
``evaluate-depth``, ``evaluate-flow``, ``landscape`` and the demos use it).

Angular velocity (the paper's Table 2), in the order data flows through it:

- ``sequence``: load a sequence with its ground truth (ECD folder, bag, simulator);
- ``ground_truth``: ground-truth ω from the IMU gyro (with a delay) or from mocap
  orientations, interpolated at each window's reference time;
- ``angular_velocity``: the same windows for every (loss, polarity) job, a process pool,
  resumable per-job result files;
- ``alignment``: per-axis sign and time-offset check by cross-correlation;
- ``metrics``: error statistics in deg/s (per axis, mean, std, RMS, % of peak, per-window tail);
- ``assemble`` and ``tables``: the table as Markdown and CSV;
- ``plots`` and ``landscape``: PNG figures (Agg backend); ``timing``: the timing column.

Depth: ``depth`` (every patch loss and max vote on the same DSI against depth maps, and the
errors of published clouds), ``depth_report`` (its table and pictures) and ``depth_set``
(``focus-ros depth``'s fused map over the wide evaluation set, ``evaluate-depth --set``).

Optical flow: ``flow`` (flow ground truth from rotation, or translation with depth, and
endpoint errors).

All three run their jobs through ``grid``: (sequence x loss x setting) jobs on a local process
pool or as Ray tasks (``--ray``), results written by the driver per job, resumable.
"""

__all__ = ["alignment", "angular_velocity", "assemble", "depth", "depth_report", "depth_set", "flow", "grid",
           "ground_truth", "landscape", "metrics", "plots", "sequence", "tables", "timing"]
