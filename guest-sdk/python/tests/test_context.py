"""Context: who an instance is, and its config."""

import unittest

from weir import Context, WeirError


class ContextTest(unittest.TestCase):
    def test_defaults_to_the_only_instance_with_no_config(self):
        ctx = Context("count")
        self.assertEqual(
            (ctx.operator, ctx.subtask, ctx.parallelism, ctx.config), ("count", 0, 1, b"")
        )

    def test_config_is_bytes_and_a_str_is_encoded(self):
        self.assertEqual(Context("x", config="k=é").config, "k=é".encode())
        self.assertEqual(Context("x", config=bytearray(b"\xff")).config, b"\xff")
        self.assertEqual(Context("x", config=b"a b").config_str(), "a b")

    def test_config_str_names_the_operator_when_not_utf8(self):
        with self.assertRaisesRegex(
            WeirError, "^the config of operator `split` must be UTF-8 text: "
        ):
            Context("split", config=b"\xff\x41").config_str()

    def test_refuses_what_the_host_never_sends(self):
        with self.assertRaisesRegex(
            WeirError, "subtask 3 is not one of the 3 instances of operator `t`"
        ):
            Context("t", subtask=3, parallelism=3)
        with self.assertRaisesRegex(
            WeirError, "parallelism must be an int from 0 to 2\\*\\*32-1, not '2'"
        ):
            Context("t", parallelism="2")
        with self.assertRaisesRegex(WeirError, "config must be bytes or str, not int"):
            Context("t", config=5)
        with self.assertRaisesRegex(WeirError, "operator must be a str"):
            Context(b"t")

    def test_is_immutable(self):
        with self.assertRaises(AttributeError):
            Context("t").subtask = 1


if __name__ == "__main__":
    unittest.main()
