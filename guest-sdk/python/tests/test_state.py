"""weir.ValueState and the harness's emulation of the host's keyed state: the requests in the
layout of abi/src/state.rs, the key groups of abi/src/key_group.rs, and checkpoints, restores
and rescales that split the state by key group as the host does."""

import json
import pickle
import struct
import unittest

import weir
from weir import Context, ValueState, WeirError
from weir import _state
from weir._host import NativeHost
from weir._output import Output
from weir.testing import Checkpoint, Harness

# (key, key_hash, key_group among 128, among 7, among 32768), printed by a program calling
# weir_abi::key_group::{key_hash, key_group}.
RUST_KEY_GROUPS = [
    (b"", 0xCBF29CE484222325, 37, 2, 8997),
    (b"a", 0xAF63DC4C8601EC8C, 12, 5, 27788),
    (b"\x00", 0xAF63BD4C8601B7DF, 95, 3, 14303),
    (b"\xff\x00\x80", 0xF920891BE415651E, 30, 0, 25886),
    (b"key-7", 0x71135CF295F2820C, 12, 2, 524),
    (b"the", 0x56F5C9194461D57C, 124, 5, 21884),
    (b"river", 0xE2A0FB53030290D1, 81, 2, 4305),
    (b"k" * 1000, 0x156DFE4694B8E4FD, 125, 2, 25853),
    ("ünïcode".encode(), 0xB1B0D40350A25BEB, 107, 6, 23531),
]

# (max_parallelism, parallelism, the ranges of KeyGroups::range), from the same program.
RUST_RANGES = [
    (128, 3, [(0, 43), (43, 86), (86, 128)]),
    (128, 2, [(0, 64), (64, 128)]),
    (7, 3, [(0, 3), (3, 5), (5, 7)]),
    (1000, 7, [(0, 143), (143, 286), (286, 429), (429, 572), (572, 715), (715, 858), (858, 1000)]),
]

COUNTS = ValueState(0)
NAMES = ValueState(1, serializer=json)


class HostCount(weir.Operator):
    """The keyed count with its counts on the host; a value "names" also records the key's
    name under state 1, in JSON; a value "forget" deletes the key's count."""

    def __init__(self, ctx):
        pass

    def process(self, batch, out):
        records = list(batch)
        keys = [key for key, _, _ in records]
        counts = dict(zip(keys, COUNTS.get_many(out, keys)))
        for key, value, timestamp in records:
            if value == b"forget":
                counts[key] = None
                continue
            counts[key] = (counts[key] or 0) + 1
            out.emit(key, b"%d" % counts[key], timestamp)
            if value == b"names":
                NAMES.put(out, key, {"name": key.decode("latin-1")})
        COUNTS.put_many(out, counts.items())


def read_request(entries):
    """A read request in the layout of abi/src/state.rs, written here without the SDK."""
    return b"".join(struct.pack("<HI", s, len(k)) + k for s, k in entries)


class KeyGroupTest(unittest.TestCase):
    def test_the_hash_and_the_groups_are_the_rust_functions(self):
        for key, hash, g128, g7, g32768 in RUST_KEY_GROUPS:
            with self.subTest(key=key[:10]):
                self.assertEqual(_state.key_hash(key), hash)
                self.assertEqual(_state.key_group(key, 128), g128)
                self.assertEqual(_state.key_group(key, 7), g7)
                self.assertEqual(_state.key_group(key, 32768), g32768)

    def test_the_ranges_are_the_rust_ranges_and_agree_with_the_owner(self):
        for max_p, p, ranges in RUST_RANGES:
            got = [_state.group_range(s, p, max_p) for s in range(p)]
            self.assertEqual([(r.start, r.stop) for r in got], ranges)
            for subtask, groups in enumerate(got):
                for group in groups:
                    self.assertEqual(_state.owner(group, p, max_p), subtask)


