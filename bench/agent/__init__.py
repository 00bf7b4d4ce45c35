"""The agent: runs on the GPU host, fingerprints it and launches the suites with torchrun.

Depends on torch and the standard library only; never imports the controller side.
"""
