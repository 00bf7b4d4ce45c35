"""The test tiers. `make test`, CI's command, runs every test. `make check`, run before each commit,
runs the tests not marked slow (`pytest -m "not slow"`), under 3 minutes and 2.5 minutes of CPU on a
2-core machine: every test of a FULL_ONLY file is slow (tests/conftest.py marks them), and a test of
a CHECK file is slow where it carries `@pytest.mark.slow` itself.

Every test file is named in one of the two lists (tests/test_tiers.py), so a new file joins a tier
on purpose. CHECK asks "does it work": unit tests, schema, architecture and docs checks, the test
session's own rules, and two CPU plans run end to end (tests/report's real bundle: collectives and
DDP over gloo, then its report, plots and compare; the copy suite's host-to-host copies in
tests/suites/test_copy.py), and every shipped plan dry-run on the machine profiles of
benchmarks/plan_durations.py (its smoke runs on this CPU are marked slow). FULL_ONLY asks "does it
hold", at a cost: files whose plans and processes take minutes, that need what `make test` installs
(sshd hosts, Slurm, Docker, a browser), or that run the CLI over a matrix of bad, degenerate or
extreme inputs (tests/e2e's bad and hostile input, tests/report's degenerate and schema-extreme
bundles; in process, tests/support/cli_in_process.py).

The budgets below hold tests/durations.json, each test file's wall and CPU seconds, which
tests/test_tiers.py reads. `make test` (every test, no TESTS selection) rewrites it when every test
passes; commit it as benchmarks/results/ is, on a quiet 2-core machine:

    make test && git add tests/durations.json

One file's row, after it changed or joined a tier:

    .venv/bin/python -m pytest -q --record-durations tests/agent/test_jobs.py

CI stops a job at 90 minutes on 2 cores; the whole suite's budget keeps it at a third of that."""

from __future__ import annotations

# `make check`: the CPU seconds of the CHECK files' tests not marked slow (each row's check_cpu_s).
CHECK_CPU_BUDGET_S = 2.5 * 60
# `make test`: the wall seconds of the whole suite on a quiet 2-core machine, a third of CI's 90
# (25.6 min measured, 2 workers).
WHOLE_SUITE_WALL_BUDGET_S = 30 * 60

CHECK = (
    "tests/test_architecture.py",
    "tests/test_docs.py",
    "tests/test_session_rules.py",
    "tests/test_tiers.py",
    "tests/agent/test_copy_engine_allreduce.py",
    "tests/agent/test_counters.py",
    "tests/agent/test_cpu_pace.py",
    "tests/agent/test_fingerprint.py",
    "tests/agent/test_gate_diagnostics.py",
    "tests/agent/test_kernel_time.py",
    "tests/agent/test_launch_imports.py",
    "tests/agent/test_placement.py",
    "tests/agent/test_planning.py",
    "tests/agent/test_sampling.py",
    "tests/agent/test_span.py",
    "tests/agent/test_spawn.py",
    "tests/agent/test_timeline.py",
    "tests/agent/test_transports.py",
    "tests/common/test_launch_floor.py",
    "tests/common/test_nccl_log.py",
    "tests/common/test_reference.py",
    "tests/common/test_replay.py",
    "tests/common/test_run.py",
    "tests/common/test_stats.py",
    "tests/formats/test_export.py",
    "tests/formats/test_import.py",
    "tests/controller/test_agent_package.py",
    "tests/controller/test_dry_run_and_smoke.py",
    "tests/controller/test_hosts.py",
    "tests/controller/test_pins.py",
    "tests/controller/test_plan_env.py",
    "tests/controller/test_pricing.py",
    "tests/controller/test_progress.py",
    "tests/e2e/test_boundaries.py",
    "tests/e2e/test_escaping.py",
    "tests/e2e/test_hostile_records.py",
    "tests/e2e/test_link_truth.py",
    "tests/judging/test_normal.py",
    "tests/judging/test_normal_coverage.py",
    "tests/judging/test_own_ranges.py",
    "tests/judging/test_ranges.py",
    "tests/e2e/test_plan_fuzz.py",
    "tests/models/test_llama.py",
    "tests/report/test_figures_agree.py",
    "tests/report/test_launch_phases.py",
    "tests/report/test_pacing.py",
    "tests/report/test_report_answer.py",
    "tests/report/test_report_merge.py",
    "tests/report/test_report_plots.py",
    "tests/report/test_report_scaling.py",
    "tests/suites/test_copy.py",
    "tests/suites/test_culprits.py",
    "tests/suites/test_micro_batch_auto.py",
    "tests/suites/test_ddp_cuda_graphs.py",
    "tests/suites/test_predict_examples.py",
    "tests/suites/test_predicted_line.py",
    "tests/suites/test_predictor_validated.py",
    "tests/suites/test_shipped_plans.py",
    "tests/suites/test_suite_contract.py",
    "tests/verify/test_compare_out.py",
    "tests/verify/test_interrupted_rerun.py",
)

FULL_ONLY = (
    "tests/suites/test_predict_topologies.py",
    "tests/report/test_gzip_bundles.py",
    "tests/verify/test_noise_model.py",
    "tests/agent/test_cgroup_memory.py",
    "tests/agent/test_estimate.py",
    "tests/agent/test_gate.py",
    "tests/agent/test_jobs.py",
    "tests/agent/test_topology.py",
    "tests/agent/test_worker.py",
    "tests/common/test_shared_machine.py",
    "tests/controller/runtimes/test_docker.py",
    "tests/controller/runtimes/test_slurm.py",
    "tests/controller/test_resume_trust.py",
    "tests/controller/test_run.py",
    "tests/controller/test_ssh.py",
    "tests/controller/test_two_nodes.py",
    "tests/docker/test_image.py",
    "tests/e2e/test_bad_input.py",
    "tests/e2e/test_eight_processes.py",
    "tests/e2e/test_hostile_input.py",
    "tests/e2e/test_hostile_remote.py",
    "tests/e2e/test_launch_limits.py",
    "tests/e2e/test_make_setup.py",
    "tests/e2e/test_make_verify.py",
    "tests/e2e/test_stopping_make_test.py",
    "tests/report/test_any_valid_bundle.py",
    "tests/report/test_degenerate_bundles.py",
    "tests/report/test_published_bundles.py",
    "tests/report/test_report_browser.py",
    "tests/report/test_report_cli.py",
    "tests/report/test_report_many_bundles.py",
    "tests/report/test_report_readable.py",
    "tests/report/test_report_reader.py",
    "tests/report/test_schema_valid_extremes.py",
    "tests/suites/test_a_new_suite.py",
    "tests/suites/test_collectives.py",
    "tests/suites/test_ddp.py",
    "tests/suites/test_ddp_predict.py",
    "tests/suites/test_fsdp.py",
    "tests/verify/test_verify.py",
)
