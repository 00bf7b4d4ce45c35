"""What a job and a launch cost beside each suite's own work (its cost model), as measured: a job's
start-up (its processes, their imports, the devices, the process group) and exit, a launch's own cost,
and a training launch's set-up per model, each per kind of host with where it was measured.

Written by benchmarks/launch_costs.py from the phases that bundles' launch records hold (bench.common.
launch_time); rerun it on new bundles rather than edit the figures by hand.
"""

MEASURED = {'gpu': {'start_s': 7.673,
         'teardown_s': 0.382,
         'launch_s': 0.262,
         'training_build_s': {'gpt2': 0.065},
         'jobs': 4,
         'launches': 6,
         'source': 'bundle 20261127T115002Z-3cea74 (quick on host local: 2x NVIDIA H200)',
         'gate_arm_s': 5.109,
         'gate_source': 'bundle 20261127T115002Z-3cea74 (quick on host local: 2x NVIDIA H200)'},
 'cpu': {'start_s': 1.922,
         'teardown_s': 0.053,
         'launch_s': 0.275,
         'training_build_s': {'tiny': 0.017, 'tiny-llama': 0.022},
         'gate_arm_s': 1.433,
         'jobs': 18,
         'launches': 34,
         'source': 'bundle 20261127T105846Z-aa56ee (quick on host local: 2 CPUs (AMD EPYC)); bundle '
                   '20261127T110124Z-36e6f7 (scaling on host local: 2 CPUs (AMD EPYC)); bundle 20261127T110400Z-2e6974 '
                   '(quick on host local: 2 CPUs (AMD EPYC)); bundle 20261127T110711Z-a61a4c (scaling on host local: 2 '
                   'CPUs (AMD EPYC)); other processes took a median 72% of the CPU, the figures are scaled to an idle '
                   'one',
         'gate_source': 'bundle 20261127T105846Z-aa56ee (quick on host local: 2 CPUs (AMD EPYC)); bundle '
                        '20261127T110124Z-36e6f7 (scaling on host local: 2 CPUs (AMD EPYC)); bundle '
                        '20261127T110400Z-2e6974 (quick on host local: 2 CPUs (AMD EPYC)); bundle '
                        '20261127T110711Z-a61a4c (scaling on host local: 2 CPUs (AMD EPYC))'}}
