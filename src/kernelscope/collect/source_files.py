"""Source files a session names, read from this machine's disk only when the user asks (`--read-sources`).

A session file can name any path (it may come from someone else): each is read only if it is a regular file
within the input limit, through model/files.read_input, never followed into a FIFO or a device.
"""
from __future__ import annotations

import hashlib

from kernelscope.model.files import InputFileError, read_input


def file_sha256(path: str) -> tuple[str | None, str | None]:
    """(SHA-256 of the bytes of the regular file at ``path``, None), or (None, one sentence why it was refused:
    not a regular file, over the input limit); (None, None) when it is not on this machine or cannot be read."""
    try:
        data = read_input(path, decompress=False)
    except InputFileError as e:
        return None, str(e)
    except (OSError, ValueError):  # missing, unreadable, a name the OS refuses (NUL): not on this machine
        return None, None
    return hashlib.sha256(data).hexdigest(), None


def files_sha256(paths: list[str]) -> tuple[dict[str, str], list[str]]:
    """``file_sha256`` of each distinct path: ({path: SHA-256} of those read, sentences for those refused)."""
    read: dict[str, str] = {}
    refused: list[str] = []
    for path in dict.fromkeys(paths):
        digest, why = file_sha256(path)
        if digest is not None:
            read[path] = digest
        elif why is not None:
            refused.append(why)
    return read, refused
