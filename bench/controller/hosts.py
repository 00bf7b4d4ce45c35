"""Hosts files: where a plan runs (YAML, validated against schema/hosts.schema.json). What a host
entry needs besides the schema (an address, the settings of its runtime, whether it may join a
group) each runtime says of itself (bench/controller/runtimes/base.py: Runtime)."""

from __future__ import annotations

from pathlib import Path

from bench import schemas
from bench.agent import switches
from bench.controller.inventory import Group, Host, Inventory
from bench.controller.runtimes import RUNTIMES
from bench.errors import UserError
from bench.yamlfile import load_yaml


def _host(path: Path, entry: dict, defaults: dict) -> Host:
    """One host entry with the file's defaults, checked against what its runtime needs."""
    settings_keys = {r.settings_key for r in RUNTIMES.values() if r.settings_key}
    merged = {**defaults, **entry, "env": {**defaults.get("env", {}), **entry.get("env", {})},
              **{key: {**defaults.get(key, {}), **entry.get(key, {})} for key in settings_keys}}
    merged["labels"] = tuple(merged.get("labels", ()))
    switches.check(merged["env"], f"{path}: host {entry['name']!r}: env")
    runtime_name = merged.get("runtime", Host.runtime)
    runtime = RUNTIMES[runtime_name]
    if runtime.needs_address and not merged.get("address"):
        raise UserError(f"{path}: host {entry['name']!r} has no address; give its address or set runtime: local")
    for key in sorted(settings_keys):
        if merged.get(key) and key != runtime.settings_key:
            raise UserError(f"{path}: host {entry['name']!r} has {key}: settings but runtime {runtime_name}; "
                            f"set runtime: {key} or remove them")
    problem = runtime.entry_problem(merged)
    if problem:
        raise UserError(f"{path}: host {entry['name']!r} {problem}")
    return Host(**merged)


def load_hosts(path: Path) -> Inventory:
    document = load_yaml(path, "hosts file")
    schemas.validate("hosts", document, str(path), "fix the hosts file (schema/hosts.schema.json lists what is allowed)")
    defaults = document.get("defaults", {})
    hosts = [_host(path, entry, defaults) for entry in document["hosts"]]
    names = [h.name for h in hosts]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise UserError(f"{path}: host name {duplicate!r} is used twice; give each host its own name")
    by_name = {h.name: h for h in hosts}
    groups, grouped = [], {}
    for entry in document.get("groups", []):
        unknown = [n for n in entry["hosts"] if n not in names]
        if unknown:
            raise UserError(f"{path}: group {entry['name']!r} names unknown host {unknown[0]!r}; list it under hosts or fix the name")
        for name in entry["hosts"]:
            if name in grouped:
                raise UserError(f"{path}: host {name!r} is in groups {grouped[name]!r} and {entry['name']!r}; a host joins one group at most")
            refusal = RUNTIMES[by_name[name].runtime].group_refusal
            if refusal:
                raise UserError(f"{path}: group {entry['name']!r}: host {name!r} has runtime {by_name[name].runtime}; {refusal}")
            if not by_name[name].address:
                raise UserError(f"{path}: group {entry['name']!r}: host {name!r} has no address; a group's hosts need one (the others reach it there)")
            grouped[name] = entry["name"]
        groups.append(Group(**{**entry, "hosts": tuple(entry["hosts"])}))
    return Inventory(hosts=tuple(hosts), groups=tuple(groups))
