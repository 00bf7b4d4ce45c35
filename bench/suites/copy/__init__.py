"""The copy suite (nvbandwidth's copies): suite.py defines it, ranks.py runs it, report.py shows it."""
