"""The writer's lock of a store: ``fcntl.flock`` on ``STORE/.lock``.

The operating system releases a ``flock`` when its holder exits, however it exits (a SIGKILL
included), so a dead writer never blocks the next one and no pid has to be probed. The file
holds the holder's pid, for the message a refused writer prints. The holder removes the file
when it is done; a writer that takes the lock checks that the file it locked is still the
one at the path (the previous holder may have removed it meanwhile) and starts over if not.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import StoreError

LOCK = ".lock"


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 64).decode("ascii", "replace").strip() or "?"
    except OSError:
        return "?"


@contextlib.contextmanager
def store_lock(root: Path) -> Iterator[None]:
    """Hold the writer's lock of the store at ``root`` for the duration of the block;
    refuse (``StoreError``) when another live process holds it."""
    path = root / LOCK
    for _ in range(100):
        try:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as err:
            # Read-only, unwritable or full location: a clean refusal, not an OSError.
            raise StoreError(
                f"cannot create the lock file {path} ({err.strerror or err}); the store "
                "location must be writable: check its permissions, free space and mount"
            ) from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _holder(fd)
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                raise StoreError(
                    f"store {root} is being written by process {holder} (lock file {path}); "
                    "wait for it to finish"
                ) from None
            raise StoreError(f"cannot lock {path} ({err.strerror or err})") from err
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the previous holder removed the file after we opened it
            os.close(fd)
            continue
        break
    else:  # pragma: no cover - would need 100 writers racing on one store
        raise StoreError(f"could not take the lock {path}; try again")
    try:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError as err:
            raise StoreError(
                f"cannot write the lock file {path} ({err.strerror or err}); free some disk "
                "space or choose a writable location"
            ) from err
        yield
    finally:
        # Unlink while still holding the lock, then release it by closing.
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)
