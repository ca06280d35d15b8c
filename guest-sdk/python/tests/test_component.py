"""The component glue, run in plain CPython against stand-ins for the bindings componentize-py
generates (``wit_world``, ``componentize_py_types``), shaped as 0.25.1 generates them for
abi/wit/operator.wit."""

import enum
import importlib
import os
import struct
import sys
import tempfile
import textwrap
import types
import unittest
from dataclasses import dataclass

from weir import _host
from weir._batch import encode_batch

OPERATOR = """
    import weir

    class Probe(weir.Operator):
        def __init__(self, ctx):
            self.seen = 0
            weir.log.warn(f"init {ctx.operator} {ctx.subtask}/{ctx.parallelism} {ctx.config!r}")

        def process(self, batch, out):
            for record in batch:
                self.seen += 1
                if record.value == b"fail":
                    raise ValueError(f"asked to fail at {record.timestamp}")
                out.set_timer(weir.PROCESSING_TIME, record.timestamp, record.key)
                out.emit(record.key, b"%d" % self.seen, out.watermark())
                out.emit_to("seen", record.key, b"", record.timestamp)

        def on_timers(self, timers, out):
            for timer in timers:
                out.delete_timer(timer.domain, timer.timestamp, timer.key)

        def finish(self, out):
            out.set_timer(weir.EVENT_TIME, 1, b"too late")
"""


class Bindings:
    """Stand-ins for the generated modules, recording the host calls."""

    def __init__(self):
        self.calls = []

        @dataclass(frozen=True)
        class Err(Exception):
            value: object

        class TimeDomain(enum.Enum):
            EVENT = 0
            PROCESSING = 1

        class Level(enum.Enum):
            ERROR = 0
            WARN = 1
            INFO = 2
            DEBUG = 3
            TRACE = 4

        @dataclass
        class InitMessage:
            operator: str
            subtask: int
            parallelism: int
            config: bytes

        self.Err, self.TimeDomain, self.Level, self.InitMessage = (
            Err,
            TimeDomain,
            Level,
            InitMessage,
        )
        record = self.calls.append
        host = types.SimpleNamespace(
            emit=lambda batch: record(("emit", batch)),
            emit_to=lambda output, batch: record(("emit_to", output, batch)),
            timer_set=lambda domain, timestamp, key: record(("timer_set", domain, timestamp, key)),
            timer_delete=lambda domain, timestamp, key: record(
                ("timer_delete", domain, timestamp, key)
            ),
            current_time=lambda domain: 77 if domain is TimeDomain.EVENT else 88,
            log=lambda level, message: record(("log", level, message)),
        )
        self.modules = {
            "componentize_py_types": types.SimpleNamespace(Err=Err),
            "wit_world": types.SimpleNamespace(),
            "wit_world.exports": types.SimpleNamespace(Guest=type("Guest", (), {})),
            "wit_world.imports": types.SimpleNamespace(),
            "wit_world.imports.host": host,
            "wit_world.imports.types": types.SimpleNamespace(TimeDomain=TimeDomain, Level=Level),
        }
        self.modules["wit_world"].exports = self.modules["wit_world.exports"]
        self.modules["wit_world.imports"].host = host
        self.modules["wit_world.imports"].types = self.modules["wit_world.imports.types"]


