"""Local storage and its signed, expiring URLs."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import LocalStorage, StorageError, object_key
from storage.local import file_signature, sign_file_url, verify_file_signature

SECRET = b"secret"


def test_put_stat_open_delete(tmp_path: Path) -> None:
    store = LocalStorage(tmp_path)
    stored = store.put("org/2026/11/21/ref.png", b"\x89PNGdata", "image/png")
    assert stored.size == 8
    stat = store.stat("org/2026/11/21/ref.png")
    assert stat is not None and stat.content_type == "image/png" and stat.size == 8
    assert b"".join(store.open("org/2026/11/21/ref.png", chunk_size=3)) == b"\x89PNGdata"
    store.delete("org/2026/11/21/ref.png")
    assert store.stat("org/2026/11/21/ref.png") is None


@pytest.mark.parametrize("key", ["../escape", "a/../../b", "/etc/passwd"])
def test_keys_cannot_escape_the_directory(tmp_path: Path, key: str) -> None:
    with pytest.raises(StorageError):
        LocalStorage(tmp_path / "store").put(key, b"x", "text/plain")


def test_unwritable_directory_is_a_storage_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageError, match=str(blocker)):
        LocalStorage(blocker).put("a/b.png", b"x", "image/png")


def test_object_keys_are_laid_out_by_organisation_and_date() -> None:
    from datetime import UTC, datetime

    assert object_key("org1", "ref", "png", datetime(2026, 1, 2, tzinfo=UTC)) == "org1/2026/01/02/ref.png"


def test_signed_urls_verify_until_they_expire_or_change() -> None:
    url = sign_file_url("http://h:1/", SECRET, "o/k.png", 2000)
    assert url.startswith("http://h:1/v1/screenshot/files/o/k.png?expires=2000&signature=")
    signature = file_signature(SECRET, "o/k.png", 2000)
    assert verify_file_signature(SECRET, "o/k.png", 2000, signature, now=1999)
    assert not verify_file_signature(SECRET, "o/k.png", 2000, signature, now=2001)
    assert not verify_file_signature(SECRET, "o/other.png", 2000, signature, now=1999)
    assert not verify_file_signature(SECRET, "o/k.png", 2500, signature, now=1999)


def test_a_non_ascii_file_signature_is_simply_wrong() -> None:
    assert not verify_file_signature(SECRET, "o/k.png", 2000, "X¸\U0009f100¢", now=1999)


def test_an_object_is_served_with_its_format_s_content_type_from_the_registry() -> None:
    """Local storage names a content type by the key's extension, as Python's mimetypes knows it once the API
    registered every output format there (the registry is the one table of extensions and types)."""
    from render.contract.formats import FORMATS, register_media_types
    from storage.local import content_type_for

    register_media_types()
    for fmt in FORMATS.values():
        assert content_type_for(f"org/2026-11-27/shot.{fmt.extension}") == fmt.media_type, fmt.name
    assert content_type_for("org/2026-11-27/unknown.zzz") == "application/octet-stream"
