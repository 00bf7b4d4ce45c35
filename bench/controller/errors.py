"""The error of one host: kept apart from the runtimes so that the SSH layer and the shells,
which the runtimes are built on, can raise it too."""


class HostError(Exception):
    """A host could not run the plan; the message names the cause and the fix."""
