"""Hostile guest for the isolation tests: what ``process`` does on the first batch is chosen by
the operator's config, so one component (19 MB, seconds to build and to compile) serves every
case.

- ``loop``: spins forever. The host must stop the call at ``limits.call_timeout``.
- ``allocate``: appends 1 MiB of written bytes to a list without end, until the memory limit
  (``limits.max_memory``) stops it — by a trap on the refused ``memory.grow``, or by the
  ``MemoryError`` CPython raises when its allocator gets no more.
- ``open-file``: reads ``/etc/passwd``. The sandbox gives a component no files, so ``open``
  raises an ``OSError`` and the call fails with it. Only if the file could be read would the
  guest emit ``read`` with its first bytes: the breach a test looks for.
- ``print``: prints 150 lines to standard output and returns: not a failure, a flood of the
  job's log, which the host cuts at 100 lines a second.
- ``socket``: makes a TCP socket and connects it to ``127.0.0.1:9``. The sandbox gives no
  network, so creating the socket raises an ``OSError``. Only if it connected would the guest
  emit ``connected``.

Nothing is caught: each failure reaches the host as the call's error, with the exception's
type and message.
"""

import socket

import weir


class Hostile(weir.Operator):
    """Misbehaves on the first batch, as its config says."""

    def __init__(self, ctx):
        self.behaviour = ctx.config_str()
        if self.behaviour not in ("loop", "allocate", "open-file", "print", "socket"):
            raise weir.WeirError(f"unknown behaviour {self.behaviour!r}")

    def process(self, batch, out):
        if self.behaviour == "loop":
            while True:
                pass
        elif self.behaviour == "allocate":
            hoard = []
            while True:
                hoard.append(bytearray(b"\xa5") * (1 << 20))
        elif self.behaviour == "print":
            for line in range(150):
                print(f"line {line} of the flood")
        elif self.behaviour == "open-file":
            with open("/etc/passwd", "rb") as f:
                out.emit(b"read", f.read(64), 0)
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as connection:
                connection.connect(("127.0.0.1", 9))
                out.emit(b"connected", b"127.0.0.1:9", 0)
