"""What the tests start and the stand-ins they use; FIXTURES is the folder of every file the tests
read as input (tests/fixtures/README.md says what each one is and where it came from)."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
