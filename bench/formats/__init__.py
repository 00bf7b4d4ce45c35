"""Other tools' formats, in and out: nccl-tests' and rccl-tests' result files made into a bundle
(`ddpbench import`, imported.py and nccl_tests.py); a bundle's figures as nccl-tests' JSON, Bencher's
BMF and Prometheus' text format (`ddpbench export`); a verdict as JUnit XML and as an in-toto
Statement (`compare` and `verify` --junit, --in-toto). One module per format."""
