"""`ddpbench image build|save|load|lock`: the pinned agent image on this machine's Docker engine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.common.escape import terminal
from bench.docker import image
from bench.controller.docker_engine import Docker
from bench.controller.shell import LocalShell


def _build_arg(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def _say(line: str) -> None:
    """A line of docker's output as it comes."""
    print(terminal(line), flush=True)


def _describe(info: dict) -> str:
    repo_digests = ", ".join(info.get("RepoDigests") or []) or "none until pushed (docker push)"
    return f"id: {info['Id']}\nrepo digest: {repo_digests}"


def cmd_build(args) -> int:
    info = image.build(Docker(LocalShell()), _say, lock=args.lock, tag=args.tag, base_image=args.base_image,
                       build_args=dict(args.build_arg))
    print(terminal(f"image: {args.tag or image.default_tag(args.lock)}\n{_describe(info)}"))
    return 0


def cmd_save(args) -> int:
    tag = args.tag or image.default_tag(args.lock)
    out = args.out or Path("dist") / (tag.replace("/", "-").replace(":", "-") + ".tar")
    info = image.save(Docker(LocalShell()), tag, out)
    size_mib = out.stat().st_size / 2**20
    print(terminal(f"saved {tag} to {out} ({size_mib:.0f} MiB)\n{_describe(info)}\n"
                   f"load it with: ddpbench image load {out}  (or docker load --input {out})"))
    return 0


def cmd_load(args) -> int:
    docker = Docker(LocalShell())
    for reference in image.load(docker, args.tarball):
        info = docker.inspect_image(reference)
        print(terminal(f"loaded {reference}\n{_describe(info) if info else ''}"))
    return 0


def cmd_lock(args) -> int:
    pinned = image.lock_base(Docker(LocalShell()), args.dockerfile)
    print(terminal(f"{args.dockerfile}: ARG BASE_IMAGE={pinned}"))
    return 0


def cmd_compose(args) -> int:
    from bench.controller.plans import load_plan
    from bench.docker.compose import run_topology

    path, bundle = run_topology(args.topology, load_plan(args.plan), args.image, args.out, _say)
    troubles = [h for h in bundle["hosts"] if h["status"] != "ok"]
    for host in troubles:
        print(terminal(f"error: host {host['name']}: {host['status']}: {host['error']}"), file=sys.stderr)
    print(terminal(f"bundle: {path}"))
    return 1 if troubles else 0


def add_image_commands(sub) -> None:
    top = sub.add_parser("image", help="build, save, load and pin the agent's Docker image")
    commands = top.add_subparsers(dest="image_command", required=True)

    def lock_and_tag(parser):
        parser.add_argument("--lock", default="cuda", help=f"lock file in docker/requirements/ ({', '.join(image.lock_names())}; default cuda)")
        parser.add_argument("--tag", default="", help="image name (default ddpbench:VERSION, with -LOCK for other locks)")

    build = commands.add_parser("build", help="build the image from the Dockerfile; print its id and digest")
    lock_and_tag(build)
    build.add_argument("--base-image", default="", help="base image reference (default: the Dockerfile's ARG BASE_IMAGE)")
    build.add_argument("--build-arg", action="append", type=_build_arg, default=[], metavar="NAME=VALUE",
                       help="another build argument, e.g. PIP_INDEX_URL=https://mirror/simple")
    build.set_defaults(func=cmd_build)

    save = commands.add_parser("save", help="write the image to a tarball for hosts that cannot reach a registry")
    lock_and_tag(save)
    save.add_argument("--out", type=Path, help="tarball path (default dist/NAME-TAG.tar)")
    save.set_defaults(func=cmd_save)

    load = commands.add_parser("load", help="load an image tarball that `image save` wrote")
    load.add_argument("tarball", type=Path, help="the tarball `image save` wrote (default name dist/NAME-TAG.tar)")
    load.set_defaults(func=cmd_load)

    lock = commands.add_parser("lock", help="pin the Dockerfile's base image to the digest its registry serves now")
    lock.add_argument("--dockerfile", type=Path, default=image.DOCKERFILE, help="the Dockerfile whose FROM to pin (default: the repository's)")
    lock.set_defaults(func=cmd_lock)

    compose = commands.add_parser("compose", help="run a plan in a compose topology of compose/; merge it into a bundle")
    compose.add_argument("topology", help="single-node, two-node, cpu, or a compose file's path")
    compose.add_argument("--plan", default="quick", help="plan name or file (default: quick)")
    compose.add_argument("--image", default=image.default_tag("cuda"), help=f"the image (default {image.default_tag('cuda')})")
    compose.add_argument("--out", type=Path, default=Path("results"), help="results folder (default: results)")
    compose.set_defaults(func=cmd_compose)

