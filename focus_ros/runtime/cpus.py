"""CPU lists in taskset's syntax, for pinning the estimator process (a node's ``estimator_cpus``)."""

from __future__ import annotations

import os


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPU numbers of a list in taskset's syntax: "1", "0,2", "2-3" (ranges inclusive);
    "" = none (not pinned). Raises ValueError naming the part that is not a CPU number or
    range, or the CPUs this machine does not have. (Any CPU of the machine will do, not only
    the caller's own: a node started with ``taskset -c 0`` may put its estimator on CPU 1.)"""
    text = str(text).strip()
    if not text:
        return frozenset()
    cpus = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not (first.isdigit() and (last.isdigit() if dash else True)) or (dash and int(last) < int(first)):
            raise ValueError(f"CPU list '{text}': '{part}' is not a CPU number or a range such as 2-3")
        cpus.update(range(int(first), int(last if dash else first) + 1))
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError(f"CPU list '{text}': pinning to CPUs needs Linux (os.sched_setaffinity)")
    machine = range(os.cpu_count() or 1)
    missing = sorted(cpus - set(machine))
    if missing:
        raise ValueError(f"CPU list '{text}': CPU {format_cpu_list(missing)} is not on this machine "
                         f"(CPUs {format_cpu_list(machine)})")
    return frozenset(cpus)


def format_cpu_list(cpus) -> str:
    """CPU numbers in taskset's syntax, runs as ranges: {0, 1, 2, 5} -> "0-2,5"."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
