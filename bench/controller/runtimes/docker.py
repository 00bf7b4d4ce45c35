"""Runtime `docker`: the agent inside the pinned image, on a host's Docker engine.

connect (SSH; a host without an address is this machine) -> check the engine (`docker info`)
and, where GPUs are wanted, the NVIDIA container runtime -> find the image: present, else
`docker load` of image_tarball (copied over SFTP unless the same file is already there), else
`docker pull` -> copy the plan into a work folder -> `docker run` the agent by image id, that
folder bind-mounted, streaming its progress -> fetch raw.json and the launch logs -> remove the
container and the folder.

The image runs by its id, so the bundle names exactly the bits that ran
(fingerprint.container.digest). raw.json, rewritten by the agent after every launch, survives
a container that is killed. Ending the ssh command would leave the container running, so
cancelling stops the container (`docker stop`) over a command of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import posixpath
import secrets
from dataclasses import dataclass
from pathlib import Path

from bench import __version__
from bench.common.protocol import Stage, Warned
from bench.controller.runtimes.base import (INTERRUPTED, KEPT_RESULTS, AgentJob, HostError, StagedRuntime, agent_output_listener,
                                            exited_early, read_raw, remote_run_dir, remote_workdir, stream_agent)
from bench.controller.shell import CommandNotFound, LocalShell, Result, Shell
from bench.controller.ssh import SSHShell
from bench.controller.ssh.files import put_file
from bench.controller.docker_engine import DOCKER, KILLED_STATUSES, Docker, DockerError, is_image_id

MOUNT = "/ddpbench/out"  # the result folder inside the container
STOP_GRACE_S = 20  # the agent ends its ranks on SIGTERM; then SIGKILL
DOCKER_RUN_FAILED = (125, 126, 127)  # docker run itself, not the agent: no container, no command
NVIDIA_FIX = "install the NVIDIA Container Toolkit there (nvidia-ctk runtime configure --runtime=docker) so that `docker run --gpus all` works"
IMAGES_DIR = "images"  # under the host's workdir: uploaded tarballs, kept for the next run


def default_image() -> str:
    return f"ddpbench:{__version__}"


def docker_env(job: AgentJob) -> dict:
    """The host's DOCKER_* settings (DOCKER_HOST, DOCKER_CONFIG, ...): for the docker command there."""
    return {k: v for k, v in job.host.env.items() if k.startswith("DOCKER_")}


def gpus_present(shell: Shell) -> bool:
    try:
        return shell.run(["nvidia-smi", "-L"], timeout=60).code == 0
    except CommandNotFound:
        return False


def needs_gpus(job: AgentJob, shell: Shell) -> bool:
    """The host has GPUs (the agent would use them), or the plan pins a CUDA or NCCL version."""
    return bool({"cuda", "nccl"} & set(job.plan.get("pin") or {})) or gpus_present(shell)


@contextlib.contextmanager
def docker_errors_as_host_errors():
    """A failed docker command fails this host, not the whole run."""
    try:
        yield
    except DockerError as err:
        raise HostError(str(err)) from None


@dataclass(frozen=True)
class Deployment:
    """What prepare() readied on the host: the image to run, whether with GPUs, and the folder
    the container writes its results into."""

    reference: str
    image_id: str
    gpus: bool
    work_dir: str  # on the host, absolute (docker's bind mount needs it)


