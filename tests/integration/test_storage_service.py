"""The service on the S3 backend: response_type=json hands out presigned URLs of objects laid out by
organisation and date; a store that refuses is storage_access_denied naming the bucket, not charged."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import httpx
import pytest

from service.settings import default_workers
from tests.conftest import Org
from tests.support.images import decode
from tests.support.servers import RunningService, S3Server, running_service
from tests.support.site import Site

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def bucket(s3: S3Server) -> str:
    return s3.new_bucket()


@pytest.fixture(scope="module")
def isolated(redis_url: str, s3: S3Server, bucket: str, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[RunningService]:
    own_database = redis_url.rsplit("/", 1)[0] + "/4"  # its jobs must not reach the main service's workers
    with running_service(own_database, tmp_path_factory.mktemp("s3-service"), workers=default_workers(),
                         **s3.service_env(bucket)) as running:
        yield running


def take_json(http: httpx.Client, org: Org, site: Site) -> httpx.Response:
    return http.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": site.url("/colours.html"), "viewport_width": "200",
        "viewport_height": "100", "response_type": "json"})


def test_json_results_live_in_the_bucket_behind_presigned_urls(
        isolated_http: httpx.Client, isolated_org: Org, site: Site, s3: S3Server, bucket: str) -> None:
    response = take_json(isolated_http, isolated_org, site)
    assert response.status_code == 200, response.text
    body = response.json()
    url = body["screenshot_url"]
    assert url.startswith(f"{s3.url}/{bucket}/") and "X-Amz-Signature=" in url and "X-Amz-Expires=3600" in url
    fetched = httpx.get(url)
    assert fetched.status_code == 200 and fetched.headers["content-type"] == "image/png"
    assert (decode(fetched.content).width, decode(fetched.content).height) == (200, 100)
    key = url.split(f"/{bucket}/", 1)[1].split("?", 1)[0]
    reference = response.headers["x-service-reference"]
    assert key == f"{isolated_org.id}/{datetime.now(UTC):%Y/%m/%d}/{reference}.png"
    head = boto3.client("s3", endpoint_url=s3.url).head_object(Bucket=bucket, Key=key)
    assert head["ContentType"] == "image/png" and head["ContentLength"] == body["size_bytes"]


def test_a_store_that_refuses_is_storage_access_denied_and_not_charged(
        isolated_http: httpx.Client, isolated_org: Org, site: Site, s3: S3Server, bucket: str) -> None:
    client = boto3.client("s3", endpoint_url=s3.url)
    for listed in client.list_objects_v2(Bucket=bucket).get("Contents", []):
        client.delete_object(Bucket=bucket, Key=listed["Key"])
    client.delete_bucket(Bucket=bucket)
    try:
        response = take_json(isolated_http, isolated_org, site)
        assert response.status_code == 400
        assert response.json()["error_code"] == "storage_access_denied"
        assert re.search(rf"bucket '{bucket}'.*does not exist", response.json()["error_message"])
        usage = isolated_http.get("/v1/screenshot/usage", params={"access_key": isolated_org.access_key}).json()
        assert usage["used"] == 0
    finally:
        client.create_bucket(Bucket=bucket)


def test_page_content_is_uploaded_to_the_bucket(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                                                s3: S3Server, bucket: str) -> None:
    response = isolated_http.get("/v1/screenshot/take", params={
        "access_key": isolated_org.access_key, "url": site.url("/article.html"), "metadata_content": "true",
        "metadata_content_format": "markdown"})
    assert response.status_code == 200, response.text
    url = response.headers["x-service-content-url"]
    assert url.startswith(f"{s3.url}/{bucket}/{isolated_org.id}/") and "X-Amz-Signature=" in url
    fetched = httpx.get(url)
    assert fetched.status_code == 200 and fetched.text.startswith("# Quarterly report")
    assert fetched.headers["content-type"] == "text/markdown; charset=utf-8"
