"""The ddp suite (DDP training step time): suite.py defines it, ranks.py runs it, report/ shows it."""
