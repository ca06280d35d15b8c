"""The base class an operator subclasses: the Python face of the guest exports.

Only ``process`` must be written. Every other method has a default: the event-time ones and
``finish`` do nothing, and the state is checkpointed with no code at all, as a pickle of the
instance's attributes (:meth:`Operator.snapshot`). The pickle protocol is pinned, so a Python
release that changes the default does not change what a snapshot holds.
"""

import pickle

from ._errors import WeirError

__all__ = ["Operator", "PICKLE_PROTOCOL"]

# The pickle protocol of default snapshots: 5 reads and writes the same on CPython 3.8 and
# later, the harness's interpreter and the component's alike.
PICKLE_PROTOCOL = 5

_RESTORE_HINT = "was the snapshot taken by another version of the operator?"


class Operator:
    """A stream operator: turns batches of input records into output records.

    The host makes one instance per subtask and calls it one call at a time: ``__init__`` once,
    then ``process`` for every batch, interleaved with checkpoints (``snapshot``) and their
    completion notices (``checkpoint_complete``), fired timers (``on_timers``) and watermark
    notices (``on_watermark``), and ``finish`` once if every input ends. A restored instance is
    made with ``__init__`` (the same context) and then given its state with ``restore``.
    An exception escaping any of them fails the call and, with it, the job's current attempt;
    the job then restarts from its latest checkpoint.

    **State.** By default a checkpoint holds every attribute of the instance (``vars(self)``)
    whose name does not start with ``_``, pickled; ``restore`` sets them back after
    ``__init__`` ran. Keep caches, handles and anything recomputed from the context in
    ``_``-prefixed attributes: ``__init__`` remakes them on every start, and they are never
    pickled. Override both ``snapshot`` and ``restore`` for another format.
    """

    def __init__(self, ctx):
        """Creates the instance from its :class:`~weir.Context`: who it is and its config.
        The default keeps nothing."""

    def process(self, batch, out) -> None:
        """Handles one :class:`~weir.Batch` of input records; ``batch.port`` says which input
        it came from. Output goes to ``out`` (:class:`~weir.Output`), which also sets timers and
        tells the watermark. Every operator defines it."""
        raise WeirError(f"{type(self).__qualname__} does not define process(self, batch, out)")

    def on_timers(self, timers, out) -> None:
        """Timers set with ``out.set_timer`` fired: :class:`~weir.FiredTimers`, all of one
        domain, in timestamp order, ties by key. The operator may emit, and set and delete
        timers. During an event-time firing ``out.watermark()`` is already the watermark that
        fires them. The default ignores them."""

    def on_watermark(self, watermark: int, out) -> None:
        """The task's watermark advanced to ``watermark``, after the event-time timers it fired
        and before it goes downstream: what is emitted here precedes it. At the end of the
        input it is called with :data:`weir.END_OF_TIME`, before ``finish``. The default does
        nothing."""

    def finish(self, out) -> None:
        """Every input has ended: emit whatever is still held back. Not called when the job is
        cancelled or fails. Timers cannot be set here. The default does nothing."""

    def checkpoint_complete(self, checkpoint_id: int) -> None:
        """Every checkpoint up to and including ``checkpoint_id`` is durable. Best-effort: the
        host may skip notices, so one covers all earlier checkpoints. The default does
        nothing."""

    def snapshot(self) -> bytes:
        """The operator's state, as bytes the host stores with a checkpoint.

        The default pickles (protocol :data:`PICKLE_PROTOCOL`) a dict of the instance's
        attributes whose names do not start with ``_``. An attribute that does not pickle
        fails the checkpoint with a :class:`~weir.WeirError` naming it. An instance with no
        such attribute (one whose state is all on the host, in :class:`~weir.ValueState`) has
        an empty snapshot, which the host can rescale.
        """
        state = {name: value for name, value in vars(self).items() if not name.startswith("_")}
        if not state:
            return b""
        try:
            return pickle.dumps(state, protocol=PICKLE_PROTOCOL)
        except Exception as e:
            raise _unpicklable(self, state, e) from None

    def restore(self, state: bytes) -> None:
        """Replaces the state with one an earlier :meth:`snapshot` returned, possibly in
        another instance; called right after ``__init__``, before any record.

        The default sets the attributes the default snapshot pickled, leaving the others as
        ``__init__`` made them. An empty state (the host's record of no state) restores
        nothing.
        """
        if not state:
            return
        try:
            attributes = pickle.loads(state)
        except Exception as e:
            raise WeirError(
                f"the snapshot does not unpickle ({_RESTORE_HINT}): {type(e).__name__}: {e}"
            ) from None
        if not isinstance(attributes, dict) or not all(
            isinstance(name, str) for name in attributes
        ):
            raise WeirError(
                "the snapshot is not a dict of attributes, as Operator.snapshot makes "
                f"({_RESTORE_HINT})"
            )
        vars(self).update(attributes)


def _unpicklable(operator, state: dict, error: Exception) -> WeirError:
    """The error for a snapshot that did not pickle: names the first attribute that fails."""
    for name, value in state.items():
        try:
            pickle.dumps(value, protocol=PICKLE_PROTOCOL)
        except Exception as e:
            error, culprit = e, f"attribute `{name}` ({type(value).__name__})"
            break
    else:
        culprit = "its attributes"
    return WeirError(
        f"cannot snapshot {type(operator).__qualname__}: {culprit} does not pickle: "
        f"{type(error).__name__}: {error}. Name it with a leading _ to leave it out of "
        "checkpoints (and remake it in __init__), or override snapshot and restore"
    )
