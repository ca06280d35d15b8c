"""Finding the operator class of an operator file, as build.sh's app module does."""

import os
import sys
import tempfile
import textwrap
import unittest

from weir import WeirError
from weir._loader import load_operator, module_name


class LoaderTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.loaded = []

    def tearDown(self):
        for name in self.loaded:
            sys.modules.pop(name, None)
        self.dir.cleanup()

    def write(self, file_name, source):
        path = os.path.join(self.dir.name, file_name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(source))
        self.loaded.append(module_name(path))
        return path

    def test_finds_the_one_operator_subclass_the_file_defines(self):
        path = self.write(
            "weir_test_single.py",
            """
            import weir
            from weir import Operator as Imported  # imported classes do not count

            class Base(weir.Operator):
                pass

            class Helper:
                pass
            """,
        )
        with self.assertRaisesRegex(WeirError, "Base does not define process"):
            load_operator(path)
        path = self.write(
            "weir_test_one.py",
            """
            import weir

            class One(weir.Operator):
                def process(self, batch, out):
                    pass
            """,
        )
        found = load_operator(path)
        self.assertEqual(found.__name__, "One")
        self.assertEqual(found.__module__, "weir_test_one", "named after the file")
        self.assertIs(load_operator(path), found, "loading the same file again reuses its module")

    def test_none_or_several_need_a_name(self):
        none = self.write("weir_test_none.py", "X = 1\n")
        with self.assertRaisesRegex(
            WeirError, "^weir_test_none.py defines no weir.Operator subclass$"
        ):
            load_operator(none)
        several = self.write(
            "weir_test_several.py",
            """
            import weir
            from weir import Operator

            class A(weir.Operator):
                def process(self, batch, out):
                    pass

            class B(A):
                pass
            """,
        )
        with self.assertRaisesRegex(
            WeirError,
            "defines several weir.Operator subclasses \\(A, B\\): name the one to build, as weir_test_several.py:A$",
        ):
            load_operator(several)
        self.assertEqual(load_operator(several, "B").__name__, "B")
        with self.assertRaisesRegex(WeirError, "`C` is nothing, not a weir.Operator subclass"):
            load_operator(several, "C")
        with self.assertRaisesRegex(WeirError, "`weir` is module, not a weir.Operator subclass"):
            load_operator(several, "weir")
        with self.assertRaisesRegex(WeirError, "Operator does not define process"):
            load_operator(several, "Operator")

    def test_a_file_named_like_a_standard_module_gets_another_name(self):
        path = self.write(
            "socket.py",
            """
            import socket
            import weir

            class Net(weir.Operator):
                def process(self, batch, out):
                    pass

            STANDARD = socket.create_connection
            """,
        )
        found = load_operator(path)
        self.assertEqual(found.__module__, "weir_operator_socket")
        self.assertTrue(
            callable(sys.modules["weir_operator_socket"].STANDARD),
            "its import is the standard socket",
        )

    def test_module_names(self):
        self.assertEqual(module_name("/x/count.py"), "count")
        self.assertEqual(module_name("/x/json.py"), "weir_operator_json")
        self.assertEqual(module_name("/x/my-op.py"), "weir_operator_my_op")
        self.assertEqual(module_name("/x/unittest.py"), "weir_operator_unittest")
        self.assertIn("weir", sys.modules)
        self.assertEqual(module_name("/x/weir.py"), "weir_operator_weir", "taken by another file")

    def test_an_import_error_leaves_no_half_module(self):
        path = self.write("weir_test_broken.py", "raise ImportError('missing thing')\n")
        with self.assertRaisesRegex(ImportError, "missing thing"):
            load_operator(path)
        self.assertNotIn("weir_test_broken", sys.modules)


if __name__ == "__main__":
    unittest.main()
