"""The batch codec: the layout of docs/ABI.md section 5, and the errors of malformed batches."""

import struct
import unittest

from weir import EVENT_TIME, PROCESSING_TIME, Batch, FiredTimer, FiredTimers, Record, WeirError
from weir._batch import BatchWriter, encode_batch, to_bytes

# The example of docs/ABI.md section 5: one record, key "a", value "xy", timestamp 5, port 1.
ABI_EXAMPLE = bytes.fromhex("01000000 01000000 0500000000000000 01000000 02000000 61 7879")


class DecodingTest(unittest.TestCase):
    def test_decodes_the_abi_documents_example(self):
        batch = Batch(ABI_EXAMPLE)
        self.assertEqual(batch.port, 1)
        self.assertEqual(len(batch), 1)
        self.assertEqual(list(batch), [Record(b"a", b"xy", 5)])
        self.assertEqual(batch[0].key, b"a")
        self.assertEqual(batch[0].value, b"xy")
        self.assertEqual(batch[0].timestamp, 5)

    def test_round_trips_awkward_records_in_order(self):
        records = [
            Record(b"", b"", -(2**63)),
            Record(b"\x00", b"v", 2**63 - 1),
            Record(b"\xff\x00\x80", b"\x00" * 3, 0),
            Record(b"k" * 1000, b"x" * 70000, -1),
        ]
        batch = Batch(encode_batch(records, port=7))
        self.assertEqual(batch.port, 7)
        self.assertEqual(list(batch), records)
        for key, value, timestamp in batch:
            self.assertIs(type(key), bytes)
            self.assertIs(type(value), bytes)
            self.assertIs(type(timestamp), int)

    def test_an_empty_batch_is_valid(self):
        batch = Batch(struct.pack("<II", 0, 3))
        self.assertEqual((batch.port, len(batch), list(batch)), (3, 0, []))

    def test_accepts_any_bytes_like_input(self):
        for data in (bytearray(ABI_EXAMPLE), memoryview(ABI_EXAMPLE)):
            self.assertEqual(list(Batch(data)), [Record(b"a", b"xy", 5)])
        with self.assertRaisesRegex(WeirError, "input batch must be bytes-like, not str"):
            Batch("not bytes")

    def test_a_short_header_is_malformed(self):
        with self.assertRaises(WeirError) as caught:
            Batch(b"\x01\x00")
        self.assertEqual(
            str(caught.exception),
            "malformed input batch: batch is 2 bytes, shorter than its 8-byte header (record count, port)",
        )

    def test_a_truncated_record_names_the_record_the_field_and_the_offset(self):
        two = encode_batch([(b"a", b"xy", 1), (b"key", b"value", 2)])
        # Record 1 starts at 8 + 16 + 3 = 27: its timestamp, lengths, key, then value.
        cases = [
            (two[:30], "record 1 needs 8 bytes at offset 27 but the batch ends at 30"),
            (two[:37], "record 1 needs 4 bytes at offset 35 but the batch ends at 37"),
            (two[:42], "record 1 needs 4 bytes at offset 39 but the batch ends at 42"),
            (two[:45], "record 1 needs 3 bytes at offset 43 but the batch ends at 45"),
            (two[:-1], "record 1 needs 5 bytes at offset 46 but the batch ends at 50"),
        ]
        for data, message in cases:
            with self.subTest(len=len(data)), self.assertRaises(WeirError) as caught:
                Batch(data)
            self.assertEqual(str(caught.exception), "malformed input batch: " + message)

    def test_leftover_bytes_are_malformed(self):
        with self.assertRaises(WeirError) as caught:
            Batch(ABI_EXAMPLE + b"\x00\x00")
        self.assertEqual(
            str(caught.exception),
            "malformed input batch: 2 bytes follow the last of the 1 records the header announces",
        )

    def test_a_huge_announced_count_fails_at_once(self):
        with self.assertRaisesRegex(WeirError, "record 0 needs 8 bytes at offset 8"):
            Batch(struct.pack("<II", 2**32 - 1, 0))

    def test_a_huge_length_fails_without_reading_past_the_end(self):
        data = struct.pack("<IIqII", 1, 0, 0, 2**32 - 1, 0) + b"abc"
        with self.assertRaisesRegex(
            WeirError, "record 0 needs 4294967295 bytes at offset 24 but the batch ends at 27"
        ):
            Batch(data)


class FiredTimersTest(unittest.TestCase):
    def test_reads_a_fired_timer_batch_as_timers_of_its_port_domain(self):
        timers = FiredTimers(encode_batch([(b"a", b"", 5), (b"b", b"", 7)], PROCESSING_TIME))
        self.assertEqual(timers.domain, PROCESSING_TIME)
        self.assertEqual(len(timers), 2)
        self.assertEqual(
            list(timers),
            [FiredTimer(PROCESSING_TIME, 5, b"a"), FiredTimer(PROCESSING_TIME, 7, b"b")],
        )
        self.assertEqual(list(FiredTimers(encode_batch([], EVENT_TIME))), [])

    def test_refuses_a_port_that_is_no_domain(self):
        with self.assertRaisesRegex(WeirError, "port 2, which is no time domain"):
            FiredTimers(encode_batch([], 2))

    def test_a_malformed_timer_batch_says_what_it_was(self):
        with self.assertRaisesRegex(WeirError, "^malformed fired-timer batch: "):
            FiredTimers(b"\x00")


class EncodingTest(unittest.TestCase):
    def test_writes_the_abi_layout(self):
        writer = BatchWriter()
        writer.add(b"a", b"xy", 5)
        self.assertEqual(writer.take(port=1), ABI_EXAMPLE)
        self.assertEqual(
            writer.take(), struct.pack("<II", 0, 0), "take starts the next batch empty"
        )

    def test_clear_drops_the_records(self):
        writer = BatchWriter()
        writer.add(b"k", b"v", 1)
        writer.clear()
        writer.add(b"a", b"xy", 5)
        self.assertEqual(writer.take(1), ABI_EXAMPLE)

    def test_timestamps_and_ports_out_of_range_are_refused(self):
        writer = BatchWriter()
        for bad in (2**63, -(2**63) - 1, 1.5, "1"):
            with self.subTest(timestamp=bad), self.assertRaisesRegex(
                WeirError, "timestamp must be an int"
            ):
                writer.add(b"k", b"v", bad)
        self.assertEqual(writer.count, 0)
        with self.assertRaisesRegex(WeirError, "port must be an int from 0 to 2\\*\\*32-1"):
            encode_batch([], -1)

    def test_str_is_utf8_and_other_types_are_refused(self):
        self.assertEqual(to_bytes("é", "key"), b"\xc3\xa9")
        self.assertEqual(to_bytes(bytearray(b"ab"), "key"), b"ab")
        self.assertEqual(to_bytes(memoryview(b"abc")[1:], "key"), b"bc")
        with self.assertRaisesRegex(WeirError, "the key must be bytes-like or str, not int"):
            to_bytes(5, "the key")
        with self.assertRaisesRegex(WeirError, "does not encode as UTF-8"):
            to_bytes("\ud800", "the key")


if __name__ == "__main__":
    unittest.main()
