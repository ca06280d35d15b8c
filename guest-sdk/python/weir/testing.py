"""Testing operators in plain CPython, through the same code the component runs.

:class:`Harness` drives one operator instance the way the host drives a guest: every input is
encoded into a batch and decoded by the SDK's own decoder, the operator's output is collected in
the batches the component would hand to ``emit`` and ``emit-to`` and decoded back into
:class:`~weir.Record`\\ s, and snapshots go through the operator's ``snapshot`` and ``restore``
(by default the pickle of its attributes) exactly as in a component. Only the WIT bindings are
left out.

Event time (docs/ABI.md section 15) is the host's, so the harness emulates that part of the host
too (:class:`EmulatedHost`): it keeps the instance's timers, moves the watermark and a
processing-time clock when the test says, and fires due timers with the host's order, batching
and rounds, so an operator that passes here sees the same calls in a job.

So is keyed state kept on the host (:class:`~weir.ValueState`, docs/STATE.md): the emulated host
keeps the values, reads the requests as the host reads them, and :meth:`Harness.checkpoint`,
:meth:`Harness.restore_checkpoint` and :meth:`Harness.rescale` carry them through checkpoints
and split them by key group (``weir_abi::key_group``) as the host splits its stores.

:func:`assert_records_eq` compares outputs with a readable diff, and
:func:`assert_restore_preserves_output` checks that checkpointing an operator does not change
what it emits.
"""

from . import _dispatch, _host, _state
from ._batch import EVENT_TIME, PROCESSING_TIME, Batch, Record, encode_batch, to_bytes
from ._context import Context
from ._errors import WeirError
from ._output import END_OF_TIME, NO_WATERMARK, Output

__all__ = [
    "Harness",
    "Checkpoint",
    "EmulatedHost",
    "record",
    "assert_records_eq",
    "assert_restore_preserves_output",
    "MAX_TIMERS_PER_CALL",
    "MAX_FIRING_ROUNDS",
    "MAX_TIMER_STATE",
    "TIMER_OVERHEAD_BYTES",
]

# Most timers the host passes to one on-timers call (docs/ABI.md section 15).
MAX_TIMERS_PER_CALL = 1024

# Most rounds of firing one advance of a time may take before the host fails the guest: a
# guest that always sets a new due timer never lets time move.
MAX_FIRING_ROUNDS = 64

# The host's default limits.max_timer_state: 256 MiB of timers per instance, each counting its
# key's length plus TIMER_OVERHEAD_BYTES.
MAX_TIMER_STATE = 256 << 20
TIMER_OVERHEAD_BYTES = 48

# Most records of each side a diff lists.
_DIFF_LISTED = 50


def record(key, value, timestamp: int) -> Record:
    """A :class:`~weir.Record` with bytes of ``key`` and ``value`` (str is encoded as UTF-8):
    ``record("word", "1", 5)``."""
    if type(timestamp) is not int:
        raise WeirError(f"a record's timestamp must be an int, not {timestamp!r}")
    return Record(to_bytes(key, "a record's key"), to_bytes(value, "a record's value"), timestamp)


