"""Local-directory storage; the API serves its objects through signed, expiring URLs."""

from __future__ import annotations

import errno
import hashlib
import hmac
import mimetypes
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from storage.base import StoredObject
from storage.errors import StorageError

# Write failures a later try may not meet: the disk full or over quota (space may be freed), an I/O error.
_MAY_PASS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN})


class LocalStorage:
    """Objects as files under one directory; writes are atomic (temp file, then rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = f"directory {root}"

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()) or not key:
            raise StorageError(f"object key {key!r} escapes the storage directory")
        return path

    def put(self, key: str, data: bytes, content_type: str) -> StoredObject:
        path = self._path(key)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except OSError as error:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)  # no part of an object is left behind
            raise StorageError(
                f"cannot write to the storage directory {self.root} ({error.strerror}); check that it "
                "exists and is writable, or set SCREENSHOT_STORAGE_DIR",
                transient=error.errno in _MAY_PASS) from None
        return StoredObject(key, len(data), content_type)

    def stat(self, key: str) -> StoredObject | None:
        path = self._path(key)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return None
        return StoredObject(key, size, content_type_for(key))

    def open(self, key: str, chunk_size: int = 1 << 16) -> Iterator[bytes]:
        path = self._path(key)
        try:
            handle = path.open("rb")
        except OSError as error:
            raise StorageError(f"cannot read {key} from {self.root} ({error.strerror})") from None
        with handle:
            while chunk := handle.read(chunk_size):
                yield chunk

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def client_url(self, key: str, expires_in: int) -> str | None:
        return None  # served by the API: see `sign_file_url`


def content_type_for(key: str) -> str:
    """Content type from the key's extension, as Python's `mimetypes` knows it: the API registers every output
    format's there at start (render.contract.formats.register_media_types), so no table is kept here."""
    return mimetypes.guess_type(key)[0] or "application/octet-stream"


def file_signature(secret: bytes, key: str, expires: int) -> str:
    """HMAC binding an object key to its expiry time."""
    return hmac.new(secret, f"{key}\n{expires}".encode(), hashlib.sha256).hexdigest()


def sign_file_url(base_url: str, secret: bytes, key: str, expires: int) -> str:
    """URL under the API's `/v1/screenshot/files/` that serves `key` until `expires` (UNIX seconds)."""
    signature = file_signature(secret, key, expires)
    return f"{base_url.rstrip('/')}/v1/screenshot/files/{quote(key)}?expires={expires}&signature={signature}"


def verify_file_signature(secret: bytes, key: str, expires: int, signature: str, now: float) -> bool:
    """True when the signature matches and has not expired."""
    if expires < now:
        return False
    return hmac.compare_digest(file_signature(secret, key, expires).encode(), signature.encode())
