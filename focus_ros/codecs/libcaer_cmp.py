"""EventPacket encoding ``libcaer_cmp``: compressed libcaer, 16-bit words.

Word = 4-bit code (bits 12-15) + 12 bits (event_camera_codecs libcaer_cmp_types.h /
libcaer_cmp_decoder.h; libcaer_driver message_converter.cpp)::

    0 TIME_HIGH   time bits 12-23 (us after time_base)      } both 0 at the start of
    1 TIME_LOW    time bits 0-11                             } every packet
    2 ADDR_X      x (bits 0-10): the column of the following events
    3 ADDR_Y      y (bits 0-10), polarity (bit 11): one event at (column, y)
    4 VECT_BASE_Y base row (bits 0-10), polarity (bit 11) of the following vectors
    5 VECT_8      8 valid bits: events at (column, base row + i), then base row += 8

Sensor time = time_base + 1000 * (TIME_HIGH << 12 | TIME_LOW). Column, base row and
polarity carry over from packet to packet (the driver starts each packet with ADDR_X):
the stream state is an int64 array (:func:`new_stream_state`) the kernel updates in place.
"""

from __future__ import annotations

import numba
import numpy as np

from focus_ros.codecs._cdr import EventDecodeError
from focus_ros.codecs._payload import payload_words, sensor_microseconds
from focus_ros.events import Events

ENCODING_LIBCAER_CMP = "libcaer_cmp"
CMP_TIME_HIGH, CMP_TIME_LOW, CMP_ADDR_X, CMP_ADDR_Y, CMP_VECT_BASE_Y, CMP_VECT_8 = range(6)
# stream state slots: column, column seen, base row, polarity, base seen
_CMP_STATE_SIZE = 5


def new_stream_state() -> np.ndarray:
    """The state one stream of libcaer_cmp packets carries over (nothing seen yet)."""
    return np.zeros(_CMP_STATE_SIZE, np.int64)


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_decode_words(words, state, time_base, width, height, x, y, t, on):
    """Decode (or, with x empty, count) libcaer_cmp words; returns (events, index of the
    first bad word or -1, fault: 0 none, 1 unknown code, 2 outside the sensor, 3 event
    before any column / vector base)."""
    count = 0
    store = len(x) > 0
    high = np.int64(0)
    low = np.int64(0)
    for i in range(len(words)):
        word = np.int64(words[i])
        code = word >> 12
        value = word & 0xFFF
        if code == 0:
            high = value
        elif code == 1:
            low = value
        elif code == 2:
            state[0] = value & 0x7FF
            state[1] = 1
        elif code == 3:
            ey = value & 0x7FF
            if state[1] == 0:
                return count, i, 3
            if state[0] >= width or ey >= height:
                return count, i, 2
            if store:
                x[count] = state[0]
                y[count] = ey
                t[count] = time_base + (high * 4096 + low) * 1000
                on[count] = (value >> 11) & 1
            count += 1
        elif code == 4:
            state[2] = value & 0x7FF
            state[3] = (value >> 11) & 1
            state[4] = 1
        elif code == 5:
            if state[1] == 0 or state[4] == 0:
                return count, i, 3
            for bit in range(8):
                if (value >> bit) & 1:
                    ey = state[2] + bit
                    if state[0] >= width or ey >= height:
                        return count, i, 2
                    if store:
                        x[count] = state[0]
                        y[count] = ey
                        t[count] = time_base + (high * 4096 + low) * 1000
                        on[count] = state[3]
                    count += 1
            state[2] += 8
        else:
            return count, i, 1
    return count, -1, 0


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_decode_packet(words, state, time_base, width, height):
    """Count (on a copy of the state), allocate, decode: one call from Python. Returns
    (x, y, t, on, index of the first bad word or -1, fault)."""
    empty16 = np.empty(0, np.uint16)
    count, bad, fault = _libcaer_cmp_decode_words(
        words, state.copy(), time_base, width, height, empty16, empty16, np.empty(0, np.int64),
        np.empty(0, np.int8))
    if fault:
        return empty16, empty16, np.empty(0, np.int64), np.empty(0, np.int8), bad, fault
    x = np.empty(count, np.uint16)
    y = np.empty(count, np.uint16)
    t = np.empty(count, np.int64)
    on = np.empty(count, np.int8)
    _libcaer_cmp_decode_words(words, state, time_base, width, height, x, y, t, on)
    return x, y, t, on, -1, 0