class EmulatedHost(_host.Host):
    """What the host keeps for one instance, emulated: the batches it emitted until the harness
    takes them, its timers (unique (timestamp, key) pairs per domain, bounded by
    ``max_timer_state`` as the host bounds them), the task's watermark and a clock.

    It keeps the instance's keyed state too, in ``keyed``: a dict from ``(state, key)`` to the
    value's bytes.

    Log lines do not come here: ``weir.log`` writes to stderr in plain CPython."""

    def __init__(self):
        self.keyed = {}
        self.emitted = []
        self.emitted_to = []
        self.timers = (set(), set())
        self.timer_bytes = 0
        self.watermark = NO_WATERMARK
        self.clock = 0
        self.max_timer_state = MAX_TIMER_STATE

    def emit(self, batch: bytes) -> None:
        self.emitted.append(batch)

    def emit_to(self, output: str, batch: bytes) -> None:
        self.emitted_to.append((output, batch))

    def timer_set(self, domain: int, timestamp: int, key: bytes) -> None:
        """Sets the timer; past ``max_timer_state`` it is not kept and the call fails."""
        timers = self.timers[domain]
        timer = (timestamp, key)
        if timer in timers:
            return
        size = self.timer_bytes + len(key) + TIMER_OVERHEAD_BYTES
        if size > self.max_timer_state:
            raise WeirError(
                f"set_timer: the instance's timers would take {size} bytes, past the limit of "
                f"{self.max_timer_state} (limits.max_timer_state; each timer counts its key and "
                f"{TIMER_OVERHEAD_BYTES} bytes)"
            )
        timers.add(timer)
        self.timer_bytes = size

    def timer_delete(self, domain: int, timestamp: int, key: bytes) -> None:
        timer = (timestamp, key)
        if timer in self.timers[domain]:
            self.timers[domain].remove(timer)
            self.timer_bytes -= len(key) + TIMER_OVERHEAD_BYTES

    def current_time(self, domain: int) -> int:
        return self.watermark if domain == EVENT_TIME else self.clock

    def state_get(self, request: bytes) -> bytes:
        """Answers a read request as the host does: per entry, its value or none."""
        keyed = self.keyed
        parts = []
        for entry in _state.reads(request):
            _state.put_result(parts, keyed.get(entry))
        return b"".join(parts)

    def state_write(self, request: bytes) -> None:
        """Applies a write request as the host does: whole, or (malformed) not at all."""
        keyed = self.keyed
        for state, key, value in _state.writes(request):
            if value is None:
                keyed.pop((state, key), None)
            else:
                keyed[(state, key)] = value

    def take(self):
        """The main and side output batches emitted since the last ``take``."""
        taken = self.emitted, self.emitted_to
        self.emitted, self.emitted_to = [], []
        return taken

    def pending(self, domain: int):
        """The timers of ``domain`` that are set, as (timestamp, key), in firing order."""
        return sorted(self.timers[domain])

    def pop_due(self, domain: int, time: int, most: int):
        """Removes and returns the first ``most`` timers of ``domain`` due at ``time``, in
        firing order."""
        due = [timer for timer in self.pending(domain) if timer[0] <= time][:most]
        for timestamp, key in due:
            self.timer_delete(domain, timestamp, key)
        return due

    def drop_timers(self, domain: int) -> None:
        """Forgets every timer of ``domain``."""
        for timestamp, key in list(self.timers[domain]):
            self.timer_delete(domain, timestamp, key)


class Checkpoint:
    """A checkpoint of one instance as the host takes it (:meth:`Harness.checkpoint`): the
    operator's snapshot (``state``), its timers per domain, the task's watermark and its keyed
    state kept on the host."""

    __slots__ = ("state", "timers", "watermark", "keyed")

    def __init__(self, state: bytes, timers, watermark: int, keyed):
        self.state = state
        self.timers = timers
        self.watermark = watermark
        self.keyed = keyed


