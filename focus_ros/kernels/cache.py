"""What numba's on-disk cache holds for focus_ros's kernels, read the way numba itself reads it.

Every kernel of focus_ros is ``numba.njit(cache=True)``: numba compiles it for each new
combination of argument types on its first call in a process (seconds for the larger ones),
then loads it from its on-disk cache in later processes (milliseconds). Where that cache
lives is numba's choice, made when the kernel's module is imported (``numba.core.caching``,
the locators tried in order):

1. ``$NUMBA_CACHE_DIR/<source folder name>_<hash of its path>/`` when NUMBA_CACHE_DIR is set;
2. else ``__pycache__`` beside the source file, when numba can create a file there;
3. else the user-wide ``~/.cache/numba/<source folder name>_<hash>/`` (``$XDG_CACHE_HOME``).

So a read-only install space (a package under /opt, another user's colcon install) makes numba
look in the user's own cache directory, empty on a first launch, whatever its
``__pycache__`` holds (checked with numba 0.68: a read-only bind mount of a filled
``__pycache__`` compiles again into ``~/.cache/numba``). When none of the three is writable,
numba raises RuntimeError ("cannot cache function ...: no locator available") as the module
is imported. In the chosen folder one index file per kernel
(``<module>.<kernel>-<line>.py311.nbi``) maps (argument types, CPU, bytecode hash) to a data
file of machine code; numba ignores an index written by another numba version or for
another content of the source file (its SHA-256: an edit makes the file's entries stale).

:func:`missing_kernels` answers "what would compile now" with numba's own objects: the
kernel's cache (its ``_cache``, a ``FunctionCache``), the index as numba loads it (``{}``
when absent, of another numba version or stale for the source), and the index key numba
would look for on this machine. It compiles nothing and reads one small file per kernel
(about 20 ms for all of focus_ros once the modules are imported).

One thing numba does not see (nor, hence, these functions): a kernel that calls a kernel of
another module has that callee's code inside its own cached machine code, and its index
knows only its own file. After a change to such a callee the caller's cache is stale but
looks fresh; ``python -m focus_ros.kernels --fresh`` (what ``make setup`` runs after a
change) clears focus_ros's entries before compiling.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path
from typing import Iterable

import numba

from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher

from focus_ros.kernels.groups import modules_of


def missing_kernels(kind: str | None = None) -> list[str]:
    """The kernels a process running ``kind`` would compile now, by qualified name (sorted; [] when
    every one has a usable cache entry): ``kind`` is an estimator kind ("angular_velocity",
    "optical_flow", "depth") or another group of :data:`~focus_ros.kernels.groups.GROUPS`
    ("event_input", ...); None: every kernel of focus_ros.

    Fast (imports the group's modules, then reads one index file per kernel; no compiling):
    for a node to say "compiling, about N s" before it does
    (:func:`~focus_ros.kernels.groups.expected_compile_s`); a node's event input is the group
    "event_input". Missing means: no index where numba looks (never compiled, an empty
    NUMBA_CACHE_DIR, a read-only install space sending numba to the user's cache directory),
    or one written by another numba version, for another content of the source file, or on
    another CPU. A kernel with an entry for other argument types than a caller's still compiles
    for that caller: :func:`focus_ros.kernels.precompile` fills the types real use gives."""
    return kernels_to_compile(modules_of(kind))


def compiles_on_its_own(dispatcher: CPUDispatcher) -> bool:
    """False for a kernel declared ``inline="always"``: numba copies its code into each caller
    while compiling the caller and never compiles (nor caches) it alone."""
    return dispatcher.targetoptions.get("inline", "never") != "always"


def module_kernels(module_name: str) -> dict[str, CPUDispatcher]:
    """Qualified name (``module.kernel``) -> numba dispatcher for every ``numba.njit`` function
    defined in ``module_name`` (imported here), those merely imported into it excluded."""
    module = importlib.import_module(module_name)
    return {f"{module_name}.{name}": value for name, value in vars(module).items()
            if isinstance(value, CPUDispatcher) and value.__module__ == module_name}


def compiled_kernels(modules: Iterable[str]) -> dict[str, CPUDispatcher]:
    """The kernels of ``modules`` that numba compiles, hence caches, on their own (see
    :func:`compiles_on_its_own`), by qualified name."""
    return {name: dispatcher for module in modules for name, dispatcher in module_kernels(module).items()
            if compiles_on_its_own(dispatcher)}


def has_usable_entry(dispatcher: CPUDispatcher) -> bool:
    """True when numba would load at least one compiled version of this kernel from its cache
    on this machine: caching is on, the index exists where numba looks (see the module
    docstring), was written by this numba version for the current content of the source file,
    and holds an entry for this CPU (target, CPU name and features) and this bytecode.

    It does not say the entry is for the argument types a caller will use: that is what
    :func:`focus_ros.kernels.precompile` guarantees by running the real code paths."""
    cache = dispatcher._cache
    if not isinstance(cache, FunctionCache):
        return False  # cache=False: compiled in every process
    index = cache._cache_file._load_index()   # numba's own check: {} when absent, other version, stale
    if not index:
        return False
    # an index key is (signature, CPU magic tuple, (bytecode hash, closure hash)): all but the signature
    wanted = cache._index_key(None, dispatcher.targetctx.codegen())[1:]
    return any(tuple(key[1:]) == wanted for key in index)


def kernels_to_compile(modules: Iterable[str]) -> list[str]:
    """Qualified names of the kernels of ``modules`` that a process would compile on first use
    now (no usable cache entry, :func:`has_usable_entry`), sorted."""
    return sorted(name for name, dispatcher in compiled_kernels(modules).items() if not has_usable_entry(dispatcher))


def cache_folders(modules: Iterable[str]) -> list[Path]:
    """The folders numba caches the kernels of ``modules`` in, as it chose them at import."""
    return sorted({Path(dispatcher._cache.cache_path) for dispatcher in compiled_kernels(modules).values()
                   if isinstance(dispatcher._cache, FunctionCache)})


def remove_entries(modules: Iterable[str]) -> int:
    """Delete the cache files (index and data) of every kernel of ``modules`` where numba looks
    for them now; the number of files removed. The next call of each kernel compiles."""
    removed = 0
    for dispatcher in compiled_kernels(modules).values():
        cache = dispatcher._cache
        if not isinstance(cache, FunctionCache):
            continue
        folder = Path(cache.cache_path)
        base = cache._impl.filename_base   # "<module>.<kernel>-<line>.py311"
        for path in list(folder.glob(f"{base}.nbi")) + list(folder.glob(f"{base}.*.nbc")):
            try:
                os.unlink(path)
                removed += 1
            except FileNotFoundError:
                pass
    return removed


def compile_counts(modules: Iterable[str]) -> tuple[int, int]:
    """(versions compiled, versions loaded from the cache) by the kernels of ``modules`` in this
    process so far: the sums of numba's own counters (``dispatcher.stats.cache_misses`` and
    ``cache_hits``, per argument-type signature)."""
    kernels = compiled_kernels(modules).values()
    return (sum(sum(kernel.stats.cache_misses.values()) for kernel in kernels),
            sum(sum(kernel.stats.cache_hits.values()) for kernel in kernels))


def sources_fingerprint() -> str:
    """SHA-256 of the numba version and of every ``.py`` file (relative path and content) of the
    focus_ros being imported: what a complete precompile was made for."""
    import focus_ros

    root = Path(focus_ros.__file__).parent
    digest = hashlib.sha256(numba.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def fingerprint_file() -> Path:
    """Where ``python -m focus_ros.kernels`` records the :func:`sources_fingerprint` of its last
    complete precompile: beside numba's files for the package's root modules."""
    return cache_folders(["focus_ros.warps"])[0] / "focus_ros_kernels.sources"
