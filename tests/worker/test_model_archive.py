from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from core.job_errors import JobFailedError
from tests.worker.s3_models import tar_gz
from worker.model_archive import unpack_model_archive

URI = "s3://b/model.tar.gz"


def _unpack(tmp_path: Path, body: bytes, *, cap: int = 10**9) -> tuple[Path, int]:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(body)
    target = tmp_path / "out"
    return target, unpack_model_archive(archive, target, uri=URI, max_unpacked_bytes=cap)


def _member(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def test_files_and_directories_are_unpacked(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.addfile(_member(".", tarfile.DIRTYPE))
        tar.addfile(_member("./sub", tarfile.DIRTYPE))
        for name, body in (("./config.json", b"{}"), ("./sub/a.bin", b"12345")):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    target, total = _unpack(tmp_path, buffer.getvalue())
    assert total == 7
    assert (target / "config.json").read_bytes() == b"{}"
    assert (target / "sub" / "a.bin").read_bytes() == b"12345"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (tar_gz({"../evil": b"x"}), "member '../evil' has an absolute or '..' path"),
        (tar_gz({"a/../../evil": b"x"}), "member 'a/../../evil' has an absolute or '..' path"),
        (tar_gz({"/etc/evil": b"x"}), "member '/etc/evil' has an absolute or '..' path"),
        (tar_gz({}, extra=[_member("link", tarfile.SYMTYPE, "/etc")]), "member 'link' is a symbolic link"),
        (tar_gz({}, extra=[_member("hard", tarfile.LNKTYPE, "x")]), "member 'hard' is a hard link"),
        (tar_gz({}, extra=[_member("dev", tarfile.CHRTYPE)]), "member 'dev' is a device file"),
        (tar_gz({}, extra=[_member("blk", tarfile.BLKTYPE)]), "member 'blk' is a device file"),
        (tar_gz({}, extra=[_member("pipe", tarfile.FIFOTYPE)]), "member 'pipe' is a FIFO"),
        (b"plain text, not gzip", "is not gzip-compressed"),
        (b"\x1f\x8b\x08\x00broken", "is not a readable tar.gz archive"),
    ],
    ids=[
        "dotdot",
        "nested-dotdot",
        "absolute",
        "symlink",
        "hardlink",
        "chr",
        "blk",
        "fifo",
        "not-gzip",
        "corrupt",
    ],
)
def test_unsafe_or_unreadable_archives_are_refused_naming_archive_and_member(
    tmp_path: Path, body: bytes, message: str
) -> None:
    with pytest.raises(JobFailedError, match=message) as raised:
        _unpack(tmp_path, body)
    assert URI in str(raised.value)
    assert not (tmp_path / "evil").exists()


def test_the_unpacked_size_is_capped(tmp_path: Path) -> None:
    body = tar_gz({"a.bin": b"x" * 60, "b.bin": b"y" * 60})
    with pytest.raises(JobFailedError, match=r"unpacks to more than 100 bytes \(reached at member 'b.bin'\)"):
        _unpack(tmp_path, body, cap=100)
    assert _unpack(tmp_path, body, cap=120)[1] == 120


def _files_under(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in directory.rglob("*")
        if path.is_file()
    }


@pytest.mark.parametrize("folder", ["my-model/", "./my-model/"], ids=["plain", "dot-slash"])
def test_an_archive_of_one_folder_unpacks_its_contents_at_the_root(tmp_path: Path, folder: str) -> None:
    folder_member = _member(folder.rstrip("/"), tarfile.DIRTYPE)
    body = tar_gz({f"{folder}config.json": b"{}", f"{folder}sub/a.bin": b"12345"}, extra=[folder_member])
    target, total = _unpack(tmp_path, body)
    assert total == 7
    assert _files_under(target) == {"config.json": b"{}", "sub/a.bin": b"12345"}
    assert sorted(path.name for path in target.iterdir()) == ["config.json", "sub"]


def test_a_child_named_like_its_folder_is_lifted_too(tmp_path: Path) -> None:
    target, _ = _unpack(tmp_path, tar_gz({"model/config.json": b"{}", "model/model/x.bin": b"1"}))
    assert _files_under(target) == {"config.json": b"{}", "model/x.bin": b"1"}


@pytest.mark.parametrize(
    "files",
    [
        {"model/config.json": b"{}", "README.md": b"hi"},  # a folder and a file beside it
        {"a/config.json": b"{}", "b/config.json": b"{}"},  # two folders
        {"config.json": b"{}"},  # files at the root already
    ],
    ids=["folder-and-file", "two-folders", "flat"],
)
def test_other_layouts_are_unpacked_as_they_are(tmp_path: Path, files: dict[str, bytes]) -> None:
    target, _ = _unpack(tmp_path, tar_gz(files))
    assert _files_under(target) == files
