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
Events outside the declared sensor size are dropped and counted; an unknown word code, or
an event before any column / vector base, is a malformed packet.
"""

from __future__ import annotations

import numba
import numpy as np

from focus_ros.codecs._cdr import EventDecodeError
from focus_ros.codecs._payload import (allocate_events, event_bound, payload_words, sensor_microseconds, store_event,
                                       store_vector)
from focus_ros.events import Events

ENCODING_LIBCAER_CMP = "libcaer_cmp"
CMP_TIME_HIGH, CMP_TIME_LOW, CMP_ADDR_X, CMP_ADDR_Y, CMP_VECT_BASE_Y, CMP_VECT_8 = range(6)
# stream state slots: column, column seen, base row, polarity (+-1), base seen
_CMP_STATE_SIZE = 5


def new_stream_state() -> np.ndarray:
    """The state one stream of libcaer_cmp packets carries over (nothing seen yet)."""
    state = np.zeros(_CMP_STATE_SIZE, np.int64)
    state[3] = -1
    return state


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_decode_words(words, state, time_base, width, height, x, y, t, p, drop_outside):
    """Decode libcaer_cmp words into x, y (px), t (ns), p (+-1), which have room for every
    event (:func:`event_bound`). Returns (events written, index of the first bad word or
    -1, fault: 0 none, 1 unknown code, 2 an event outside width x height px, 3 event
    before any column / vector base); ``state`` is written back only when there is no
    fault. With ``drop_outside`` (a compile-time constant) events outside are dropped
    instead of fault 2 (and not counted here: :func:`_libcaer_cmp_decode_packet` counts
    them from the bound). The checks an event needs (a column seen and inside the sensor)
    are one flag, ``blocked``, updated with the column."""
    numba.literally(drop_outside)  # one compiled kernel per value: the first pass has no dropping code
    column, column_seen, base, polarity, base_seen = state[0], state[1], state[2], state[3], state[4]
    blocked = column_seen == 0 or column >= width
    high = np.int64(0)  # time bits 12-23 (us), both 0 at the start of every packet
    low = np.int64(0)
    time_ns = time_base
    count = 0
    for i in range(len(words)):
        word = np.int64(words[i])
        code = word >> 12
        if code == 5:  # VECT_8: events at (column, base + set bit)
            mask = word & 0xFF
            if blocked or base_seen == 0 or base + 8 > height:
                if column_seen == 0 or base_seen == 0:
                    return count, i, 3
                if mask != 0 and (column >= width or base >= height or (mask >> (height - base)) != 0):
                    if not drop_outside:
                        return count, i, 2
                    inside = np.int64(0)
                    if column < width and base < height:  # then base + 8 > height: 0 < height - base < 8
                        inside = mask & ((1 << (height - base)) - 1)
                    mask = inside
            if mask != 0:
                count = store_vector(y, x, t, p, count, mask, 8, base, column, time_ns, polarity)
            base += 8
        elif code == 3:  # ADDR_Y: one event
            row = word & 0x7FF
            if blocked or row >= height:
                if column_seen == 0:
                    return count, i, 3
                if drop_outside:
                    continue
                return count, i, 2
            count = store_event(y, x, t, p, count, row, column, time_ns, ((word >> 10) & 2) - 1)
        elif code == 4:  # VECT_BASE_Y
            base = word & 0x7FF
            polarity = ((word >> 10) & 2) - 1
            base_seen = 1
        elif code == 2:  # ADDR_X
            column = word & 0x7FF
            column_seen = 1
            blocked = column >= width
        elif code == 1:  # TIME_LOW
            low = word & 0xFFF
            time_ns = time_base + (high + low) * 1000
        elif code == 0:  # TIME_HIGH
            high = (word & 0xFFF) << 12
            time_ns = time_base + (high + low) * 1000
        else:
            return count, i, 1
    state[0], state[1], state[2], state[3], state[4] = column, column_seen, base, polarity, base_seen
    return count, -1, 0


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_decode_packet(words, state, time_base, width, height):
    """Bound, allocate once, decode once: one call from Python. Returns (x, y, t, p, events
    outside the sensor, index of the first bad word or -1, fault), the arrays views of
    exactly the decoded events (fresh: the caller owns them). A packet with events outside
    the sensor (a glitch) is decoded a second time, dropping them (the state is as it
    was): the first pass keeps the loop free of the dropping. The bound is exact (one
    event per ADDR_Y word and per VECT_8 bit): the events outside are the bound less those
    decoded."""
    bound, _ = event_bound(words, CMP_ADDR_Y, -1, CMP_VECT_8, -1)
    x, y, t, p = allocate_events(bound)
    count, bad, fault = _libcaer_cmp_decode_words(words, state, time_base, width, height, x, y, t, p, False)
    outside = 0
    if fault == 2:
        count, bad, fault = _libcaer_cmp_decode_words(words, state, time_base, width, height, x, y, t, p, True)
        outside = bound - count
    return x[:count], y[:count], t[:count], p[:count], outside, bad, fault


def decode_packet(payload: np.ndarray, time_base: int, is_bigendian: bool, payload_offset: int,
                  width: int, height: int, state: np.ndarray) -> tuple[Events, None, int]:
    """One packet's payload bytes -> (Events inside width x height px, no triggers, events
    outside (dropped)), advancing the stream ``state`` (:func:`new_stream_state`);
    EventDecodeError on an unknown word code or an event before any column / vector base
    (the state then stays as it was)."""
    words = payload_words(payload, 2, is_bigendian, ENCODING_LIBCAER_CMP, payload_offset)
    x, y, t, p, outside, bad, fault = _libcaer_cmp_decode_packet(words, state, np.int64(time_base), width, height)
    if fault:
        word = int(words[bad])
        what = (f"unknown libcaer_cmp word code {word >> 12}" if fault == 1 else
                "libcaer_cmp event before any ADDR_X / VECT_BASE_Y word")
        raise EventDecodeError(f"malformed message: {what} in word {word:#06x} at byte offset "
                               f"{payload_offset + 2 * bad}",
                               kind="unknown_word" if fault == 1 else "event_before_address")
    return Events(x, y, t, p), None, outside


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
