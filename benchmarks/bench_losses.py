"""Time every focus loss (value + gradient) on a realistic 240×180 IWE.

The IWE is the boxes_rotation slice (30,000 real events) accumulated unwarped with
bilinear voting at a sub-pixel offset (continuous values, as the engine's IWEs), with
and without polarity; the mean timestamp also gets its timestamp image. One thread
(numba code is single-threaded; OpenCV is set to 1 thread). Prints a Markdown table of
the median µs per ``evaluate`` over several repeats, after a warm-up (JIT, caches).

    .venv/bin/python benchmarks/bench_losses.py [--repeats 200]

Measured pitfall: the losses allocate a few 345 kB temporaries per call; once glibc's
malloc has raised its mmap threshold history differently (e.g. after the histogram
losses ran), fresh pages get mapped per call and page faults on this VM made
variance_of_gradient 4× slower (1,250 vs 330 µs). Fixing the allocator, e.g.
``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456``, removes that.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import cv2
import numpy as np

from focus_ros.losses import LOSSES
from focus_ros.evaluation.timing import median_microseconds

SHARED_DATA = Path(os.environ.get("FOCUS_ROS_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SENSOR_SHAPE = (180, 240)
SUBPIXEL_OFFSET_PX = (0.3, 0.6)


def bilinear_image(x, y, weights) -> np.ndarray:
    """Σ_k weights_k · bilinear(x − x_k, y − y_k) with zero outside the sensor."""
    image = np.zeros((SENSOR_SHAPE[0] + 1, SENSOR_SHAPE[1] + 1))
    column, row = np.floor(x).astype(int), np.floor(y).astype(int)
    fx, fy = x - column, y - row
    for dy, dx, share in [(0, 0, (1 - fx) * (1 - fy)), (0, 1, fx * (1 - fy)),
                          (1, 0, (1 - fx) * fy), (1, 1, fx * fy)]:
        np.add.at(image, (row + dy, column + dx), weights * share)
    return np.ascontiguousarray(image[:SENSOR_SHAPE[0], :SENSOR_SHAPE[1]])


def realistic_images():
    """(count IWE, polarity IWE, timestamp image in s) from the boxes_rotation slice."""
    table = np.loadtxt(SHARED_DATA / "ec_slices" / "boxes_rotation" / "events.txt")
    t, x, y = table[:, 0], table[:, 1] + SUBPIXEL_OFFSET_PX[0], table[:, 2] + SUBPIXEL_OFFSET_PX[1]
    polarity = np.where(table[:, 3] > 0, 1.0, -1.0)
    return (bilinear_image(x, y, np.ones_like(t)), bilinear_image(x, y, polarity),
            bilinear_image(x, y, t - t[0]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per loss and mode")
    args = parser.parse_args()
    cv2.setNumThreads(1)
    counts, signed, timestamps = realistic_images()
    print(f"IWE 240×180 from 30,000 events of boxes_rotation; median of {args.repeats} calls, 1 thread\n")
    print("| loss | paper | w/o polarity [µs] | w/ polarity [µs] |")
    print("|---|---|---:|---:|")
    for loss in LOSSES.values():
        cells = []
        for mode, image in (("without", counts), ("with", signed)):
            if mode not in loss.polarity_modes:
                cells.append("–")
                continue
            stamps = timestamps if loss.uses_timestamps else None
            call = lambda: loss.evaluate(image, timestamp_image=stamps)  # noqa: E731
            cells.append(f"{median_microseconds(call, args.repeats, warmup=5):.0f}")
        print(f"| {loss.title} (`{loss.name}`) | {loss.equation} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
