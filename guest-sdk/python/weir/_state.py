"""Keyed state kept on the host (docs/STATE.md, docs/ABI.md section 17).

A :class:`ValueState` is one value per key, kept by the host in a store beside the task rather
than in the operator's attributes: it is not capped by the component's memory, it is
checkpointed by what changed instead of pickled whole at every checkpoint, and it moves with its
keys when the operator's parallelism changes, with no code in the operator. Values are
serialised per key with :mod:`pickle` by default.

Reads and writes are batched: :meth:`ValueState.get_many` reads the values of many keys in one
call to the host and :meth:`ValueState.put_many` writes many in one, so a batch of records costs
two host calls however many keys it has (a host call from Python costs microseconds).

The requests are the packed buffers of ``weir_abi::state`` (abi/src/state.rs), written and read
here with :mod:`struct`; the harness's emulated host (``weir.testing``) reads them with
:func:`reads` and :func:`writes` as the host does. The key-group functions are those of
``weir_abi::key_group``, which the harness splits state with as the host splits its stores.
"""

import pickle
import struct

from ._batch import to_bytes
from ._errors import WeirError

__all__ = [
    "ValueState",
    "key_hash",
    "key_group",
    "owner",
    "group_range",
    "DEFAULT_MAX_PARALLELISM",
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
]

# The longest key an entry may have: 64 KiB.
MAX_KEY_BYTES = 64 * 1024
# The longest value an entry may have: 16 MiB.
MAX_VALUE_BYTES = 16 * 1024 * 1024
# The length a read result gives an entry that has no value.
ABSENT = 0xFFFF_FFFF
# The op byte of a write that sets a value, and of one that removes it.
PUT = 1
DELETE = 0
# The most state numbers: one u16.
_MAX_STATE = 0xFFFF

# The job's max_parallelism when the job file sets none: the number of key groups.
DEFAULT_MAX_PARALLELISM = 128

# The pickle protocol of values: fixed, so that what one build of the SDK wrote another reads.
PICKLE_PROTOCOL = 5

_FNV_OFFSET = 0xCBF2_9CE4_8422_2325
_FNV_PRIME = 0x0000_0100_0000_01B3
_U64 = (1 << 64) - 1

_READ = struct.Struct("<HI")
_WRITE = struct.Struct("<BHI")
_LEN = struct.Struct("<I")


def key_hash(key: bytes) -> int:
    """A key's 64-bit hash: FNV-1a, as ``weir_abi::key_group::key_hash`` computes it."""
    hash = _FNV_OFFSET
    for byte in key:
        hash = ((hash ^ byte) * _FNV_PRIME) & _U64
    return hash


def key_group(key: bytes, max_parallelism: int) -> int:
    """The key group of ``key`` among ``max_parallelism`` groups."""
    return key_hash(key) % max_parallelism


def owner(group: int, parallelism: int, max_parallelism: int) -> int:
    """The subtask, of ``parallelism``, that owns key group ``group``."""
    return group * parallelism // max_parallelism


