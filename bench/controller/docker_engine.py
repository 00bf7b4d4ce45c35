"""The docker command line as a small API: each method is one docker command, run through a
`Shell` (this machine, or a host over SSH), with its failures turned into one line that
names the cause and the fix."""

from __future__ import annotations

import json
import re
from typing import Callable

from bench.controller.shell import CommandNotFound, Result, Shell
from bench.errors import UserError

DOCKER = "docker"
ENGINE_UNREACHABLE = re.compile(r"Cannot connect to the Docker daemon|Is the docker daemon running|error during connect", re.IGNORECASE)
NO_SUCH_IMAGE = re.compile(r"No such image|No such object", re.IGNORECASE)
NOT_IN_REGISTRY = re.compile(r"manifest unknown|not found|does not exist", re.IGNORECASE)
REGISTRY_UNREACHABLE = re.compile(
    r"lookup .* (no such host|server misbehaving)|dial tcp|i/o timeout|Temporary failure in name resolution|"
    r"Client.Timeout|connection refused|network is unreachable",
    re.IGNORECASE,
)
DISK_FULL = re.compile(r"no space left on device", re.IGNORECASE)
KILLED_STATUSES = {137: "SIGKILL: `docker kill`, the kernel's out-of-memory killer or a stopped engine",
                   143: "SIGTERM: `docker stop`"}


class DockerError(UserError):
    """A docker command failed; the message names the cause and the fix."""


def is_image_id(reference: str) -> bool:
    return re.fullmatch(r"sha256:[0-9a-f]{64}", reference) is not None


class Docker:
    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    def _run(self, argv: list[str], timeout: "float | None" = None) -> Result:
        try:
            result = self.shell.run([DOCKER, *argv], timeout=timeout)
        except CommandNotFound:
            raise DockerError(
                f"the docker command is not installed on {self.shell.where}; install Docker "
                "(Debian/Ubuntu: apt-get install docker.io) or use runtime: native"
            ) from None
        self.raise_common_failure(result)
        return result

    def raise_common_failure(self, result: Result) -> None:
        """The failures any docker command can meet: no engine, a full disk."""
        if result.code != 0 and DISK_FULL.search(result.stderr):
            raise DockerError(
                f"the Docker engine on {self.shell.where} ran out of disk space ({result.last_error_line()}); "
                "free space there (docker system prune, or remove old images) or move the engine's data-root to a bigger disk"
            )
        if result.code != 0 and ENGINE_UNREACHABLE.search(result.stderr):
            raise DockerError(
                f"cannot reach the Docker engine at {self.shell.docker_endpoint()} on {self.shell.where} "
                f"({result.last_error_line()}); start it (systemctl start docker) or point DOCKER_HOST at one that runs"
            )

    def runtimes(self) -> list[str]:
        """`docker info`: the engine answers; returns the container runtimes it has (runc, nvidia, ...)."""
        result = self._run(["info", "--format", "{{json .Runtimes}}"], timeout=60)
        if result.code != 0:
            raise DockerError(f"docker info failed on {self.shell.where}: {result.last_error_line()}")
        try:
            return sorted(json.loads(result.stdout) or {})
        except ValueError:
            return []

    def inspect_image(self, reference: str) -> "dict | None":
        """The engine's record of an image (Id, RepoTags, RepoDigests, ...), or None if absent."""
        result = self._run(["image", "inspect", "--format", "{{json .}}", reference], timeout=60)
        if result.code != 0:
            if NO_SUCH_IMAGE.search(result.stderr):
                return None
            raise DockerError(f"docker image inspect {reference} failed on {self.shell.where}: {result.last_error_line()}")
        return json.loads(result.stdout)

    def pull(self, reference: str) -> None:
        result = self._run(["pull", "--quiet", reference])
        if result.code == 0:
            return
        reason = result.last_error_line()
        if NOT_IN_REGISTRY.search(result.stderr):
            fix = "check the name and digest, or load the image from a tarball (image_tarball, `ddpbench image load`)"
            raise DockerError(f"image {reference} is not in its registry ({reason}); {fix}")
        if REGISTRY_UNREACHABLE.search(result.stderr):
            raise DockerError(
                f"cannot pull {reference} on {self.shell.where}: its registry cannot be reached ({reason}); "
                "`docker save` it where it exists and load it here (`ddpbench image load FILE`, or image_tarball in the hosts file)"
            )
        raise DockerError(f"cannot pull {reference} on {self.shell.where}: {reason}")

    def load(self, tarball: str) -> list[str]:
        """`docker load` a saved image; returns what it loaded (tags, or image ids for untagged ones)."""
        result = self._run(["load", "--input", tarball])
        if result.code != 0:
            raise DockerError(
                f"{tarball} on {self.shell.where} is not a Docker image archive that this engine can load ({result.last_error_line()}); "
                "write it again with `make image-save` (docker save) and copy it whole"
            )
        return re.findall(r"^Loaded image(?: ID)?: (\S+)$", result.stdout, re.MULTILINE)

    def save(self, reference: str, tarball: str) -> None:
        result = self._run(["save", "--output", tarball, reference])
        if result.code != 0:
            raise DockerError(f"docker save {reference} failed: {result.last_error_line()}")

    def build(self, context: str, tag: str, build_args: dict, on_line: Callable[[str], None]) -> None:
        argv = [DOCKER, "build", "--network", "host", "--tag", tag]
        for name, value in build_args.items():
            argv += ["--build-arg", f"{name}={value}"]
        try:
            result = self.shell.stream([*argv, context], on_line)
        except CommandNotFound:
            raise DockerError(f"the docker command is not installed on {self.shell.where}; install Docker (apt-get install docker.io)") from None
        self.raise_common_failure(result)
        if result.code != 0:
            raise DockerError(f"docker build of {tag} failed: {result.last_error_line()}; the build output above says where")

    def stop(self, container: str, grace_s: int = 20) -> None:
        """SIGTERM, then SIGKILL after grace_s; a container already gone is no error."""
        self._run(["stop", "--time", str(grace_s), container], timeout=grace_s + 30)

    def kill(self, container: str) -> None:
        self._run(["kill", container], timeout=30)
