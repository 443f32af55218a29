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

Nothing is decoded before the stream's first TIME_HIGH followed by a TIME_LOW. Sensor
time = the camera's own microsecond clock x 1000, 24-bit rollovers counted from the first
packet of the stream (``time_base`` is undefined for evt3), plus
:attr:`Evt3Decoder.time_offset_ns`. Time, row and vector base carry over from packet to
packet: one :class:`Evt3Decoder` per stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from focus_ros.codecs._cdr import EventDecodeError
from focus_ros.codecs._payload import payload_words
from focus_ros.events import Events

ENCODING_EVT3 = "evt3"
EVT3_ADDR_Y, EVT3_ADDR_X, EVT3_VECT_BASE_X, EVT3_VECT_12, EVT3_VECT_8 = 0x0, 0x2, 0x3, 0x4, 0x5
EVT3_TIME_LOW, EVT3_TIME_HIGH, EVT3_EXT_TRIGGER = 0x6, 0x8, 0xA
_EVT3_TIME_HIGH_PERIOD_US = 1 << 24

# The decoder's state: an int64 array the kernel updates in place, slot by slot: 0 TIME_HIGH,
# 1 TIME_LOW, 2 y, 3 vector base x, 4 vector polarity, 5 a TIME_HIGH seen, 6 a full time seen,
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


@numba.njit(cache=True, nogil=True)
def _evt3_decode_words(words, state, width, height, x, y, t_us, on, trigger_t_us,
                       trigger_edge, trigger_id):
    """Decode EVT3 words into preallocated arrays (or only count when x is empty).

    Returns (events written, triggers written, index of the first bad word or -1, kind
    of fault: 0 none, 1 unknown word type, 2 event outside the sensor). ``state`` is
    updated.
    """
    count = 0
    triggers = 0
    store = len(x) > 0
    store_triggers = len(trigger_t_us) > 0
    for i in range(len(words)):
        word = np.int64(words[i])
        kind = word >> 12
        value = word & 0xFFF
        if kind == 0x8:  # TIME_HIGH
            high = value
            last_high = state[0]
            if state[5] == 1 and high < last_high and last_high - high > 10:
                state[7] += 1
            state[0] = high
            state[5] = 1
        elif kind == 0x6:  # TIME_LOW
            state[1] = value
            if state[5] == 1:
                state[6] = 1
        elif kind == 0x0:  # ADDR_Y
            state[2] = value & 0x7FF
        elif kind == 0x2 or kind == 0x3:  # ADDR_X or VECT_BASE_X
            ex = value & 0x7FF
            polarity = (value >> 11) & 1
            if kind == 0x3:
                state[3] = ex
                state[4] = polarity
            elif state[6] == 1:
                if ex >= width or state[2] >= height:
                    return count, triggers, i, 2
                if store:
                    x[count] = ex
                    y[count] = state[2]
                    t_us[count] = state[7] * 16777216 + state[0] * 4096 + state[1]
                    on[count] = polarity
                count += 1
        elif kind == 0x4 or kind == 0x5:  # VECT_12, VECT_8
            bits = 12 if kind == 0x4 else 8
            if state[6] == 1:
                for bit in range(bits):
                    if (value >> bit) & 1:
                        ex = state[3] + bit
                        if ex >= width or state[2] >= height:
                            return count, triggers, i, 2
                        if store:
                            x[count] = ex
                            y[count] = state[2]
                            t_us[count] = state[7] * 16777216 + state[0] * 4096 + state[1]
                            on[count] = state[4]
                        count += 1
            state[3] += bits
        elif kind == 0xA:  # EXT_TRIGGER
            if state[6] == 1:
                if store_triggers:
                    trigger_t_us[triggers] = state[7] * 16777216 + state[0] * 4096 + state[1]
                    trigger_edge[triggers] = value & 1
                    trigger_id[triggers] = (value >> 8) & 0xF
                triggers += 1
        elif kind == 0x7 or kind == 0x9 or kind == 0xE or kind == 0xF:
            pass
        else:
            return count, triggers, i, 1
    return count, triggers, -1, 0


@numba.njit(cache=True, nogil=True)
def _evt3_decode_packet(words, state, width, height):
    """Count (on a copy of the state), allocate, decode: one call from Python. Returns
    (x, y, t_us, on, trigger t_us, edge, id, index of the first bad word or -1, fault);
    the state advances only when there is no fault."""
    empty16 = np.empty(0, np.uint16)
    empty8 = np.empty(0, np.uint8)
    empty64 = np.empty(0, np.int64)
    count, trigger_count, bad, fault = _evt3_decode_words(
        words, state.copy(), width, height, empty16, empty16, empty64, empty8, empty64, empty8,
        empty8)
    if fault:
        return empty16, empty16, empty64, empty8, empty64, empty8, empty8, bad, fault
    x = np.empty(count, np.uint16)
    y = np.empty(count, np.uint16)
    t_us = np.empty(count, np.int64)
    on = np.empty(count, np.uint8)
    trigger_t_us = np.empty(trigger_count, np.int64)
    edge = np.empty(trigger_count, np.uint8)
    trigger_id = np.empty(trigger_count, np.uint8)
    _evt3_decode_words(words, state, width, height, x, y, t_us, on, trigger_t_us, edge, trigger_id)
    return x, y, t_us, on, trigger_t_us, edge, trigger_id, -1, 0