class ValueStateTest(unittest.TestCase):
    def test_a_read_sees_the_writes_before_it_and_absent_keys_are_none(self):
        h = Harness(HostCount)
        h.push_on(0, [("a", "", 1), ("b", "", 2), ("a", "", 3)])
        out = h.push_on(0, [("a", "", 4), ("c", "", 5)])
        self.assertEqual([r.value for r in out], [b"3", b"1"])
        self.assertEqual(h.host.keyed[(0, b"a")], pickle.dumps(3, protocol=5))
        self.assertNotIn((0, b"x"), h.host.keyed)

    def test_values_are_pickled_by_default_and_serialised_as_asked_otherwise(self):
        h = Harness(HostCount)
        h.push("k", "names", 1)
        self.assertEqual(pickle.loads(h.host.keyed[(0, b"k")]), 1)
        self.assertEqual(json.loads(h.host.keyed[(1, b"k")]), {"name": "k"})

    def test_a_none_value_deletes_the_key(self):
        h = Harness(HostCount)
        h.push("k", "", 1)
        h.push("k", "forget", 2)
        self.assertNotIn((0, b"k"), h.host.keyed)
        self.assertEqual(h.push("k", "", 3)[0].value, b"1")

    def test_requests_are_the_abi_layout(self):
        class Probe(weir.Operator):
            def __init__(self, ctx):
                pass

            def process(self, batch, out):
                COUNTS.put_many(out, [(b"k", 7), ("é", None)])
                self.got = COUNTS.get_many(out, [b"k", b"x"])

        class Recording(weir.testing.EmulatedHost):
            def state_get(self, request):
                self.read = request
                return super().state_get(request)

            def state_write(self, request):
                self.written = request
                super().state_write(request)

        h = Harness(Probe)
        h.host = Recording()
        h._output = Output(h.host)
        h.push("any", "", 0)
        value = pickle.dumps(7, protocol=5)
        self.assertEqual(
            h.host.written,
            b"\x01\x00\x00\x01\x00\x00\x00k"
            + struct.pack("<I", len(value))
            + value
            + b"\x00\x00\x00\x02\x00\x00\x00\xc3\xa9",
        )
        self.assertEqual(h.host.read, read_request([(0, b"k"), (0, b"x")]))
        self.assertEqual(h.operator.got, [7, None])

    def test_a_malformed_request_fails_the_call_and_changes_nothing(self):
        class Bad(weir.Operator):
            def __init__(self, ctx):
                pass

            def process(self, batch, out):
                request = b"\x01\x00\x00\x01\x00\x00\x00kv"  # the value's length is cut
                try:
                    out._state_write(b"\x01\x00\x00\x01\x00\x00\x00k\x01\x00\x00\x00v" + request)
                except WeirError:
                    pass  # caught, and the call fails all the same

        h = Harness(Bad)
        with self.assertRaisesRegex(WeirError, "malformed.*section 17"):
            h.push("k", "", 0)
        self.assertEqual(h.host.keyed, {})

    def test_state_outside_a_call_or_outside_the_harness_is_refused(self):
        out = Output(weir.testing.EmulatedHost())
        with self.assertRaisesRegex(WeirError, "not allowed between calls"):
            COUNTS.get(out, b"k")
        out = Output(NativeHost())
        out._begin("process")
        with self.assertRaisesRegex(WeirError, "weir.testing.Harness"):
            COUNTS.put(out, b"k", 1)

    def test_a_state_number_is_a_u16(self):
        for bad in (-1, 65536, "0", 1.0):
            with self.assertRaises(WeirError):
                ValueState(bad)

    def test_an_operator_with_its_state_on_the_host_has_an_empty_snapshot(self):
        h = Harness(HostCount)
        h.push("k", "", 1)
        self.assertEqual(h.snapshot(), b"")


class CheckpointTest(unittest.TestCase):
    def test_a_restored_checkpoint_has_the_values_of_its_moment(self):
        h = Harness(HostCount)
        h.push("a", "", 1)
        checkpoint = h.checkpoint()
        h.push("a", "", 2)
        h.push("b", "", 3)
        h.restore_checkpoint(checkpoint)
        self.assertEqual(h.push("a", "", 4)[0].value, b"2")
        self.assertEqual(h.push("b", "", 5)[0].value, b"1")

    def test_a_rescale_gives_each_key_to_the_subtask_that_owns_its_group(self):
        keys = [b"key-%d" % i for i in range(200)]
        subtasks = [Harness(HostCount, Context("c", s, 2)) for s in range(2)]

        def route(harnesses, key):
            group = _state.key_group(key, 128)
            return harnesses[_state.owner(group, len(harnesses), 128)]

        counts = {}
        for parallelism in (3, 1, 2):
            for n, key in enumerate(keys * 2):
                counts[key] = counts.get(key, 0) + 1
                out = route(subtasks, key).push(key, "", n)
                self.assertEqual(out[0].value, b"%d" % counts[key], (parallelism, key))
            checkpoints = [h.checkpoint() for h in subtasks]
            subtasks = Harness.rescale(HostCount, Context("c"), checkpoints, parallelism)
            self.assertEqual(len(subtasks), parallelism)
            for subtask, h in enumerate(subtasks):
                self.assertEqual(h.context, Context("c", subtask, parallelism))
                groups = _state.group_range(subtask, parallelism, 128)
                for _, key in h.host.keyed:
                    self.assertIn(_state.key_group(key, 128), groups)
            self.assertEqual(sum(len(h.host.keyed) for h in subtasks), len(keys))

    def test_a_rescale_of_a_pickled_state_is_refused(self):
        class Pickled(weir.Operator):
            def __init__(self, ctx):
                self.counts = {}

            def process(self, batch, out):
                pass

        checkpoints = [Harness(Pickled).checkpoint()]
        with self.assertRaisesRegex(WeirError, "subtask 0.*cannot split"):
            Harness.rescale(Pickled, None, checkpoints, 2)

    def test_a_rescale_moves_timers_with_their_keys_and_takes_the_smallest_watermark(self):
        checkpoints = [
            Checkpoint(b"", ({(5, b"a")}, set()), 10, {}),
            Checkpoint(b"", ({(6, b"the")}, {(7, b"river")}), 3, {}),
        ]
        harnesses = Harness.rescale(HostCount, None, checkpoints, 3)
        for h in harnesses:
            self.assertEqual(h.watermark, 3)
        owner = {key: _state.owner(_state.key_group(key, 128), 3, 128) for key in (b"a", b"the")}
        self.assertIn((5, b"a"), harnesses[owner[b"a"]].pending_timers())
        self.assertIn((6, b"the"), harnesses[owner[b"the"]].pending_timers())


if __name__ == "__main__":
    unittest.main()
