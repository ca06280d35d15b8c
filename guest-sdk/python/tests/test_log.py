"""weir.log: to the installed host, and to stderr in plain CPython."""

import contextlib
import io
import unittest

import weir
from weir import _host


class Recorder(_host.Host):
    def __init__(self):
        self.lines = []

    def log(self, level, message):
        self.lines.append((_host.LEVEL_NAMES[level], message))


class LogTest(unittest.TestCase):
    def tearDown(self):
        _host.install(_host.NativeHost())

    def test_plain_cpython_writes_level_and_message_to_stderr(self):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            weir.log.info("loaded 3 rules")
            weir.log.error(42)
        self.assertEqual(stderr.getvalue(), "[info] loaded 3 rules\n[error] 42\n")

    def test_each_function_writes_its_level_to_the_installed_host(self):
        recorder = Recorder()
        _host.install(recorder)
        weir.log.error("e")
        weir.log.warn("w")
        weir.log.info("i")
        weir.log.debug("d")
        weir.log.trace("t")
        self.assertEqual(
            recorder.lines,
            [("error", "e"), ("warn", "w"), ("info", "i"), ("debug", "d"), ("trace", "t")],
        )


if __name__ == "__main__":
    unittest.main()
