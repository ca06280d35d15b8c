"""weir.testing: the harness drives an operator as the host does, timers and restores included."""

import struct
import unittest

import weir
from weir import EVENT_TIME, PROCESSING_TIME, Context, WeirError
from weir._batch import encode_batch
from weir.testing import (
    MAX_FIRING_ROUNDS,
    MAX_TIMERS_PER_CALL,
    Harness,
    assert_records_eq,
    assert_restore_preserves_output,
    record,
)


class Total(weir.Operator):
    """Emits each value with a running total of value lengths; fails on the value "boom"."""

    def __init__(self, ctx):
        if ctx.config_str() == "refuse":
            raise WeirError(f"operator `{ctx.operator}` refuses to start")
        self.bytes = 0
        self.port_seen = None

    def process(self, batch, out):
        self.port_seen = batch.port
        for key, value, timestamp in batch:
            out.emit(key, b"partial", timestamp)
            if value == b"boom":
                raise ValueError(f"boom at {timestamp}")
            self.bytes += len(value)
            out.emit(key, str(self.bytes), timestamp)

    def finish(self, out):
        out.emit(b"total", str(self.bytes), weir.END_OF_TIME)


class Forgetful(weir.Operator):
    """Forgets its state on restore: what assert_restore_preserves_output must catch."""

    def __init__(self, ctx):
        self.seen = 0

    def process(self, batch, out):
        for key, _, timestamp in batch:
            self.seen += 1
            out.emit(key, str(self.seen), timestamp)

    def snapshot(self):
        return b""

    def restore(self, state):
        pass


class Timed(weir.Operator):
    """Drives the time imports from its input: a record's value is a command (``set E 10``,
    ``set P 5``, ``del E 10``, ``side NAME``, ``fail``) applied to the record's key. Fired timers
    come out as records ``fired DOMAIN at WATERMARK``, and the keys ``forever`` and ``chain:N``
    set a due timer again when they fire (forever, or N more times)."""

    def __init__(self, ctx):
        self.timer_calls = []

    def process(self, batch, out):
        for key, value, timestamp in batch:
            words = value.decode().split(" ")
            domain = EVENT_TIME if words[-2:-1] == ["E"] else PROCESSING_TIME
            if words[0] == "set":
                out.set_timer(domain, int(words[2]), key)
            elif words[0] == "del":
                out.delete_timer(domain, int(words[2]), key)
            elif words[0] == "side":
                out.emit_to(words[1], key, b"s", timestamp)
            elif words[0] == "fail":
                raise ValueError("asked to fail")
            else:
                raise ValueError(f"unknown command {value!r}")

    def on_timers(self, timers, out):
        self.timer_calls.append(len(timers))
        for timer in timers:
            name = "event" if timer.domain == EVENT_TIME else "processing"
            out.emit(timer.key, f"fired {name} at {out.watermark()}", timer.timestamp)
            if timer.key == b"forever":
                out.set_timer(timer.domain, timer.timestamp, timer.key)
            elif timer.key.startswith(b"chain:"):
                n = int(timer.key[6:])
                if n > 0:
                    out.set_timer(timer.domain, timer.timestamp, f"chain:{n - 1}")

    def on_watermark(self, watermark, out):
        out.emit(b"watermark", str(watermark), watermark)

    def finish(self, out):
        out.emit(b"finish", b"", 0)
        out.set_timer(EVENT_TIME, 1, b"too late")


class Polite(Timed):
    """Timed with a finish that obeys the rules."""

    def finish(self, out):
        out.emit(b"finish", b"", 0)


def fired(key, domain, timestamp, watermark):
    return record(key, f"fired {domain} at {watermark}", timestamp)


