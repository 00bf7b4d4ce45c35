"""What a job and a launch cost beside each suite's own work (its cost model), as measured: a job's
start-up (its processes, their imports, the devices, the process group) and exit, a launch's own cost,
a training launch's set-up per model, and on a GPU what a small eager micro-batch of each training setup
takes and how long its profiled steps' traces take to read, each per kind of host with where it was
measured.

Written by benchmarks/launch_costs.py from the phases that bundles' launch records hold (bench.common.
launch_time); rerun it on new bundles rather than edit the figures by hand.
"""

MEASURED = {'gpu': {'start_s': 4.718,
         'teardown_s': 0.53,
         'launch_s': 0.497,
         'training_build_s': {'gpt2': 0.034, 'gpt2-large': 0.041, 'llama3.2-1b': 0.055, 'sdxl-unet': 12.947},
         'jobs': 6,
         'launches': 30,
         'source': 'bundle 20261206T234403Z-5d14e3 (quick on host local: 1x NVIDIA H100 80GB HBM3); bundle '
                   '20261206T234419Z-71f2a9 (quick on host local: 1x NVIDIA H100 80GB HBM3); bundle '
                   '20261206T234441Z-b1efd7 (pacing-shipped on host local: 1x NVIDIA H100 80GB HBM3)',
         'gate_arm_s': 5.109,
         'gate_source': 'bundle 20261127T115002Z-3cea74 (quick on host local: 2x NVIDIA H200)',
         'eager_micro_batches': {'ddp gpt2': {'micro_batch': 4,
                                              'micro_batch_s': 0.0217,
                                              'runs': 2,
                                              'trace_s': 0.0532,
                                              'profiled_runs': 5},
                                 'ddp gpt2-large': {'micro_batch': 2,
                                                    'micro_batch_s': 0.0381,
                                                    'runs': 2,
                                                    'trace_s': 0.1438,
                                                    'profiled_runs': 3},
                                 'ddp llama3.2-1b checkpointed': {'micro_batch': 2,
                                                                  'micro_batch_s': 0.0783,
                                                                  'runs': 2,
                                                                  'trace_s': 0.2167,
                                                                  'profiled_runs': 1},
                                 'fsdp full gpt2-large': {'micro_batch': 2,
                                                          'micro_batch_s': 0.0974,
                                                          'runs': 2,
                                                          'trace_s': 0.2998,
                                                          'profiled_runs': 1},
                                 'fsdp full llama3.2-1b checkpointed': {'micro_batch': 2,
                                                                        'micro_batch_s': 0.1051,
                                                                        'runs': 2,
                                                                        'trace_s': 0.2331,
                                                                        'profiled_runs': 2},
                                 'fsdp grad_op gpt2-large': {'micro_batch': 2,
                                                             'micro_batch_s': 0.0857,
                                                             'runs': 2,
                                                             'trace_s': 0.173,
                                                             'profiled_runs': 1},
                                 'fsdp grad_op llama3.2-1b checkpointed': {'micro_batch': 2,
                                                                           'micro_batch_s': 0.0998,
                                                                           'runs': 2,
                                                                           'trace_s': 0.2838,
                                                                           'profiled_runs': 1}}},
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
