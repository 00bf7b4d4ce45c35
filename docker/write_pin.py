"""Write the image's pin file (/etc/ddpbench/pin.json) while the image is built.

The versions come from the installed packages' metadata, so nothing imports torch (a CUDA build
of torch would look for a driver the build machine need not have). The image's own digest is not
in it: no image can contain its own digest; the runtime that starts a container passes it in
DDPBENCH_IMAGE_DIGEST instead (bench/agent/fingerprint/software.py reads both).
"""

from __future__ import annotations

import argparse
import json
from importlib import metadata
from pathlib import Path


def installed_version(*names: str) -> "str | None":
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def pin(image: str, base_image: str, git_commit: str) -> dict:
    document = {
        "image": image,
        "base_image": base_image,
        "torch": installed_version("torch"),
        # The NCCL torch loads is the wheel's; a CPU build has none.
        "nccl": installed_version("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
        "git_commit": git_commit,
    }
    return {key: value for key, value in document.items() if value}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--base-image", required=True)
    parser.add_argument("--git-commit", required=True)
    args = parser.parse_args()
    document = pin(args.image, args.base_image, args.git_commit)
    if "torch" not in document:
        raise SystemExit("write_pin: torch is not installed in this venv; the lock file must pin it")
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(json.dumps(document, sort_keys=True))


if __name__ == "__main__":
    main()