class Harness:
    """One operator instance, driven in plain CPython the way the host drives a guest.

    Besides the instance (``harness.operator``) it keeps what the host keeps for it
    (docs/ABI.md section 15): its timers, the task's watermark, a processing-time clock
    (starting at 0) and what it emitted on side outputs. A test moves time with
    :meth:`advance_watermark` and :meth:`advance_processing_time`, which fire due timers exactly
    as the host does, and :meth:`finish` ends the input the host's way.

    Every call returns what the operator emitted on its main output, as a list of
    :class:`~weir.Record`; side outputs accumulate in :meth:`side_output`. An exception the
    operator raises propagates, and what the failed call emitted is dropped, as the host drops
    it.

    ``harness.operator`` is the instance under test, ``harness.context`` its context and
    ``harness.host`` the :class:`EmulatedHost` behind it.
    """

    def __init__(self, operator_class, ctx: Context = None):
        """Creates an instance of ``operator_class`` with ``ctx`` (by default
        ``Context(operator_class.__name__)``), as the host's ``init`` does."""
        self.context = Context(operator_class.__name__) if ctx is None else ctx
        self._operator_class = operator_class
        self.host = EmulatedHost()
        self._output = Output(self.host)
        self._side_outputs = {}
        self.operator = _dispatch.init(operator_class, self.context)

    def push(self, key, value, timestamp: int):
        """Processes a batch of one record on port 0; returns what the operator emitted."""
        return self.push_on(0, [(key, value, timestamp)])

    def push_on(self, port: int, records):
        """Processes one batch of ``records`` (each ``(key, value, timestamp)``, keys and values
        bytes-like or str) arriving on input ``port``; returns what the operator emitted."""
        return self.push_batch(encode_batch(records, port))

    def push_batch(self, batch: bytes):
        """Processes an encoded batch, as the host passes it to ``process`` (malformed bytes
        fail as they would in the component); returns what the operator emitted."""
        return _decode_outputs(self.push_batch_encoded(batch))

    def push_batch_encoded(self, batch: bytes):
        """Processes an encoded batch and returns the encoded batches the operator emitted on
        its main output, as the host receives them from ``emit``: for tests of the exact
        batches (the count's are compared byte for byte with other languages')."""
        return self._call(_dispatch.process, self.operator, self._output, batch)

    def advance_watermark(self, watermark: int):
        """Advances the task's watermark to ``watermark``, as the host does when its inputs'
        watermarks move; returns what the operator emitted.

        The event-time timers at or before ``watermark`` fire, in rounds: each round hands the
        timers due when it starts to ``on_timers`` in timestamp order, ties by key, at most
        :data:`MAX_TIMERS_PER_CALL` per call, and timers set while they fire that are due fire
        in the next round; more than :data:`MAX_FIRING_ROUNDS` rounds fail. While they fire,
        ``out.watermark()`` is already ``watermark``. Then ``on_watermark`` runs.

        A watermark equal to the current one is no advance: nothing is called. One before it
        raises :class:`~weir.WeirError`: watermarks never move back.
        """
        current = self.host.watermark
        if type(watermark) is not int or not NO_WATERMARK <= watermark <= END_OF_TIME:
            raise WeirError(f"a watermark must be an int from -2**63 to 2**63-1, not {watermark!r}")
        if watermark < current:
            raise WeirError(f"the watermark cannot move back, from {current} to {watermark}")
        if watermark == current:
            return []
        self.host.watermark = watermark
        emitted = self._fire(EVENT_TIME, watermark)
        batches = self._call(_dispatch.on_watermark, self.operator, self._output, watermark)
        return emitted + _decode_outputs(batches)

    def advance_processing_time(self, time: int):
        """Sets the processing-time clock to ``time`` (milliseconds; it starts at 0) and fires
        the processing-time timers at or before it, in rounds as :meth:`advance_watermark`
        fires event-time ones (without calling ``on_watermark``); returns what the operator
        emitted. Moving the clock back raises :class:`~weir.WeirError`."""
        if type(time) is not int:
            raise WeirError(f"a time must be an int, not {time!r}")
        if time < self.host.clock:
            raise WeirError(
                f"the harness's clock cannot move back, from {self.host.clock} to {time}"
            )
        self.host.clock = time
        return self._fire(PROCESSING_TIME, time)

    def finish(self):
        """Ends every input, as the host does; returns what the operator emitted: the watermark
        advances to :data:`weir.END_OF_TIME`, firing every event-time timer, then
        ``on_watermark`` runs with it, then ``finish``. Processing-time timers still set are
        dropped."""
        emitted = self.advance_watermark(END_OF_TIME)
        self.host.drop_timers(PROCESSING_TIME)
        return emitted + _decode_outputs(self._call(_dispatch.finish, self.operator, self._output))

    def checkpoint_complete(self, checkpoint_id: int) -> None:
        """Tells the operator that checkpoints up to ``checkpoint_id`` are durable."""
        _dispatch.checkpoint_complete(self.operator, checkpoint_id)

    def snapshot(self) -> bytes:
        """The operator's state, as the host would store it."""
        return _dispatch.snapshot(self.operator)

    def restore_into_fresh(self, state: bytes) -> None:
        """Replaces the instance by a fresh one, made with the same context and then restored
        from ``state``: what a job restart does to the guest. The host's state for the
        instance (timers, watermark, clock) is kept, as the host restores it."""
        fresh = _dispatch.init(self._operator_class, self.context)
        _dispatch.restore(fresh, state)
        self.operator = fresh

    def snapshot_and_restore(self) -> None:
        """Snapshots the instance and replaces it by a fresh one restored from the snapshot."""
        self.restore_into_fresh(self.snapshot())

    def checkpoint(self) -> Checkpoint:
        """Takes a checkpoint the way the host does: the operator's snapshot and the host's
        state for the instance: its timers, the watermark and its keyed state."""
        host = self.host
        return Checkpoint(
            self.snapshot(),
            tuple(set(timers) for timers in host.timers),
            host.watermark,
            dict(host.keyed),
        )

    def restore_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Restores ``checkpoint`` the way a job restart does: a fresh instance restored from
        its snapshot, and the host's timers, watermark and keyed state as they were. The clock
        is not rewound (it is a clock), nor the side outputs (they are output)."""
        self.restore_into_fresh(checkpoint.state)
        host = self.host
        host.drop_timers(EVENT_TIME)
        host.drop_timers(PROCESSING_TIME)
        for domain, timers in enumerate(checkpoint.timers):
            for timestamp, key in timers:
                host.timer_set(domain, timestamp, key)
        host.watermark = checkpoint.watermark
        host.keyed = dict(checkpoint.keyed)

    @classmethod
    def rescale(
        cls,
        operator_class,
        ctx,
        checkpoints,
        parallelism: int,
        max_parallelism: int = _state.DEFAULT_MAX_PARALLELISM,
    ):
        """Splits and merges the checkpoints of an operator's subtasks (one per subtask, in
        order, taken at parallelism ``len(checkpoints)``) for ``parallelism`` subtasks, the way
        the host does when a job is restored at another parallelism (docs/ABI.md section 16):
        keyed state kept on the host and timers go to the subtask that owns their key's group
        among ``max_parallelism``, and each gets the smallest watermark. Returns one harness
        per new subtask, restored, its context ``ctx`` (by default
        ``Context(operator_class.__name__)``) with its subtask and parallelism.

        Raises :class:`~weir.WeirError`, as the host refuses the restore, when an operator's
        snapshot is not empty: a pickle cannot be split by key. An operator that keeps its
        state in :class:`~weir.ValueState` has an empty snapshot.
        """
        old = len(checkpoints)
        for count in (old, parallelism):
            if type(count) is not int or not 1 <= count <= max_parallelism:
                raise WeirError(
                    f"parallelism {count!r} is not between 1 and the max_parallelism "
                    f"{max_parallelism}"
                )
        for subtask, checkpoint in enumerate(checkpoints):
            if checkpoint.state:
                raise WeirError(
                    f"the host would refuse this rescale: the snapshot of subtask {subtask} is "
                    f"{len(checkpoint.state)} bytes of the operator's own state, which the host "
                    "cannot split by key; keep keyed state in weir.ValueState"
                )

        def owner_of(key):
            group = _state.key_group(key, max_parallelism)
            return _state.owner(group, parallelism, max_parallelism)

        keyed = [{} for _ in range(parallelism)]
        timers = [(set(), set()) for _ in range(parallelism)]
        for checkpoint in checkpoints:
            for (state, key), value in checkpoint.keyed.items():
                keyed[owner_of(key)][(state, key)] = value
            for domain, pending in enumerate(checkpoint.timers):
                for timestamp, key in pending:
                    timers[owner_of(key)][domain].add((timestamp, key))
        watermark = min(checkpoint.watermark for checkpoint in checkpoints)
        base = Context(operator_class.__name__) if ctx is None else ctx
        harnesses = []
        for subtask in range(parallelism):
            context = Context(base.operator, subtask, parallelism, base.config)
            harness = cls(operator_class, context)
            harness.restore_checkpoint(Checkpoint(b"", timers[subtask], watermark, keyed[subtask]))
            harnesses.append(harness)
        return harnesses

    def side_output(self, name: str):
        """Every record the operator emitted on the side output ``name`` so far, in order (empty
        when none). Kept across restores: it is output, not state."""
        return list(self._side_outputs.get(name, ()))

    @property
    def watermark(self) -> int:
        """The task's watermark: :data:`weir.NO_WATERMARK` until the first advance."""
        return self.host.watermark

    @property
    def processing_time(self) -> int:
        """The harness's processing-time clock."""
        return self.host.clock

    def pending_timers(self, domain: int = EVENT_TIME):
        """The timers of ``domain`` that are set, as ``(timestamp, key)``, in firing order."""
        return self.host.pending(domain)

    def _fire(self, domain: int, time: int):
        """Fires the timers of ``domain`` due at ``time``, in rounds; returns what the operator
        emitted."""
        emitted = []
        rounds = 0
        while True:
            due = sum(1 for timestamp, _ in self.host.timers[domain] if timestamp <= time)
            if due == 0:
                return emitted
            rounds += 1
            if rounds > MAX_FIRING_ROUNDS:
                name = "event" if domain == EVENT_TIME else "processing"
                raise WeirError(
                    f"{name} timers were still due at {time} after {MAX_FIRING_ROUNDS} rounds of "
                    "firing: the operator keeps setting timers at or before the time they fire at "
                    "(docs/ABI.md section 15)"
                )
            while due > 0:
                fired = self.host.pop_due(domain, time, min(due, MAX_TIMERS_PER_CALL))
                if not fired:
                    break  # the operator deleted the rest of the round's timers
                due -= len(fired)
                batch = encode_batch([(key, b"", timestamp) for timestamp, key in fired], domain)
                emitted += _decode_outputs(
                    self._call(_dispatch.on_timers, self.operator, self._output, batch)
                )

    def _call(self, call, *args):
        """Runs one dispatch ``call``; returns the main output batches it emitted and keeps its
        side output records. A failed call's output is dropped."""
        try:
            call(*args)
        finally:
            main, sides = self.host.take()
        for name, batch in sides:
            self._side_outputs.setdefault(name, []).extend(
                _decode_output(batch, f" on side output {name!r}")
            )
        return main


