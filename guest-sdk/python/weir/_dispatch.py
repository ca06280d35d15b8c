"""From the guest calls, with their bytes, to the operator's methods and back.

The component glue (``_component``) and the test harness (``weir.testing``) both call these
functions, so a harness test runs the very batch decoding, output flushing, rule checks and
default snapshot pickling that a guest runs in the host; only the WIT bindings are left out.
"""

from ._batch import Batch, FiredTimers
from ._errors import WeirError
from ._operator import Operator

__all__ = [
    "init",
    "process",
    "on_timers",
    "on_watermark",
    "finish",
    "snapshot",
    "restore",
    "checkpoint_complete",
]


def init(operator_class, ctx):
    """``init``: creates the operator instance from its context."""
    operator = operator_class(ctx)
    if not isinstance(operator, Operator):
        raise WeirError(
            f"{operator_class!r} made {type(operator).__name__}, which is no weir.Operator"
        )
    return operator


def process(operator, out, batch: bytes) -> None:
    """``process``: decodes the batch (a malformed one fails before the operator sees it), runs
    the operator and hands on what it emitted."""
    decoded = Batch(batch)
    _run(out, "process", operator.process, decoded, out)


def on_timers(operator, out, timers: bytes) -> None:
    """``on-timers``: decodes the fired timers, runs the operator and hands on what it
    emitted."""
    fired = FiredTimers(timers)
    _run(out, "on_timers", operator.on_timers, fired, out)


def on_watermark(operator, out, watermark: int) -> None:
    """``on-watermark``: tells the operator and hands on what it emitted."""
    _run(out, "on_watermark", operator.on_watermark, watermark, out)


def finish(operator, out) -> None:
    """``finish``: lets the operator emit its last records and hands them on."""
    _run(out, "finish", operator.finish, out)


def snapshot(operator) -> bytes:
    """``snapshot``: the operator's state, checked to be bytes."""
    state = operator.snapshot()
    if state.__class__ is bytes:
        return state
    if isinstance(state, (bytearray, memoryview)):
        return bytes(state)
    raise WeirError(
        f"{type(operator).__qualname__}.snapshot returned {type(state).__name__}, not bytes"
    )


def restore(operator, state: bytes) -> None:
    """``restore``: gives the operator the state of an earlier snapshot."""
    operator.restore(state)


def checkpoint_complete(operator, checkpoint_id: int) -> None:
    """``checkpoint-complete``: tells the operator a checkpoint is durable."""
    operator.checkpoint_complete(checkpoint_id)


def _run(out, call: str, method, *args) -> None:
    """Runs one call that may emit: hands on its records if it succeeds, drops them if not. A
    forbidden use of the ABI during the call fails it, even if the operator caught the error."""
    out._begin(call)
    try:
        method(*args)
    except BaseException:
        fault = out._end(False)
        if fault is not None:
            raise fault
        raise
    fault = out._end(True)
    if fault is not None:
        raise fault
