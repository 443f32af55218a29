"""Evaluation of the angular-velocity estimator against ground truth: the paper's Table 2.

Modules, in the order data flows through them:

- ``sequence``: load a sequence with its ground truth (ECD folder, bag, simulator);
- ``ground_truth``: ground-truth ω from the IMU gyro (with a delay) or from mocap
  orientations, interpolated at each window's reference time;
- ``runner``: the same windows for every (loss, polarity) job, a process pool,
  resumable per-job result files;
- ``alignment``: per-axis sign and time-offset check by cross-correlation;
- ``metrics``: error statistics in deg/s (per axis, mean, std, RMS, % of peak);
- ``tables``: the table as Markdown and CSV;
- ``plots`` and ``landscape``: PNG figures (Agg backend).
"""
