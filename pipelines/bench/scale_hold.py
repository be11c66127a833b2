"""A store's SST files and the page cache: read once after a build (`page_in`), held in
memory while a measured run reads them (`held_files`, `bench --scale --hold-files`).

The bench builds each state by writing SST files (`state.storage.bulk`), and RocksDB's
SST file writer drops every file it writes from the page cache as it goes: the run would
find every block of the state on the disk, as after a reboot, where a state the engine had
built itself would find the blocks its own flushes and compactions wrote still in the page
cache. `page_in` reads the files once, so a run starts as it would on such a state.

A replay over 100M URLs reads most of its known URLs' blocks from the store's files, so its
rate depends on whether the operating system still has those files in its page cache: a
kernel that reclaims pages left untouched for a while (DAMON's proactive reclaim, for one,
set to page out what was not accessed for a minute) sends those reads to the disk. To tell
the engine's cost from the machine's, another process maps every SST file the directory
holds when the run starts and locks them in memory (`mlockall`), so each read of them is a
read from the page cache; files the run itself writes (flushes, compactions) are not held.
The holding process is not the measured one: its memory is not in the run's peak RSS.

Locking needs the right to (root, or `CAP_IPC_LOCK`, or a large `ulimit -l`); without
it the files are read once into the page cache and reported as not locked.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_MCL_CURRENT = 1
_CHUNK = 4 << 20


def page_in(directory: Path) -> int:
    """Read every SST file of `directory` once (into the page cache, as far as the kernel
    keeps it); returns the bytes read."""
    buffer = bytearray(_CHUNK)
    total = 0
    for entry in os.scandir(directory):
        if entry.name.endswith(".sst"):
            with open(entry.path, "rb", buffering=0) as file:
                while read := file.readinto(buffer):
                    total += read
    return total


@contextmanager
def held_files(directory: Path) -> Iterator[dict[str, float]]:
    """The SST files of `directory` held in memory by a child process for the body of the
    `with`; yields what it holds: files, bytes and whether they are locked (1) or only
    read once (0)."""
    child = subprocess.Popen(
        [sys.executable, "-m", __name__, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        line = child.stdout.readline()
        if not line:
            raise RuntimeError(f"holding the files of {directory} failed (exit {child.wait()})")
        yield json.loads(line)
    finally:
        child.stdin.close()  # the child waits for this, then exits and lets go of the files
        child.wait(timeout=120)


def _hold(directory: Path) -> None:
    """Map and lock every SST file of `directory`, say what is held, and keep it until
    standard input closes."""
    maps: list[mmap.mmap] = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.name.endswith(".sst") and entry.stat().st_size:
            with open(entry.path, "rb") as file:
                maps.append(mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ))
    for mapped in maps:
        mapped.madvise(mmap.MADV_WILLNEED)
    libc = ctypes.CDLL(None, use_errno=True)
    locked = libc.mlockall(_MCL_CURRENT) == 0
    if not locked:  # in the page cache for now, not held
        page_in(directory)
    held = {"files": len(maps), "bytes": sum(len(m) for m in maps), "locked": int(locked)}
    print(json.dumps(held), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    _hold(Path(sys.argv[1]))