class HarnessTest(unittest.TestCase):
    def test_returns_what_each_call_emits(self):
        h = Harness(Total)
        self.assertEqual(h.context, Context("Total"))
        assert_records_eq(h.push("a", "xyz", 1), [("a", "partial", 1), ("a", "3", 1)])
        out = h.push_on(2, [("b", "", 2), record("c", "12", 3)])
        self.assertEqual(len(out), 4)
        self.assertEqual(h.operator.port_seen, 2)
        assert_records_eq(h.finish(), [("total", "5", weir.END_OF_TIME)])

    def test_drops_the_output_of_a_failed_call_and_raises_the_operators_exception(self):
        h = Harness(Total)
        with self.assertRaisesRegex(ValueError, "^boom at 2$"):
            h.push_on(0, [("a", "x", 1), ("a", "boom", 2)])
        assert_records_eq(h.push("a", "y", 3), [("a", "partial", 3), ("a", "2", 3)])

    def test_init_errors_surface_from_the_constructor(self):
        with self.assertRaisesRegex(WeirError, "operator `t` refuses to start"):
            Harness(Total, Context("t", config="refuse"))

    def test_malformed_batches_fail_as_in_the_component(self):
        with self.assertRaisesRegex(
            WeirError, "^malformed input batch: record 0 needs 8 bytes at offset 8"
        ):
            Harness(Total).push_batch(struct.pack("<II", 1, 0))

    def test_restore_into_fresh_keeps_the_state_through_a_new_instance(self):
        h = Harness(Total)
        h.push("a", "abcd", 1)
        first = h.operator
        state = h.snapshot()
        h.push("a", "ef", 2)
        h.restore_into_fresh(state)
        self.assertIsNot(h.operator, first)
        self.assertEqual(h.operator.bytes, 4)
        h.snapshot_and_restore()
        self.assertEqual((h.operator.bytes, h.operator.port_seen), (4, 0))

    def test_the_harness_snapshot_is_the_default_pickle_so_unpicklable_state_fails_here_too(self):
        h = Harness(Total)
        h.operator.handle = lambda: None
        with self.assertRaisesRegex(WeirError, "attribute `handle` \\(function\\) does not pickle"):
            h.snapshot_and_restore()

    def test_a_snapshot_must_be_bytes(self):
        class Wrong(Forgetful):
            def snapshot(self):
                return {"seen": self.seen}

        with self.assertRaisesRegex(WeirError, "Wrong.snapshot returned dict, not bytes"):
            Harness(Wrong).snapshot()

    def test_output_past_the_flush_threshold_comes_back_whole_and_in_order(self):
        class Echo(Forgetful):
            def process(self, batch, out):
                for key, value, timestamp in batch:
                    out.emit(key, value, timestamp)

        value = b"v" * (200 * 1024)
        records = [("k", value, ts) for ts in range(12)]
        batches = Harness(Echo).push_batch_encoded(encode_batch(records))
        self.assertEqual([len(weir.Batch(b)) for b in batches], [6, 6], "handed on once past 1 MiB")
        out = Harness(Echo).push_on(0, records)
        assert_records_eq(out, records)

    def test_checkpoint_complete_reaches_the_operator(self):
        class Noted(Forgetful):
            def checkpoint_complete(self, checkpoint_id):
                self.completed = checkpoint_id

        h = Harness(Noted)
        h.checkpoint_complete(7)
        self.assertEqual(h.operator.completed, 7)


