"""The host's imports, as the pure-Python SDK reaches them.

In a component the imports are the functions of ``wit_world.imports.host``, which only the
component glue (``_component``) may import; in plain CPython there are none. So the SDK talks
to a :class:`Host` object instead: the glue's wraps the real imports, the test harness's
(``weir.testing``) emulates them, and :class:`NativeHost`, the default, only writes log lines
to stderr. :class:`~weir.Output` is given its host; ``weir.log`` uses the process-wide one,
which the glue replaces with :func:`install`.
"""

import sys

from ._errors import WeirError

__all__ = ["Host", "NativeHost", "install", "current", "LEVEL_NAMES"]

# The log levels of the WIT enum ``level``, by their number.
LEVEL_NAMES = ("error", "warn", "info", "debug", "trace")


class Host:
    """What the guest can ask of the host (abi/wit/operator.wit, interface ``host``).

    Domains are ints (0 event time, 1 processing time), levels an index of
    :data:`LEVEL_NAMES`; batches are encoded (``weir._batch``). Callers have checked their
    arguments and that the running call allows the import.
    """

    def emit(self, batch: bytes) -> None:
        """Appends an encoded batch to the main output."""
        raise NotImplementedError

    def emit_to(self, output: str, batch: bytes) -> None:
        """Appends an encoded batch to the side output named ``output``."""
        raise NotImplementedError

    def timer_set(self, domain: int, timestamp: int, key: bytes) -> None:
        """Sets the timer (domain, timestamp, key)."""
        raise NotImplementedError

    def timer_delete(self, domain: int, timestamp: int, key: bytes) -> None:
        """Deletes the timer (domain, timestamp, key), if it is set."""
        raise NotImplementedError

    def current_time(self, domain: int) -> int:
        """The watermark (event time) or the host's clock in milliseconds (processing time)."""
        raise NotImplementedError

    def log(self, level: int, message: str) -> None:
        """Writes a line to the job's log."""
        raise NotImplementedError

    def state_get(self, request: bytes) -> bytes:
        """Reads keyed state: a read request in, its result out (interface ``keyed-state``,
        ``weir._state``)."""
        raise WeirError(_NO_KEYED_STATE)

    def state_write(self, request: bytes) -> None:
        """Applies a write request to keyed state (interface ``keyed-state``)."""
        raise WeirError(_NO_KEYED_STATE)


# Why a host gives no keyed state.
_NO_KEYED_STATE = (
    "keyed state (weir.ValueState) is kept by the host: in plain CPython, run the operator "
    "in weir.testing.Harness"
)


class NativeHost(Host):
    """The host of plain CPython, outside a component and outside the harness's calls: log
    lines go to stderr as ``[level] message``; nothing else is reachable."""

    def log(self, level: int, message: str) -> None:
        """Writes ``[level] message`` to stderr."""
        print(f"[{LEVEL_NAMES[level]}] {message}", file=sys.stderr)


_current: Host = NativeHost()


def install(host: Host) -> None:
    """Makes ``host`` the one ``weir.log`` writes to (the component glue installs the real
    host's imports)."""
    global _current
    _current = host


def current() -> Host:
    """The host ``weir.log`` writes to."""
    return _current
