"""Bundles are read as published: the project's own benchmarks/results/bundles/*.bundle.json.gz goes
through validate, report, compare, predict, sign and verify as its .json does; the size and parse
limits hold for what it unpacks to, so a gzip bomb is refused before it is unpacked past them."""

from __future__ import annotations

import gzip
import resource
import subprocess
import zlib
from pathlib import Path

import pytest

from bench.bundle import MAX_BUNDLE_BYTES, MAX_GZIP_MEMBERS
from tests.conftest import cli
from tests.support.cli_in_process import ddpbench

REPO = Path(__file__).resolve().parents[2]
PUBLISHED = sorted((REPO / "benchmarks" / "results" / "bundles").glob("*.bundle.json.gz"))


@pytest.fixture
def packed(tmp_path) -> Path:
    """A published .json.gz, copied where its signature may be written."""
    path = tmp_path / PUBLISHED[0].name
    path.write_bytes(PUBLISHED[0].read_bytes())
    return path


def test_a_published_gzip_bundle_goes_through_every_command(packed, tmp_path):
    assert PUBLISHED, "benchmarks/results/bundles holds a .json.gz"
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(packed.read_bytes()))
    done = ddpbench("validate", str(packed))
    assert done.returncode == 0
    assert done.stdout.startswith(f"{packed}: ok: bundle ")
    done = ddpbench("report", str(packed), "--out", str(tmp_path / "report"))
    assert done.returncode == 0
    assert "from 1 bundle(s)" in done.stdout
    assert ddpbench("compare", str(packed), str(plain), "--out", str(tmp_path / "verdict")).returncode in (0, 3)
    done = ddpbench("predict", str(packed))
    assert done.returncode == 0
    assert "| host | model |" in done.stdout
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", key], check=True)
    signed = ddpbench("sign", str(packed), "--key", str(key))
    assert signed.returncode == 0 and "Traceback" not in signed.stderr, signed.stderr
    assert packed.with_name(packed.name + ".sig").read_text().startswith("-----BEGIN SSH SIGNATURE-----")


def test_verify_reads_a_gzip_bundle(packed, tmp_path):
    """The packed bundle is read (its host 'local' is paired with 'gone'); verify then stops on the host
    it cannot reach, before it runs anything, with one line that names it."""
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n  - name: gone\n    runtime: native\n    address: 127.0.0.1\n    port: 1\n    connect_timeout_s: 2\n")
    done = cli("verify", packed, "--hosts", hosts, "--out", tmp_path / "results", "--host-map", "local=gone", timeout=120)
    assert "Traceback" not in done.stderr and "not a ddpbench bundle" not in done.stderr, done.stderr
    assert done.returncode == 2 and "host 'gone': connection refused" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_gzip_bomb_is_refused_before_it_is_unpacked_past_the_limit(tmp_path):
    """Half a GiB of zeros packed into about half a MiB: refused by the size limit, never held whole."""
    bomb = tmp_path / "bomb.bundle.json.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(bomb, "wb") as out:
        out.write(packer.compress(b'{"a": "'))
        zeros = b"0" * (1 << 24)
        for _ in range(32):
            out.write(packer.compress(zeros))
        out.write(packer.compress(b'"}') + packer.flush())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    done = ddpbench("validate", str(bomb))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line == f"error: {bomb}: unpacks to more than the {MAX_BUNDLE_BYTES}-byte limit for a bundle; this is not a ddpbench bundle"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < 2 * MAX_BUNDLE_BYTES  # the limit's worth at most: not the half GiB it packs


def test_a_cut_gzip_bundle_is_one_line(packed, tmp_path):
    cut = tmp_path / "cut.bundle.json.gz"
    cut.write_bytes(packed.read_bytes()[:5000])
    done = ddpbench("report", str(cut), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {cut}: the gzip stream ends early (truncated); fetch the bundle again"]


def test_a_gzip_file_of_many_members_is_refused_naming_the_bound(packed, tmp_path):
    """500,000 empty members (10 MB) took minutes, unpacked one by one; a bundle split into members
    (`cat a.gz b.gz`) still reads."""
    many = tmp_path / "many.bundle.json.gz"
    many.write_bytes(gzip.compress(b"") * 500_000)
    done = ddpbench("validate", str(many))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {many}: holds more than {MAX_GZIP_MEMBERS} gzip members, and a bundle is one; this is not a ddpbench bundle"]
    text = gzip.decompress(packed.read_bytes())
    split = tmp_path / "split.bundle.json.gz"
    split.write_bytes(b"".join(gzip.compress(text[at:at + len(text) // 8 + 1]) for at in range(0, len(text), len(text) // 8 + 1)))
    done = ddpbench("validate", str(split))
    assert done.returncode == 0
    assert done.stdout.startswith(f"{split}: ok: bundle ")