class TimersTest(unittest.TestCase):
    def test_timers_fire_once_in_order_with_the_new_watermark_then_on_watermark_runs(self):
        h = Harness(Timed)
        self.assertEqual(h.watermark, weir.NO_WATERMARK)
        for key, command in [
            ("b", "set E 20"),
            ("z", "set E 10"),
            ("a", "set E 20"),
            ("a", "set E 20"),
            ("c", "set E 30"),
            ("c", "set P 15"),
        ]:
            h.push(key, command, 0)
        self.assertEqual(len(h.pending_timers(EVENT_TIME)), 4)
        assert_records_eq(
            h.advance_watermark(20),
            [
                fired("z", "event", 10, 20),
                fired("a", "event", 20, 20),
                fired("b", "event", 20, 20),
                ("watermark", "20", 20),
            ],
        )
        self.assertEqual(h.operator.timer_calls, [3])
        self.assertEqual(h.advance_watermark(20), [], "no advance, no call")
        self.assertEqual(h.pending_timers(EVENT_TIME), [(30, b"c")])
        self.assertEqual(h.pending_timers(PROCESSING_TIME), [(15, b"c")])
        with self.assertRaisesRegex(WeirError, "^the watermark cannot move back, from 20 to 19$"):
            h.advance_watermark(19)

    def test_deleted_timers_never_fire_and_timers_behind_the_watermark_wait_for_an_advance(self):
        h = Harness(Timed)
        h.push("a", "set E 10", 0)
        h.push("a", "del E 10", 0)
        h.push("a", "del E 99", 0)
        self.assertEqual(h.pending_timers(EVENT_TIME), [])
        h.advance_watermark(50)
        h.push("b", "set E 40", 0)
        assert_records_eq(
            h.advance_watermark(51), [fired("b", "event", 40, 51), ("watermark", "51", 51)]
        )

    def test_a_firing_hands_at_most_1024_timers_to_one_call(self):
        h = Harness(Timed)
        h.push_on(0, [(f"{i:05}", f"set E {i % 7}", 0) for i in range(2 * MAX_TIMERS_PER_CALL + 1)])
        out = h.advance_watermark(10)
        self.assertEqual(len(out), 2 * MAX_TIMERS_PER_CALL + 2)
        self.assertEqual(h.operator.timer_calls, [1024, 1024, 1])
        order = [(r.timestamp, r.key) for r in out[:-1]]
        self.assertEqual(order, sorted(set(order)), "timestamp, then key order")

    def test_timers_set_while_firing_fire_in_the_next_round_for_64_rounds_at_most(self):
        h = Harness(Timed)
        h.push("chain:63", "set E 5", 0)
        out = h.advance_watermark(5)
        self.assertEqual(len(out), MAX_FIRING_ROUNDS + 1, "64 firings and the watermark")
        self.assertEqual(out[63], fired("chain:0", "event", 5, 5))
        h = Harness(Timed)
        h.push("chain:64", "set E 5", 0)
        with self.assertRaises(WeirError) as caught:
            h.advance_watermark(5)
        self.assertEqual(
            str(caught.exception),
            "event timers were still due at 5 after 64 rounds of firing: the operator keeps setting "
            "timers at or before the time they fire at (docs/ABI.md section 15)",
        )
        h = Harness(Timed)
        h.push("forever", "set P 5", 0)
        with self.assertRaisesRegex(WeirError, "^processing timers were still due at 9"):
            h.advance_processing_time(9)

    def test_processing_timers_follow_the_clock_and_are_dropped_when_the_input_ends(self):
        h = Harness(Timed)
        self.assertEqual(h.processing_time, 0)
        h.push("a", "set P 100", 0)
        h.push("b", "set P 300", 0)
        h.push("c", "set P 0", 0)
        assert_records_eq(
            h.advance_processing_time(0), [fired("c", "processing", 0, weir.NO_WATERMARK)]
        )
        assert_records_eq(
            h.advance_processing_time(150), [fired("a", "processing", 100, weir.NO_WATERMARK)]
        )
        self.assertEqual(h.processing_time, 150)
        with self.assertRaisesRegex(WeirError, "clock cannot move back, from 150 to 149"):
            h.advance_processing_time(149)
        self.assertEqual(len(h.pending_timers(PROCESSING_TIME)), 1)
        h.push("e", "set E 7", 0)
        with self.assertRaisesRegex(WeirError, "^set_timer is not allowed during finish"):
            h.finish()
        self.assertEqual(h.pending_timers(PROCESSING_TIME), [])
        self.assertEqual(h.watermark, weir.END_OF_TIME)

    def test_finish_fires_every_timer_then_tells_the_last_watermark_then_finishes(self):
        h = Harness(Polite)
        h.push("late", "set E 9000000", 0)
        h.push("soon", "set E -4", 0)
        assert_records_eq(
            h.finish(),
            [
                fired("soon", "event", -4, weir.END_OF_TIME),
                fired("late", "event", 9000000, weir.END_OF_TIME),
                ("watermark", str(weir.END_OF_TIME), weir.END_OF_TIME),
                ("finish", "", 0),
            ],
        )

    def test_timers_are_the_hosts_kept_across_restores(self):
        h = Harness(Timed)
        h.push("a", "set E 10", 0)
        h.push("b", "set E 20", 0)
        h.snapshot_and_restore()
        self.assertEqual(h.operator.timer_calls, [])
        self.assertEqual(len(h.pending_timers(EVENT_TIME)), 2)
        h.advance_watermark(15)
        self.assertEqual(h.operator.timer_calls, [1])

    def test_timers_past_the_memory_limit_fail_the_call_and_are_not_kept(self):
        h = Harness(Timed)
        h.host.max_timer_state = 2 * (48 + 10) + 5
        key = "k" * 10
        h.push(key, "set E 1", 0)
        h.push(key, "set E 1", 0)
        h.push(key, "set E 2", 0)
        with self.assertRaisesRegex(
            WeirError, "timers would take 174 bytes, past the limit of 121"
        ):
            h.push(key, "set P 1", 0)
        self.assertEqual(len(h.pending_timers(EVENT_TIME)), 2)
        self.assertEqual(h.pending_timers(PROCESSING_TIME), [])
        h.push(key, "del E 2", 0)
        h.push(key, "set P 1", 0)

    def test_side_outputs_keep_their_records_and_a_failed_call_emits_nothing(self):
        h = Harness(Timed)
        h.push("a", "side late", 1)
        h.push_on(0, [("b", "side other", 2), ("c", "side late", 3)])
        with self.assertRaisesRegex(ValueError, "asked to fail"):
            h.push_on(0, [("d", "side late", 4), ("e", "fail", 5)])
        h.snapshot_and_restore()
        assert_records_eq(h.side_output("late"), [("a", "s", 1), ("c", "s", 3)])
        assert_records_eq(h.side_output("other"), [("b", "s", 2)])
        self.assertEqual(h.side_output("none"), [])
        with self.assertRaisesRegex(WeirError, "^emit_to: the side output name '' is 0 bytes"):
            h.push("x", "side ", 0)


