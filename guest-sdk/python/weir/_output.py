"""Where an operator's records go, and its handle on the host's timers and clocks.

:class:`Output` encodes records straight into one batch for the main output and one per side
output. A batch is handed to the host (``emit`` / ``emit-to``) when it passes
:data:`FLUSH_AT` bytes and at the end of the call, so the guest's memory for output stays
bounded and host calls stay few; a call that fails hands on nothing more. The component and the
test harness both go through this class, with different hosts (``weir._host``), so the harness
sees the very batches the host would.

The flush threshold is the Rust SDK's (1 MiB), so that an operator written with either SDK
emits the same batches for the same input, not only the same records: the cross-language tests
of the project compare batches byte for byte.

A use the ABI forbids (docs/ABI.md sections 4 and 15) raises :class:`~weir.WeirError` at once,
with a message naming the fault; the call fails with it even if the operator catches it, as the
host would fail it.
"""

from ._batch import EVENT_TIME, PROCESSING_TIME, BatchWriter, to_bytes
from ._errors import WeirError

__all__ = ["Output", "FLUSH_AT", "NO_WATERMARK", "END_OF_TIME"]

# A batch is handed on once its encoding reaches this many bytes.
FLUSH_AT = 1 << 20

# The watermark before the first one arrives: every timestamp is after it.
NO_WATERMARK = -(2**63)

# The final watermark, reached when every input has ended: every event-time timer fires.
END_OF_TIME = 2**63 - 1

# The longest side output name, in bytes of UTF-8.
MAX_OUTPUT_NAME_BYTES = 255

# The calls that may use timers (docs/ABI.md section 4): all those an Output is handed to but
# finish.
_TIMER_CALLS = frozenset(("process", "on_timers", "on_watermark"))


