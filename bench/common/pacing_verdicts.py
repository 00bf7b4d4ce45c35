"""What paced a training run's steps, as bench/suites/training/pacing.py judges it and the launch floor
(launch_floor.py) keys its entries: the GPU, the host launching its kernels, the CPU computing, or unknown."""

GPU_BOUND = "gpu-bound"
HOST_PACED = "host-paced"
ON_CPU = "cpu"
UNKNOWN = "unknown"
