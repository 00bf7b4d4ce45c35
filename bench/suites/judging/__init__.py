"""What is judged of every suite's runs beside each suite's own warnings: what the host did to a run
(machine.py: the P2P gate, a NUMA split) and its figure against the expected ranges of its GPU model
and link (normal.py). A folder without suite.py: the registry passes it by."""