class Evt3Decoder:
    """Stateful EVT 3.0 decoder for one stream of packets (times, y, vector base carry over).

    time_offset_ns: added to the decoded sensor time (us x 1000) to give Events.t (ns).
    """

    def __init__(self, time_offset_ns: int = 0):
        self.time_offset_ns = int(time_offset_ns)
        self.state = np.zeros(_STATE_SIZE, np.int64)

    def decode(self, payload: np.ndarray, is_bigendian: bool = False, payload_offset: int = 0,
               width: int = 2048, height: int = 2048) -> Events:
        """Decode one packet's payload bytes; raise EventDecodeError on a bad word."""
        return self.decode_with_triggers(payload, is_bigendian, payload_offset, width, height)[0]

    def decode_with_triggers(self, payload: np.ndarray, is_bigendian: bool = False,
                             payload_offset: int = 0, width: int = 2048,
                             height: int = 2048) -> tuple[Events, Triggers]:
        """Decode one packet's payload bytes into CD events and external-trigger events."""
        words = payload_words(payload, 2, is_bigendian, ENCODING_EVT3, payload_offset)
        x, y, t_us, on, trigger_t_us, edge, trigger_id, bad_word, fault = _evt3_decode_packet(
            words, self.state, width, height)
        if fault:
            word = int(words[bad_word])
            what = (f"unknown EVT3 word type {word >> 12:#x}" if fault == 1 else
                    f"EVT3 event outside the sensor {width}x{height} px")
            raise EventDecodeError(f"malformed message: {what} in word {word:#06x} at byte "
                                   f"offset {payload_offset + 2 * bad_word}")
        offset = np.int64(self.time_offset_ns)
        t_us *= 1000
        t_us += offset
        trigger_t_us *= 1000
        trigger_t_us += offset
        return (Events(x, y, t_us, on.view(np.int8) * np.int8(2) - np.int8(1)),
                Triggers(trigger_t_us, edge, trigger_id))


def encode_evt3_words(events: Events, time_offset_ns: int = 0) -> np.ndarray:
    """EVT3 words (little-endian uint16) for events in time order: TIME_HIGH, TIME_LOW and
    ADDR_Y words where they change (all three before the first event), one ADDR_X per event.

    The sensor clock is ``(t - time_offset_ns) / 1000`` us; raises ValueError when a time is
    not a whole microsecond after the offset, negative, or out of order. Times beyond 2^24 us
    are written modulo 2^24 (the decoder counts the rollovers, as the camera's would need
    TIME_HIGH words at least every 2^24 us - 10 x 4096 us; raises ValueError otherwise).
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
    sensor_time = microseconds % _EVT3_TIME_HIGH_PERIOD_US
    high = sensor_time >> 12
    low = sensor_time & 0xFFF
    first = np.zeros(len(events), bool)
    first[0] = True
    changed_high = first | np.r_[False, microseconds[1:] >> 12 != microseconds[:-1] >> 12]
    changed_low = changed_high | np.r_[False, low[1:] != low[:-1]]
    changed_y = first | np.r_[False, events.y[1:] != events.y[:-1]]
    candidates = np.stack([
        (EVT3_TIME_HIGH << 12) | high,
        (EVT3_TIME_LOW << 12) | low,
        (EVT3_ADDR_Y << 12) | events.y.astype(np.int64),
        (EVT3_ADDR_X << 12) | ((events.p > 0).astype(np.int64) << 11) | events.x.astype(np.int64),
    ], axis=1)
    keep = np.stack([changed_high, changed_low, changed_y, np.ones(len(events), bool)], axis=1)
    return candidates[keep].astype("<u2")


#: a new stream's state: the decoder itself carries it from packet to packet
new_stream_state = Evt3Decoder


def decode_packet(payload: np.ndarray, time_base: int, is_bigendian: bool, payload_offset: int,
                  width: int, height: int, state: Evt3Decoder) -> tuple[Events, Triggers]:
    """One packet's payload bytes -> (Events, Triggers), advancing the stream's decoder
    ``state``; ``time_base`` plays no part (undefined for evt3)."""
    return state.decode_with_triggers(payload, is_bigendian, payload_offset, width, height)


def encode_packet(events: Events, time_base: int | None, sensor_time_offset_ns: int) -> tuple[int, bytes]:
    """(time_base written: 0, payload bytes): :func:`encode_evt3_words` of the sensor clock
    ``(t - sensor_time_offset_ns) / 1000`` us; the ``time_base`` argument plays no part."""
    return 0, encode_evt3_words(events, sensor_time_offset_ns).tobytes()
