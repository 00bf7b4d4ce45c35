"""What is judged of every suite's runs, beside each suite's own warnings: whether a figure is normal
(normal.py: each figure a suite gives against the expected range of its key, with the causes its
bundle shows for a figure below it), and what the host did to it, its conditions: a busy machine
(shared_machine.py), the fingerprint's concerns (health.py), clocks held back or a link below its
slot while measured (counters.py), the P2P gate's and a NUMA split's marks on a run (machine.py).
Torch-free and shipped with the agent, which prints the host's concerns before its first launch."""