class RestoreEquivalenceTest(unittest.TestCase):
    def test_holds_for_the_default_pickled_state(self):
        records = [("k", "ab" * i, i) for i in range(7)]
        for every in (1, 2, 3):
            assert_restore_preserves_output(Total, Context("total"), records, every)

    def test_catches_lost_state(self):
        records = [("k", "v", i) for i in range(4)]
        with self.assertRaises(AssertionError) as caught:
            assert_restore_preserves_output(Forgetful, None, records, 2)
        self.assertTrue(
            str(caught.exception).startswith(
                "output changes when the operator is restored into a fresh instance after every 2 "
                "record(s)\nrecords differ at index 2"
            ),
            caught.exception,
        )

    def test_covers_side_outputs(self):
        class Forgets(Forgetful):
            def process(self, batch, out):
                for key, value, timestamp in batch:
                    self.seen += 1
                    out.emit_to("many" if self.seen > 2 else "few", key, value, timestamp)

        with self.assertRaises(AssertionError) as caught:
            assert_restore_preserves_output(Forgets, None, [("k", "v", i) for i in range(4)], 3)
        self.assertTrue(
            str(caught.exception).startswith(
                "side output 'few' changes when the operator is restored into a fresh instance after every 3"
            ),
            caught.exception,
        )

    def test_a_failing_run_says_which(self):
        with self.assertRaises(ValueError) as caught:
            assert_restore_preserves_output(Total, None, [("k", "boom", 0)], 1)
        self.assertIn(
            "(in the run without restores of assert_restore_preserves_output)",
            caught.exception.__notes__,
        )
        with self.assertRaisesRegex(WeirError, "`every` must be an int of at least 1"):
            assert_restore_preserves_output(Total, None, [], 0)


class DiffTest(unittest.TestCase):
    def test_names_the_first_difference_and_lists_both_sides(self):
        left = [record("a", "1", 1), record("b", "1", 2)]
        with self.assertRaises(AssertionError) as caught:
            assert_records_eq(left, [("a", "1", 1), ("b", "2", 2), ("c", "1", 3)])
        text = str(caught.exception)
        self.assertTrue(
            text.startswith(
                "records differ at index 1 (actual: 2 records, expected: 3)\n"
                "  actual:   Record(key=b'b', value=b'1', timestamp=2)\n"
                "  expected: Record(key=b'b', value=b'2', timestamp=2)\n"
            ),
            text,
        )
        self.assertIn(" >   1: Record(key=b'b', value=b'2', timestamp=2)", text)
        assert_records_eq(left, left)
        with self.assertRaisesRegex(AssertionError, "actual:   \\(no record\\)"):
            assert_records_eq(left[:1], left)


if __name__ == "__main__":
    unittest.main()
