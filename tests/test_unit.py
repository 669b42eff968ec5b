"""Runs the C unit tests (registered with meson) from pytest, so that one
command runs everything."""
import subprocess

import pytest

from conftest import BUILD

UNIT = ["layout", "parity", "policy", "cstore", "journal", "parse", "assemble", "rules",
        "simpol", "evidence"]


@pytest.mark.parametrize("name", UNIT)
def test_c_unit(name):
    exe = BUILD / "tests" / "unit" / f"test_{name}"
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    assert r.returncode != 77, f"test_{name} skipped: {r.stdout}{r.stderr}"
    assert r.returncode == 0, r.stdout + r.stderr
