"""Batches: how records cross between the host and the guest, decoded and encoded.

Layout (docs/ABI.md section 5), little-endian, no padding::

    offset 0  record_count u32
    offset 4  port u32         the input port for input batches; 0 for output batches
    then record_count records, each:
              timestamp i64, key_len u32, value_len u32, key bytes, value bytes

A batch is exactly as long as its records: leftover bytes make it malformed. Decoding is the
hot path of every Python operator, so it walks the bytes once with precompiled
:class:`struct.Struct` readers, slicing keys and values straight out of the batch, and reports
a malformed batch with the same words as the Rust decoder (``weir-abi``): which record, which
field, at what offset.
"""

import struct
from collections import namedtuple

from ._errors import WeirError

__all__ = [
    "Record",
    "FiredTimer",
    "Batch",
    "FiredTimers",
    "BatchWriter",
    "encode_batch",
    "to_bytes",
    "EVENT_TIME",
    "PROCESSING_TIME",
]

# The time domains (docs/ABI.md section 15): the domain argument of the timer imports and the
# port of a fired-timer batch.
EVENT_TIME = 0
PROCESSING_TIME = 1

_DOMAINS = (EVENT_TIME, PROCESSING_TIME)

_HEADER = struct.Struct("<II")
_RECORD = struct.Struct("<qII")
HEADER_LEN = _HEADER.size
RECORD_HEADER_LEN = _RECORD.size

Record = namedtuple("Record", "key value timestamp")
Record.__doc__ = """One record: ``key`` and ``value`` (bytes; the key is empty when the record
has none) and ``timestamp`` (event time in milliseconds, an int in the range of i64).

A named tuple: ``for key, value, timestamp in batch`` works too.
"""

FiredTimer = namedtuple("FiredTimer", "domain timestamp key")
FiredTimer.__doc__ = """One timer that fired: its ``domain`` (:data:`weir.EVENT_TIME` or
:data:`weir.PROCESSING_TIME`), the ``timestamp`` it was set for and the ``key`` it was set for
(bytes).
"""

_new_tuple = tuple.__new__


def to_bytes(data, what: str) -> bytes:
    """``data`` as bytes: bytes as they are, another bytes-like object copied, a str encoded
    as UTF-8. Anything else raises :class:`~weir.WeirError` naming ``what``."""
    if data.__class__ is bytes:
        return data
    if isinstance(data, str):
        try:
            return data.encode()
        except UnicodeEncodeError as e:
            raise WeirError(f"{what} is a str that does not encode as UTF-8: {e}") from None
    try:
        return memoryview(data).tobytes()
    except TypeError:
        raise WeirError(f"{what} must be bytes-like or str, not {type(data).__name__}") from None


def _decode(data: bytes, what: str):
    """The port and the records of the encoded batch ``data``; fails with a
    :class:`~weir.WeirError` naming ``what`` and the fault when it is malformed."""
    size = len(data)
    if size < HEADER_LEN:
        raise WeirError(
            f"malformed {what}: batch is {size} bytes, shorter than its {HEADER_LEN}-byte "
            "header (record count, port)"
        )
    count, port = _HEADER.unpack_from(data, 0)
    records = []
    append = records.append
    unpack = _RECORD.unpack_from
    make = _new_tuple
    pos = HEADER_LEN
    try:
        for _ in range(count):
            timestamp, key_len, value_len = unpack(data, pos)
            key = pos + RECORD_HEADER_LEN
            value = key + key_len
            pos = value + value_len
            if pos > size:
                break
            append(make(Record, (data[key:value], data[value:pos], timestamp)))
        else:
            if pos != size:
                raise WeirError(
                    f"malformed {what}: {size - pos} bytes follow the last of the {count} "
                    "records the header announces"
                )
            return port, records
    except struct.error:
        pass
    raise WeirError(f"malformed {what}: {_locate_error(data, count)}")


def _locate_error(data: bytes, count: int) -> str:
    """Where the batch ``data``, known to be malformed, goes wrong: the first field of the
    first record that does not fit. Walks field by field, so it runs only for bad batches."""
    size = len(data)
    pos = HEADER_LEN
    for index in range(count):
        for needed in (8, 4, 4):  # the timestamp and the two lengths
            if pos + needed > size:
                return _short(index, needed, pos, size)
            pos += needed
        _, key_len, value_len = _RECORD.unpack_from(data, pos - RECORD_HEADER_LEN)
        for needed in (key_len, value_len):
            if pos + needed > size:
                return _short(index, needed, pos, size)
            pos += needed
    return f"{size - pos} bytes follow the last of the {count} records the header announces"


