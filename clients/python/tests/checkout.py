"""Puts the checkout's package first on the path: the tests exercise this tree, not a copy that
happens to be installed. Every test module calls use() before it imports aclaim."""

import os
import sys

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def use() -> None:
    if PACKAGE_ROOT not in sys.path:
        sys.path.insert(0, PACKAGE_ROOT)
