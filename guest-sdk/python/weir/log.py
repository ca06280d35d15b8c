"""Log lines from an operator: ``weir.log.info(f"loaded {n} rules")``.

In a component each line goes to the host's ``log`` import, which writes it to the job's log
tagged with the operator and the subtask; in plain CPython (tests, the harness) it is written
to stderr as ``[level] message``. A message that is not a str is formatted with ``str()``.
Lines are allowed in every call, ``__init__`` included; the host cuts messages past 64 KiB.
"""

from . import _host

__all__ = ["error", "warn", "info", "debug", "trace"]


def error(message) -> None:
    """Something went wrong."""
    _host.current().log(0, str(message))


def warn(message) -> None:
    """Something looks wrong."""
    _host.current().log(1, str(message))


def info(message) -> None:
    """Normal progress worth telling whoever runs the job."""
    _host.current().log(2, str(message))


def debug(message) -> None:
    """Detail for the operator's author."""
    _host.current().log(3, str(message))


def trace(message) -> None:
    """Very fine detail."""
    _host.current().log(4, str(message))