class ComponentTest(unittest.TestCase):
    def setUp(self):
        self.bindings = Bindings()
        self.saved_modules = {
            name: sys.modules.get(name) for name in [*self.bindings.modules, "weir._component"]
        }
        sys.modules.update(self.bindings.modules)
        sys.modules.pop("weir._component", None)
        self.component = importlib.import_module("weir._component")
        self.dir = tempfile.TemporaryDirectory()
        app_dir, operator_dir = (os.path.join(self.dir.name, d) for d in ("app", "operator"))
        os.mkdir(app_dir)
        os.mkdir(operator_dir)
        with open(os.path.join(operator_dir, "weir_test_probe.py"), "w") as f:
            f.write(textwrap.dedent(OPERATOR))
        self.saved_path = sys.path[:]
        sys.path[:] = ["/stdlib", app_dir, operator_dir]
        guest_class = self.component.guest_for_file(
            os.path.join(app_dir, "weir_app.py"), "weir_test_probe.py"
        )
        sys.path[:] = self.saved_path
        self.guest = guest_class()

    def tearDown(self):
        sys.path[:] = self.saved_path
        for name, module in self.saved_modules.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        sys.modules.pop("weir_test_probe", None)
        _host.install(_host.NativeHost())
        self.dir.cleanup()

    def init(self):
        self.guest.init(self.bindings.InitMessage("probe", 1, 2, b"\x00cfg"))

    def test_init_makes_the_instance_and_log_reaches_the_hosts_import(self):
        self.init()
        self.assertEqual(
            self.bindings.calls, [("log", self.bindings.Level.WARN, "init probe 1/2 b'\\x00cfg'")]
        )

    def test_process_dispatches_and_hands_one_batch_per_output_to_the_host(self):
        self.init()
        self.bindings.calls.clear()
        self.guest.process(encode_batch([("a", "", 5), ("b", "", 6)], port=1))
        domain = self.bindings.TimeDomain
        self.assertEqual(
            self.bindings.calls,
            [
                ("timer_set", domain.PROCESSING, 5, b"a"),
                ("timer_set", domain.PROCESSING, 6, b"b"),
                ("emit", encode_batch([("a", "1", 77), ("b", "2", 77)])),
                ("emit_to", "seen", encode_batch([("a", "", 5), ("b", "", 6)])),
            ],
        )
        self.bindings.calls.clear()
        self.guest.on_timers(encode_batch([("a", "", 5)], port=1))
        self.assertEqual(self.bindings.calls, [("timer_delete", domain.PROCESSING, 5, b"a")])

    def test_an_exception_becomes_err_with_its_type_message_and_operator_frames(self):
        self.init()
        self.bindings.calls.clear()
        with self.assertRaises(self.bindings.Err) as caught:
            self.guest.process(encode_batch([("a", "ok", 1), ("b", "fail", 2)]))
        message = caught.exception.value
        self.assertTrue(message.startswith("ValueError: asked to fail at 2\nTraceback"), message)
        self.assertIn('weir_test_probe.py", line 13, in process', message)
        self.assertNotIn("_component.py", message)
        self.assertEqual(
            [call[0] for call in self.bindings.calls], ["timer_set"], "nothing was emitted"
        )

    def test_forbidden_uses_and_malformed_input_fail_the_call_by_name(self):
        self.init()
        with self.assertRaises(self.bindings.Err) as caught:
            self.guest.finish()
        self.assertTrue(
            caught.exception.value.startswith(
                "weir.WeirError: set_timer is not allowed during finish"
            )
        )
        with self.assertRaises(self.bindings.Err) as caught:
            self.guest.process(struct.pack("<II", 1, 0))
        self.assertEqual(
            caught.exception.value,
            "weir.WeirError: malformed input batch: record 0 needs 8 bytes at offset 8 but the batch ends at 8",
        )

    def test_snapshot_and_restore_carry_the_state_into_a_fresh_instance(self):
        self.init()
        self.guest.process(encode_batch([("a", "", 1), ("a", "", 2)]))
        state = self.guest.snapshot(1)
        self.assertIsInstance(state, bytes)
        self.guest.checkpoint_complete(1)
        self.init()
        self.guest.restore(state)
        self.bindings.calls.clear()
        self.guest.process(encode_batch([("a", "", 3)]))
        self.assertIn(("emit", encode_batch([("a", "3", 77)])), self.bindings.calls)
        with self.assertRaises(self.bindings.Err) as caught:
            self.guest.restore(b"garbage")
        self.assertIn("the snapshot does not unpickle", caught.exception.value)

    def test_a_call_before_init_fails(self):
        with self.assertRaises(self.bindings.Err) as caught:
            self.guest.on_watermark(5)
        self.assertEqual(
            caught.exception.value, "weir.WeirError: the host called the operator before init"
        )


if __name__ == "__main__":
    unittest.main()
