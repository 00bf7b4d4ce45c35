"""SSH signatures of bundles and of verdicts' in-toto Statements (`ssh-keygen -Y`), so a published
bundle says who published it, and an attestation who attested it.

The signature lies beside the file as FILE.sig, in the namespace "ddpbench-bundle" (a Statement's:
"ddpbench-attestation"), so a signature made for anything else (a git commit, a file, the other
kind) does not pass for its.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.bundle import read_bundle
from bench.common.files import write_text
from bench.controller.shell import last_line
from bench.errors import UserError
from bench.formats import intoto

NAMESPACE = "ddpbench-bundle"
ATTESTATION_NAMESPACE = "ddpbench-attestation"
MAX_SIGNATURE_BYTES = 64 * 1024
_KEY = re.compile(r"with (\S+) key (\S+)")


def signature_path(bundle_path: Path) -> Path:
    return bundle_path.with_name(bundle_path.name + ".sig")


def _ssh_keygen(args: "list[str]", stdin: bytes = b"", timeout_s: "float | None" = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["ssh-keygen", "-Y", *args], input=stdin, capture_output=True, timeout=timeout_s)
    except FileNotFoundError:
        raise UserError("ssh-keygen is not installed; install openssh-client (apt-get install openssh-client)") from None


def _last_line(done: subprocess.CompletedProcess) -> str:
    return last_line((done.stderr or b"").decode(errors="replace")) or f"ssh-keygen exited with status {done.returncode}"


def namespace_of(path: Path) -> str:
    return ATTESTATION_NAMESPACE if intoto.is_statement(path) else NAMESPACE


def _signature(data: bytes, key: Path, what: str, namespace: str = NAMESPACE) -> str:
    if not key.is_file():
        raise UserError(f"--key {key}: no such private key; give the key you publish with, e.g. ~/.ssh/id_ed25519")
    # Signing standard input writes the signature to standard output: no overwrite prompt, and the
    # old signature stays until the new one is complete. ssh-keygen asks a passphrase on the terminal.
    done = _ssh_keygen(["sign", "-f", str(key), "-n", namespace], stdin=data, timeout_s=None)
    if done.returncode != 0 or not done.stdout:
        raise UserError(f"{what}: ssh-keygen could not sign with {key} ({_last_line(done)}); check the key and its passphrase")
    return done.stdout.decode("ascii")  # an SSH signature is armored ASCII


def sign(bundle_path: Path, key: Path) -> Path:
    """Write FILE.sig of a bundle or an in-toto Statement (NAME.intoto.json); one that fails its own
    checks is not signed."""
    if intoto.is_statement(bundle_path):
        intoto.read(bundle_path)
    else:
        read_bundle(bundle_path)
    path = signature_path(bundle_path)
    write_text(path, _signature(bundle_path.read_bytes(), key, str(bundle_path), namespace_of(bundle_path)))
    return path


def check_key(key: Path, allowed_signers: "Path | None") -> None:
    """Before a rerun that signs its bundle with `key`: the key signs, and where allowed signers are
    given, it is one of theirs, so the new bundle's signature passes the rule the original's does."""
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / "probe.sig"
        probe.write_text(_signature(b"ddpbench key check", key, f"--key {key}"))
        if allowed_signers is None:
            return
        if not allowed_signers.is_file():
            raise UserError(f"--allowed-signers {allowed_signers}: no such file; give the allowed signers file of the keys you trust")
        done = _ssh_keygen(["find-principals", "-s", str(probe), "-f", str(allowed_signers)])
    if done.returncode != 0 or not done.stdout.split():
        raise UserError(f"--key {key} is not a key {allowed_signers} lists, so the new bundle's signature would not pass "
                        "--allowed-signers; add its public key there or sign with a key it lists")


@dataclass(frozen=True)
class Signature:
    state: str  # "unsigned", "signed" (valid, signer not checked) or "verified" (signer in allowed signers)
    key: "str | None" = None  # e.g. "ED25519 SHA256:..."
    principal: "str | None" = None

    def describe(self) -> str:
        if self.state == "unsigned":
            return "unsigned"
        if self.state == "signed":
            return f"signed with {self.key} (signer not checked: pass --allowed-signers FILE)"
        return f"signed by {self.principal} ({self.key}), verified against the allowed signers"

    def to_json(self) -> dict:
        return {"state": self.state, "key": self.key, "principal": self.principal, "text": self.describe()}


def check_signature(bundle_path: Path, allowed_signers: "Path | None", required: bool) -> Signature:
    """Who signed the bundle; a UserError for a signature that does not verify, or a missing one when required."""
    if required and allowed_signers is None:
        raise UserError("--require-signature needs --allowed-signers FILE: the keys you trust, one `principal keytype key` line each")
    if allowed_signers is not None and not allowed_signers.is_file():
        raise UserError(f"--allowed-signers {allowed_signers}: no such file; give the allowed signers file of the keys you trust")
    path = signature_path(bundle_path)
    if not path.is_file():
        if required:
            raise UserError(f"{bundle_path}: unsigned (no {path.name} beside it) but --require-signature was given; get the publisher's {path.name} or drop --require-signature")
        return Signature("unsigned")
    if path.stat().st_size > MAX_SIGNATURE_BYTES:
        raise UserError(f"{path}: {path.stat().st_size} bytes is too large for an SSH signature; get the publisher's signature again")
    data = bundle_path.read_bytes()
    namespace = namespace_of(bundle_path)
    done = _ssh_keygen(["check-novalidate", "-n", namespace, "-s", str(path)], stdin=data)
    if done.returncode != 0:
        raise UserError(f"{bundle_path}: {path.name} is not a valid {namespace} signature of this file ({_last_line(done)}); the bundle or its signature was changed: get the originals")
    found = _KEY.search(done.stdout.decode(errors="replace"))
    key = f"{found.group(1)} {found.group(2)}" if found else None
    if allowed_signers is None:
        return Signature("signed", key)
    done = _ssh_keygen(["find-principals", "-s", str(path), "-f", str(allowed_signers)])
    principals = done.stdout.decode(errors="replace").split() if done.returncode == 0 else []
    if not principals:
        raise UserError(f"{bundle_path}: signed with {key}, a key {allowed_signers} does not list; it was signed by someone you do not trust: check with the publisher")
    done = _ssh_keygen(["verify", "-f", str(allowed_signers), "-I", principals[0], "-n", namespace, "-s", str(path)], stdin=data)
    if done.returncode != 0:
        raise UserError(f"{bundle_path}: the signature of {principals[0]} does not verify against {allowed_signers} ({_last_line(done)}); check the allowed signers' namespaces and validity")
    return Signature("verified", key, principals[0])
