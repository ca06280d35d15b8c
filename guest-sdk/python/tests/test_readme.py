"""The Python operator the repository's README shows runs as it claims: a keyed count whose
counts survive a restore."""

import os
import re
import unittest

from weir.testing import Harness, assert_records_eq, assert_restore_preserves_output, record

README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")


def readme_operator():
    """The class defined by the README's ```python block."""
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.DOTALL)
    assert len(blocks) == 1, f"the README has {len(blocks)} python blocks, expected 1"
    namespace = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    return namespace["Count"]


class ReadmeTest(unittest.TestCase):
    def test_the_readme_count_counts_and_survives_a_restore(self):
        count = readme_operator()
        harness = Harness(count)
        assert_records_eq(
            harness.push_on(0, [record("a", "x", 1), record("b", "y", 2), record("a", "z", 3)]),
            [record("a", "1", 1), record("b", "1", 2), record("a", "2", 3)],
        )
        harness.snapshot_and_restore()
        assert_records_eq(harness.push("a", "", 4), [record("a", "3", 4)])
        records = [record(key, "v", ts) for ts, key in enumerate("abacab")]
        assert_restore_preserves_output(count, None, records, 2)


if __name__ == "__main__":
    unittest.main()
