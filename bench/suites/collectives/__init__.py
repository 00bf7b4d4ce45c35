"""The collectives suite (nccl-tests' collectives): suite.py defines it, ranks.py runs it, report/ shows it."""
