"""Tests of the Python count, with the SDK's harness, in plain CPython:

    python3 -m unittest discover -s examples/python/count

Besides the behaviour, they check the cross-language contract byte for byte: for the same
input batches, one output batch per non-empty input batch, encoded exactly as the Rust count
(examples/rust/count) and tests/all/languages.rs's model of it encode theirs.
"""

import os
import random
import struct
import sys
import unittest

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_here, "..", "..", "..", "guest-sdk", "python"))
sys.path.insert(0, _here)

from count import Count  # noqa: E402
from weir import Context  # noqa: E402
from weir.testing import (
    Harness,
    assert_records_eq,
    assert_restore_preserves_output,
    record,
)  # noqa: E402

# Keys the languages test uses: empty, a zero byte, not UTF-8, 1000 bytes long, many short ones.
AWKWARD_KEYS = [b"", b"\x00", b"\xff\x00\x80", b"k" * 1000] + [b"key-%d" % i for i in range(40)]


def encode(records, port=0):
    """A batch in the layout of docs/ABI.md section 5, written here independently of the SDK."""
    parts = [struct.pack("<II", len(records), port)]
    for key, value, timestamp in records:
        parts.append(struct.pack("<qII", timestamp, len(key), len(value)) + key + value)
    return b"".join(parts)


def random_input(rng, n):
    """``n`` records over AWKWARD_KEYS, some far more frequent than others, with random values
    (which count ignores) and timestamps (the extremes included)."""
    records = []
    for _ in range(n):
        pick = rng.randrange(len(AWKWARD_KEYS))
        key = AWKWARD_KEYS[pick * pick // len(AWKWARD_KEYS)]
        value = bytes(rng.randrange(256) for _ in range(rng.randrange(24)))
        timestamp = rng.choice([-(2**63), 2**63 - 1, rng.randrange(-(2**40), 2**40)])
        records.append((key, value, timestamp))
    return records


def expected(batches):
    """What count must emit for ``batches`` (lists of records): per non-empty batch one batch of
    (key, updated count as decimal text, timestamp), computed without the SDK."""
    counts = {}
    out = []
    for records in batches:
        emitted = []
        for key, _, timestamp in records:
            counts[key] = counts.get(key, 0) + 1
            emitted.append((key, str(counts[key]).encode("ascii"), timestamp))
        out.append([encode(emitted)] if emitted else [])
    return out


class CountTest(unittest.TestCase):
    def test_emits_the_updated_count_of_each_key_as_decimal_text(self):
        h = Harness(Count, Context("count"))
        out = h.push_on(0, [("a", "x", 1), ("b", "y", 2), ("a", "z", 3), ("", "", 4)])
        assert_records_eq(out, [("a", "1", 1), ("b", "1", 2), ("a", "2", 3), ("", "1", 4)])

    def test_counts_past_one_digit(self):
        h = Harness(Count)
        for ts in range(12):
            last = h.push("k", "", ts)
        assert_records_eq(last, [("k", "12", 11)])

    def test_keys_are_arbitrary_bytes(self):
        h = Harness(Count)
        for key in AWKWARD_KEYS[:4] * 2:
            h.push(key, "v", 0)
        self.assertEqual(h.operator.counts, {key: 2 for key in AWKWARD_KEYS[:4]})
        assert_records_eq(h.push(b"\xff\x00\x80", "", -1), [record(b"\xff\x00\x80", "3", -1)])

    def test_counts_survive_a_restore(self):
        h = Harness(Count)
        h.push("a", "", 1)
        h.push("a", "", 2)
        h.snapshot_and_restore()
        assert_records_eq(h.push("a", "", 3), [("a", "3", 3)])

    def test_a_snapshot_restores_every_key(self):
        h = Harness(Count)
        for ts in range(300):
            h.push(f"key-{ts % 150}", "", ts)
        h.snapshot_and_restore()
        self.assertEqual(h.operator.counts, {f"key-{i}".encode(): 2 for i in range(150)})

    def test_restoring_at_any_point_preserves_the_output(self):
        keys = ["a", "b", "a", "c", "a", "b", "\0", "a"]
        records = [(key, "v", ts) for ts, key in enumerate(keys)]
        for every in (1, 2, 3):
            assert_restore_preserves_output(Count, Context("count"), records, every)

    def test_emits_the_batches_of_every_other_language_byte_for_byte(self):
        for seed in (1, 0x5EED, 0xDEADBEEF):
            rng = random.Random(seed)
            records = random_input(rng, 1500)
            for size in (1, 2, 7, 64, 500, 1500):
                batches = [records[i : i + size] for i in range(0, len(records), size)]
                batches.insert(rng.randrange(len(batches)), [])
                want = expected(batches)
                for restore_every in (None, 3):
                    h = Harness(Count)
                    got = []
                    for index, batch in enumerate(batches):
                        got.append(h.push_batch_encoded(encode(batch)))
                        if restore_every and index % restore_every == 0:
                            h.snapshot_and_restore()
                    with self.subTest(seed=seed, size=size, restore_every=restore_every):
                        self.assertEqual(len(got), len(want))
                        for call, (g, w) in enumerate(zip(got, want)):
                            self.assertEqual(g, w, f"call {call}")


if __name__ == "__main__":
    unittest.main()
