"""Helpers shared by the EventPacket encodings: the payload as machine-order words, event
times as a camera's microsecond clock, and the pieces the word-by-word decoders of
``evt3`` and ``libcaer_cmp`` have in common.

Both formats say "the events of this word" in two ways: a single event (all four fields
given or carried over) and a *vector*, a bit mask of up to 12 neighbouring pixels along
one axis (x for evt3, y for libcaer_cmp) that share the other coordinate, the time and
the polarity. :func:`store_event` writes the one, :func:`store_vector` (one word's mask)
and :func:`store_bits` (several words' masks gathered) the other; each decoder allocates
its output once from :func:`event_bound` (exact for a well-formed packet, no second
decoding pass and no copy afterwards).

numba's cache does not follow a kernel's calls into another module: after changing a
kernel here, touch ``evt3.py``, ``libcaer_cmp.py`` and ``libcaer.py`` too (or clear their
``__pycache__``).
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from focus_ros.codecs._cdr import EventDecodeError
from focus_ros.events import Events

#: (bytes per word, big endian) -> the payload's word type
_WORD_TYPES = {(size, big): np.dtype((">" if big else "<") + ("u2" if size == 2 else "u4"))
               for size in (2, 4) for big in (False, True)}

#: output room past the bound: :func:`store_vector` writes all 12 slots of a vector
#: (branch-free) and keeps those of the set bits
VECTOR_SLACK = 12


def payload_words(payload: np.ndarray, word_bytes: int, is_bigendian: bool, encoding: str,
                  payload_offset: int) -> np.ndarray:
    """The payload bytes as a contiguous array of native-order 16- or 32-bit words
    (``word_bytes`` 2 or 4): a view of the message's own bytes when they are in the
    machine's order and aligned (no copy), a copy otherwise. EventDecodeError when the
    bytes are not a whole number of words."""
    if len(payload) % word_bytes:
        raise EventDecodeError(
            f"malformed message: {encoding} payload of {len(payload)} bytes at byte offset "
            f"{payload_offset} is not a whole number of {8 * word_bytes}-bit words", kind="partial_word")
    words = payload.view(_WORD_TYPES[word_bytes, is_bigendian])
    if not (words.dtype.isnative and words.flags.aligned):
        words = words.astype(words.dtype.newbyteorder("="))
    return words


def sensor_microseconds(events: Events, offset_ns: int, encoding: str) -> np.ndarray:
    """Event times as the camera's clock in whole microseconds since ``offset_ns``;
    ValueError when a time is before the offset or not a whole microsecond after it."""
    relative = events.t - np.int64(offset_ns)
    if len(events) and (relative.min() < 0 or np.any(relative % 1000)):
        raise ValueError(f"{encoding} encoding needs times that are whole microseconds at or "
                         f"after the sensor time offset {offset_ns} ns")
    return relative // 1000


@numba.njit(cache=True, nogil=True, inline="always")
def bit_count(mask):
    """The number of set bits of a mask of up to 16 bits."""
    mask = mask - ((mask >> 1) & 0x5555)
    mask = (mask & 0x3333) + ((mask >> 2) & 0x3333)
    mask = (mask + (mask >> 4)) & 0x0F0F
    return (mask + (mask >> 8)) & 0x1F


@numba.njit(cache=True, nogil=True)
def event_bound(words, single_code, vector12_code, vector8_code, other_code):
    """(events, other words): an upper bound of the events a packet's 16-bit words hold
    (one per word of ``single_code``, one per set bit of the 12 (``vector12_code``) or 8
    (``vector8_code``) mask bits of a vector word; -1 for a code the format lacks), exact
    when every event is valid; and how many words have ``other_code`` (evt3's triggers).

    One branch-free pass over the words, a fraction of the decoding's cost; the decoder
    allocates from it once."""
    events = 0
    others = 0
    for i in range(len(words)):
        word = np.int64(words[i])
        code = word >> 12
        mask = (word & 0xFFF) * (code == vector12_code) + (word & 0xFF) * (code == vector8_code)
        events += bit_count(mask) + (code == single_code)
        others += code == other_code
    return events, others


@numba.njit(cache=True, nogil=True)
def allocate_events(bound):
    """Output arrays x, y (uint16 px), t (int64 ns), p (int8, +-1) with room for ``bound``
    events and :data:`VECTOR_SLACK`."""
    size = bound + VECTOR_SLACK
    return (np.empty(size, np.uint16), np.empty(size, np.uint16), np.empty(size, np.int64),
            np.empty(size, np.int8))


@numba.njit(cache=True, nogil=True, inline="always")
def store_event(along, across, t, p, count, along_px, across_px, time_ns, polarity):
    """Write one event at index ``count`` (``along``/``across``: the x and y arrays in the
    order the format's vectors need); returns count + 1. The index is made unsigned so
    that numba leaves out its negative-index wraparound (a compare and an add per store,
    in the innermost loop of the decoders)."""
    index = np.uint64(count)
    along[index] = along_px
    across[index] = across_px
    t[index] = time_ns
    p[index] = polarity
    return count + 1


@numba.njit(cache=True, nogil=True, inline="always")
def store_vector(along, across, t, p, count, mask, bits, base_px, across_px, time_ns, polarity):
    """Write the events of a vector word at index ``count``: bit i of ``mask`` (``bits`` of
    them) is an event at ``base_px + i`` along the vector, ``across_px`` across it. All
    ``bits`` slots are written and the count advances by the set bits only (no branch per
    bit, faster than a loop over the set bits for one word; the arrays have
    :data:`VECTOR_SLACK` room). Returns the new count."""
    for bit in range(bits):
        index = np.uint64(count)
        along[index] = base_px + bit
        across[index] = across_px
        t[index] = time_ns
        p[index] = polarity
        count += (mask >> bit) & 1
    return count


@numba.njit(cache=True, nogil=True, inline="always")
def store_bits(along, across, t, p, count, mask, base_px, across_px, time_ns, polarity):
    """Write the events of a mask of up to 63 bits at index ``count``, one per set bit (bit i:
    ``base_px + i`` along the vector), lowest first. Better than :func:`store_vector` for
    the sparse masks of several vector words gathered into one (one loop exit instead of
    a branch per word). Returns the new count."""
    while mask != 0:
        index = np.uint64(count)
        along[index] = base_px + trailing_zeros(mask)
        across[index] = across_px
        t[index] = time_ns
        p[index] = polarity
        count += 1
        mask &= mask - 1
    return count
