"""Estimate the angular velocity (rad/s) of a rotating event camera over a whole ECD sequence.

Reads an Event Camera Dataset folder (events.txt + calib.txt) as a stream, cuts it into
windows of N events, maximises the chosen focus loss in each window (warm-started from the
previous window) and writes a CSV: t_ref (s), wx, wy, wz (rad/s), iterations, evaluations,
score, degenerate.
"""

from __future__ import annotations

import csv
import math
import os
import sys
from pathlib import Path
from typing import Iterator

import numpy as np

from focus_ros.cli import UserError
from focus_ros.events import NANOSECONDS_PER_SECOND, Events

CSV_COLUMNS = ("t_ref", "wx", "wy", "wz", "iterations", "evaluations", "score", "degenerate")

#: bytes read per chunk by the fallback text reader
_CHUNK_BYTES = 4 << 20


def _read_text_event_chunks(path: Path, chunk_bytes: int = _CHUNK_BYTES) -> Iterator[Events]:
    """Minimal streaming reader of ECD ``events.txt`` (``t x y p`` per line, t in s).

    Used only while focus_ros.sources.ecd is unavailable. Memory is bounded by the chunk
    size. Raises ValueError naming the file and line of the first malformed line.
    """
    line_number = 0
    with open(path, "rb") as stream:
        remainder = b""
        while True:
            block = stream.read(chunk_bytes)
            data = remainder + block
            if not block:
                if not data.strip():
                    return
                remainder = b""
            else:
                cut = data.rfind(b"\n")
                if cut < 0:
                    remainder = data
                    continue
                data, remainder = data[:cut + 1], data[cut + 1:]
            lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
            try:
                values = np.array(data.split(), dtype=np.float64)
            except ValueError:
                values = None
            if values is None or values.size != 4 * lines:
                # slow path, only on irregular input: find the offending line (blank lines are allowed)
                for offset, line in enumerate(data.splitlines(), start=1):
                    if line.strip() and len(line.split()) != 4:
                        raise ValueError(f"{path}:{line_number + offset}: expected 't x y p', "
                                         f"got {line.decode(errors='replace')!r}")
                    if line.strip():
                        try:
                            [float(word) for word in line.split()]
                        except ValueError:
                            raise ValueError(f"{path}:{line_number + offset}: not numbers: "
                                             f"{line.decode(errors='replace')!r}") from None
                values = np.array(data.split(), dtype=np.float64)
            table = values.reshape(-1, 4)
            if len(table):
                yield Events.from_arrays(table[:, 1], table[:, 2],
                                         np.round(table[:, 0] * NANOSECONDS_PER_SECOND).astype(np.int64),
                                         table[:, 3])
            line_number += lines
            if not block:
                return


def iter_event_chunks(path: Path, chunk_events: int = 200_000) -> Iterator[Events]:
    """Stream events from an ECD events.txt: focus_ros.sources.ecd when present, else the
    minimal reader above."""
    try:
        from focus_ros.sources.ecd import iter_event_chunks as ecd_chunks
    except ImportError:
        return _read_text_event_chunks(path)
    return ecd_chunks(path, chunk_events)


def add_arguments(parser) -> None:
    parser.add_argument("sequence", help="ECD folder with events.txt and calib.txt, or an events.txt file")
    parser.add_argument("--calib", help="calib.txt (fx fy cx cy k1 k2 p1 p2 k3) or ROS camera YAML; "
                                        "default: calib.txt beside events.txt")
    parser.add_argument("--width", type=int, default=240, help="sensor width for calib.txt (px, default 240)")
    parser.add_argument("--height", type=int, default=180, help="sensor height for calib.txt (px, default 180)")
    parser.add_argument("-o", "--output", default="angular_velocity.csv", help="output CSV path")
    parser.add_argument("--window-events", type=int, default=30_000, help="events per window (default 30000)")
    parser.add_argument("--stride", type=int, default=None, help="events between window starts "
                                                                 "(default: the window size)")
    parser.add_argument("--loss", default="variance", help="focus loss name (default variance)")
    parser.add_argument("--polarity", action="store_true", help="use polarity in the IWE (b_k = p_k)")
    parser.add_argument("--kernel", choices=("bilinear", "gaussian"), default="bilinear")
    parser.add_argument("--sigma", type=float, default=1.0, help="Gaussian kernel sigma (px)")
    parser.add_argument("--t-ref", choices=("start", "middle", "end"), default="middle",
                        help="reference time of each window")
    parser.add_argument("--warp", choices=("exact", "small_angle"), default="exact")
    parser.add_argument("--optimizer", choices=("cg", "lbfgs"), default="cg")
    parser.add_argument("--max-windows", type=int, default=None, help="stop after this many windows")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _resolve_inputs(args) -> tuple[Path, Path]:
    sequence = Path(args.sequence)
    if sequence.is_dir():
        events_path = sequence / "events.txt"
        if not events_path.is_file():
            raise UserError(f"no events.txt in folder {sequence}")
    elif sequence.is_file():
        events_path = sequence
    else:
        raise UserError(f"sequence not found: {sequence}")
    calib_path = Path(args.calib) if args.calib else events_path.parent / "calib.txt"
    if not calib_path.is_file():
        raise UserError(f"calibration not found: {calib_path} (give --calib)")
    return events_path, calib_path


