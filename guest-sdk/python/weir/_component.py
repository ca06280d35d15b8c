"""The component glue: the guest exports of abi/wit/operator.wit, implemented by dispatching
to an operator class.

This is the only module of the SDK that imports ``wit_world``, the bindings componentize-py
generates while it builds a component, so the rest of the SDK imports in plain CPython. The app
module ``build.sh`` writes sets ``Guest = guest_for_file(...)``; componentize-py then calls the
methods of ``Guest`` for the host's calls. The instance and its :class:`~weir.Output` live in
this module between calls. Whatever escapes the operator becomes ``err(message)``, the message
being :func:`weir._errors.describe`'s: the exception's type and message and its innermost
frames.
"""

import os
import sys

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host as _imports
from wit_world.imports import types as _types

# The imports of interface ``keyed-state``: there only in a component of the world
# ``keyed-operator``, which ``build.sh`` chooses for an operator that uses ValueState. Imported
# here, at the top, because componentize-py keeps only the binding modules imported while it
# builds the component.
try:
    from wit_world.imports import keyed_state as _keyed_imports
except ImportError:
    _keyed_imports = None

from . import _dispatch, _host, _loader
from ._context import Context
from ._errors import WeirError, describe
from ._output import Output

__all__ = ["Guest", "guest_for_file"]

_DOMAINS = (_types.TimeDomain.EVENT, _types.TimeDomain.PROCESSING)
_LEVELS = (
    _types.Level.ERROR,
    _types.Level.WARN,
    _types.Level.INFO,
    _types.Level.DEBUG,
    _types.Level.TRACE,
)


class _WitHost(_host.Host):
    """The real host, through the imports of interface ``host``."""

    def emit(self, batch: bytes) -> None:
        _imports.emit(batch)

    def emit_to(self, output: str, batch: bytes) -> None:
        _imports.emit_to(output, batch)

    def timer_set(self, domain: int, timestamp: int, key: bytes) -> None:
        _imports.timer_set(_DOMAINS[domain], timestamp, key)

    def timer_delete(self, domain: int, timestamp: int, key: bytes) -> None:
        _imports.timer_delete(_DOMAINS[domain], timestamp, key)

    def current_time(self, domain: int) -> int:
        return _imports.current_time(_DOMAINS[domain])

    def log(self, level: int, message: str) -> None:
        _imports.log(_LEVELS[level], message)

    def state_get(self, request: bytes) -> bytes:
        return _keyed_state().state_get(request)

    def state_write(self, request: bytes) -> None:
        _keyed_state().state_write(request)


def _keyed_state():
    """The imports of interface ``keyed-state``, or the failure of a component built without
    them."""
    if _keyed_imports is None:
        raise WeirError(
            "this component was built without keyed state: guest-sdk/python/build.sh builds "
            "against the world keyed-operator when a Python file beside the operator mentions "
            "ValueState"
        )
    return _keyed_imports


_wit_host = _WitHost()
_host.install(_wit_host)

# The operator class the component runs, set at build time by guest_for_file.
_operator_class = None
# The instance, from init on.
_operator = None
# Its output, reused from call to call.
_output = Output(_wit_host)


def guest_for_file(app_file: str, operator_file: str, class_name: str = None):
    """Loads the operator class from the file named ``operator_file`` and returns
    :class:`Guest`, which runs it; for the app module ``build.sh`` writes at ``app_file``.

    componentize-py mounts each ``-p`` directory in the order given, and puts them on the
    module path in that order: ``build.sh`` gives the app's directory, then the operator's.
    """
    global _operator_class
    app_dir = os.path.dirname(os.path.abspath(app_file))
    operator_dir = sys.path[sys.path.index(app_dir) + 1]
    _operator_class = _loader.load_operator(os.path.join(operator_dir, operator_file), class_name)
    return Guest


def _instance():
    """The operator instance, which ``init`` made."""
    if _operator is None:
        raise WeirError("the host called the operator before init")
    return _operator


def _call(function):
    """Runs ``function()``, turning any exception into ``Err`` with its description."""
    try:
        return function()
    except Err:
        raise
    except BaseException as e:
        raise Err(describe(e)) from None


def _init(message) -> None:
    """``init``: makes the instance from the init message."""
    global _operator
    ctx = Context(message.operator, message.subtask, message.parallelism, message.config)
    _operator = _dispatch.init(_operator_class, ctx)


class Guest(exports.Guest):
    """The guest exports, each a call into ``weir._dispatch`` with the one instance."""

    def init(self, message) -> None:
        _call(lambda: _init(message))

    def process(self, batch: bytes) -> None:
        _call(lambda: _dispatch.process(_instance(), _output, batch))

    def snapshot(self, checkpoint_id: int) -> bytes:
        return _call(lambda: _dispatch.snapshot(_instance()))

    def restore(self, state: bytes) -> None:
        _call(lambda: _dispatch.restore(_instance(), state))

    def checkpoint_complete(self, checkpoint_id: int) -> None:
        _call(lambda: _dispatch.checkpoint_complete(_instance(), checkpoint_id))

    def on_timers(self, timers: bytes) -> None:
        _call(lambda: _dispatch.on_timers(_instance(), _output, timers))

    def on_watermark(self, watermark: int) -> None:
        _call(lambda: _dispatch.on_watermark(_instance(), _output, watermark))

    def finish(self) -> None:
        _call(lambda: _dispatch.finish(_instance(), _output))
