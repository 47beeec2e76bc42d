"""The package installs with pip from the checkout with no network, the way the README says:
into a venv that sees the system's python3-zmq, built with the system's setuptools."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import checkout


class Install(unittest.TestCase):
    def test_pip_installs_the_package_offline_into_a_venv(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            # A copy, so that the build's leftovers (build/, *.egg-info) stay out of the tree.
            src = os.path.join(d, "src")
            shutil.copytree(checkout.PACKAGE_ROOT, src,
                            ignore=shutil.ignore_patterns("tests", "__pycache__", "build",
                                                          "*.egg-info"))
            venv = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                            "--without-pip", venv], check=True, timeout=120)
            python = os.path.join(venv, "bin", "python")
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            env.pop("PIP_FIND_LINKS", None)
            r = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install",
                                "--no-build-isolation", "--no-index", src],
                               capture_output=True, text=True, env=env, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("Successfully installed aclaim-", r.stdout)
            r = subprocess.run([python, "-c", "import aclaim, zmq; print(aclaim.__file__); "
                                "print(aclaim.Worker.__name__, aclaim.__version__)"],
                               capture_output=True, text=True, cwd=d, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            where, names = r.stdout.splitlines()
            self.assertTrue(where.startswith(venv), where)
            self.assertTrue(names.startswith("Worker "), names)


if __name__ == "__main__":
    unittest.main()
