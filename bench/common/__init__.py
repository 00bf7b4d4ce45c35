"""What the agent and the controller both run: the agent protocol, what a host can do, statistics,
the concerns a fingerprint raises, transports and links, the machine key of launch history, the
one way to write a file, units, the clock, the source root and the deadline poll.

Standard library only: the agent ships this package beside `bench/agent` (its zipapp and image),
and the controller imports it without torch.
"""
