"""Finishing a capture: an output becomes a result. The vision provider is asked, the page content, the result
and its slices stored, and the output uploaded to the caller's own bucket (`store`). The job is then ended
(render.queue.endings) by its worker."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

import orjson
import redis
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from render.capture import archiving
from render.capture.pipeline import Output
from render.contract import certificates, sealing
from render.contract.errors import ErrorDetail, NameNotResolved, RequestNotValid, StorageAccessDenied
from render.contract.formats import FORMATS
from render.contract.options import VISION_FIELDS, TakeOptions
from render.contract.wire import Capture, JobRequest, JobResult, Recorded, StoredCopy, StoredSlice
from render.net.policy import AddressNotAllowed, NetworkPolicy
from render.output import imaging, vision
from render.queue.archive_key import NoArchiveKey, archive_key
from render.queue.certify_key import NoCertifyKey, certify_key
from render.settings import SERVICE_VERSION, RenderSettings
from storage import Bounded, StorageError, object_key
from storage.deadline import within
from storage.paths import filled

log = logging.getLogger(__name__)
T = TypeVar("T")
FIRST_RETRY_SECONDS = 0.5  # an async job's second try at a store; each next one waits twice as long, at most:
LAST_RETRY_SECONDS = 8.0


def _utc(unix_seconds: float) -> str:
    """ISO 8601 in UTC with milliseconds."""
    return datetime.fromtimestamp(unix_seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Finisher:
    """What a worker does with an output once the browser is done with it."""

    def __init__(self, settings: RenderSettings, storage: Bounded, connection: redis.Redis | None,
                 policy: NetworkPolicy, loop: asyncio.AbstractEventLoop, egress_url: str) -> None:
        self.settings = settings
        self.storage = storage
        self.redis = connection
        self.policy = policy
        self.loop = loop  # the browser's loop, where the policy resolves names
        self.egress_url = egress_url  # uploads go through the egress proxy too
        self._certify_key: Ed25519PrivateKey | None = None  # loaded on the first certify=true
        self._archive_key: ec.EllipticCurvePrivateKey | None = None  # loaded on the first archive=true

    def result(self, job: JobRequest, capture: Capture, options: TakeOptions, output: Output, started: float,
               acquire_seconds: float = 0.0) -> JobResult:
        """An output made a result: vision asked, the archive packed, content and result stored as the job says."""
        clock = output.timings
        if job.enqueued_at:  # the API's clock against this host's: near enough for the queue's share
            clock.add("queue", max(0.0, time.time() - (time.monotonic() - started) - job.enqueued_at))
        clock.add("context", acquire_seconds)
        completion = None
        if options.vision_provider_api_key is not None:
            with clock.stage("metadata"):
                completion = self._ask_vision(job, options, output)
        # certify=true: made before the archive is packed, which carries it (so it lists every artefact but that).
        certificate = self._certificate(job, options, output, completion, started) if options.certify else None
        if output.archive is not None:
            with clock.stage("metadata"):
                archiving.pack_into(output, self._archive_key_now(), self.settings, certificate)
        result = JobResult(
            job.reference, ok=True, rendering_seconds=time.monotonic() - started,
            content_type=output.content_type, size_bytes=len(output.body), format=output.format,
            width=output.width, height=output.height, body=output.body, acquire_seconds=round(acquire_seconds, 4),
            blocked_requests=output.blocked_requests, metadata=output.metadata, vision_completion=completion)
        log.debug("job %s: waited %.3f s for its tab, %.3f s in all", job.reference,
                  acquire_seconds, result.rendering_seconds)
        with clock.stage("store"):
            for name, (body, extension, content_type) in output.artefacts.items():
                result.artefacts[name] = self._put(
                    job, object_key(job.organisation, f"{job.reference}-{name}", extension), body, content_type)
            if options.full_page_slices:
                self._store_slices(job, options, output, result)
            if options.store:
                self._upload_to_caller(job, options, output, result)
            if capture.store or capture.store_key:
                self._store(job, capture, options, result)
            if certificate is not None:
                result.artefacts["certificate"] = self._put(
                    job, object_key(job.organisation, f"{job.reference}-certificate", "json"), certificate,
                    "application/json")
        result.timings = clock.report()
        return result

    def _archive_key_now(self) -> ec.EllipticCurvePrivateKey:
        """The service's archive key (archive=true), loaded on first use."""
        if self._archive_key is None:
            try:
                self._archive_key = archive_key(self.settings.archive_key_file, self.redis)
            except NoArchiveKey as error:
                raise RequestNotValid(f"archive: {error}.", [ErrorDetail("archive", "no key to sign with")]) from None
        return self._archive_key

    def _certificate(self, job: JobRequest, options: TakeOptions, output: Output, completion: str | None,
                     started: float) -> bytes:
        """certify=true: the signed manifest of everything the capture returns (format=wacz: the screenshots the
        archive holds; the archive is signed on its own and carries the certificate)."""
        if self._certify_key is None:
            try:
                self._certify_key = certify_key(self.settings.certify_key_file, self.redis)
            except NoCertifyKey as error:
                raise RequestNotValid(f"certify: {error}.", [ErrorDetail("certify", "no key to sign with")]) from None
        provenance = output.provenance
        if output.format == "wacz" and output.archive is not None:
            artefacts = [certificates.artefact(view.kind, view.png, FORMATS["png"].media_type)
                         for view in output.archive.views]
        else:
            artefacts = [certificates.artefact("output", output.body, output.content_type)]
        artefacts += [certificates.artefact(name, body, content_type)
                      for name, (body, _, content_type) in output.artefacts.items()]
        artefacts += [certificates.artefact(f"slice-{index}", piece.body, output.content_type)
                      for index, piece in enumerate(output.slices)]
        if completion is not None:
            artefacts.append(certificates.artefact("vision", completion.encode(), "text/plain"))
        public_options, secrets = sealing.split_secrets(options.to_payload())
        now = time.time()
        manifest = {
            "reference": job.reference,
            "requested_url": sealing.without_credentials(options.url) if options.url else None,
            "final_url": provenance.final_url if provenance else None,
            "http_status": provenance.http_status if provenance else None,
            "options": public_options,
            # What metadata_* found (the accessibility tree is an artefact of its own).
            "metadata": {name: value for name, value in output.metadata.items() if name != "accessibility"},
            "redacted": sorted({*secrets, *(name for name in VISION_FIELDS if getattr(options, name) is not None)}),
            "started_at": _utc(now - (time.monotonic() - started)),
            "finished_at": _utc(now),
            "service": {"name": "screenshot-service", "version": SERVICE_VERSION},
            "chromium": provenance.chromium if provenance else None,
            "artefacts": artefacts,
        }
        return orjson.dumps(certificates.sign(manifest, self._certify_key))

    def _upload_to_caller(self, job: JobRequest, options: TakeOptions, output: Output, result: JobResult) -> None:
        """store=true: the output in the caller's bucket, with the caller's credentials, through the egress
        proxy (the network policy); any failure is storage_access_denied (not charged)."""
        from storage.destination import Destination, upload  # boto3: imported by the jobs that need it

        if options.storage_access_key_id is None or options.storage_secret_access_key is None:
            raise StorageAccessDenied("store=true needs storage_access_key_id and storage_secret_access_key; "
                                      "this job's credentials did not reach the worker. Send the request again.")
        assert options.storage_path is not None and options.storage_bucket is not None  # the options' rule
        destination = Destination(
            bucket=options.storage_bucket,
            # The time placeholders are the request's, so a job rendered again writes the same object.
            key=filled(options.storage_path, options.file_extension, reference=job.reference, url=options.url,
                       now=datetime.fromtimestamp(job.enqueued_at, UTC) if job.enqueued_at else None),
            access_key_id=options.storage_access_key_id, secret_access_key=options.storage_secret_access_key,
            endpoint=options.storage_endpoint or self.settings.store_endpoint or None,
            storage_class=options.storage_class, acl=options.storage_acl, reference=job.reference)
        try:  # refused by name here; the egress checks the address it connects to again
            asyncio.run_coroutine_threadsafe(self.policy.checked_address(destination.host), self.loop).result(30)
        except AddressNotAllowed as refused:
            raise StorageAccessDenied(
                f"storage_endpoint: {refused}; operators can open it with SCREENSHOT_ALLOWED_NETWORKS.") from None
        except (OSError, concurrent.futures.TimeoutError, NameNotResolved):
            raise StorageAccessDenied(f"storage_endpoint: {destination.host} does not resolve.") from None
        seconds = self.storage.seconds
        try:
            location = self._tried(job, lambda: within(
                min(seconds, job.deadline - time.time()),
                lambda: upload(destination, output.body, output.content_type, self.egress_url, seconds),
                f"bucket {destination.bucket!r} at {destination.host}"))
        except StorageError as error:
            raise StorageAccessDenied(f"Could not upload to bucket {destination.bucket!r}: {error}.") from None
        result.stored_copy = StoredCopy(destination.bucket, destination.key,
                                        location if options.storage_return_location else None)

    def _store_slices(self, job: JobRequest, options: TakeOptions, output: Output, result: JobResult) -> None:
        """full_page_slices: each band the capture cut from the final image stored, and a manifest of them (the
        API serves it with fresh links: its /slices route)."""
        for index, piece in enumerate(output.slices):
            key = self._put(job, object_key(job.organisation, f"{job.reference}-slice-{index}",
                                            options.file_extension), piece.body, output.content_type)
            result.slices.append(StoredSlice(index, piece.offset_y, piece.width, piece.height, key))
        result.slices_manifest = self._put(
            job, object_key(job.organisation, f"{job.reference}-slices", "json"),
            orjson.dumps({"slices": result.slices}), "application/json")

    def _ask_vision(self, job: JobRequest, options: TakeOptions, output: Output) -> str:
        """The provider's completion for the final image; the key was opened with the job, is used once here."""
        assert options.vision_provider_api_key is not None
        image, media_type = output.body, options.output_format.media_type
        if not options.output_format.vision:  # not an input the providers take
            image, media_type = imaging.to_png(output.body), FORMATS["png"].media_type
        settings = self.settings
        return vision.ask(
            image, media_type, options.vision_prompt, options.vision_max_tokens,
            api_key=options.vision_provider_api_key,
            base_url=settings.vision_base_url, model=settings.vision_model, deadline=job.deadline,
            timeout=settings.vision_timeout, schema=options.vision_response_schema)

    def _store(self, job: JobRequest, capture: Capture, options: TakeOptions, result: JobResult) -> None:
        key = capture.store_key or object_key(job.organisation, job.reference, options.file_extension)
        result.storage_key = self._put(job, key, result.body, result.content_type)
        if not capture.keep_body:
            result.body = b""

    def _put(self, job: JobRequest, key: str, body: bytes, content_type: str) -> str:
        try:
            self._tried(job, lambda: self.storage.until(job.deadline).put(key, body, content_type))
        except StorageError as error:
            raise StorageAccessDenied(f"Could not store the result: {error}") from None
        return key

    def _tried(self, job: JobRequest, call: Callable[[], T]) -> T:
        """`call()` (a store's): once for a job a client waits on; for an async job again after a store's
        transient failure, waiting a little longer each time, until the job's deadline."""
        wait = FIRST_RETRY_SECONDS
        while True:
            try:
                return call()
            except StorageError as error:
                again = isinstance(job.answer, Recorded) and error.transient and time.time() + wait < job.deadline
                log.warning("job %s: %s%s", job.reference, error, f"; trying again in {wait:g} s" if again else "")
                if not again:
                    raise
                self.storage.failures["retried"] += 1
                time.sleep(wait)
                wait = min(wait * 2, LAST_RETRY_SECONDS)