def _decode_outputs(batches):
    """The records of the main output batches ``batches``."""
    records = []
    for batch in batches:
        records += _decode_output(batch, "")
    return records


def _decode_output(batch: bytes, where: str):
    """The records of one output batch, checked as the host checks it."""
    decoded = Batch(batch, f"output batch{where}")
    if decoded.port != 0:
        raise WeirError(f"the operator emitted a batch{where} whose port is {decoded.port}, not 0")
    return list(decoded)


def assert_records_eq(actual, expected) -> None:
    """Asserts that two lists of records are equal (``expected`` may hold plain tuples, with
    str keys and values); otherwise raises ``AssertionError`` showing the first index at which
    they differ, the two records there, and both lists."""
    difference = _diff(("actual", list(actual)), ("expected", [record(*r) for r in expected]))
    if difference:
        raise AssertionError(difference)


def assert_restore_preserves_output(operator_class, ctx, records, every: int) -> None:
    """Asserts that snapshotting the operator and restoring it into a fresh instance does not
    change its output.

    Runs ``records`` (each ``(key, value, timestamp)``) through a new instance one record per
    batch on port 0, then finishes it. Runs them again through another instance, this time
    replacing the instance by a fresh one restored from its snapshot after every
    ``every``-th record. Raises ``AssertionError`` with a diff if the two outputs differ (main
    or side outputs); an exception in either run propagates, with a note naming the run.
    ``checkpoint_complete`` is called in neither run. ``ctx`` may be None, as for
    :class:`Harness`.
    """
    if type(every) is not int or every < 1:
        raise WeirError(
            f"restore after every {every!r} records: `every` must be an int of at least 1"
        )
    records = [record(*r) for r in records]
    straight, straight_sides = _run(operator_class, ctx, records, None, "the run without restores")
    restored, restored_sides = _run(
        operator_class, ctx, records, every, f"the run restoring after every {every} record(s)"
    )
    change = (
        f"changes when the operator is restored into a fresh instance after every {every} record(s)"
    )
    difference = _diff(("with restores", restored), ("without", straight))
    if difference:
        raise AssertionError(f"output {change}\n{difference}")
    for name in sorted(set(straight_sides) | set(restored_sides)):
        difference = _diff(
            ("with restores", restored_sides.get(name, [])),
            ("without", straight_sides.get(name, [])),
        )
        if difference:
            raise AssertionError(f"side output {name!r} {change}\n{difference}")


