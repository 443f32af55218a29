"""The command that fills numba's cache: ``python -m focus_ros.kernels`` and ``focus-ros compile``
(same options, same output)."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import time

from focus_ros.kernels.cache import (cache_folders, compile_counts, fingerprint_file, missing_kernels,
                                     sources_fingerprint)
from focus_ros.kernels.groups import GROUPS, modules_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", action="append", choices=list(GROUPS), metavar="GROUP",
                        help=f"compile only this group (repeatable; default all: {', '.join(GROUPS)})")
    parser.add_argument("--fresh", action="store_true",
                        help="first delete these kernels' cache entries (after an update: numba does not see a change "
                             "in a kernel called from another module's kernel)")
    parser.add_argument("--if-changed", action="store_true",
                        help="do nothing when the last complete compilation was for these very sources and numba "
                             "version and nothing is missing (what setup.py runs at every colcon build)")
    parser.add_argument("--check", action="store_true",
                        help="compile nothing: list the kernels that would compile now; exit status 1 if any")
    parser.add_argument("--quiet", action="store_true", help="print only problems")


def _where(folders) -> str:
    """The cache's location in a few words: the common parent of its folders."""
    if not folders:
        return "nowhere (no kernel is cached)"
    parent = os.path.commonpath([str(folder) for folder in folders])
    return f"{parent} ({len(folders)} folders)" if len(folders) > 1 else parent


@contextlib.contextmanager
def _one_at_a_time(say):
    """Hold an exclusive lock on a file beside numba's files (the folder of
    :func:`~focus_ros.kernels.cache.fingerprint_file`) while compiling: a second precompile of
    the same cache (two `make test` at once) waits, instead of deleting (--fresh) what the first
    one is writing."""
    with open(fingerprint_file().with_name("focus_ros_kernels.lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("   waiting for another compilation of the same cache to end ...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run(args) -> int:
    """Compile (or with --check, list) the selected groups; 0 when nothing is left to compile."""
    groups = args.group or list(GROUPS)
    modules = [module for name in groups for module in modules_of(name)]
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    if args.check:
        missing = sorted({name for group in groups for name in missing_kernels(group)})
        say(f"numba's cache: {_where(cache_folders(modules))}")
        for name in missing:
            print(f"   would compile: {name}")
        say(f"{len(missing)} kernels would compile" if missing else "nothing to compile")
        return 1 if missing else 0
    with _one_at_a_time(say):  # the check too: a second make waits, then finds the work done
        return _compile(groups, modules, args, say)


def _compile(groups: list[str], modules: list[str], args, say) -> int:
    from focus_ros.kernels.precompile import precompile

    folders = cache_folders(modules)
    complete = set(groups) == set(GROUPS)
    fingerprint = sources_fingerprint() if complete else ""  # of the sources as compiled
    if args.if_changed and complete and _recorded_fingerprint() == fingerprint and not missing_kernels():
        say(f"focus_ros's kernels are compiled for these sources: nothing to do ({_where(folders)})")
        return 0
    say(f"== compiling focus_ros's kernels into numba's cache, once per install (about 1 min on 2 cores): "
        f"{_where(folders)}")
    started = time.perf_counter()
    precompile(groups, progress=say, fresh=args.fresh)
    compiled, loaded = compile_counts(modules)
    missing = sorted({name for group in groups for name in missing_kernels(group)})
    say(f"   total {time.perf_counter() - started:.1f} s: {compiled} kernel versions compiled, {loaded} loaded "
        f"from the cache")
    if missing:
        print(f"focus_ros.kernels: still not cached after compiling: {', '.join(missing)}")
        return 1
    if complete:
        fingerprint_file().write_text(fingerprint + "\n")
    return 0


def _recorded_fingerprint() -> str:
    try:
        return fingerprint_file().read_text().strip()
    except OSError:
        return ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m focus_ros.kernels", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
