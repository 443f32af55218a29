"""The Event Camera Dataset's text layout (Mueggler et al., IJRR 2017): read and write.

A sequence folder holds (docs/design.md, section 3 "The Event Camera Dataset"):

- ``events.txt``: ``t x y p`` per line; t in seconds with 9 decimals, x y in px with (0, 0)
  the top-left pixel, p in {0, 1} (1 = brightness increase);
- ``imu.txt``: ``t ax ay az gx gy gz`` (m/s^2, rad/s);
- ``groundtruth.txt``: ``t px py pz qx qy qz qw`` (m, unit quaternion);
- ``calib.txt``: ``fx fy cx cy k1 k2 p1 p2 k3``.

Times become int64 nanoseconds exactly: the seconds are parsed as decimal text
(integer part and up to 9 decimals), never through a float.

``events.txt`` is parsed by a numba byte parser over blocks of the file, so reading
streams at several million events per second with bounded memory. Malformed input
raises :class:`EventFileError` naming the file and the line number; events before the
fault are yielded first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numba
import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.sources.depth_maps import DepthGroundTruth
from focus_ros.sources.errors import EventFileError
from focus_ros.sources.recording import ImuSamples, Poses, Recording, simulation_from_text, simulation_to_text

EVENTS_FILE = "events.txt"
IMU_FILE = "imu.txt"
GROUNDTRUTH_FILE = "groundtruth.txt"
CALIBRATION_FILE = "calib.txt"
#: depth ground truth beside the events (the simulator's; not part of the dataset's format)
DEPTH_LIST_FILE = "depthmaps.txt"
DEPTH_FOLDER = "depthmaps"
#: the simulator's record beside its events (YAML, see focus_ros.sources.recording.simulation_to_text;
#: not part of the dataset's format): the sequence is simulated, of this sensor size
SIMULATION_FILE = "simulation.yaml"

#: bytes read per block when streaming events.txt (about 40 bytes per line at most)
_BLOCK_BYTES = 8 << 20

# fault codes of the event line parser -> message
_FAULT_NONE = 0
_FAULT_MESSAGES = {
    1: "expected 4 columns 't x y p'",
    2: "not a number (t must be decimal seconds, x y p non-negative integers)",
    3: "polarity must be 0 or 1",
    4: "timestamp goes backwards",
    5: "more than 9 decimals in the timestamp",
    6: "x or y does not fit in 16 bits",
}


# ----------------------------------------------------------------------------------------
# events.txt: parsing


@numba.njit(cache=True, nogil=True)
def _parse_event_lines(data, last_t, x, y, t, p):
    """Parse complete ``t x y p`` lines of ``data`` (uint8) into the output arrays.

    Parses at most len(t) events. Returns (events parsed, bytes consumed, lines consumed,
    fault code, last time). On a fault, the counts stop at the start of the faulty line.
    Empty lines (also just '\\r') are skipped.
    """
    count = 0
    position = 0
    lines = 0
    size = len(data)
    capacity = len(t)
    values = np.zeros(4, np.int64)  # t (ns), x, y, p of the current line
    while position < size and count < capacity:
        line_start = position
        line_end = position
        while line_end < size and data[line_end] != 10:  # '\n'
            line_end += 1
        stop = line_end
        if stop > line_start and data[stop - 1] == 13:  # '\r'
            stop -= 1
        values[:] = 0
        column = 0
        cursor = line_start
        fault = 0
        while cursor < stop:
            while cursor < stop and (data[cursor] == 32 or data[cursor] == 9):
                cursor += 1
            if cursor >= stop:
                break
            if column >= 4:
                fault = 1
                break
            integer = 0
            digits = 0
            fraction = 0
            decimals = 0
            seen_dot = False
            while cursor < stop and data[cursor] != 32 and data[cursor] != 9:
                c = data[cursor]
                if c >= 48 and c <= 57:
                    if seen_dot:
                        if decimals >= 9:
                            fault = 5
                            break
                        fraction = fraction * 10 + (c - 48)
                        decimals += 1
                    else:
                        if digits >= 12:
                            fault = 6 if column > 0 else 2
                            break
                        integer = integer * 10 + (c - 48)
                        digits += 1
                elif c == 46 and column == 0 and not seen_dot:  # '.' only in t
                    seen_dot = True
                else:
                    fault = 2
                    break
                cursor += 1
            if fault:
                break
            if digits == 0 and decimals == 0:
                fault = 2
                break
            if column == 0:
                for _ in range(9 - decimals):
                    fraction *= 10
                values[0] = integer * 1000000000 + fraction
            else:
                values[column] = integer
            column += 1
        if fault == 0 and column == 0:  # empty line
            position = line_end + 1
            lines += 1
            continue
        if fault == 0 and column != 4:
            fault = 1
        if fault == 0 and (values[1] > 65535 or values[2] > 65535):
            fault = 6
        if fault == 0 and values[3] > 1:
            fault = 3
        if fault == 0 and values[0] < last_t:
            fault = 4
        if fault:
            return count, line_start, lines, fault, last_t
        t[count] = values[0]
        x[count] = values[1]
        y[count] = values[2]
        p[count] = 1 if values[3] == 1 else -1
        last_t = values[0]
        count += 1
        position = line_end + 1
        lines += 1
    return count, min(position, size), lines, 0, last_t


def _empty_event_buffers(capacity: int):
    return (np.empty(capacity, np.uint16), np.empty(capacity, np.uint16),
            np.empty(capacity, np.int64), np.empty(capacity, np.int8))


def iter_event_chunks(path, chunk_events: int = 1_000_000) -> Iterator[Events]:
    """Stream ``events.txt`` as Events batches of ``chunk_events`` events (the last may be
    shorter; t in int64 ns, exact). ``path`` may be the file or its sequence folder.

    Raises FileNotFoundError when absent, and EventFileError naming the file and line on
    a wrong column count, a non-number, a truncated last line, more than 9 decimals,
    polarity not in {0, 1} or a timestamp going backwards; events before the faulty
    line are yielded first.
    """
    path = Path(path)
    if path.is_dir():
        path = path / EVENTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"events file not found: {path}")
    if chunk_events < 1:
        raise ValueError(f"chunk_events must be at least 1, got {chunk_events}")
    last_t = np.int64(np.iinfo(np.int64).min)
    line_number = 1  # of the first line in `pending`
    x, y, t, p = _empty_event_buffers(chunk_events)
    filled = 0
    with open(path, "rb") as stream:
        pending = b""
        at_end = False
        while not at_end:
            block = stream.read(_BLOCK_BYTES)
            at_end = not block
            data = pending + block
            if not at_end:
                cut = data.rfind(b"\n") + 1  # parse complete lines only
                if cut == 0:
                    pending = data
                    continue
                data, pending = data[:cut], data[cut:]
            else:
                pending = b""
            array = np.frombuffer(data, np.uint8)
            offset = 0
            while offset < len(array):
                parsed, consumed, lines, fault, last_t = _parse_event_lines(
                    array[offset:], last_t, x[filled:], y[filled:], t[filled:], p[filled:])
                filled += parsed
                offset += consumed
                line_number += lines
                if fault:
                    if filled:
                        yield Events(x[:filled].copy(), y[:filled].copy(), t[:filled].copy(),
                                     p[:filled].copy())
                    raise EventFileError(
                        f"{path}: line {line_number}: {_FAULT_MESSAGES[fault]}: "
                        f"{_line_text(array, offset)!r}")
                if filled == chunk_events:
                    yield Events(x, y, t, p)
                    x, y, t, p = _empty_event_buffers(chunk_events)
                    filled = 0
    if filled:
        yield Events(x[:filled], y[:filled], t[:filled], p[:filled])


def _line_text(array: np.ndarray, start: int, limit: int = 80) -> str:
    """The text of the line starting at ``start`` (for error messages, cut at ``limit``)."""
    stop = start
    while stop < len(array) and stop - start < limit and array[stop] != 10:
        stop += 1
    return bytes(array[start:stop]).decode("utf-8", "replace").rstrip("\r")


def read_events(path) -> Events:
    """All events of ``events.txt`` (or a sequence folder) in one batch."""
    return Events.concatenate(list(iter_event_chunks(path)))


# ----------------------------------------------------------------------------------------
# events.txt: writing


@numba.njit(cache=True, nogil=True)
def _write_decimal(out, position, value):
    """Write a non-negative integer in decimal at ``position``; return the new position."""
    if value == 0:
        out[position] = 48
        return position + 1
    digits = 0
    probe = value
    while probe > 0:
        probe //= 10
        digits += 1
    for i in range(digits - 1, -1, -1):
        out[position + i] = 48 + value % 10
        value //= 10
    return position + digits


@numba.njit(cache=True, nogil=True)
def _format_event_lines(x, y, t, p, out):
    """Format events as ``seconds.nanoseconds(9 digits) x y p01\\n`` into ``out``; return bytes used."""
    position = 0
    for i in range(len(t)):
        seconds = t[i] // 1000000000
        nanoseconds = t[i] % 1000000000
        position = _write_decimal(out, position, seconds)
        out[position] = 46  # '.'
        for k in range(9):
            out[position + 9 - k] = 48 + nanoseconds % 10
            nanoseconds //= 10
        position += 10
        out[position] = 32
        position = _write_decimal(out, position + 1, np.int64(x[i]))
        out[position] = 32
        position = _write_decimal(out, position + 1, np.int64(y[i]))
        out[position] = 32
        out[position + 1] = 49 if p[i] > 0 else 48
        out[position + 2] = 10
        position += 3
    return position


def write_events(path, events: Events, chunk_events: int = 1_000_000) -> None:
    """Write ``events.txt`` in the dataset's format (t with 9 decimals, p in {0, 1}).

    Raises ValueError for negative times (the format has no sign).
    """
    with open(path, "wb") as stream:
        for start in range(0, len(events), chunk_events):
            chunk = events[start:start + chunk_events]
            if len(chunk) and chunk.t.min() < 0:
                raise ValueError(f"{path}: negative event times cannot be written")
            out = np.empty(len(chunk) * 44, np.uint8)  # 20 + 1 + 9 + 3 x 6 + ... per line
            used = _format_event_lines(chunk.x, chunk.y, chunk.t, chunk.p, out)
            stream.write(out[:used].tobytes())


# ----------------------------------------------------------------------------------------
# imu.txt, groundtruth.txt


def seconds_text_to_ns(text: str) -> int:
    """Exact int ns from decimal seconds text like ``49.006624000`` (ValueError otherwise)."""
    whole, dot, fraction = text.partition(".")
    if (not whole.isdigit() and not (dot and whole == "")) or (fraction and not fraction.isdigit()) \
            or len(fraction) > 9 or (not whole and not fraction):
        raise ValueError(f"not a time in decimal seconds: {text!r}")
    return int(whole or 0) * NANOSECONDS_PER_SECOND + int(fraction.ljust(9, "0") or 0)


def ns_to_seconds_text(t_ns: int) -> str:
    """Decimal seconds with 9 decimals, the dataset's time format (t_ns >= 0)."""
    seconds, nanoseconds = divmod(int(t_ns), NANOSECONDS_PER_SECOND)
    if t_ns < 0:
        raise ValueError(f"negative time {t_ns} ns cannot be written")
    return f"{seconds}.{nanoseconds:09d}"


