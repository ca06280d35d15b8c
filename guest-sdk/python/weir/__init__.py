"""Weir operators in Python, built into WebAssembly components with componentize-py.

An operator subclasses :class:`Operator` and defines ``process``; its state is checkpointed
with no code, as a pickle of its attributes. ``guest-sdk/python/build.sh`` builds an operator
file into a component that speaks abi/wit/operator.wit; :mod:`weir.testing` runs the same
operator in plain CPython, through the same decoding, output and snapshot code.

What is here:

- :class:`Operator`, :class:`Context`, :class:`Output`, :class:`WeirError`: what an operator
  author uses; :mod:`weir.log` writes to the job's log.
- :class:`ValueState`: one value per key kept on the host (docs/STATE.md), checkpointed by
  what changed and rescaled with no code.
- :class:`Batch` and :class:`Record`, :class:`FiredTimers` and :class:`FiredTimer`: what the
  operator is given.
- :data:`EVENT_TIME`, :data:`PROCESSING_TIME`, :data:`NO_WATERMARK`, :data:`END_OF_TIME`:
  event time and timers (docs/ABI.md section 15).

The SDK has no dependency beyond the standard library. Its private modules: ``_batch`` (the
batch codec), ``_state`` (keyed state's requests and key groups), ``_dispatch`` (guest calls to operator methods, shared by the component and the
harness), ``_host`` (the host's imports as an object), ``_loader`` (finding the operator class
of a file) and ``_component`` (the WIT glue, the only code that imports ``wit_world``).
"""

from . import log
from ._batch import EVENT_TIME, PROCESSING_TIME, Batch, FiredTimer, FiredTimers, Record
from ._context import Context
from ._errors import WeirError
from ._operator import Operator
from ._output import END_OF_TIME, NO_WATERMARK, Output
from ._state import ValueState

__all__ = [
    "Operator",
    "Context",
    "Output",
    "WeirError",
    "ValueState",
    "Batch",
    "Record",
    "FiredTimers",
    "FiredTimer",
    "EVENT_TIME",
    "PROCESSING_TIME",
    "NO_WATERMARK",
    "END_OF_TIME",
    "log",
]
