"""Writing the grader's outputs without following links: a new file, then renamed into place.

Whoever controls a folder can plant a link where an output will be written; opening the output
by its name would write through the link into the file it points to. Here an output is always a
new file (``O_CREAT | O_EXCL | O_NOFOLLOW``: never an existing file or link) in the folder,
renamed over the name (a link there is replaced, not followed), and a reader sees the old file or
the new one, never half of one.
"""
from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def write_replacing(folder: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """``data`` into ``name`` in the open directory ``folder``, as the module says."""
    temporary = f".{name}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=folder)
    fd = os.open(temporary, _CREATE, 0o600, dir_fd=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        os.unlink(temporary, dir_fd=folder)
        raise
    os.close(fd)
    os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)


def write_file(path: str | Path, data: bytes | str, mode: int = 0o644) -> None:
    """``data`` (text is UTF-8) into ``path``, its folder created if missing; the folder itself
    must not be a link."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        write_replacing(folder, path.name, data.encode() if isinstance(data, str) else data, mode)
    finally:
        os.close(folder)


@contextlib.contextmanager
def replacing(path: str | Path, binary: bool = False) -> Iterator[IO]:
    """A file to write (text: UTF-8, newlines as given, as a CSV writer wants), put in place by
    :func:`write_file` when the block ends without an error: whole or not at all."""
    buffer: io.BytesIO | io.StringIO = io.BytesIO() if binary else io.StringIO(newline="")
    yield buffer
    write_file(path, buffer.getvalue())
