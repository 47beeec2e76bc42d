"""aclaim.__version__ is the project's one version: the top-level VERSION file of the checkout
(aclaim/_version.py says why the package holds a copy of it)."""

from __future__ import annotations

import os
import unittest

import checkout

checkout.use()

import aclaim  # noqa: E402

VERSION_FILE = os.path.join(os.path.dirname(os.path.dirname(checkout.PACKAGE_ROOT)), "VERSION")


class Version(unittest.TestCase):
    def test_the_package_reports_the_projects_version(self) -> None:
        with open(VERSION_FILE) as f:
            project = f.readline().strip()
        self.assertEqual(aclaim.__version__, project,
                         "bump clients/python/aclaim/_version.py with VERSION")


if __name__ == "__main__":
    unittest.main()
