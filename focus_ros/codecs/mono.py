"""EventPacket encoding ``mono``: one 64-bit word per event.

Layout (event_camera_msgs README, "mono"; event_camera_codecs mono_decoder.h /
mono_encoder.h): bit 63 polarity (1 = ON), bits 48-62 y (15 bits), bits 32-47 x
(16 bits), bits 0-31 dt (ns) after the message's time_base; words in the byte order
given by is_bigendian. Sensor time = time_base + dt. Events outside the declared sensor
size are dropped and counted. No state from packet to packet.
"""

from __future__ import annotations

import numpy as np

from focus_ros.codecs._cdr import EventDecodeError
from focus_ros.events import Events

ENCODING_MONO = "mono"
_MONO_WORD_BYTES = 8


def decode_packet(payload: np.ndarray, time_base: int, is_bigendian: bool, payload_offset: int,
                  width: int, height: int, state=None) -> tuple[Events, None, int]:
    """One packet's payload bytes -> (Events inside width x height px (fresh arrays), no
    triggers, events outside (dropped)); EventDecodeError when the bytes are not whole
    words."""
    if len(payload) % _MONO_WORD_BYTES:
        raise EventDecodeError(
            f"malformed message: mono payload of {len(payload)} bytes at byte offset "
            f"{payload_offset} is not a whole number of 8-byte words")
    words = payload.view(">u8" if is_bigendian else "<u8")
    x = ((words >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.uint16)
    y = ((words >> np.uint64(48)) & np.uint64(0x7FFF)).astype(np.uint16)
    on = (words >> np.uint64(63)).astype(np.uint8)
    dt = (words & np.uint64(0xFFFFFFFF)).astype(np.int64)
    inside = (x < width) & (y < height)
    outside = len(x) - int(np.count_nonzero(inside))
    if outside:
        x, y, on, dt = x[inside], y[inside], on[inside], dt[inside]
    t = np.int64(time_base) + dt
    return Events(x, y, t, (on.astype(np.int8) * 2 - 1).astype(np.int8)), None, outside


def encode_packet(events: Events, time_base: int | None, sensor_time_offset_ns: int = 0) -> tuple[int, bytes]:
    """(time_base written, payload bytes): time_base (ns) as given, default the first
    event's time (0 when empty); ValueError when an event is before time_base or 2^32 ns
    (4.29 s) or more after it. The sensor time offset plays no part."""
    base = int(events.t[0]) if (time_base is None and len(events)) else int(time_base or 0)
    dt = events.t - np.int64(base)
    if len(events) and (dt.min() < 0 or dt.max() >= (1 << 32)):
        raise ValueError(f"mono encoding needs 0 <= t - time_base < 2^32 ns; events span "
                         f"{int(dt.min())} .. {int(dt.max())} ns after time_base {base}")
    words = (dt.astype(np.uint64)
             | (events.x.astype(np.uint64) << np.uint64(32))
             | (events.y.astype(np.uint64) << np.uint64(48))
             | ((events.p > 0).astype(np.uint64) << np.uint64(63)))
    return base, words.astype("<u8").tobytes()
