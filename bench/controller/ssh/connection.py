"""Connecting to a host with Fabric: the host-key policy, the jump host, and a one-line error
for every way a connection fails."""

from __future__ import annotations

import dataclasses
import logging
import socket
from pathlib import Path

import paramiko
from fabric import Config, Connection

from bench.controller.errors import HostError
from bench.controller.inventory import Host

logging.getLogger("paramiko").addHandler(logging.NullHandler())  # its tracebacks are not the user's; HostError says it in one line


class UnknownHostKey(paramiko.SSHException):
    pass


class _RefuseUnknownKey(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client, hostname, key):
        raise UnknownHostKey(hostname)


class _AcceptNewKey(paramiko.MissingHostKeyPolicy):
    """Trust a key seen for the first time, for this connection only: a throwaway rented
    machine's key would otherwise linger in known_hosts and clash with the next one."""

    def missing_host_key(self, client, hostname, key):
        client.get_host_keys().add(hostname, key.get_name(), key)


def where(host: Host) -> str:
    return f"{host.address}:{host.port}"


def connect(host: Host) -> Connection:
    """An open connection to the host (through its jump host, if any), or a HostError saying
    why not and what to fix."""
    identity = str(Path(host.identity_file).expanduser()) if host.identity_file else ""
    if identity and not Path(identity).is_file():
        raise HostError(f"identity_file {identity} does not exist; fix identity_file in the hosts file")
    gateway = None
    if host.jump:
        jump_user, _, jump_address = host.jump.rpartition("@")
        jump_name, _, jump_port = jump_address.partition(":")
        jump = dataclasses.replace(host, address=jump_name, port=int(jump_port or 22), user=jump_user or host.user, jump="")
        gateway = _open(jump, identity, None, f"jump host {host.jump}: ")
    try:
        connection = _open(host, identity, gateway)
    except HostError:
        if gateway is not None:
            gateway.close()
        raise
    connection.transport.set_keepalive(int(host.keepalive_s))
    return connection


def close(connection: Connection) -> None:
    """Close the connection and the jump host's under it (Fabric leaves that one open)."""
    connection.close()
    if isinstance(connection.gateway, Connection):
        connection.gateway.close()


def is_open(connection: Connection) -> bool:
    return connection.transport is not None and connection.transport.is_active()


def _open(host: Host, identity: str, gateway: "Connection | None", context: str = "") -> Connection:
    # The hosts file is the whole truth: no ~/.ssh/config rewriting users, ports or keys.
    config = Config(overrides={"load_ssh_configs": False})
    connect_kwargs = {
        "banner_timeout": host.connect_timeout_s, "auth_timeout": host.connect_timeout_s,
        "look_for_keys": not identity, "allow_agent": not identity,
    }
    if identity:
        connect_kwargs["key_filename"] = [identity]
    connection = Connection(
        host.address, user=host.user, port=host.port, config=config, gateway=gateway or False,
        connect_timeout=max(1, round(host.connect_timeout_s)), connect_kwargs=connect_kwargs,
    )
    known_hosts = Path(host.known_hosts_file).expanduser()
    if known_hosts.is_file():
        connection.client.load_system_host_keys(str(known_hosts))
    connection.client.set_missing_host_key_policy(_AcceptNewKey() if host.accept_new_host_key else _RefuseUnknownKey())
    try:
        connection.open()
    except Exception as err:  # noqa: BLE001 - every way a connection fails becomes one line
        connection.close()
        raise HostError(context + explain_connect_error(host, err)) from None
    return connection


def explain_connect_error(host: Host, err: Exception) -> str:
    at = where(host)
    if isinstance(err, UnknownHostKey):
        return (
            f"host key of {at} is not in {host.known_hosts_file}; check it and add it "
            f"(ssh-keyscan -p {host.port} {host.address} >> {host.known_hosts_file}), "
            "or set accept_new_host_key: true for a throwaway machine"
        )
    if isinstance(err, paramiko.BadHostKeyException):
        return (
            f"host key of {at} differs from the one in {host.known_hosts_file}: another machine answers at this "
            "address, or someone is in between; remove the old key only if you know the machine changed"
        )
    if isinstance(err, paramiko.AuthenticationException):
        key = host.identity_file or "your default keys"
        return (
            f"authentication as {host.user} with {key} was refused by {at}; check user and identity_file, "
            "and that the public key is in the host's authorized_keys"
        )
    if isinstance(err, paramiko.ChannelException):
        return f"the jump host could not reach {at} ({err.text}); check the address and port as the jump host sees them"
    if isinstance(err, paramiko.ssh_exception.NoValidConnectionsError) or isinstance(err, ConnectionRefusedError):
        return f"connection refused by {at}; check the address and port in the hosts file and that sshd runs there"
    if isinstance(err, socket.gaierror):
        return f"cannot resolve {host.address!r}; check the address in the hosts file"
    # paramiko stops waiting for the key exchange after the same timeout as for the banner:
    # whichever gives up first, the server did not answer in time.
    if isinstance(err, (socket.timeout, TimeoutError)) or str(err) in ("Error reading SSH protocol banner", "No existing session"):
        return (
            f"no SSH answer from {at} within {host.connect_timeout_s:g} s (connect_timeout_s); "
            "check the address and port, and that the machine is up"
        )
    if isinstance(err, OSError):
        return f"cannot reach {at}: {err.strerror or err}; check the address, the port and the network"
    return f"SSH to {at} failed: {' '.join(str(err).split()) or type(err).__name__}"
