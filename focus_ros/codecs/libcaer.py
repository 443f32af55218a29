"""EventPacket encoding ``libcaer``: iniVation polarity events, 8 bytes each.

Layout (libcaer polarity.h; event_camera_codecs libcaer_decoder.h; libcaer_driver
copies libcaer's packets as they are): uint32 data, int32 timestamp (us), little endian.
data: bit 0 valid mark, bit 1 polarity (1 = ON), bits 2-16 y, bits 17-31 x.
Sensor time = time_base + 1000 * timestamp; the timestamp's 31 bits roll over every
2^31 us (35.8 min): when it decreases within a packet, 2^31 us is added from there on
(the driver folds the clock's higher bits into time_base). Events outside the declared
sensor size are dropped and counted (their stamps still count for the rollover); a
negative timestamp is a malformed packet. No state from packet to packet.
"""

from __future__ import annotations

import numba
import numpy as np

from focus_ros.codecs._cdr import EventDecodeError
from focus_ros.codecs._payload import payload_words, sensor_microseconds, store_event
from focus_ros.events import Events

ENCODING_LIBCAER = "libcaer"
_LIBCAER_ROLLOVER_US = 1 << 31


@numba.njit(cache=True, nogil=True)
def _libcaer_decode_words(words, time_base, width, height, x, y, t, p, drop_outside):
    """words: uint32 pairs (data, timestamp). Fills x, y, t (ns), p (+-1) straight into the
    Events arrays; returns (events written, index of the first bad event or -1, fault: 0
    none, 1 negative timestamp, 2 an event outside width x height px). With
    ``drop_outside``, events outside are dropped instead of fault 2 (a second pass over a
    packet with a glitch: the first keeps its loop free of the dropping; a compile-time
    constant, so each pass has its own compiled loop)."""
    numba.literally(drop_outside)  # one compiled kernel per value: the first pass has no dropping code
    high = np.int64(time_base)
    last = np.int64(0)
    count = 0
    for i in range(len(words) // 2):
        data = np.int64(words[2 * i])
        stamp = np.int64(words[2 * i + 1])
        if stamp >= 2147483648:
            return count, i, 1
        if stamp < last:
            high += np.int64(2147483648) * 1000
        last = stamp
        ex = (data >> 17) & 0x7FFF
        ey = (data >> 2) & 0x7FFF
        if ex >= width or ey >= height:
            if drop_outside:
                continue
            return count, i, 2
        count = store_event(x, y, t, p, count, ex, ey, high + stamp * 1000, (data & 2) - 1)
    return count, -1, 0


@numba.njit(cache=True, nogil=True)
def _libcaer_decode_packet(words, time_base, width, height):
    """Allocate once, decode once (a packet with events outside the sensor, a glitch: a
    second time, dropping them): one call from Python. Returns (x, y, t, p, events
    outside, index of the first bad event or -1, fault), the arrays views of exactly the
    decoded events (fresh: the caller owns them)."""
    size = len(words) // 2
    x = np.empty(size, np.uint16)
    y = np.empty(size, np.uint16)
    t = np.empty(size, np.int64)
    p = np.empty(size, np.int8)
    count, bad, fault = _libcaer_decode_words(words, time_base, width, height, x, y, t, p, False)
    outside = 0
    if fault == 2:
        count, bad, fault = _libcaer_decode_words(words, time_base, width, height, x, y, t, p, True)
        outside = size - count
    return x[:count], y[:count], t[:count], p[:count], outside, bad, fault


def decode_packet(payload: np.ndarray, time_base: int, is_bigendian: bool, payload_offset: int,
                  width: int, height: int, state=None) -> tuple[Events, None, int]:
    """One packet's payload bytes -> (Events inside width x height px (fresh arrays), no
    triggers, events outside (dropped)); EventDecodeError on a partial event or a negative
    timestamp."""
    if len(payload) % 8:
        raise EventDecodeError(
            f"malformed message: libcaer payload of {len(payload)} bytes at byte offset "
            f"{payload_offset} is not a whole number of 8-byte events", kind="partial_word")
    words = payload_words(payload, 4, is_bigendian, ENCODING_LIBCAER, payload_offset)
    x, y, t, p, outside, bad, fault = _libcaer_decode_packet(words, np.int64(time_base), width, height)
    if fault:
        stamp = int(words[2 * bad + 1])
        raise EventDecodeError(f"malformed message: libcaer negative timestamp {stamp - (1 << 32)} us at byte "
                               f"offset {payload_offset + 8 * bad}", kind="negative_timestamp")
    return Events(x, y, t, p), None, outside


def encode_packet(events: Events, time_base: int | None, sensor_time_offset_ns: int) -> tuple[int, bytes]:
    """(time_base written, payload bytes), as libcaer_driver writes them, from the camera's
    64-bit microsecond clock ``(t - sensor_time_offset_ns) / 1000`` (whole microseconds, in
    time order; ValueError otherwise): time_base = offset + 1000 x (the clock's bits above
    bit 30 at the first event), each event's stamp = the clock's low 31 bits. The
    ``time_base`` argument plays no part."""
    offset_ns = sensor_time_offset_ns
    if len(events) == 0:
        return int(offset_ns), b""
    clock_us = sensor_microseconds(events, offset_ns, ENCODING_LIBCAER)
    if np.any(np.diff(clock_us) < 0):
        raise ValueError("libcaer encoding needs events in time order")
    high_us = int(clock_us[0]) & ~(_LIBCAER_ROLLOVER_US - 1)
    stamps = (clock_us - high_us) % _LIBCAER_ROLLOVER_US
    # each rollover must show as a decrease of the 31-bit stamp
    rollovers = (clock_us - high_us) // _LIBCAER_ROLLOVER_US
    decreases = np.r_[0, np.cumsum(stamps[1:] < stamps[:-1])]
    if np.any(rollovers != decreases):
        raise ValueError("libcaer encoding: a gap of 2^31 us (35.8 min) or more inside one packet")
    data = ((events.x.astype(np.uint32) << np.uint32(17)) | (events.y.astype(np.uint32) << np.uint32(2))
            | ((events.p > 0).astype(np.uint32) << np.uint32(1)) | np.uint32(1))
    words = np.empty((len(events), 2), "<u4")
    words[:, 0] = data
    words[:, 1] = stamps
    return int(offset_ns) + 1000 * high_us, words.tobytes()
