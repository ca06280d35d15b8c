"""``host-count``: the keyed running count of examples/python/count, its counts kept on the host.

For every input record the operator adds one to the count of the record's key and emits a
record with the same key, the updated count as decimal ASCII digits, and the same timestamp:
record for record, batch for batch, the output of examples/python/count and of the count in
every other language.

State: one :class:`weir.ValueState` (state 0), a count per key, kept by the host's keyed store
(docs/STATE.md), not in the operator's attributes. So the state is not capped by the
component's memory, a checkpoint stores what changed rather than a pickle of every count, and a
change of parallelism moves each key's count with the key, with no code here. The operator has
no attributes, so its own snapshot is empty.

Each batch costs two calls to the host, whatever its size: one read of the counts of its
distinct keys, one write of their new counts.

Build: ``bash guest-sdk/python/build.sh host-count.wasm examples/python/host-count/host_count.py``
(it mentions ValueState, so it is built against the world ``keyed-operator``).
"""

import weir

# The count of each key, kept on the host as state 0.
COUNTS = weir.ValueState(0)


class HostCount(weir.Operator):
    """The keyed running count, its counts on the host."""

    def __init__(self, ctx):
        pass

    def process(self, batch, out):
        records = list(batch)
        if not records:
            return
        # The distinct keys of the batch, in their first order: one read for all of them.
        keys = list(dict.fromkeys(key for key, _, _ in records))
        counts = {key: count or 0 for key, count in zip(keys, COUNTS.get_many(out, keys))}
        emit = out.emit
        for key, _, timestamp in records:
            count = counts[key] + 1
            counts[key] = count
            emit(key, b"%d" % count, timestamp)
        COUNTS.put_many(out, counts.items())
