"""The SDK's error type, and how any exception becomes the message the host reports.

A guest call fails by returning ``err(message)`` (abi/wit/operator.wit); the host reports that
message with the operator, the subtask and the call. The component glue (``_component``) turns
whatever escapes an operator into such a message with :func:`describe`, which lives here,
outside the glue, so that plain CPython can test it.
"""

import os
import traceback

__all__ = ["WeirError", "describe"]

# Frames of the SDK's own files are left out of a failure's traceback when operator frames
# remain: the operator's author wants to see their own code.
_SDK_DIR = os.path.dirname(os.path.abspath(__file__))

# Most frames a failure's traceback keeps: the innermost ones, where it went wrong.
_MAX_FRAMES = 8


class WeirError(Exception):
    """A failure the SDK reports: a malformed batch or snapshot, a use of the ABI it forbids
    (a timer set from ``finish``, a bad side output name), or a harness misuse.

    Operators may raise it too; like any exception, it fails the call it escapes from.
    """


# Reported as `weir.WeirError`, the name operators know it by.
WeirError.__module__ = "weir"


def describe(exc: BaseException) -> str:
    """The message a failed call reports for ``exc``: its type and message on the first line,
    then the innermost frames of its traceback: the operator's frames when there are any; none
    for a :class:`WeirError` the SDK raised outside operator code; all of them otherwise.

    The traceback's frames are cleared first, which releases their local variables: after a
    ``MemoryError`` that is what frees the memory to write the message with.
    """
    tb = exc.__traceback__
    if tb is not None:
        traceback.clear_frames(tb)
    summary = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(tb)
    operator_frames = [f for f in frames if not _in_sdk(f.filename)]
    if not operator_frames and isinstance(exc, WeirError):
        return (
            summary  # the SDK's own report (a malformed batch or snapshot): its message says it all
        )
    frames = traceback.StackSummary.from_list((operator_frames or frames)[-_MAX_FRAMES:])
    if not frames:
        return summary
    return summary + "\nTraceback (most recent call last):\n" + "".join(frames.format()).rstrip()


def _in_sdk(filename: str) -> bool:
    """Whether ``filename`` is one of the SDK's own files."""
    return os.path.dirname(os.path.abspath(filename)) == _SDK_DIR
