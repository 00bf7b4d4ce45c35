"""The pinned agent image: build it from the Dockerfile, pin its base by digest, save and load it.

An image is named by its id (`sha256:` of its config): the same wherever it is loaded from a
`docker save` tarball or pulled from a registry, so a bundle that records it names exactly the
bits that ran. A registry adds a repo digest (`name@sha256:` of its manifest) once pushed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from bench import __version__
from bench.bundle.assembly import tool_info
from bench.common.paths import SOURCE_ROOT
from bench.controller.docker_engine import Docker, DockerError
from bench.errors import UserError

DOCKERFILE = SOURCE_ROOT / "Dockerfile"
LOCKS_DIR = SOURCE_ROOT / "docker" / "requirements"
BASE_ARG = re.compile(r"^ARG BASE_IMAGE=(\S+)$", re.MULTILINE)


def lock_names() -> list[str]:
    return sorted(p.stem for p in LOCKS_DIR.glob("*.lock"))


def default_tag(lock: str) -> str:
    return f"ddpbench:{__version__}" if lock == "cuda" else f"ddpbench:{__version__}-{lock}"


def split_reference(reference: str) -> tuple[str, str, str]:
    """'reg:5000/a/b:tag@sha256:x' -> ('reg:5000/a/b', 'tag', 'sha256:x'); missing parts are ''."""
    name, _, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return name[:colon], name[colon + 1:], digest
    return name, "", digest


def _canonical_repository(repository: str) -> str:
    """Docker Hub names in full, as RepoDigests may write them either way."""
    first = repository.split("/", 1)[0]
    if "/" not in repository or not ("." in first or ":" in first or first == "localhost"):
        repository = "docker.io/" + (repository if "/" in repository else "library/" + repository)
    return repository


def repo_digest_reference(info: dict, reference: str) -> "str | None":
    """`name:tag@sha256:...` for the reference's repository, from the engine's RepoDigests."""
    repository, tag, _ = split_reference(reference)
    for repo_digest in info.get("RepoDigests") or []:
        name, _, digest = repo_digest.partition("@")
        if _canonical_repository(name) == _canonical_repository(repository):
            return f"{repository}{':' + tag if tag else ''}@{digest}"
    return None


def dockerfile_base(dockerfile: Path = DOCKERFILE) -> str:
    try:
        text = dockerfile.read_text()
    except OSError as err:
        raise UserError(f"{dockerfile}: cannot read the Dockerfile ({err.strerror}); give the project's Dockerfile") from None
    match = BASE_ARG.search(text)
    if match is None:
        raise UserError(f"{dockerfile}: no `ARG BASE_IMAGE=...` line; restore it (the base image reference)")
    return match.group(1)


def git_commit() -> str:
    info = tool_info()
    if info["git_commit"] is None:
        return "unknown"
    return info["git_commit"] + ("-dirty" if info["git_dirty"] else "")


def resolve_base(docker: Docker, reference: str) -> str:
    """The base as it will be built from: pulled if absent, and pinned to its registry digest
    where it has one (an imported or locally built base has none and keeps its name)."""
    info = docker.inspect_image(reference)
    if info is None:
        docker.pull(reference)
        info = docker.inspect_image(reference)
    if split_reference(reference)[2]:
        return reference
    return repo_digest_reference(info, reference) or reference


def build(docker: Docker, on_line: Callable[[str], None], lock: str = "cuda", tag: str = "", base_image: str = "",
          build_args: "dict | None" = None) -> dict:
    """Build the image; returns the engine's record of it (Id, RepoDigests, ...)."""
    if lock not in lock_names():
        raise UserError(f"no lock file {lock!r} in docker/requirements/; use one of {', '.join(lock_names())}")
    tag = tag or default_tag(lock)
    base = resolve_base(docker, base_image or dockerfile_base())
    if not split_reference(base)[2]:
        on_line(f"note: base {base} has no registry digest: the pin records its name only (`make image-lock` pins a registry base)")
    args = {"BASE_IMAGE": base, "LOCK": lock, "IMAGE": tag, "GIT_COMMIT": git_commit(), **(build_args or {})}
    docker.build(str(SOURCE_ROOT), tag, args, on_line)
    return docker.inspect_image(tag)


def lock_base(docker: Docker, dockerfile: Path = DOCKERFILE) -> str:
    """Resolve the Dockerfile's base tag to the digest its registry serves now and write it into
    the Dockerfile's `ARG BASE_IMAGE=` line; returns the pinned reference."""
    repository, tag, _ = split_reference(dockerfile_base(dockerfile))
    by_tag = f"{repository}:{tag}" if tag else repository
    docker.pull(by_tag)
    pinned = repo_digest_reference(docker.inspect_image(by_tag) or {}, by_tag)
    if pinned is None:
        raise DockerError(f"{by_tag} was pulled but the engine records no registry digest for it; pull it by hand and check `docker image inspect`")
    text = dockerfile.read_text()
    dockerfile.write_text(BASE_ARG.sub(lambda _: f"ARG BASE_IMAGE={pinned}", text, count=1))
    return pinned


def save(docker: Docker, reference: str, tarball: Path) -> dict:
    info = docker.inspect_image(reference)
    if info is None:
        raise UserError(f"no image {reference} on {docker.shell.where}; build it (`make image`) or load it (`make image-load`)")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    docker.save(reference, str(tarball))
    return info


def load(docker: Docker, tarball: Path) -> list[str]:
    if not tarball.is_file():
        raise UserError(f"{tarball}: no such image tarball; give the file `make image-save` wrote")
    return docker.load(str(tarball))
