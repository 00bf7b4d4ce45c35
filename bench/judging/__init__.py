"""What is judged of every suite's runs, beside each suite's own warnings: whether a figure is normal
(normal.py: each figure a suite gives against the expected range of its key, ranges.py's, read from
each suite's expected.json; own_ranges.py makes this project's from its bundles), and what the host
did to it, its conditions: a busy machine (shared_machine.py), the fingerprint's concerns (health.py),
clocks held back or a link below its slot while measured (counters.py), the P2P gate's and a NUMA
split's marks on a run (machine.py). host.py reads a host's fingerprint once; verdicts.py judges a
host and its runs at once for the report; summary.py gives `ddpbench run`'s lines. Torch-free and
shipped with the agent, which prints the host's concerns before its first launch."""
