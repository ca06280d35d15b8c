"""Output: batches handed to the host at the end of a call and past the flush threshold, and
the ABI's rules on what may be called when."""

import unittest

from weir import EVENT_TIME, PROCESSING_TIME, Batch, Output, Record, WeirError
from weir._output import FLUSH_AT
from weir.testing import EmulatedHost


def records(batch):
    return list(Batch(batch, "output batch"))


class OutputTest(unittest.TestCase):
    def setUp(self):
        self.host = EmulatedHost()
        self.out = Output(self.host)
        self.out._begin("process")

    def end(self, succeeded=True):
        return self.out._end(succeeded)

    def test_a_call_hands_on_one_batch_per_output_at_its_end(self):
        self.out.emit(b"a", b"1", 1)
        self.out.emit("é", "2", -2)
        self.out.emit(bytearray(b"c"), memoryview(b"3"), 3)
        self.out.emit_to("late", b"l", b"x", 4)
        self.assertEqual(self.host.emitted, [], "nothing before the end of the call")
        self.assertIsNone(self.end())
        main, sides = self.host.take()
        self.assertEqual(len(main), 1)
        self.assertEqual(
            records(main[0]),
            [Record(b"a", b"1", 1), Record("é".encode(), b"2", -2), Record(b"c", b"3", 3)],
        )
        self.assertEqual(
            [(name, records(b)) for name, b in sides], [("late", [Record(b"l", b"x", 4)])]
        )

    def test_an_empty_call_hands_on_nothing_and_a_failed_one_drops_its_records(self):
        self.end()
        self.assertEqual(self.host.take(), ([], []))
        self.out._begin("process")
        self.out.emit(b"k", b"v", 0)
        self.out.emit_to("late", b"k", b"v", 0)
        self.end(succeeded=False)
        self.out._begin("process")
        self.end()
        self.assertEqual(self.host.take(), ([], []))

    def test_a_batch_past_the_threshold_is_handed_on_at_once(self):
        value = b"v" * (300 * 1024)
        for ts in range(4):
            self.out.emit(b"k", value, ts)
        self.assertEqual(len(self.host.emitted), 1, "the 4th record takes the batch past 1 MiB")
        self.assertEqual(len(records(self.host.emitted[0])), 4)
        self.out.emit(b"k", b"small", 4)
        self.out.emit_to("side", b"k", b"v" * FLUSH_AT, 5)
        self.assertEqual([name for name, _ in self.host.emitted_to], ["side"])
        self.end()
        main, _ = self.host.take()
        self.assertEqual([len(records(b)) for b in main], [4, 1])

    def test_side_outputs_get_a_batch_each(self):
        for name, ts in (("a", 1), ("b", 2), ("a", 3)):
            self.out.emit_to(name, b"k", b"v", ts)
        self.end()
        _, sides = self.host.take()
        self.assertEqual([(name, len(records(b))) for name, b in sides], [("a", 2), ("b", 1)])

    def test_bad_side_output_names_are_refused(self):
        self.out.emit_to("n" * 255, b"k", b"v", 0)
        self.out.emit_to("é" * 127, b"k", b"v", 0)
        cases = [
            ("", "the side output name '' is 0 bytes long; names are 1 to 255 bytes"),
            ("n" * 256, "is 256 bytes long"),
            ("é" * 128, "is 256 bytes long"),
            (b"late", "a side output name must be a str, not bytes"),
            ("\udc80", "is not UTF-8 text"),
        ]
        for name, message in cases:
            with self.subTest(name=name), self.assertRaisesRegex(WeirError, message):
                self.out.emit_to(name, b"k", b"v", 0)

    def test_a_caught_fault_still_fails_the_call_and_drops_its_records(self):
        self.out.emit(b"k", b"v", 0)
        try:
            self.out.emit_to("", b"k", b"v", 0)
        except WeirError:
            pass
        fault = self.end()
        self.assertIsInstance(fault, WeirError)
        self.assertIn("name '' is 0 bytes long", str(fault))
        self.assertEqual(self.host.take(), ([], []))

    def test_the_first_fault_of_a_call_is_the_one_reported(self):
        for name in ("", "n" * 256):
            with self.assertRaises(WeirError):
                self.out.emit_to(name, b"k", b"v", 0)
        self.assertIn("is 0 bytes long", str(self.end()))

    def test_timers_go_to_the_host_from_process_on_timers_and_on_watermark_only(self):
        for call in ("process", "on_timers", "on_watermark"):
            self.out._begin(call)
            self.out.set_timer(EVENT_TIME, 5, call)
            self.out.set_timer(PROCESSING_TIME, 6, b"p")
            self.assertIsNone(self.end())
        self.assertEqual(
            sorted(self.host.timers[EVENT_TIME]),
            [(5, b"on_timers"), (5, b"on_watermark"), (5, b"process")],
        )
        self.out._begin("process")
        self.out.delete_timer(EVENT_TIME, 5, b"process")
        self.out.delete_timer(EVENT_TIME, 99, b"never set")
        self.end()
        self.assertEqual(len(self.host.timers[EVENT_TIME]), 2)
        self.out._begin("finish")
        with self.assertRaisesRegex(WeirError, "^set_timer is not allowed during finish: "):
            self.out.set_timer(EVENT_TIME, 5, b"k")
        with self.assertRaisesRegex(WeirError, "^delete_timer is not allowed during finish: "):
            self.out.delete_timer(EVENT_TIME, 5, b"on_timers")
        self.assertIsNotNone(self.end())
        self.assertEqual(len(self.host.timers[EVENT_TIME]), 2, "the refused calls changed nothing")

    def test_bad_timer_arguments_are_refused(self):
        cases = [
            (
                (2, 5, b"k"),
                "the domain must be weir.EVENT_TIME \\(0\\) or weir.PROCESSING_TIME \\(1\\), not 2",
            ),
            ((True, 5, b"k"), "not True"),
            ((0.0, 5, b"k"), "not 0.0"),
            ((EVENT_TIME, 2**63, b"k"), "the timestamp must be an int"),
            ((EVENT_TIME, 1.0, b"k"), "the timestamp must be an int"),
            ((EVENT_TIME, 5, 5), "the key must be bytes-like or str, not int"),
        ]
        for args, message in cases:
            with self.subTest(args=args), self.assertRaisesRegex(WeirError, message):
                self.out.set_timer(*args)
        self.assertEqual(self.host.timers, (set(), set()))

    def test_nothing_may_be_emitted_or_timed_between_calls(self):
        self.end()
        with self.assertRaisesRegex(WeirError, "^emit is not allowed between calls"):
            self.out.emit(b"k", b"v", 0)
        with self.assertRaisesRegex(WeirError, "^emit_to is not allowed between calls"):
            self.out.emit_to("late", b"k", b"v", 0)
        with self.assertRaisesRegex(WeirError, "^set_timer is not allowed between calls"):
            self.out.set_timer(EVENT_TIME, 1, b"k")
        self.out._begin("process")
        self.assertIsNone(self.end(), "a fault between calls does not fail the next one")
        self.assertEqual(self.host.take(), ([], []))

    def test_bad_records_are_refused(self):
        with self.assertRaisesRegex(
            WeirError, "emit: the key must be bytes-like or str, not NoneType"
        ):
            self.out.emit(None, b"v", 0)
        with self.assertRaisesRegex(
            WeirError, "emit_to: the value must be bytes-like or str, not int"
        ):
            self.out.emit_to("s", b"k", 1, 0)
        with self.assertRaisesRegex(
            WeirError, "timestamp must be an int from -2\\*\\*63 to 2\\*\\*63-1, not 2.5"
        ):
            self.out.emit(b"k", b"v", 2.5)
        self.end()
        self.assertEqual(self.host.take(), ([], []))

    def test_tells_the_hosts_times(self):
        self.host.watermark, self.host.clock = 42, 7
        self.assertEqual((self.out.watermark(), self.out.processing_time()), (42, 7))


if __name__ == "__main__":
    unittest.main()