def _read_timed_table(path, columns: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``t v1 .. v{columns-1}``: (t int64 ns, values float64 (N, columns - 1)).

    Raises FileNotFoundError, or EventFileError naming file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    times: list[int] = []
    rows: list[list[float]] = []
    with open(path, encoding="utf-8", errors="replace") as stream:
        for line_number, line in enumerate(stream, start=1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if len(words) != columns:
                raise EventFileError(f"{path}: line {line_number}: expected {columns} columns "
                                     f"'{layout}', found {len(words)}: {line.strip()!r}")
            try:
                t = seconds_text_to_ns(words[0])
                values = [float(word) for word in words[1:]]
            except ValueError:
                raise EventFileError(f"{path}: line {line_number}: not a number: "
                                     f"{line.strip()!r}") from None
            if times and t < times[-1]:
                raise EventFileError(f"{path}: line {line_number}: timestamp goes backwards: "
                                     f"{line.strip()!r}")
            if not all(np.isfinite(values)):
                raise EventFileError(f"{path}: line {line_number}: non-finite value: "
                                     f"{line.strip()!r}")
            times.append(t)
            rows.append(values)
    return (np.array(times, np.int64),
            np.array(rows, np.float64).reshape(len(rows), columns - 1))


def read_imu(path) -> ImuSamples:
    """Read ``imu.txt`` (``t ax ay az gx gy gz``; m/s^2, rad/s) or a folder holding it."""
    path = Path(path)
    if path.is_dir():
        path = path / IMU_FILE
    t, values = _read_timed_table(path, 7, "t ax ay az gx gy gz")
    return ImuSamples(t=t, angular_velocity=values[:, 3:6].copy(),
                      linear_acceleration=values[:, 0:3].copy())


def read_groundtruth(path) -> Poses:
    """Read ``groundtruth.txt`` (``t px py pz qx qy qz qw``; m, unit quaternion)."""
    path = Path(path)
    if path.is_dir():
        path = path / GROUNDTRUTH_FILE
    t, values = _read_timed_table(path, 8, "t px py pz qx qy qz qw")
    return Poses(t=t, position=values[:, 0:3].copy(), orientation=values[:, 3:7].copy())


def _write_timed_table(path, t: np.ndarray, values: np.ndarray) -> None:
    """Write rows ``t v1 v2 ..`` with t in 9-decimal seconds and shortest exact floats."""
    with open(path, "w", encoding="utf-8") as stream:
        for time_ns, row in zip(t.tolist(), values.tolist()):
            stream.write(ns_to_seconds_text(time_ns) + " "
                         + " ".join(repr(float(v)) for v in row) + "\n")


def write_imu(path, imu: ImuSamples) -> None:
    """Write ``imu.txt`` (``t ax ay az gx gy gz``)."""
    _write_timed_table(path, imu.t, np.hstack([imu.linear_acceleration, imu.angular_velocity]))


def write_groundtruth(path, poses: Poses) -> None:
    """Write ``groundtruth.txt`` (``t px py pz qx qy qz qw``)."""
    _write_timed_table(path, poses.t, np.hstack([poses.position, poses.orientation]))


# ----------------------------------------------------------------------------------------
# depth ground truth: depthmaps.txt + depthmaps/*.npy (not part of the dataset's format)


def write_depth_folder(folder, t_ns: np.ndarray, depth_m: np.ndarray) -> None:
    """Write ``folder/depthmaps.txt`` and ``folder/depthmaps/depth_%08d.npy`` (float32 maps)."""
    truth = DepthGroundTruth(t_ns, depth_m)
    folder = Path(folder)
    (folder / DEPTH_FOLDER).mkdir(parents=True, exist_ok=True)
    lines = []
    for index, (time_ns, depth) in enumerate(zip(truth.t.tolist(), truth.depth_m)):
        name = f"{DEPTH_FOLDER}/depth_{index:08d}.npy"
        np.save(folder / name, np.ascontiguousarray(depth, np.float32))
        lines.append(f"{ns_to_seconds_text(time_ns)} {name}\n")
    (folder / DEPTH_LIST_FILE).write_text("".join(lines))


def read_depth_folder(folder) -> DepthGroundTruth:
    """Read ``folder/depthmaps.txt`` and the maps it lists. FileNotFoundError / ValueError
    naming the file and line when something is missing or malformed."""
    folder = Path(folder)
    listing = folder / DEPTH_LIST_FILE
    if not listing.is_file():
        raise FileNotFoundError(f"depth ground truth not found: {listing}")
    times, maps = [], []
    for line_number, line in enumerate(listing.read_text().splitlines(), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 2:
            raise ValueError(f"{listing}: line {line_number}: expected 't path', got {line.strip()!r}")
        try:
            t = seconds_text_to_ns(words[0])
        except ValueError:
            raise ValueError(f"{listing}: line {line_number}: not a time in seconds: {words[0]!r}") from None
        path = folder / words[1]
        if not path.is_file():
            raise FileNotFoundError(f"{listing}: line {line_number}: depth map not found: {path}")
        depth = np.load(path, allow_pickle=False)
        if depth.ndim != 2 or (maps and depth.shape != maps[0].shape):
            raise ValueError(f"{path}: a depth map must be 2-D like the others, got shape {depth.shape}")
        if times and t <= times[-1]:
            raise ValueError(f"{listing}: line {line_number}: time does not increase")
        times.append(t)
        maps.append(depth.astype(np.float32, copy=False))
    if not maps:
        raise ValueError(f"{listing}: no depth maps listed")
    return DepthGroundTruth(np.array(times, np.int64), np.stack(maps))


# ----------------------------------------------------------------------------------------
# folders


def read_simulation(folder) -> dict | None:
    """The simulator's record of a folder it wrote (``simulation.yaml``), or None for recorded data."""
    path = Path(folder) / SIMULATION_FILE
    return simulation_from_text(path.read_text(), str(path)) if path.is_file() else None


def recorded_sensor_size(folder) -> tuple[int, int] | None:
    """(width, height) px a folder records (its ``simulation.yaml``), or None: calib.txt stores none."""
    simulation = read_simulation(folder)
    if simulation is None or "width" not in simulation or "height" not in simulation:
        return None
    return int(simulation["width"]), int(simulation["height"])


def read_ecd_folder(folder, width: int | None = None, height: int | None = None) -> Recording:
    """Load a whole sequence folder into memory (for small data; stream large ones with
    :func:`iter_event_chunks`). ``imu.txt``, ``groundtruth.txt`` and ``calib.txt`` are
    optional; the calibration file has no sensor size: ``width`` x ``height`` px when given,
    else the size the folder records (:func:`recorded_sensor_size`), else 240x180 (DAVIS240C).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"sequence folder not found: {folder}")
    simulation = read_simulation(folder)
    recorded_width, recorded_height = recorded_sensor_size(folder) or (240, 180)
    width = recorded_width if width is None else width
    height = recorded_height if height is None else height
    calibration = None
    if (folder / CALIBRATION_FILE).is_file():
        calibration = Calibration.from_ecd_calib(folder / CALIBRATION_FILE, width, height)
    imu = read_imu(folder / IMU_FILE) if (folder / IMU_FILE).is_file() else None
    poses = (read_groundtruth(folder / GROUNDTRUTH_FILE)
             if (folder / GROUNDTRUTH_FILE).is_file() else None)
    depth = read_depth_folder(folder) if (folder / DEPTH_LIST_FILE).is_file() else None
    return Recording(events=read_events(folder / EVENTS_FILE), calibration=calibration,
                     imu=imu, poses=poses, depth_times=depth.t if depth is not None else None,
                     depth_maps=depth.depth_m if depth is not None else None, simulation=simulation)


def write_ecd_folder(folder, recording: Recording) -> None:
    """Write a Recording as a sequence folder: ``events.txt``, and ``calib.txt``,
    ``imu.txt``, ``groundtruth.txt`` for the parts the recording has (no ``images.txt``), and
    depth maps as ``depthmaps.txt`` + ``depthmaps/*.npy`` (:func:`write_depth_folder`, not part
    of the dataset's format), and a simulated recording's record as ``simulation.yaml``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_events(folder / EVENTS_FILE, recording.events)
    if recording.calibration is not None:
        (folder / CALIBRATION_FILE).write_text(recording.calibration.to_ecd_line() + "\n")
    if recording.imu is not None:
        write_imu(folder / IMU_FILE, recording.imu)
    if recording.poses is not None:
        write_groundtruth(folder / GROUNDTRUTH_FILE, recording.poses)
    if recording.depth_maps is not None:
        write_depth_folder(folder, recording.depth_times, recording.depth_maps)
    if recording.simulation is not None:
        (folder / SIMULATION_FILE).write_text(simulation_to_text(recording.simulation))
