"""EventPacket encoding ``evt3``: Prophesee EVT 3.0, 16-bit words.

Word = 4-bit type (bits 12-15) + 12-bit payload (Prophesee "EVT 3.0 format" docs;
event_camera_codecs evt3_types.h / evt3_decoder.h)::

    0x0 ADDR_Y      y (bits 0-10), system type (bit 11)
    0x2 ADDR_X      x (bits 0-10), polarity (bit 11): one event at (x, current y)
    0x3 VECT_BASE_X x (bits 0-10), polarity (bit 11): base of the following vectors
    0x4 VECT_12     12 valid bits: events at base_x + i, then base_x += 12
    0x5 VECT_8      8 valid bits (0-7): events at base_x + i, then base_x += 8
    0x6 TIME_LOW    time bits 0-11 (us)
    0x8 TIME_HIGH   time bits 12-23 (us); going back by more than 10 means a 2^24 us rollover
    0xA EXT_TRIGGER edge (bit 0, 1 = rising), trigger id (bits 8-11): a trigger event
    0x7, 0x9, 0xE, 0xF: continued / padding / others: no event

Nothing is decoded before the stream's first TIME_HIGH followed by a TIME_LOW. Events
outside the declared sensor size are dropped and counted (a driver's glitch costs those
events, not the packet); a word of an unknown type is a malformed packet. Sensor
time = the camera's own microsecond clock x 1000, 24-bit rollovers counted from the first
packet of the stream (``time_base`` is undefined for evt3), plus
:attr:`Evt3Decoder.time_offset_ns`. Time, row and vector base carry over from packet to
packet: one :class:`Evt3Decoder` per stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from focus_ros.codecs._cdr import EventDecodeError
from focus_ros.codecs._payload import (allocate_events, event_bound, payload_words, store_bits, store_event,
                                       store_vector)
from focus_ros.events import Events

ENCODING_EVT3 = "evt3"
EVT3_ADDR_Y, EVT3_ADDR_X, EVT3_VECT_BASE_X, EVT3_VECT_12, EVT3_VECT_8 = 0x0, 0x2, 0x3, 0x4, 0x5
EVT3_TIME_LOW, EVT3_TIME_HIGH, EVT3_EXT_TRIGGER = 0x6, 0x8, 0xA
_EVT3_TIME_HIGH_PERIOD_US = 1 << 24

# The decoder's state: an int64 array the kernel reads at the start of a packet and writes
# back at its end (only when the packet decoded without a fault): 0 TIME_HIGH, 1 TIME_LOW,
# 2 y, 3 vector base x, 4 vector polarity (+-1), 5 a TIME_HIGH seen, 6 a full time seen,
# 7 24-bit rollovers counted (TIME_HIGH stepping back by more than 10).
_STATE_SIZE = 8


@dataclass(frozen=True)
class Triggers:
    """External-trigger events of an EVT3 stream: t (int64 ns, same clock as the events),
    edge (uint8, 1 = rising), id (uint8, trigger channel)."""

    t: np.ndarray
    edge: np.ndarray
    id: np.ndarray

    @classmethod
    def empty(cls) -> "Triggers":
        return cls(np.empty(0, np.int64), np.empty(0, np.uint8), np.empty(0, np.uint8))

    def __len__(self) -> int:
        return len(self.t)


#: the triggers of a packet without any (shared: there is nothing in it to change)
NO_TRIGGERS = Triggers.empty()


@numba.njit(cache=True, nogil=True)
def _evt3_decode_words(words, state, width, height, offset_ns, x, y, t, p, trigger_rows, drop_outside):
    """Decode EVT3 words into x, y (px), t (ns: offset_ns + camera us x 1000), p (+-1) and
    trigger_rows (t ns, edge, id), which have room for every event and trigger
    (:func:`event_bound`).

    Returns (events written, triggers written, index of the first bad word or -1, fault:
    0 none, 1 unknown word type, 2 an event outside width x height px); ``state`` is
    written back only when there is no fault. Events before the stream's first full time
    are dropped; so are events outside with ``drop_outside`` (a compile-time constant:
    without it they are fault 2, the fast first pass whose loop leaves at such an event;
    :func:`_evt3_decode_packet` counts them from the bound, no counter in this loop). The
    state lives in locals inside the loop; the checks an event needs (a full time seen,
    the row inside the sensor) are folded into one flag, ``blocked``, updated when the row
    or the time changes. A VECT_BASE_X and the vector words after it (a camera's 32-pixel
    group: VECT_12, VECT_12, VECT_8) are written together from one mask, one loop over its
    set bits instead of a branch per word; a vector word the packet starts with (the
    packet was cut inside a group) goes word by word, as do groups that would drop or
    fault.
    """
    numba.literally(drop_outside)  # one compiled kernel per value: the first pass has no dropping code
    high, low, row, base, vector_polarity = state[0], state[1], state[2], state[3], state[4]
    high_seen, valid, rollovers = state[5], state[6], state[7]
    epoch_ns = offset_ns + rollovers * _EVT3_TIME_HIGH_PERIOD_US * 1000
    time_ns = epoch_ns + (high * 4096 + low) * 1000
    blocked = valid == 0 or row >= height
    count = 0
    triggers = 0
    skip = 0  # vector words already written with the VECT_BASE_X before them
    n = len(words)
    for i in range(n):
        if skip > 0:
            skip -= 1
            continue
        word = np.int64(words[i])
        kind = word >> 12
        if kind == 0x2:  # ADDR_X: one event
            column = word & 0x7FF
            if blocked or column >= width:
                if valid == 0 or drop_outside:  # before the first full time, or outside: dropped
                    continue
                return count, triggers, i, 2
            count = store_event(x, y, t, p, count, column, row, time_ns, ((word >> 10) & 2) - 1)
        elif kind == 0x0:  # ADDR_Y
            row = word & 0x7FF
            blocked = valid == 0 or row >= height
        elif kind == 0x6:  # TIME_LOW
            low = word & 0xFFF
            valid = valid | high_seen
            blocked = valid == 0 or row >= height
            time_ns = epoch_ns + (high * 4096 + low) * 1000
        elif kind == 0x4 or kind == 0x5:  # VECT_12, VECT_8: events at base + set bit
            bits = 12 if kind == 0x4 else 8
            mask = word & ((1 << bits) - 1)
            if mask != 0 and (blocked or base + bits > width):
                if valid == 0:
                    mask = 0
                elif row >= height or base >= width or (mask >> (width - base)) != 0:  # some or all outside
                    if not drop_outside:
                        return count, triggers, i, 2
                    inside = np.int64(0)
                    if row < height and base < width:  # then base + bits > width: 0 < width - base < bits
                        inside = mask & ((1 << (width - base)) - 1)
                    mask = inside
            if mask != 0:
                if bits == 12:
                    count = store_vector(x, y, t, p, count, mask, 12, base, row, time_ns, vector_polarity)
                else:
                    count = store_vector(x, y, t, p, count, mask, 8, base, row, time_ns, vector_polarity)
            base += bits
        elif kind == 0x3:  # VECT_BASE_X, and at once the vector words that follow it
            base = word & 0x7FF
            vector_polarity = ((word >> 10) & 2) - 1
            mask = np.int64(0)  # bit i: an event at base + i
            span = 0
            j = i + 1
            while j < n and span <= 40:
                follower = np.int64(words[j])
                if follower >> 12 == 0x4:
                    mask |= (follower & 0xFFF) << span
                    span += 12
                elif follower >> 12 == 0x5:
                    mask |= (follower & 0xFF) << span
                    span += 8
                else:
                    break
                j += 1
            if not blocked and base + span <= width:  # else word by word, which drops or faults
                count = store_bits(x, y, t, p, count, mask, base, row, time_ns, vector_polarity)
                base += span
                skip = j - i - 1
        elif kind == 0x8:  # TIME_HIGH; stepping back by more than 10 is a 2^24 us rollover
            new_high = word & 0xFFF
            if high_seen == 1 and new_high < high and high - new_high > 10:
                rollovers += 1
                epoch_ns += _EVT3_TIME_HIGH_PERIOD_US * 1000
            high = new_high
            high_seen = 1
            time_ns = epoch_ns + (high * 4096 + low) * 1000
        elif kind == 0xA:  # EXT_TRIGGER
            if valid == 1:
                trigger_rows[triggers, 0] = time_ns
                trigger_rows[triggers, 1] = word & 1
                trigger_rows[triggers, 2] = (word >> 8) & 0xF
                triggers += 1
        elif kind != 0x7 and kind != 0x9 and kind != 0xE and kind != 0xF:
            return count, triggers, i, 1
    state[0], state[1], state[2], state[3], state[4] = high, low, row, base, vector_polarity
    state[5], state[6], state[7] = high_seen, valid, rollovers
    return count, triggers, -1, 0


@numba.njit(cache=True, nogil=True)
def _evt3_words_before_time(words, high_seen):
    """How many of a packet's words come before the stream's first full time (a TIME_HIGH,
    then a TIME_LOW; ``high_seen``: the stream's TIME_HIGH seen in an earlier packet): the
    events of those words are dropped uncounted."""
    for i in range(len(words)):
        kind = words[i] >> 12
        if kind == EVT3_TIME_HIGH:
            high_seen = 1
        elif kind == EVT3_TIME_LOW and high_seen == 1:
            return i
    return len(words)


@numba.njit(cache=True, nogil=True)
def _evt3_decode_packet(words, state, width, height, offset_ns):
    """Bound, allocate once, decode once: one call from Python. Returns (x, y, t, p,
    trigger rows (t, edge, id), events outside width x height px, index of the first bad
    word or -1, fault), the arrays views of exactly the decoded events (fresh: the caller
    owns them); the state advances only when there is no fault. A packet with events
    outside the sensor (a glitch) is decoded a second time, dropping them (the state is as
    it was): the first pass keeps the loop free of the dropping and counting. The bound
    is exact (one event per ADDR_X word and per vector bit): the events outside are the
    bound less those decoded and those before the stream's first full time. (The triggers
    in one array, not three: each array handed back to Python costs time, every packet,
    and most packets hold no trigger.)"""
    bound, trigger_bound = event_bound(words, EVT3_ADDR_X, EVT3_VECT_12, EVT3_VECT_8, EVT3_EXT_TRIGGER)
    x, y, t, p = allocate_events(bound)
    trigger_rows = np.empty((trigger_bound, 3), np.int64)
    count, triggers, bad, fault = _evt3_decode_words(words, state, width, height, offset_ns, x, y, t, p,
                                                     trigger_rows, False)
    outside = 0
    if fault == 2:
        unseen = 0  # events before the stream's first full time
        if state[6] == 0:
            unseen, _ = event_bound(words[:_evt3_words_before_time(words, state[5])], EVT3_ADDR_X, EVT3_VECT_12,
                                    EVT3_VECT_8, -1)
        count, triggers, bad, fault = _evt3_decode_words(words, state, width, height, offset_ns, x, y, t, p,
                                                         trigger_rows, True)
        outside = bound - unseen - count
    return x[:count], y[:count], t[:count], p[:count], trigger_rows[:triggers], outside, bad, fault


class Evt3Decoder:
    """Stateful EVT 3.0 decoder for one stream of packets (times, y, vector base carry over).

    time_offset_ns: added to the decoded sensor time (us x 1000) to give Events.t (ns).
    """

    def __init__(self, time_offset_ns: int = 0):
        self.time_offset_ns = int(time_offset_ns)
        self.state = np.zeros(_STATE_SIZE, np.int64)
        self.state[4] = -1  # vectors before any VECT_BASE_X: polarity 0 (OFF)

    def decode(self, payload: np.ndarray, is_bigendian: bool = False, payload_offset: int = 0,
               width: int = 2048, height: int = 2048) -> Events:
        """Decode one packet's payload bytes into its CD events (those inside width x height px);
        raise EventDecodeError on a word of an unknown type."""
        return self.decode_packet(payload, is_bigendian, payload_offset, width, height)[0]

    def decode_packet(self, payload: np.ndarray, is_bigendian: bool = False, payload_offset: int = 0,
                      width: int = 2048, height: int = 2048) -> tuple[Events, Triggers, int]:
        """Decode one packet's payload bytes: (CD events inside width x height px, the
        external-trigger events, how many events lay outside and were dropped). The arrays
        are fresh (the caller may change them in place). EventDecodeError on a word of an
        unknown type (the state then stays as it was)."""
        words = payload_words(payload, 2, is_bigendian, ENCODING_EVT3, payload_offset)
        x, y, t, p, trigger_rows, outside, bad_word, fault = _evt3_decode_packet(
            words, self.state, width, height, self.time_offset_ns)
        if fault:
            word = int(words[bad_word])
            raise EventDecodeError(f"malformed message: unknown EVT3 word type {word >> 12:#x} in word "
                                   f"{word:#06x} at byte offset {payload_offset + 2 * bad_word}", kind="unknown_word")
        if len(trigger_rows) == 0:
            return Events(x, y, t, p), NO_TRIGGERS, outside
        return (Events(x, y, t, p), Triggers(trigger_rows[:, 0].copy(), trigger_rows[:, 1].astype(np.uint8),
                                             trigger_rows[:, 2].astype(np.uint8)), outside)


#: a run of at least this many events in a 32-pixel group is written as a vector (4 words),
#: fewer as ADDR_X words (never longer than the vector)
_EVT3_VECTOR_MIN_EVENTS = 4


@numba.njit(cache=True, nogil=True)
def _evt3_flush_run(words, n, mask, run_base, run_on):
    """Write a run of events on one row at one time (bit i of mask: x = run_base + i) at
    words[n]: one ADDR_X per event when there are fewer than
    :data:`_EVT3_VECTOR_MIN_EVENTS`, else the 32-pixel group as VECT_BASE_X + VECT_12 +
    VECT_12 + VECT_8. Returns the new word count."""
    events = 0
    rest = mask
    while rest != 0:
        rest &= rest - 1
        events += 1
    if events < _EVT3_VECTOR_MIN_EVENTS:
        rest = mask
        while rest != 0:
            words[n] = (EVT3_ADDR_X << 12) | (run_on << 11) | (run_base + trailing_zeros(rest))
            n += 1
            rest &= rest - 1
        return n
    words[n] = (EVT3_VECT_BASE_X << 12) | (run_on << 11) | run_base
    words[n + 1] = (EVT3_VECT_12 << 12) | (mask & 0xFFF)
    words[n + 2] = (EVT3_VECT_12 << 12) | ((mask >> 12) & 0xFFF)
    words[n + 3] = (EVT3_VECT_8 << 12) | ((mask >> 24) & 0xFF)
    return n + 4


@numba.njit(cache=True, nogil=True)
def _evt3_encode(microseconds, x, y, on, vectors, words):
    """Fill words (room for 7 per event) from the events' sensor clock (us, unwrapped);
    returns how many were written."""
    n = 0
    mask = 0  # the pending run: bit i = an event at x = run_base + i
    run_base = 0
    run_on = 0
    last_x = 0
    for i in range(len(microseconds)):
        us = microseconds[i]
        new_high = i == 0 or (us >> 12) != (microseconds[i - 1] >> 12)
        new_low = new_high or (us & 0xFFF) != (microseconds[i - 1] & 0xFFF)
        new_row = i == 0 or y[i] != y[i - 1]
        joins = (vectors and mask != 0 and not new_low and not new_row and on[i] == run_on
                 and x[i] >> 5 == run_base >> 5 and x[i] > last_x)
        if mask != 0 and not joins:
            n = _evt3_flush_run(words, n, mask, run_base, run_on)
            mask = 0
        if new_high:
            words[n] = (EVT3_TIME_HIGH << 12) | ((us >> 12) & 0xFFF)
            n += 1
        if new_low:
            words[n] = (EVT3_TIME_LOW << 12) | (us & 0xFFF)
            n += 1
        if new_row:
            words[n] = (EVT3_ADDR_Y << 12) | y[i]
            n += 1
        if not joins:
            run_base = x[i] & ~31 if vectors else x[i]
            run_on = on[i]
        mask |= 1 << (x[i] - run_base)
        last_x = x[i]
    if mask != 0:
        n = _evt3_flush_run(words, n, mask, run_base, run_on)
    return n


def encode_evt3_words(events: Events, time_offset_ns: int = 0, vectors: bool = True) -> np.ndarray:
    """EVT3 words (little-endian uint16) for events in time order: TIME_HIGH, TIME_LOW and
    ADDR_Y words where they change (all three before the first event); then, as a
    Prophesee IMX636 reads out its rows in 32-pixel groups, the events that follow each
    other at one time on one row, with one polarity and increasing x inside one 32-pixel
    group: four or more as VECT_BASE_X (the group's first x) + VECT_12 + VECT_12 + VECT_8,
    fewer as one ADDR_X each (never longer than the vector). With ``vectors=False``, one
    ADDR_X per event (as event_camera_codecs' encoder writes them).

    The sensor clock is ``(t - time_offset_ns) / 1000`` us; raises ValueError when a time is
    not a whole microsecond after the offset, negative, or out of order, or when x or y
    needs more than the format's 11 bits. Times beyond 2^24 us are written modulo 2^24 (the
    decoder counts the rollovers, as the camera's would need TIME_HIGH words at least every
    2^24 us - 10 x 4096 us; raises ValueError otherwise).
    """
    if len(events) == 0:
        return np.empty(0, "<u2")
    relative = events.t - np.int64(time_offset_ns)
    if relative.min() < 0 or np.any(relative % 1000):
        raise ValueError("evt3 encoding needs times that are whole microseconds at or after "
                         f"the offset {time_offset_ns} ns")
    microseconds = relative // 1000
    if np.any(np.diff(microseconds) < 0):
        raise ValueError("evt3 encoding needs events in time order")
    if np.any(np.diff(microseconds) >= _EVT3_TIME_HIGH_PERIOD_US - 11 * 4096):
        raise ValueError("evt3 encoding cannot represent a gap of 16.7 s or more between events")
    if int(events.x.max()) >= 2048 or int(events.y.max()) >= 2048:
        raise ValueError("evt3 encoding holds coordinates below 2048 px")
    words = np.empty(7 * len(events), np.int64)
    n = _evt3_encode(microseconds, events.x.astype(np.int64), events.y.astype(np.int64),
                     (events.p > 0).astype(np.int64), bool(vectors), words)
    return words[:n].astype("<u2")


#: a new stream's state: the decoder itself carries it from packet to packet
new_stream_state = Evt3Decoder


def decode_packet(payload: np.ndarray, time_base: int, is_bigendian: bool, payload_offset: int,
                  width: int, height: int, state: Evt3Decoder) -> tuple[Events, Triggers, int]:
    """One packet's payload bytes -> (Events, Triggers, events outside the sensor (dropped)),
    advancing the stream's decoder ``state`` (:meth:`Evt3Decoder.decode_packet`);
    ``time_base`` plays no part (undefined for evt3)."""
    return state.decode_packet(payload, is_bigendian, payload_offset, width, height)


def encode_packet(events: Events, time_base: int | None, sensor_time_offset_ns: int) -> tuple[int, bytes]:
    """(time_base written: 0, payload bytes): :func:`encode_evt3_words` of the sensor clock
    ``(t - sensor_time_offset_ns) / 1000`` us; the ``time_base`` argument plays no part."""
    return 0, encode_evt3_words(events, sensor_time_offset_ns).tobytes()
