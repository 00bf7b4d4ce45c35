"""The fsdp suite: sharded data parallelism (FSDP2), beside the ddp suite."""
