"""One contract for every storage backend: local directory and S3 (moto's server over real HTTP)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from storage import LocalStorage, Storage, StorageError
from storage.local import sign_file_url
from storage.s3 import S3Storage
from tests.support.servers import S3Server, free_port

KEY = "org1/2026/11/21/ref.png"


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path, s3: S3Server) -> Iterator[Storage]:
    if request.param == "local":
        yield LocalStorage(tmp_path / "storage")
    else:
        yield s3.storage(s3.new_bucket())


def test_put_stat_open_delete(store: Storage) -> None:
    data = bytes(range(256)) * 1000
    stored = store.put(KEY, data, "image/png")
    assert (stored.key, stored.size, stored.content_type) == (KEY, len(data), "image/png")
    stat = store.stat(KEY)
    assert stat is not None and (stat.size, stat.content_type) == (len(data), "image/png")
    chunks = list(store.open(KEY, chunk_size=10_000))
    assert b"".join(chunks) == data and len(chunks) > 1  # streamed in pieces, not read whole
    store.put(KEY, b"replaced", "image/png")
    assert b"".join(store.open(KEY)) == b"replaced"
    store.delete(KEY)
    assert store.stat(KEY) is None
    store.delete(KEY)  # deleting what is gone is fine


def test_missing_objects(store: Storage) -> None:
    assert store.stat("org1/nothing.png") is None
    with pytest.raises(StorageError):
        b"".join(store.open("org1/nothing.png"))


def test_client_urls_fetch_the_object_until_they_expire(store: Storage, tmp_path: Path) -> None:
    store.put(KEY, b"\x89PNG-bytes", "image/png")
    url = store.client_url(KEY, 60)
    if url is None:  # local storage: the API serves it through a signed URL (tests/integration/test_take.py)
        assert isinstance(store, LocalStorage)
        assert "/v1/screenshot/files/" in sign_file_url("http://api", b"secret", KEY, int(time.time()) + 60)
        return
    fetched = httpx.get(url)
    assert fetched.status_code == 200 and fetched.content == b"\x89PNG-bytes"
    assert fetched.headers["content-type"] == "image/png"
    tampered = url.replace("ref.png", "other.png")
    assert httpx.get(tampered).status_code in (403, 404)


def test_failures_name_the_bucket_or_directory(store: Storage, tmp_path: Path, s3: S3Server) -> None:
    if isinstance(store, LocalStorage):
        blocker = tmp_path / "not-a-directory"
        blocker.write_text("")
        broken: Storage = LocalStorage(blocker)
        where = str(blocker)
    else:
        broken = s3.storage("no-such-bucket")
        where = "no-such-bucket"
    with pytest.raises(StorageError, match=where) as raised:
        broken.put(KEY, b"x", "image/png")
    if not isinstance(store, LocalStorage):
        assert "does not exist" in str(raised.value)


def test_cache_objects_get_cdn_urls_when_a_cdn_fronts_the_bucket(s3: S3Server) -> None:
    store = S3Storage(s3.new_bucket(), endpoint_url=s3.url, region="us-east-1", path_style=True,
                      cdn_base_url="https://cdn.example.com/")
    assert store.client_url("cache/ab/cd.png", 60) == "https://cdn.example.com/cache/ab/cd.png"
    assert (store.client_url("org1/2026/11/21/ref.png", 60) or "").startswith(s3.url)  # presigned, private


def test_unreachable_endpoint_is_a_storage_error() -> None:
    store = S3Storage("bucket", endpoint_url=f"http://127.0.0.1:{free_port()}", region="us-east-1",
                      path_style=True)
    with pytest.raises(StorageError, match="bucket 'bucket' at http://127.0.0.1"):
        store.put(KEY, b"x", "image/png")


def test_presigned_urls_name_the_public_endpoint_when_clients_use_another(s3: S3Server) -> None:
    # As in docker compose: the service reaches the store as 127.0.0.1, clients as localhost.
    public = s3.url.replace("127.0.0.1", "localhost")
    store = S3Storage(s3.new_bucket(), endpoint_url=s3.url, region="us-east-1", path_style=True,
                      public_endpoint_url=public)
    store.put(KEY, b"the object", "image/png")
    url = store.client_url(KEY, 60) or ""
    assert url.startswith(f"{public}/")
    assert httpx.get(url, timeout=10).content == b"the object"
