"""Tests of the Python host-count, with the SDK's harness, in plain CPython:

    python3 -m unittest discover -s examples/python/host-count

It must emit what the Python count (examples/python/count) emits, batch for batch and byte for
byte, through restores of the host's checkpoints and rescales of its keyed state.
"""

import os
import random
import sys
import unittest

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_here, "..", "..", "..", "guest-sdk", "python"))
sys.path.insert(0, os.path.join(_here, "..", "count"))
sys.path.insert(0, _here)

from count import Count  # noqa: E402
from host_count import COUNTS, HostCount  # noqa: E402
from test_count import AWKWARD_KEYS, encode, expected, random_input  # noqa: E402
from weir import Context  # noqa: E402
from weir import _state  # noqa: E402
from weir.testing import Harness, assert_records_eq  # noqa: E402


class HostCountTest(unittest.TestCase):
    def test_emits_the_updated_count_of_each_key_as_decimal_text(self):
        h = Harness(HostCount, Context("host-count"))
        out = h.push_on(0, [("a", "x", 1), ("b", "y", 2), ("a", "z", 3), ("", "", 4)])
        assert_records_eq(out, [("a", "1", 1), ("b", "1", 2), ("a", "2", 3), ("", "1", 4)])

    def test_the_counts_live_on_the_host_and_the_snapshot_is_empty(self):
        h = Harness(HostCount)
        for key in AWKWARD_KEYS[:4] * 2:
            h.push(key, "v", 0)
        self.assertEqual(h.snapshot(), b"")
        stored = {key: COUNTS.serializer.loads(v) for (_, key), v in h.host.keyed.items()}
        self.assertEqual(stored, {key: 2 for key in AWKWARD_KEYS[:4]})

    def test_emits_the_batches_of_the_python_count_through_checkpoints(self):
        for seed in (1, 0x5EED):
            rng = random.Random(seed)
            records = random_input(rng, 1000)
            for size in (1, 7, 500):
                batches = [records[i : i + size] for i in range(0, len(records), size)]
                batches.insert(rng.randrange(len(batches)), [])
                want = expected(batches)
                h, count = Harness(HostCount), Harness(Count)
                checkpoint = h.checkpoint()
                got = []
                index = 0
                failed = set()
                while index < len(batches):
                    got.append(h.push_batch_encoded(encode(batches[index])))
                    self.assertEqual(got[-1], count.push_batch_encoded(encode(batches[index])))
                    index += 1
                    if index % 3 == 0:
                        checkpoint = h.checkpoint()
                    elif index % 5 == 0 and index not in failed:
                        # A failure: back to the last checkpoint, and the batches after it again.
                        failed.add(index)
                        h.restore_checkpoint(checkpoint)
                        index -= index % 3
                        got = got[:index]
                        count = Harness(Count)
                        for again in batches[:index]:
                            count.push_batch_encoded(encode(again))
                with self.subTest(seed=seed, size=size):
                    self.assertEqual(got, want)

    def test_rescaled_two_to_three_to_one_it_counts_on(self):
        keys = [b"word-%d" % i for i in range(300)] + AWKWARD_KEYS

        def subtask_of(key, parallelism):
            return _state.owner(_state.key_group(key, 128), parallelism, 128)

        harnesses = [Harness(HostCount, Context("host-count", s, 2)) for s in range(2)]
        counts = {}
        for parallelism in (3, 1):
            for ts, key in enumerate(keys):
                counts[key] = counts.get(key, 0) + 1
                out = harnesses[subtask_of(key, len(harnesses))].push(key, "", ts)
                assert_records_eq(out, [(key, str(counts[key]), ts)])
            checkpoints = [h.checkpoint() for h in harnesses]
            harnesses = Harness.rescale(HostCount, Context("host-count"), checkpoints, parallelism)
        for ts, key in enumerate(keys):
            assert_records_eq(harnesses[0].push(key, "", ts), [(key, "3", ts)])


if __name__ == "__main__":
    unittest.main()
