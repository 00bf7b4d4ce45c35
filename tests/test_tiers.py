"""tests/tiers.py names every test file in one tier, and `make check` selects tests of every CHECK
file and of no other."""

from __future__ import annotations

import collections
import subprocess
import sys

import pytest

from tests import tiers
from tests.conftest import REPO


def test_every_test_file_is_in_one_tier():
    files = {str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("test_*.py")}
    listed = [*tiers.CHECK, *tiers.FULL_ONLY]
    assert sorted(files - set(listed)) == [], "test files in no tier: name each in tests/tiers.py's CHECK or FULL_ONLY"
    assert sorted(set(listed) - files) == [], "tests/tiers.py names files that are not there"
    assert [path for path, count in collections.Counter(listed).items() if count > 1] == [], "files named twice in tests/tiers.py"


@pytest.mark.slow  # it collects every test file in a child pytest: seconds of CPU that make check spares
def test_make_check_selects_tests_of_every_check_file_and_none_of_the_others():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "-p", "no:cacheprovider"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]  # 5: nothing selected
    selected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    assert selected, "make check selects no test"
    assert sorted(selected - set(tiers.CHECK)) == [], "make check selects tests of files outside CHECK"
    assert sorted(set(tiers.CHECK) - selected) == [], "CHECK files whose every test is marked slow: move each to FULL_ONLY"
