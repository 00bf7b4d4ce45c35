"""What a job and a launch cost beside each suite's own work (its cost model), as measured: a job's
start-up (its processes, their imports, the devices, the process group) and exit, a launch's own cost,
and a training launch's set-up per model, each per kind of host with where it was measured.

Written by benchmarks/launch_costs.py from the phases that bundles' launch records hold (bench.common.
launch_time); rerun it on new bundles rather than edit the figures by hand.
"""

MEASURED = {'cpu': {'start_s': 1.922,
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
                        '20261127T110711Z-a61a4c (scaling on host local: 2 CPUs (AMD EPYC))'},
 'gpu': {'start_s': 8.0,
         'teardown_s': 0.0,
         'launch_s': 0.0,
         'training_build_s': {'gpt2': 6.0},
         'jobs': 0,
         'launches': 0,
         'source': 'not yet measured by phases: the figures fitted to whole launches on 2x H200 '
                   '(benchmarks/results/plan_durations.md), start-up and exit as one',
         'gate_arm_s': 6.438,
         'gate_source': 'bundle 20261125T183210Z-4271cb (seed001-sharded on host local: 2x NVIDIA H100 80GB HBM3); '
                        'bundle 20261125T212254Z-56d161 (seed002 on host local: 2x NVIDIA H100 80GB HBM3); bundle '
                        '20261125T213517Z-a86d8e (readings on host local: 2x NVIDIA H100 80GB HBM3); bundle '
                        '20261125T213922Z-6e20a7 (quick on host local: 2x NVIDIA H100 80GB HBM3); bundle '
                        '20261125T215632Z-593e7a (seed001-sharded-llama-grad-op on host local: 2x NVIDIA H100 80GB '
                        'HBM3); bundle 20261126T145046Z-b6143d (smoke on host local: 4x NVIDIA H200); bundle '
                        '20261126T162558Z-9ea34b (quick on host local: 2x NVIDIA H200); bundle 20261126T163106Z-ba806a '
                        '(two-nodes on host local: 2x NVIDIA H200)'}}
