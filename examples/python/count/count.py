"""``count``: a keyed running count, in Python.

For every input record the operator adds one to the count of the record's key and emits a
record with

- the same key (any bytes: empty, zero bytes, not UTF-8, long),
- as value, the updated count as decimal ASCII digits (no sign, no leading zeros): the first
  record of a key gives ``1``, the tenth ``10``,
- the same timestamp.

The input value is ignored. This output is a cross-language contract: for the same input
batches the count of examples/rust/count and of every other language emits byte-identical
batches, one per non-empty input batch, with its records in order.

State: the counts, one attribute, checkpointed by the SDK's default snapshot (a pickle of the
instance's attributes) with no code here.

Build: ``bash guest-sdk/python/build.sh count.wasm examples/python/count/count.py``.
"""

import weir


class Count(weir.Operator):
    """The keyed running count."""

    def __init__(self, ctx):
        # How many records of each key have been seen: key bytes -> count.
        self.counts = {}

    def process(self, batch, out):
        counts = self.counts
        emit = out.emit
        for key, _, timestamp in batch:
            count = counts.get(key, 0) + 1
            counts[key] = count
            emit(key, b"%d" % count, timestamp)
