"""Unpacking a model.tar.gz (S3DataType S3Object, CompressionType Gzip) into a local directory.

The archive comes from the user, so every member is checked before anything is written:
it must be a regular file or a directory, stay inside the target directory, and the
archive's unpacked total must stay under a cap. A refusal names the archive and the member.
Python's ``filter="data"`` extraction stays on as a second line of defence.

SageMaker users often tar the model's folder rather than its files (``tar czf model.tar.gz
my-model/``); an archive whose members all sit under one top-level folder is unpacked as if
that folder's contents had been archived, so the model files land at the directory's root.
"""

from __future__ import annotations

import os
import tarfile
import uuid
from pathlib import Path, PurePosixPath

from core.job_errors import JobFailedError

GZIP_MAGIC = b"\x1f\x8b"


def unpack_model_archive(archive: Path, target: Path, *, uri: str, max_unpacked_bytes: int) -> int:
    """Unpack the gzip-compressed tar ``archive`` (downloaded from ``uri``) into ``target``.

    Returns the number of bytes unpacked. Raises JobFailedError on anything unsafe or unreadable.
    """
    with archive.open("rb") as handle:
        if handle.read(2) != GZIP_MAGIC:
            raise JobFailedError(
                f"Model archive {uri} is not gzip-compressed; CompressionType Gzip needs a .tar.gz file"
            )
    target.mkdir(parents=True, exist_ok=True)
    root = target.resolve()
    total = 0
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for member in tar:
                relative = _member_path(member, uri)
                if relative is None:
                    continue  # the archive's own root ("." or "./")
                _check_member_type(member, uri)
                destination = Path(os.path.normpath(root / relative))
                if destination != root and root not in destination.parents:
                    raise JobFailedError(
                        f"Model archive {uri}: member {member.name!r} would be written outside the "
                        "model directory"
                    )
                if member.isfile():
                    total += member.size
                    if total > max_unpacked_bytes:
                        raise JobFailedError(
                            f"Model archive {uri} unpacks to more than {max_unpacked_bytes} bytes "
                            f"(reached at member {member.name!r}); the limit is "
                            "EAGLENEST_MAX_MODEL_ARCHIVE_BYTES"
                        )
                try:
                    tar.extract(member, root, filter="data")
                except tarfile.FilterError as error:
                    raise JobFailedError(
                        f"Model archive {uri}: member {member.name!r} is unsafe to unpack: {error}"
                    ) from error
    except (tarfile.TarError, EOFError, OSError) as error:
        raise JobFailedError(f"Model archive {uri} is not a readable tar.gz archive: {error}") from error
    _lift_single_top_folder(root)
    return total


def _lift_single_top_folder(root: Path) -> None:
    """When ``root`` holds exactly one entry and it is a folder, move that folder's contents up.

    The folder is first renamed to a name of our own, so a child with the folder's own name
    (``model/model/``) is moved up without clashing with its parent.
    """
    entries = list(root.iterdir())
    if len(entries) != 1 or not entries[0].is_dir() or entries[0].is_symlink():
        return
    folder = entries[0].rename(root / f".unpacked-{uuid.uuid4().hex}")
    for child in folder.iterdir():
        child.rename(root / child.name)
    folder.rmdir()


def _member_path(member: tarfile.TarInfo, uri: str) -> str | None:
    name = member.name
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith("/") or any(part == ".." for part in path.parts):
        raise JobFailedError(
            f"Model archive {uri}: member {name!r} has an absolute or '..' path, which would be "
            "written outside the model directory"
        )
    parts = [part for part in path.parts if part != "."]
    return "/".join(parts) if parts else None


def _check_member_type(member: tarfile.TarInfo, uri: str) -> None:
    if member.issym():
        what = f"a symbolic link (to {member.linkname!r})"
    elif member.islnk():
        what = f"a hard link (to {member.linkname!r})"
    elif member.ischr() or member.isblk():
        what = "a device file"
    elif member.isfifo():
        what = "a FIFO"
    elif member.isfile() or member.isdir():
        return
    else:
        what = "not a regular file or directory"
    raise JobFailedError(
        f"Model archive {uri}: member {member.name!r} is {what}; a model archive may hold only "
        "regular files and directories"
    )