def decode_packet(payload: np.ndarray, time_base: int, is_bigendian: bool, payload_offset: int,
                  width: int, height: int, state: np.ndarray) -> tuple[Events, None]:
    """One packet's payload bytes -> (Events, no triggers), advancing the stream ``state``
    (:func:`new_stream_state`); EventDecodeError on an unknown word code, an event outside
    the sensor (width x height px) or before any column / vector base."""
    words = payload_words(payload, 2, is_bigendian, ENCODING_LIBCAER_CMP, payload_offset)
    x, y, t, on, bad, fault = _libcaer_cmp_decode_packet(words, state, np.int64(time_base), width,
                                                         height)
    if fault:
        word = int(words[bad])
        what = {1: f"unknown libcaer_cmp word code {word >> 12}",
                2: f"libcaer_cmp event outside the sensor {width}x{height} px",
                3: "libcaer_cmp event before any ADDR_X / VECT_BASE_Y word"}[fault]
        raise EventDecodeError(f"malformed message: {what} in word {word:#06x} at byte offset "
                               f"{payload_offset + 2 * bad}")
    return Events(x, y, t, on * np.int8(2) - np.int8(1)), None


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_flush(words, n, mask, polarity, row_high, last_row):
    """Write a run of rows (bit i of mask: row row_high + i) at words[n]: ADDR_Y for a
    single event, VECT_BASE_Y + VECT_8 otherwise. Returns the new word count."""
    if mask & (mask - 1) == 0:
        words[n] = (3 << 12) | (polarity << 11) | last_row
        return n + 1
    words[n] = (4 << 12) | (polarity << 11) | row_high
    words[n + 1] = (5 << 12) | mask
    return n + 2


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_encode(dt_us, x, y, on, words):
    """Fill words (room for 5 per event + 1); returns how many were written."""
    n = 0
    high = 0
    low = 0
    column = -1
    mask = 0
    mask_row_high = -1
    mask_polarity = -1
    last_row = 0
    for i in range(len(dt_us)):
        event_high = dt_us[i] >> 12
        event_low = dt_us[i] & 0xFFF
        row_high = y[i] & ~7
        row_low = y[i] & 7
        same_group = (event_high == high and event_low == low and x[i] == column
                      and on[i] == mask_polarity and row_high == mask_row_high
                      and mask != 0 and (mask >> row_low) == 0)
        if not same_group and mask != 0:  # flush the pending run
            n = _libcaer_cmp_flush(words, n, mask, mask_polarity, mask_row_high, last_row)
            mask = 0
        if event_high != high:
            high = event_high
            words[n] = (0 << 12) | high
            n += 1
        if event_low != low:
            low = event_low
            words[n] = (1 << 12) | low
            n += 1
        if x[i] != column:
            column = x[i]
            words[n] = (2 << 12) | column
            n += 1
        mask_row_high = row_high
        mask_polarity = on[i]
        mask |= 1 << row_low
        last_row = y[i]
    if mask != 0:
        n = _libcaer_cmp_flush(words, n, mask, mask_polarity, mask_row_high, last_row)
    return n


def encode_packet(events: Events, time_base: int | None = None,
                  sensor_time_offset_ns: int = 0) -> tuple[int, bytes]:
    """(time_base written, payload bytes): time_base = the first event's time; each event's
    time ``time_base + 1000 x (0 .. 2^24 - 1) us``, written as TIME_HIGH / TIME_LOW / ADDR_X
    words where they change, and runs of up to 8 rows sharing time, column, polarity and the
    row's upper bits as VECT_BASE_Y + VECT_8 (a single event as ADDR_Y). The ``time_base``
    and ``sensor_time_offset_ns`` arguments play no part. ValueError for coordinates of
    2048 px or more, times not whole microseconds after the first, or spanning 2^24 us."""
    if len(events) == 0:
        return 0, b""
    if int(events.x.max()) >= 2048 or int(events.y.max()) >= 2048:
        raise ValueError("libcaer_cmp encoding holds coordinates below 2048 px")
    base = int(events.t[0])
    dt_us = sensor_microseconds(events, base, ENCODING_LIBCAER_CMP)
    if dt_us.max() >= 1 << 24:
        raise ValueError("libcaer_cmp encoding: events must lie within 2^24 us (16.8 s) "
                         "after the packet's first event")
    words = np.zeros(5 * len(events) + 1, np.int64)
    n = _libcaer_cmp_encode(dt_us.astype(np.int64), events.x.astype(np.int64),
                            events.y.astype(np.int64), (events.p > 0).astype(np.int64), words)
    return base, words[:n].astype("<u2").tobytes()
