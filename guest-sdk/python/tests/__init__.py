"""Tests of the Python SDK, run from the repository root with
``python3 -m unittest discover -s guest-sdk/python/tests -t guest-sdk/python``."""