def _short(index: int, needed: int, offset: int, size: int) -> str:
    """The fault of a record whose field runs past the end of the batch."""
    return f"record {index} needs {needed} bytes at offset {offset} but the batch ends at {size}"


class Batch:
    """A batch of input records, decoded and checked once, in full, before the operator sees it.

    ``batch.port`` is the input it arrived on (inputs are numbered from 0 in the order the job
    file lists them); ``len(batch)`` is its number of records; iterating it yields
    :class:`Record`\\ s in order, and ``batch[i]`` is the i-th.
    """

    __slots__ = ("port", "_records")

    def __init__(self, data, what: str = "input batch"):
        """Decodes the encoded batch ``data`` (bytes-like); a malformed one raises
        :class:`~weir.WeirError` naming ``what``, the record, the field and the offset."""
        if data.__class__ is not bytes:
            try:
                data = memoryview(data).tobytes()
            except TypeError:
                raise WeirError(f"{what} must be bytes-like, not {type(data).__name__}") from None
        self.port, self._records = _decode(data, what)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self):
        return iter(self._records)

    def __getitem__(self, index):
        return self._records[index]

    def __repr__(self) -> str:
        return f"Batch(port={self.port}, records={self._records!r})"


class FiredTimers:
    """The timers that fired in one ``on_timers`` call, all of one domain, in firing order: by
    timestamp, ties by key (bytewise).

    ``timers.domain`` is :data:`weir.EVENT_TIME` or :data:`weir.PROCESSING_TIME`; iterating
    yields :class:`FiredTimer`\\ s; ``len(timers)`` is how many fired.
    """

    __slots__ = ("domain", "_timers")

    def __init__(self, data):
        """Decodes a fired-timer batch (docs/ABI.md section 15): one record per timer, the
        batch's port its domain."""
        batch = Batch(data, "fired-timer batch")
        if batch.port not in _DOMAINS:
            raise WeirError(
                f"fired timers arrived with port {batch.port}, which is no time domain "
                "(0 event, 1 processing)"
            )
        self.domain = domain = batch.port
        self._timers = [_new_tuple(FiredTimer, (domain, r[2], r[0])) for r in batch]

    def __len__(self) -> int:
        return len(self._timers)

    def __iter__(self):
        return iter(self._timers)

    def __repr__(self) -> str:
        return f"FiredTimers(domain={self.domain}, timers={self._timers!r})"


class BatchWriter:
    """Encodes records into one growing batch (port 0, as output batches must be), for
    :class:`~weir.Output`: ``add`` appends a record, ``take`` returns the batch and starts
    the next."""

    __slots__ = ("buffer", "count")

    def __init__(self):
        self.buffer = bytearray(HEADER_LEN)
        self.count = 0

    def add(self, key: bytes, value: bytes, timestamp: int) -> None:
        """Appends one record; ``key`` and ``value`` are bytes. A timestamp that is not an
        int in the range of i64 raises :class:`~weir.WeirError`."""
        try:
            header = _RECORD.pack(timestamp, len(key), len(value))
        except struct.error:
            raise WeirError(
                f"a record's timestamp must be an int from -2**63 to 2**63-1, not {timestamp!r}"
            ) from None
        buffer = self.buffer
        buffer += header
        buffer += key
        buffer += value
        self.count += 1

    def take(self, port: int = 0) -> bytes:
        """The encoded batch of the records added since the last ``take``, with ``port`` in
        its header (0, as output batches must have, unless the harness encodes input);
        the next batch starts empty."""
        try:
            _HEADER.pack_into(self.buffer, 0, self.count, port)
        except struct.error:
            raise WeirError(f"a port must be an int from 0 to 2**32-1, not {port!r}") from None
        batch = bytes(self.buffer)
        self.clear()
        return batch

    def clear(self) -> None:
        """Drops the records added since the last ``take``."""
        del self.buffer[HEADER_LEN:]
        self.count = 0


def encode_batch(records, port: int = 0) -> bytes:
    """The encoded batch of ``records`` on ``port``: what the host passes to ``process``.
    Each record is a ``(key, value, timestamp)`` such as a :class:`Record`; keys and values
    may be bytes-like or str (encoded as UTF-8)."""
    writer = BatchWriter()
    for key, value, timestamp in records:
        writer.add(to_bytes(key, "a record's key"), to_bytes(value, "a record's value"), timestamp)
    return writer.take(port)