def _load_calibration(path: Path, width: int, height: int):
    from focus_ros.camera import Calibration

    if path.suffix.lower() in (".yaml", ".yml"):
        return Calibration.from_yaml(path)
    return Calibration.from_ecd_calib(path, width=width, height=height)


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.estimators.angular_velocity import (AngularVelocityEstimator, AngularVelocitySettings,
                                                        degeneracy_of)
    from focus_ros.losses import LOSSES, get_loss
    from focus_ros.windows import count_windows

    events_path, calib_path = _resolve_inputs(args)
    if args.loss not in LOSSES:
        raise UserError(f"unknown loss '{args.loss}': choose one of {', '.join(LOSSES)}")
    reason = degeneracy_of(get_loss(args.loss), args.polarity)
    if reason:
        raise UserError(reason + "; add --polarity")
    if args.window_events <= 0:
        raise UserError(f"--window-events must be positive, got {args.window_events}")
    if args.stride is not None and args.stride <= 0:
        raise UserError(f"--stride must be positive, got {args.stride}")
    calibration = _load_calibration(calib_path, args.width, args.height)
    settings = AngularVelocitySettings(loss=args.loss, use_polarity=args.polarity, kernel=args.kernel,
                                       sigma=args.sigma, t_ref=args.t_ref, warp=args.warp,
                                       optimizer=args.optimizer)
    estimator = AngularVelocityEstimator(calibration, settings)

    stride = args.stride or args.window_events
    total_windows = _estimate_window_count(events_path, args.window_events, stride)
    if args.max_windows is not None:
        total_windows = min(total_windows, args.max_windows)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    degenerate = 0
    with open(output, "w", newline="") as handle, tqdm(total=total_windows, unit="window",
                                                        disable=args.quiet, file=sys.stderr) as progress:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for window in count_windows(iter_event_chunks(events_path), args.window_events, stride):
            estimate = estimator.estimate(window)
            omega = estimate.angular_velocity
            writer.writerow([f"{estimate.t_ref_ns / NANOSECONDS_PER_SECOND:.9f}",
                             *(f"{v:.6f}" if math.isfinite(v) else "nan" for v in omega),
                             estimate.iterations, estimate.evaluations,
                             f"{estimate.score:.9g}", int(estimate.degenerate)])
            written += 1
            degenerate += int(estimate.degenerate)
            progress.update(1)
            if args.max_windows is not None and written >= args.max_windows:
                break
    if written == 0:
        print(f"focus-ros estimate: warning: {events_path} has fewer than {args.window_events} events: "
              "no window written", file=sys.stderr)
    if not args.quiet:
        print(f"wrote {written} windows ({degenerate} degenerate) to {output}", file=sys.stderr)
    return 0


def _estimate_window_count(events_path: Path, window_events: int, stride: int) -> int:
    """Windows expected from the file size and the mean line length of its first 64 KiB
    (for the progress bar only)."""
    size = os.path.getsize(events_path)
    with open(events_path, "rb") as stream:
        head = stream.read(65536)
    lines = head.count(b"\n")
    if lines == 0:
        return 0
    events = size * lines / len(head)
    return max(0, int((events - window_events) // stride) + 1)