def group_range(subtask: int, parallelism: int, max_parallelism: int) -> range:
    """The key groups subtask ``subtask`` of ``parallelism`` owns: a contiguous range."""

    def start(i):
        return -(-i * max_parallelism // parallelism)

    return range(start(subtask), start(subtask + 1))


class _Pickle:
    """The default serialiser: :mod:`pickle` at :data:`PICKLE_PROTOCOL`."""

    @staticmethod
    def dumps(value) -> bytes:
        return pickle.dumps(value, protocol=PICKLE_PROTOCOL)

    @staticmethod
    def loads(data: bytes):
        return pickle.loads(data)


class ValueState:
    """One value per key, kept on the host under a state number.

    ``COUNTS = ValueState(0)`` keeps values under state 0; another :class:`ValueState` of the
    same operator must use another number (0 to 65535). It holds no values itself, so it may be
    a module constant or an attribute; an operator whose state is all on the host has an empty
    snapshot, which the host can rescale.

    ``serializer`` turns a value into bytes and back: any object with ``dumps(value)`` and
    ``loads(data)`` (:mod:`pickle` by default; :mod:`json` works too, its str encoded as UTF-8).
    ``None`` is no value: :meth:`get_many` gives it for a key that has none, and
    :meth:`put_many` removes a key's value when given it.

    Every method takes the call's :class:`~weir.Output`: the state may be used where records may
    be emitted (``process``, ``on_timers``, ``on_watermark``, ``finish``).
    """

    __slots__ = ("state", "serializer")

    def __init__(self, state: int, serializer=None):
        if type(state) is not int or not 0 <= state <= _MAX_STATE:
            raise WeirError(f"a state number must be an int from 0 to {_MAX_STATE}, not {state!r}")
        self.state = state
        self.serializer = _Pickle if serializer is None else serializer

    def get_many(self, out, keys):
        """The value of each of ``keys`` (bytes-like or str), in order, ``None`` where a key has
        none; read in one call to the host."""
        pack = _READ.pack
        state = self.state
        parts = []
        count = 0
        for key in keys:
            if key.__class__ is not bytes:
                key = to_bytes(key, "get_many: a key")
            parts.append(pack(state, len(key)))
            parts.append(key)
            count += 1
        if count == 0:
            return []
        result = out._state_get(b"".join(parts))
        loads = self.serializer.loads
        values = []
        offset = 0
        unpack = _LEN.unpack_from
        for _ in range(count):
            if offset + 4 > len(result):
                raise WeirError("the host's state result ends early")
            (length,) = unpack(result, offset)
            offset += 4
            if length == ABSENT:
                values.append(None)
                continue
            data = result[offset : offset + length]
            offset += length
            try:
                values.append(loads(data))
            except Exception as e:
                raise WeirError(
                    f"a value of state {state} does not deserialise ({type(e).__name__}: {e}): "
                    "was the state number used with another serializer?"
                ) from None
        return values

    def get(self, out, key):
        """The value of ``key``, or ``None``."""
        return self.get_many(out, (key,))[0]

    def put_many(self, out, items) -> None:
        """Sets each key of ``items`` (pairs of key and value) to its value, or removes it where
        the value is ``None``, in one call to the host; the last write of a key wins."""
        pack = _WRITE.pack
        length = _LEN.pack
        state = self.state
        dumps = self.serializer.dumps
        parts = []
        for key, value in items:
            if key.__class__ is not bytes:
                key = to_bytes(key, "put_many: a key")
            if value is None:
                parts.append(pack(DELETE, state, len(key)))
                parts.append(key)
                continue
            data = dumps(value)
            if isinstance(data, str):
                data = data.encode()
            elif data.__class__ is not bytes:
                data = bytes(data)
            parts.append(pack(PUT, state, len(key)))
            parts.append(key)
            parts.append(length(len(data)))
            parts.append(data)
        if parts:
            out._state_write(b"".join(parts))

    def put(self, out, key, value) -> None:
        """Sets the value of ``key`` (``None`` removes it)."""
        self.put_many(out, ((key, value),))

    def delete(self, out, key) -> None:
        """Removes the value of ``key``."""
        self.put_many(out, ((key, None),))

    def __repr__(self):
        return f"ValueState({self.state})"


def _key(key: bytes):
    if len(key) > MAX_KEY_BYTES:
        raise _malformed(f"a key is {len(key)} bytes long, over the {MAX_KEY_BYTES}-byte limit")
    return key


def _malformed(problem: str) -> WeirError:
    return WeirError(f"the keyed-state request is malformed: {problem} (docs/ABI.md section 17)")


def _take(request: bytes, offset: int, needed: int) -> None:
    if offset + needed > len(request):
        raise _malformed(
            f"it ends at byte {len(request)} within an entry that needs {needed} bytes at {offset}"
        )


def reads(request: bytes):
    """The entries of a read request, as ``(state, key)``, read as the host reads them: a
    malformed request raises :class:`~weir.WeirError`."""
    entries = []
    offset = 0
    while offset < len(request):
        _take(request, offset, 6)
        state, length = _READ.unpack_from(request, offset)
        offset += 6
        _take(request, offset, length)
        entries.append((state, _key(request[offset : offset + length])))
        offset += length
    return entries


def writes(request: bytes):
    """The entries of a write request, as ``(state, key, value or None)``, read as the host
    reads them: a malformed request raises :class:`~weir.WeirError`."""
    entries = []
    offset = 0
    while offset < len(request):
        _take(request, offset, 7)
        op, state, length = _WRITE.unpack_from(request, offset)
        if op not in (PUT, DELETE):
            raise _malformed(
                f"byte {offset} holds the op {op}, which is neither {PUT} (put) nor "
                f"{DELETE} (delete)"
            )
        offset += 7
        _take(request, offset, length)
        key = _key(request[offset : offset + length])
        offset += length
        value = None
        if op == PUT:
            _take(request, offset, 4)
            (length,) = _LEN.unpack_from(request, offset)
            offset += 4
            _take(request, offset, length)
            if length > MAX_VALUE_BYTES:
                raise _malformed(
                    f"a value is {length} bytes long, over the {MAX_VALUE_BYTES}-byte limit"
                )
            value = request[offset : offset + length]
            offset += length
        entries.append((state, key, value))
    return entries


def put_result(out: list, value) -> None:
    """Appends one entry's answer (bytes, or None for no value) to a read result's parts."""
    if value is None:
        out.append(_LEN.pack(ABSENT))
    else:
        out.append(_LEN.pack(len(value)))
        out.append(value)
