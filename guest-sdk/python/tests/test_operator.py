"""Operator: the defaults, and the default state, a pickle of the public attributes."""

import pickle
import unittest

import weir
from weir import Context, Operator, WeirError
from weir._operator import PICKLE_PROTOCOL


class Counter(Operator):
    def __init__(self, ctx):
        self.counts = {}
        self.label = ctx.operator
        self._cache = ["remade by __init__"]

    def process(self, batch, out):
        pass


class OperatorTest(unittest.TestCase):
    def test_the_default_snapshot_pickles_the_public_attributes_with_the_pinned_protocol(self):
        op = Counter(Context("c"))
        op.counts[b"\x00"] = 3
        state = op.snapshot()
        self.assertEqual(PICKLE_PROTOCOL, 5)
        self.assertEqual(state[:2], b"\x80\x05", "a protocol 5 pickle")
        self.assertEqual(pickle.loads(state), {"counts": {b"\x00": 3}, "label": "c"})

    def test_the_default_restore_sets_them_back_and_leaves_the_private_ones(self):
        op = Counter(Context("c"))
        op.counts[b"k"] = 2
        op._cache.append("not checkpointed")
        fresh = Counter(Context("other"))
        fresh.restore(op.snapshot())
        self.assertEqual(
            (fresh.counts, fresh.label, fresh._cache), ({b"k": 2}, "c", ["remade by __init__"])
        )

    def test_an_empty_state_restores_nothing(self):
        op = Counter(Context("c"))
        op.restore(b"")
        self.assertEqual(op.counts, {})

    def test_a_state_that_is_no_snapshot_fails_with_a_hint(self):
        with self.assertRaisesRegex(
            WeirError,
            "^the snapshot does not unpickle \\(was the snapshot taken by another version",
        ):
            Counter(Context()).restore(b"this is no snapshot")
        with self.assertRaisesRegex(WeirError, "^the snapshot is not a dict of attributes"):
            Counter(Context()).restore(pickle.dumps([1, 2]))
        with self.assertRaisesRegex(WeirError, "^the snapshot is not a dict of attributes"):
            Counter(Context()).restore(pickle.dumps({1: 2}))

    def test_an_attribute_that_does_not_pickle_is_named(self):
        op = Counter(Context())
        op.lines = (line for line in ["a"])
        with self.assertRaises(WeirError) as caught:
            op.snapshot()
        message = str(caught.exception)
        self.assertIn(
            "cannot snapshot Counter: attribute `lines` (generator) does not pickle", message
        )
        self.assertIn("Name it with a leading _ to leave it out of checkpoints", message)
        op._lines = op.lines
        del op.lines
        op.snapshot()

    def test_only_process_must_be_written(self):
        class Bare(Operator):
            pass

        op = Bare(Context())
        self.assertIsNone(op.on_timers(None, None))
        self.assertIsNone(op.on_watermark(5, None))
        self.assertIsNone(op.finish(None))
        self.assertIsNone(op.checkpoint_complete(3))
        with self.assertRaisesRegex(
            WeirError, "Bare does not define process\\(self, batch, out\\)"
        ):
            op.process(None, None)

    def test_the_public_constants(self):
        self.assertEqual((weir.EVENT_TIME, weir.PROCESSING_TIME), (0, 1))
        self.assertEqual((weir.NO_WATERMARK, weir.END_OF_TIME), (-(2**63), 2**63 - 1))


if __name__ == "__main__":
    unittest.main()
