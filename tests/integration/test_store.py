"""store=true (an SDK parameter): the result uploaded to the caller's own bucket with the caller's
credentials, under the network policy; failures are storage_access_denied and not charged; the credentials
are neither stored nor logged.

The caller's store is moto's S3 server with IAM authentication on (INITIAL_NO_AUTH_ACTION_COUNT: the set-up
calls are the last unauthenticated ones), so a wrong secret or an unknown key is refused as by a real store.
The service's own network policy is closed but for 127.0.0.1, where the store and the pages are.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import redis

from tests.conftest import Org, create_org
from tests.support.servers import RunningService, free_port, running_service, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser

SETUP_CALLS = 5  # create_bucket, create_user, put_user_policy, create_access_key, create_bucket


@dataclass
class CallerStore:
    url: str
    bucket: str
    key_id: str
    secret: str

    def client(self) -> Any:
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id=self.key_id,
                            aws_secret_access_key=self.secret)


@pytest.fixture(scope="module")
def store() -> Iterator[CallerStore]:
    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS), "AWS_ACCESS_KEY_ID": "setup",
           "AWS_SECRET_ACCESS_KEY": "setup"}
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: httpx.get(url + "/moto-api/").status_code == 200, 30, "moto's S3 server")
        setup = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "setup",
                 "aws_secret_access_key": "setup"}
        s3, iam = boto3.client("s3", **setup), boto3.client("iam", **setup)
        s3.create_bucket(Bucket="caller-bucket")
        iam.create_user(UserName="caller")
        iam.put_user_policy(UserName="caller", PolicyName="own-bucket", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": [
                "arn:aws:s3:::caller-bucket", "arn:aws:s3:::caller-bucket/*"]}]}))
        key = iam.create_access_key(UserName="caller")["AccessKey"]
        s3.create_bucket(Bucket="someone-elses")  # the caller's key has no right to it
        yield CallerStore(url, "caller-bucket", key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        process.terminate()
        process.wait(10)


@dataclass
class Service:
    running: RunningService
    org: Org
    log: Path


@pytest.fixture(scope="module")
def service(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    directory = tmp_path_factory.mktemp("store-service")
    log_path = directory / "service.log"
    with log_path.open("wb") as log, running_service(
            redis_url.rsplit("/", 1)[0] + "/9", directory, workers=1, log=log,
            SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false", SCREENSHOT_ALLOWED_NETWORKS="127.0.0.1/32",
            SCREENSHOT_LOG_LEVEL="DEBUG") as running:
        org = asyncio.run(create_org(running.redis_url, quota=100, concurrency=2))
        yield Service(running, org, log_path)


def take(service: Service, site: Site, store: CallerStore, **params: Any) -> httpx.Response:
    return httpx.get(f"{service.running.url}/v1/screenshot/take", timeout=60, params={
        "access_key": service.org.access_key, "url": site.url("/colours.html"), "viewport_width": 200,
        "viewport_height": 100, "store": "true", "storage_endpoint": store.url, "storage_bucket": store.bucket,
        "storage_access_key_id": store.key_id, "storage_secret_access_key": store.secret, **params})


def used(service: Service) -> int:
    usage = httpx.get(f"{service.running.url}/v1/screenshot/usage",
                      params={"access_key": service.org.access_key}).json()
    return int(usage["used"])


def test_the_result_lands_in_the_callers_bucket(service: Service, site: Site, store: CallerStore) -> None:
    before = used(service)
    response = take(service, site, store, storage_path="shots/{date}/colours-{reference}", format="jpeg",
                    storage_class="STANDARD_IA", storage_acl="private", response_type="empty")
    assert response.status_code == 200, response.text
    reference = response.headers["x-service-reference"]
    key = f"shots/{datetime.now(UTC):%Y-%m-%d}/colours-{reference}.jpg"
    assert response.headers["x-service-store-key"] == key
    assert response.headers["x-service-store-bucket"] == store.bucket
    assert "x-service-store-location" not in response.headers and response.content == b""
    stored = store.client().get_object(Bucket=store.bucket, Key=key)
    assert stored["Body"].read().startswith(b"\xff\xd8") and stored["ContentType"] == "image/jpeg"
    assert stored["StorageClass"] == "STANDARD_IA"
    assert stored["Metadata"] == {"idempotency-key": reference}  # a job rendered again rewrites this object
    assert used(service) == before + 1
    # With the location, in the JSON body as well.
    located = take(service, site, store, storage_path="by-domain/{domain}", response_type="json",
                   storage_return_location="true")
    assert located.status_code == 200, located.text
    body = located.json()
    assert body["store"] == {"bucket": store.bucket, "key": "by-domain/127.0.0.1.png",
                             "location": f"{store.url}/{store.bucket}/by-domain/127.0.0.1.png"}
    assert located.headers["x-service-store-location"] == body["store"]["location"]
    assert store.client().get_object(Bucket=store.bucket, Key="by-domain/127.0.0.1.png")["Body"].read().startswith(
        b"\x89PNG")


@pytest.mark.parametrize("change, says", [
    ({"storage_secret_access_key": "not-the-secret-0123456789"}, "storage_secret_access_key"),
    ({"storage_access_key_id": "AKIAUNKNOWN000000000"}, "storage_access_key_id"),
    ({"storage_bucket": "someone-elses"}, "access denied"),
    ({"storage_bucket": "no-such-bucket"}, "no-such-bucket"),
    ({"storage_endpoint": "http://127.0.0.2:9"}, "storage_endpoint"),  # a private address outside the policy
    ({"storage_endpoint": "http://name.invalid:9"}, "storage_endpoint"),
])
def test_a_failed_upload_is_storage_access_denied_and_not_charged(service: Service, site: Site, store: CallerStore,
                                                                  change: dict[str, str], says: str) -> None:
    before = used(service)
    refused = take(service, site, store, storage_path="refused", **change)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error_code"] == "storage_access_denied"
    assert says in refused.json()["error_message"], refused.json()["error_message"]
    for secret in (store.secret, change.get("storage_secret_access_key", store.secret)):
        assert secret not in refused.text
    assert used(service) == before
    usage = httpx.get(f"{service.running.url}/v1/screenshot/usage", params={"access_key": service.org.access_key})
    assert usage.json()["concurrency"]["remaining"] == usage.json()["concurrency"]["limit"]  # the slot came back


@pytest.mark.parametrize("params, field", [
    ({"storage_access_key_id": None}, "storage_access_key_id"),
    ({"storage_secret_access_key": None}, "storage_secret_access_key"),
    ({"storage_path": None}, "storage_path"),
    ({"storage_path": "../up"}, "storage_path"),
    ({"storage_path": "a/{secret}"}, "storage_path"),
    ({"store": "false"}, "storage_bucket"),  # storage_* without store
    ({"storage_endpoint": "ftp://store.example"}, "storage_endpoint"),
    ({"storage_acl": "everyone"}, "storage_acl"),
    ({"cache": "true"}, "store"),
])
def test_what_cannot_be_stored_is_refused_by_name(service: Service, site: Site, store: CallerStore,
                                                  params: dict[str, Any], field: str) -> None:
    arguments = {"storage_path": "x", **params}
    sent = {name: value for name, value in arguments.items() if value is not None}
    missing = [name for name, value in arguments.items() if value is None]
    response = httpx.get(f"{service.running.url}/v1/screenshot/take", timeout=60, params={
        "access_key": service.org.access_key, "url": site.url("/colours.html"),
        **{name: value for name, value in {
            "store": "true", "storage_endpoint": store.url, "storage_bucket": store.bucket,
            "storage_access_key_id": store.key_id, "storage_secret_access_key": store.secret}.items()
           if name not in missing}, **sent})
    assert response.status_code == 400 and response.json()["error_code"] == "request_not_valid", response.text
    assert field in [detail["field"] for detail in response.json()["error_details"]], response.text
    assert store.secret not in response.text


def test_the_callers_credentials_are_neither_stored_nor_logged(service: Service, site: Site,
                                                              store: CallerStore) -> None:
    accepted = take(service, site, store, storage_path="async/{reference}", **{"async": "true"})
    assert accepted.status_code == 202, accepted.text
    reference = accepted.json()["reference"]
    wait_for(lambda: httpx.get(f"{service.running.url}/v1/screenshot/jobs/{reference}", params={
        "access_key": service.org.access_key}).json()["status"] == "done", 60, "the async upload")
    assert store.client().get_object(Bucket=store.bucket, Key=f"async/{reference}.png")["Body"].read()
    connection = redis.Redis.from_url(service.running.redis_url)
    try:
        for key in connection.scan_iter():
            kind = connection.type(key)
            if kind == b"string":
                values = [connection.get(key) or b""]
            elif kind == b"hash":
                values = [*connection.hgetall(key).values()]
            elif kind == b"list":
                values = connection.lrange(key, 0, -1)
            elif kind == b"zset":
                values = [member for member, _ in connection.zrange(key, 0, -1, withscores=True)]
            else:
                values = [*connection.smembers(key)] if kind == b"set" else []
            assert not any(store.secret.encode() in value or store.key_id.encode() in value for value in values), key
    finally:
        connection.close()
    log = service.log.read_bytes()
    assert store.secret.encode() not in log and store.key_id.encode() not in log