def _run(operator_class, ctx, records, every, what):
    """Runs ``records`` through a new instance, restoring it after every ``every`` records when
    ``every`` is given, then finishes it; returns the main output and the side outputs."""
    try:
        harness = Harness(operator_class, ctx)
        output = []
        for index, one in enumerate(records):
            output += harness.push_on(0, [one])
            if every is not None and (index + 1) % every == 0:
                harness.snapshot_and_restore()
        output += harness.finish()
    except Exception as e:
        e.add_note(f"(in {what} of assert_restore_preserves_output)")
        raise
    return output, harness._side_outputs


def _diff(left, right):
    """How the record lists ``left`` and ``right`` (each a (name, list) pair) differ, or None
    when they are equal."""
    (left_name, left_records), (right_name, right_records) = left, right
    length = max(len(left_records), len(right_records))
    index = next(
        (
            i
            for i in range(length)
            if i >= len(left_records)
            or i >= len(right_records)
            or left_records[i] != right_records[i]
        ),
        None,
    )
    if index is None:
        return None
    width = max(len(left_name), len(right_name)) + 1
    lines = [
        f"records differ at index {index} ({left_name}: {len(left_records)} records, "
        f"{right_name}: {len(right_records)})"
    ]
    for name, records in (left, right):
        at = repr(records[index]) if index < len(records) else "(no record)"
        lines.append(f"  {name + ':':{width}} {at}")
    for name, records in (left, right):
        lines.append(f"{name}:")
        for i, one in enumerate(records[:_DIFF_LISTED]):
            lines.append(f" {'>' if i == index else ' '}{i:4}: {one!r}")
        if len(records) > _DIFF_LISTED:
            lines.append(f"   ... {len(records) - _DIFF_LISTED} more")
    return "\n".join(lines)
