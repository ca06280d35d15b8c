"""How an exception becomes the message of a failed call."""

import gc
import unittest
import weakref

from weir import Batch, WeirError
from weir._errors import describe


class Payload:
    pass


def fail_deep(depth):
    if depth == 0:
        raise ValueError("went wrong")
    fail_deep(depth - 1)


def raised(function, *args):
    try:
        function(*args)
    except BaseException as e:
        return e
    raise AssertionError("did not raise")


class DescribeTest(unittest.TestCase):
    def test_the_type_and_message_come_first_then_the_innermost_frames(self):
        text = describe(raised(fail_deep, 20))
        lines = text.splitlines()
        self.assertEqual(lines[0], "ValueError: went wrong")
        self.assertEqual(lines[1], "Traceback (most recent call last):")
        self.assertIn("in fail_deep\n    raise ValueError", text)
        self.assertIn("[Previous line repeated 4 more times]", text, "8 frames of the 22 are kept")
        self.assertNotIn("in raised", text, "the outer frames are left out")

    def test_sdk_frames_are_left_out_and_the_sdks_own_errors_have_no_traceback(self):
        def process():
            Batch(b"\x01")

        text = describe(raised(process))
        self.assertTrue(
            text.startswith("weir.WeirError: malformed input batch: batch is 1 bytes"), text
        )
        self.assertIn("in process", text)
        self.assertNotIn("_batch.py", text)
        outside_operator_code = raised(Batch, b"\x01")
        outside_operator_code.__traceback__ = outside_operator_code.__traceback__.tb_next
        self.assertEqual(
            describe(outside_operator_code),
            "weir.WeirError: malformed input batch: batch is 1 bytes, shorter than its 8-byte header "
            "(record count, port)",
        )

    def test_describing_releases_the_frames_locals(self):
        def hoard():
            payload = Payload()
            hoard.ref = weakref.ref(payload)
            raise MemoryError

        exc = raised(hoard)
        self.assertIsNotNone(hoard.ref())
        text = describe(exc)
        gc.collect()
        self.assertIsNone(hoard.ref(), "the frame's locals were released")
        self.assertTrue(text.startswith("MemoryError\nTraceback"), text)

    def test_an_exception_without_a_traceback_is_its_summary(self):
        self.assertEqual(describe(KeyError("k")), "KeyError: 'k'")
        self.assertEqual(describe(WeirError("plain")), "weir.WeirError: plain")


if __name__ == "__main__":
    unittest.main()