def run_command(job: AgentJob, image_id: str, reference: str, container: str, out_dir: str, gpus: bool, user: str) -> list[str]:
    """`docker run` of the agent: host network and IPC (NCCL's sockets and shared memory as on
    the host itself: /dev/shm is the host's, so no --shm-size, which docker ignores with
    --ipc host), every GPU, results in the bind-mounted folder."""
    command = [
        DOCKER, "run", "--rm", "--init", "--name", container, "--network", "host", "--ipc", "host",
        "--volume", f"{out_dir}:{MOUNT}",
        "--env", f"DDPBENCH_IMAGE={reference}", "--env", f"DDPBENCH_IMAGE_DIGEST={image_id}", "--env", "HOME=/tmp",
    ]
    if gpus:
        # NVIDIA's limits for NCCL: RDMA pins memory. Only with GPUs: a sandbox may refuse them.
        command += ["--gpus", "all", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    if user:
        command += ["--user", user]
    return [*command, image_id, *job.agent_args(f"{MOUNT}/plan.json", MOUNT).argv(["python", "-m", "bench.agent"])]


class DockerRuntime(StagedRuntime):
    needs_address = False  # none: this machine's Docker engine
    kept_results_folder = "out"  # on an SSH host (with an address)

    def __init__(self) -> None:
        super().__init__()
        self._deployment: "Deployment | None" = None
        self._container = ""  # while it runs: what cancel() stops

    def prepare(self, job: AgentJob) -> None:
        """Everything that can fail before the container starts (a group's members all get here first)."""
        with docker_errors_as_host_errors():
            super().prepare(job)

    def _prepare(self, job: AgentJob) -> None:
        if job.host.address:
            shell = self._connect(job, docker_env(job))
        else:
            shell = LocalShell(docker_env(job))
            with self._lock:
                self._shell = shell
        docker = Docker(shell)
        self._stage(job, "check docker")
        gpus = self._check_engine(job, shell, docker)
        self._stage(job, "image")
        reference, image_id = self._find_image(job, shell, docker)
        self._stage(job, "deploy")
        self._deployment = Deployment(reference, image_id, gpus, self._deploy(job, shell))

    def run(self, job: AgentJob) -> dict:
        with docker_errors_as_host_errors():
            return super().run(job)

    def cancel(self, reason: str = INTERRUPTED) -> None:
        """Stop the container (the agent ends its ranks); what it already wrote stays."""
        with self._lock:
            self._cancelled = self._cancelled or reason
            container, shell = self._container, self._shell
        if container:
            self._stop_container(Docker(shell), container)

    @staticmethod
    def _stop_container(docker: Docker, container: str) -> None:
        try:
            docker.stop(container, STOP_GRACE_S)
        except (DockerError, HostError):
            pass  # no engine or no connection: nothing left that could stop it

    @staticmethod
    def _check_engine(job: AgentJob, shell: Shell, docker: Docker) -> bool:
        """The engine answers, with a way to give the container GPUs where they are wanted; whether they are."""
        runtimes = docker.runtimes()
        gpus = needs_gpus(job, shell)
        if gpus and "nvidia" not in runtimes and not has_gpu_hook(shell):
            wanted = "the plan pins CUDA/NCCL" if {"cuda", "nccl"} & set(job.plan.get("pin") or {}) else "it has GPUs"
            raise HostError(
                f"the Docker engine on {shell.where} has no NVIDIA container runtime (runtimes: "
                f"{', '.join(runtimes) or 'none'}) but {wanted}; {NVIDIA_FIX}"
            )
        return gpus

    def _find_image(self, job: AgentJob, shell: Shell, docker: Docker) -> tuple[str, str]:
        """The image's reference and id, loaded from image_tarball or pulled where it is not there yet."""
        host = job.host
        reference = host.image or default_image()
        info = docker.inspect_image(reference)
        if info is None and host.image_tarball:
            loaded = docker.load(upload_tarball(job, shell))
            info = docker.inspect_image(reference)
            if info is None:
                raise HostError(f"{host.image_tarball} holds {', '.join(loaded) or 'no image'}, not {reference}; "
                                "give the image that tarball holds, or the tarball of this image")
        if info is None and is_image_id(reference):
            raise HostError(f"image {reference} is not on {shell.where} and an image id cannot be pulled; "
                            "load the tarball that holds it (image_tarball in the hosts file, or `ddpbench image load`)")
        if info is None:
            docker.pull(reference)
            info = docker.inspect_image(reference)
        return reference, info["Id"]

    def _deploy(self, job: AgentJob, shell: Shell) -> str:
        """The plan, in the folder the container will write its results into; returns that folder."""
        if isinstance(shell, SSHShell):
            self._remote_dir = remote_run_dir(job)
            out = posixpath.join(self._remote_dir, "out")
            done = shell.run(["sh", "-c", 'mkdir -p -- "$1" && cd -- "$1" && pwd', "sh", out], timeout=job.host.command_timeout_s)
            if done.code != 0:
                raise HostError(f"creating the work folder {out} failed: {done.last_error_line()}; fix workdir in the hosts file")
            work_dir = done.stdout.strip()
        else:
            job.result_dir.mkdir(parents=True, exist_ok=True)
            work_dir = str(job.result_dir.resolve())
        shell.put(json.dumps(job.plan).encode(), posixpath.join(work_dir, "plan.json"))
        return work_dir

    def _run_agent(self, job: AgentJob) -> dict:
        deployment, shell = self._deployment, self._shell
        container = f"ddpbench-{job.host.name}-{secrets.token_hex(3)}"
        command = run_command(job, deployment.image_id, deployment.reference, container, deployment.work_dir,
                              deployment.gpus, user_of(shell))
        errors: list[str] = []
        with self._lock:
            if self._cancelled:  # cancelled while the image was being found: start nothing
                raise HostError(self._cancelled)
            self._container = container
        try:
            result = stream_agent(shell, job, command, agent_output_listener(job, errors), what=DOCKER)
        except HostError:
            self._stop_container(Docker(shell), container)  # ending the docker client leaves the container running
            raise
        finally:
            with self._lock:
                self._container = ""
            self._fetched = shell.fetch_results(deployment.work_dir, job.result_dir, job.progress)
        if not errors:
            self._check_container_end(result, container)
        return read_raw(job, errors, lambda: self._no_results(result, deployment.reference, shell), self._kept_in())

    def _check_container_end(self, result: Result, container: str) -> None:
        """A HostError when the container was cancelled, killed, or never ran the agent."""
        with self._lock:
            cancelled = self._cancelled
        if cancelled:
            raise HostError(cancelled)
        if result.code in KILLED_STATUSES:
            raise HostError(
                f"container {container} on {self._shell.where} was stopped (status {result.code}, {KILLED_STATUSES[result.code]}); "
                "the launches it finished are kept; run again with --resume to measure the rest"
            )
        if result.code in DOCKER_RUN_FAILED:
            raise HostError(self._no_results(result, self._deployment.reference, self._shell))

    @staticmethod
    def _no_results(result: Result, reference: str, shell: Shell) -> str:
        """Why the container wrote no results (a full disk or a vanished engine raise in their own words)."""
        reason = result.last_error_line()
        fix = f"; {NVIDIA_FIX}" if "could not select device driver" in reason else ""
        Docker(shell).raise_common_failure(result)
        return exited_early(result, f"the agent in {reference}", reason + fix)

    def _close(self, job: AgentJob) -> None:
        """Remove the work folder (SSH hosts; uploaded images stay for the next run) and close the connection."""
        with self._lock:
            shell = self._shell
        if shell is None:
            return
        try:
            if self._remote_dir and not self._fetched:
                job.progress(Warned(KEPT_RESULTS.format(where=f"{shell.where}:{self._remote_dir}")))
            elif self._remote_dir:
                job.progress(Stage("clean up"))
                shell.run(["rm", "-rf", "--", self._remote_dir], timeout=job.host.command_timeout_s)
        except (HostError, CommandNotFound) as err:
            job.progress(Warned(str(err)))
        finally:
            shell.close()


def has_gpu_hook(shell: Shell) -> bool:
    """`--gpus` works without an `nvidia` runtime where the toolkit's hook is installed."""
    try:
        return shell.run(["sh", "-c", "command -v nvidia-container-runtime-hook"], timeout=60).code == 0
    except CommandNotFound:
        return False


def user_of(shell: Shell) -> str:
    """The shell's user, so that the results it reads back are its own; root stays root."""
    ids = [shell.run(["id", flag], timeout=60).stdout.strip() for flag in ("-u", "-g")]
    return "" if ids[0] in ("", "0") else ":".join(ids)


def upload_tarball(job: AgentJob, shell: Shell) -> str:
    """image_tarball's path where the shell runs: over SSH copied by SFTP, named by its sha256,
    so that a copy already there (from an earlier run) is used again and a cut one never is."""
    local = Path(job.host.image_tarball).expanduser()
    if not local.is_file():
        raise HostError(f"image_tarball {local} does not exist on this machine; write it with `make image-save` or fix image_tarball")
    if not isinstance(shell, SSHShell):
        return str(local)
    digest = hashlib.sha256()
    with open(local, "rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    images = posixpath.join(remote_workdir(job.host), IMAGES_DIR)
    path = posixpath.join(images, f"{digest.hexdigest()}.tar")
    check = shell.run(["sh", "-c", 'mkdir -p -- "$1" && test -f "$2" && sha256sum -- "$2"', "sh", images, path], timeout=None)
    if check.code == 0 and check.stdout.split()[:1] == [digest.hexdigest()]:
        return path
    free = shell.run(["df", "-Pk", images], timeout=60)
    size = local.stat().st_size
    try:
        free_bytes = int(free.stdout.splitlines()[-1].split()[3]) * 1024
    except (IndexError, ValueError):
        free_bytes = size  # df says nothing we can read: let the copy find out
    if free_bytes < size:
        raise HostError(f"no space left on the host's disk for {local} ({size / 2**20:.0f} MiB) in {images}: "
                        f"{free_bytes / 2**20:.0f} MiB free; free space there or set workdir: to a bigger disk")
    job.progress(Stage("upload image"))
    put_file(shell.connection, job.host, local, path)
    return path
