"""Runtime `docker`: the agent inside the pinned image, on a Docker engine.

The image is found by reference (a tag, `name@sha256:` or an image id), loaded from the host's
image_tarball or pulled when absent, and run by its id, so the bundle names exactly the bits that
ran (fingerprint.container.digest). The result folder is a bind mount: raw.json, rewritten by the
agent after every launch, survives a container that is killed.

Every step is a docker command given to a `Shell`; this version runs them on this machine (a host
without an address), a later one over SSH with the same commands.
"""

from __future__ import annotations

import json
import secrets
import threading

from bench import __version__
from bench.controller.runtimes.base import AgentJob, HostError, read_event
from bench.docker.engine import DOCKER, KILLED_STATUSES, Docker, DockerError, is_image_id
from bench.docker.shell import CommandNotFound, LocalShell, Shell

MOUNT = "/ddpbench/out"  # the result folder inside the container
STOP_GRACE_S = 20  # the agent ends its ranks on SIGTERM; then SIGKILL
DOCKER_RUN_FAILED = (125, 126, 127)  # docker run itself, not the agent: no container, no command
NO_GPU_RUNTIME_FIX = "; install the NVIDIA Container Toolkit on the host so that `docker run --gpus all` works"


def default_image() -> str:
    return f"ddpbench:{__version__}"


def gpus_present(shell: Shell) -> bool:
    try:
        return shell.run(["nvidia-smi", "-L"], timeout=30).code == 0
    except CommandNotFound:
        return False


def run_command(job: AgentJob, image_id: str, reference: str, container: str, gpus: bool, user: str) -> list[str]:
    """`docker run` of the agent: host network and IPC (NCCL's sockets and shared memory as on
    the host itself), every GPU, results in the bind-mounted folder."""
    command = [
        DOCKER, "run", "--rm", "--init", "--name", container, "--network", "host", "--ipc", "host",
        "--volume", f"{job.result_dir.resolve()}:{MOUNT}",
        "--env", f"DDPBENCH_IMAGE={reference}", "--env", f"DDPBENCH_IMAGE_DIGEST={image_id}", "--env", "HOME=/tmp",
    ]
    if gpus:
        # NVIDIA's limits for NCCL: RDMA pins memory. Only with GPUs: a sandbox may refuse them.
        command += ["--gpus", "all", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    if user:
        command += ["--user", user]
    return [*command, image_id, *job.agent_command("python", f"{MOUNT}/plan.json", MOUNT)]


class DockerRuntime:
    def __init__(self, shell: "Shell | None" = None) -> None:
        self.shell = shell or LocalShell()
        self.docker = Docker(self.shell)
        self._container = ""
        self._cancelled = False
        self._lock = threading.Lock()

    def run(self, job: AgentJob) -> dict:
        host = job.host
        if host.address:
            raise HostError(
                f"runtime docker on a remote host ({host.address}) comes with the SSH controller; "
                "leave out address to use this machine's Docker engine, or use runtime: native"
            )
        try:
            return self._run(job)
        except DockerError as err:
            raise HostError(str(err)) from None

    def _image(self, job: AgentJob) -> tuple[str, dict]:
        reference = job.host.image or default_image()
        info = self.docker.inspect_image(reference)
        if info is None and job.host.image_tarball:
            loaded = self.docker.load(job.host.image_tarball)
            info = self.docker.inspect_image(reference)
            if info is None:
                raise HostError(f"{job.host.image_tarball} holds {', '.join(loaded) or 'no image'}, not {reference}; "
                                "give the image that tarball holds, or the tarball of this image")
        if info is None and is_image_id(reference):
            raise HostError(f"image {reference} is not on {self.shell.where} and an image id cannot be pulled; "
                            "load the tarball that holds it (image_tarball in the hosts file, or `ddpbench image load`)")
        if info is None:
            self.docker.pull(reference)
            info = self.docker.inspect_image(reference)
        return reference, info

    def _run(self, job: AgentJob) -> dict:
        reference, info = self._image(job)
        job.result_dir.mkdir(parents=True, exist_ok=True)
        (job.result_dir / "plan.json").write_text(json.dumps(job.plan))
        user = self._user()
        container = f"ddpbench-{job.host.name}-{secrets.token_hex(3)}"
        command = run_command(job, info["Id"], reference, container, gpus_present(self.shell), user)
        errors: list[str] = []

        def on_line(line: str) -> None:
            event = read_event(line)
            if event is None:
                return
            if event["event"] == "error":
                errors.append(event["message"])
            job.progress(event)

        with self._lock:
            if self._cancelled:  # Ctrl-C while the image was being found: start nothing
                raise HostError("interrupted before the container started")
            self._container = container
        try:
            result = self.shell.stream(command, on_line)
        finally:
            with self._lock:
                self._container = ""
        raw_path = job.result_dir / "raw.json"
        if errors:
            raise HostError(errors[0])
        if result.code in KILLED_STATUSES:
            raise HostError(
                f"container {container} was stopped (status {result.code}, {KILLED_STATUSES[result.code]}); "
                "the launches it finished are kept; run again to measure the rest"
            )
        if result.code in DOCKER_RUN_FAILED or not raw_path.exists():
            reason = result.last_error_line()
            fix = NO_GPU_RUNTIME_FIX if "could not select device driver" in reason else ""
            raise HostError(f"the agent in {reference} exited with status {result.code} before writing results: {reason}{fix}")
        return json.loads(raw_path.read_text())  # status 1: some launches failed, as raw.json says

    def _user(self) -> str:
        """The shell's user, so the results it reads back are its own; root stays root."""
        ids = [self.shell.run(["id", flag], timeout=30).stdout.strip() for flag in ("-u", "-g")]
        return "" if ids[0] in ("", "0") else ":".join(ids)

    def cancel(self) -> None:
        """Stop the container (the agent ends its ranks); what it already wrote stays."""
        with self._lock:
            self._cancelled = True
            container = self._container
        if container:
            try:
                self.docker.stop(container, STOP_GRACE_S)
            except DockerError:
                pass  # no engine, no container left to stop
