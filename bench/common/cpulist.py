"""The kernel's CPU list notation ('0-3,8'), read and written."""
from __future__ import annotations

# Far above any kernel's CPU count (NR_CPUS is at most 8192): a list past it is not a machine's, and
# a bundle is hostile input that could otherwise ask for a range of a billion CPUs.
MAX_CPUS = 1 << 16


def parse_cpulist(text: "str | None") -> set[int]:
    """{0, 1, 2, 3, 8} from '0-3,8'; empty for empty or unparseable text, or CPUs past MAX_CPUS."""
    cpus: set[int] = set()
    for part in (text or "").split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()) or int(high or low) >= MAX_CPUS:
            return set()
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def format_cpulist(cpus: "set[int] | list[int]") -> str:
    """'0-3,8' from {0, 1, 2, 3, 8}."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