class Output:
    """The sink for an operator's records and its way to the host's timers and clocks, handed to
    ``process``, ``on_timers``, ``on_watermark`` and ``finish``.

    Keys and values may be bytes-like or str (encoded as UTF-8); timestamps are ints in the
    range of i64, in milliseconds.
    """

    __slots__ = ("_host", "_main", "_sides", "_call", "_fault")

    def __init__(self, host):
        """An output whose batches and timer calls go to ``host`` (a ``weir._host.Host``)."""
        self._host = host
        self._main = BatchWriter()
        # Side output name -> its batch, in the order of first use; kept across calls.
        self._sides = {}
        # The running call (process, on_timers, on_watermark or finish), or None between calls.
        self._call = None
        # The first forbidden use of the ABI in the running call: it fails the call.
        self._fault = None

    def emit(self, key, value, timestamp: int) -> None:
        """Emits one record on the main output."""
        if self._call is None:
            self._refuse(_outside("emit"))
        if key.__class__ is not bytes:
            key = to_bytes(key, "emit: the key")
        if value.__class__ is not bytes:
            value = to_bytes(value, "emit: the value")
        main = self._main
        main.add(key, value, timestamp)
        if len(main.buffer) >= FLUSH_AT:
            self._host.emit(main.take())

    def emit_to(self, output: str, key, value, timestamp: int) -> None:
        """Emits one record on the side output named ``output`` (docs/ABI.md section 15), a str
        of 1 to 255 bytes of UTF-8. The job wires side outputs like any edge; records on an
        output nothing reads are dropped by the host."""
        if self._call is None:
            self._refuse(_outside("emit_to"))
        side = self._sides.get(output) if output.__class__ is str else None
        if side is None:
            _check_output_name(self, output)
            side = self._sides[output] = BatchWriter()
        if key.__class__ is not bytes:
            key = to_bytes(key, "emit_to: the key")
        if value.__class__ is not bytes:
            value = to_bytes(value, "emit_to: the value")
        side.add(key, value, timestamp)
        if len(side.buffer) >= FLUSH_AT:
            self._host.emit_to(output, side.take())

    def set_timer(self, domain: int, timestamp: int, key) -> None:
        """Sets a timer for ``key`` at ``timestamp`` in ``domain`` (:data:`weir.EVENT_TIME`
        or :data:`weir.PROCESSING_TIME`). A timer is the triple (domain, timestamp, key):
        setting a set one changes nothing.

        An event-time timer fires once the watermark reaches ``timestamp``, a processing-time
        one once the host's clock does; both reach ``on_timers``. The host keeps the timers and
        checkpoints them: the operator's state need not hold them. Allowed in ``process``,
        ``on_timers`` and ``on_watermark``.
        """
        key = self._timer_args("set_timer", domain, timestamp, key)
        try:
            self._host.timer_set(domain, timestamp, key)
        except WeirError as e:
            # The harness's host refusing a timer (past the timer memory limit), as the real
            # host would fail the call: the call fails even if the operator catches it.
            self._refuse(str(e))

    def delete_timer(self, domain: int, timestamp: int, key) -> None:
        """Deletes the timer for ``key`` at ``timestamp`` in ``domain``, if it is set. Allowed
        where :meth:`set_timer` is."""
        key = self._timer_args("delete_timer", domain, timestamp, key)
        self._host.timer_delete(domain, timestamp, key)

    def watermark(self) -> int:
        """The task's watermark: no record at or before it is still to come, except late ones.
        :data:`weir.NO_WATERMARK` before the first; while event-time timers fire, already the
        watermark that fires them."""
        return self._host.current_time(EVENT_TIME)

    def processing_time(self) -> int:
        """The host's clock, in milliseconds since the Unix epoch (in the harness, the clock
        the test sets)."""
        return self._host.current_time(PROCESSING_TIME)

    def _timer_args(self, method: str, domain, timestamp, key) -> bytes:
        """Checks a timer call against the ABI's rules and returns its key as bytes."""
        if self._call not in _TIMER_CALLS:
            where = "between calls" if self._call is None else f"during {self._call}"
            self._refuse(
                f"{method} is not allowed {where}: timers may be set and deleted in process, "
                "on_timers and on_watermark (docs/ABI.md section 4)"
            )
        if type(domain) is not int or domain not in (EVENT_TIME, PROCESSING_TIME):
            self._refuse(
                f"{method}: the domain must be weir.EVENT_TIME (0) or weir.PROCESSING_TIME (1), "
                f"not {domain!r}"
            )
        if type(timestamp) is not int or not NO_WATERMARK <= timestamp <= END_OF_TIME:
            self._refuse(
                f"{method}: the timestamp must be an int from -2**63 to 2**63-1, not {timestamp!r}"
            )
        return to_bytes(key, f"{method}: the key")

    def _state_get(self, request: bytes) -> bytes:
        """Reads keyed state (:class:`~weir.ValueState`): the host's ``state-get``."""
        if self._call is None:
            self._refuse(_outside("keyed state"))
        try:
            return self._host.state_get(request)
        except WeirError as e:
            # The harness's host refusing the request, as the real host would fail the call.
            self._refuse(str(e))

    def _state_write(self, request: bytes) -> None:
        """Writes keyed state (:class:`~weir.ValueState`): the host's ``state-write``."""
        if self._call is None:
            self._refuse(_outside("keyed state"))
        try:
            self._host.state_write(request)
        except WeirError as e:
            self._refuse(str(e))

    def _refuse(self, message: str):
        """Records a forbidden use, which fails the call (the first one is reported), and
        raises it."""
        error = WeirError(message)
        if self._fault is None:
            self._fault = error
        raise error

    def _begin(self, call: str) -> None:
        """Starts ``call``: what follows is emitted during it."""
        self._call = call
        self._fault = None

    def _end(self, succeeded: bool):
        """Ends the running call: hands on what it emitted if it ``succeeded`` and made no
        forbidden use, drops it otherwise. Returns the forbidden use, which fails the call."""
        fault, self._call, self._fault = self._fault, None, None
        if succeeded and fault is None:
            if self._main.count:
                self._host.emit(self._main.take())
            for name, side in self._sides.items():
                if side.count:
                    self._host.emit_to(name, side.take())
        else:
            self._main.clear()
            for side in self._sides.values():
                side.clear()
        return fault


def _outside(method: str) -> str:
    """The message for ``method`` called on an Output between calls."""
    return (
        f"{method} is not allowed between calls: records may be emitted only during process, "
        "on_timers, on_watermark and finish (docs/ABI.md section 4)"
    )


def _check_output_name(out: Output, name) -> None:
    """Refuses (through ``out``) a side output name the host would refuse."""
    if not isinstance(name, str):
        out._refuse(f"emit_to: a side output name must be a str, not {type(name).__name__}")
    try:
        size = len(name.encode())
    except UnicodeEncodeError as e:
        out._refuse(f"emit_to: the side output name {name!r} is not UTF-8 text: {e}")
    if not 1 <= size <= MAX_OUTPUT_NAME_BYTES:
        out._refuse(
            f"emit_to: the side output name {name!r} is {size} bytes long; names are 1 to "
            f"{MAX_OUTPUT_NAME_BYTES} bytes"
        )
