"""Settings of the render workers (environment, prefix SCREENSHOT_)."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PROXY_VARIABLE = re.compile(r"^SCREENSHOT_PROXY_([A-Z]{2})$")
# The one setting that is a family of variables: its name and meaning in the settings reference.
PROXY_SETTING = ("SCREENSHOT_PROXY_&lt;CC&gt;", "Upstream proxy (`http://user:password@host:port/`) for "
                 "`ip_country_code=<cc>`, e.g. `SCREENSHOT_PROXY_DE`.")
REGION_LABEL = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")


def configured_proxies() -> dict[str, str]:
    """`SCREENSHOT_PROXY_<CC>` variables: country code (lower case) to upstream proxy URL."""
    return {match.group(1).lower(): value for name, value in os.environ.items()
            if (match := PROXY_VARIABLE.match(name)) and value}


def region_labels(value: str) -> list[str]:
    """`us-east, eu-west` as labels; ValueError naming one that is not lower-case letters, digits and dashes."""
    labels = [label.strip() for label in value.split(",") if label.strip()]
    for label in labels:
        if not REGION_LABEL.match(label):
            raise ValueError(f"{label!r} is not a region label (lower-case letters, digits and dashes, at most 32)")
    return labels


def offered_regions() -> list[str]:
    """`SCREENSHOT_REGIONS`: the regions `servers_region` may name (checked at start-up)."""
    return region_labels(os.environ.get("SCREENSHOT_REGIONS", ""))


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_overrides(text: str) -> dict[str, list[IPAddress]]:
    """`host=ip,host=ip1|ip2`: fixed answers (with several, successive lookups take them in turn)."""
    overrides: dict[str, list[IPAddress]] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        host, sep, addresses = entry.partition("=")
        if not sep or not host.strip():
            raise ValueError(f"entry {entry!r} is not host=ip (or host=ip1|ip2)")
        try:
            overrides[host.strip().lower()] = [ipaddress.ip_address(a.strip()) for a in addresses.split("|")]
        except ValueError:
            raise ValueError(f"entry {entry!r}: {addresses!r} is not an IP address (or ip1|ip2)") from None
    return overrides


_HOST_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?$")


def parse_allowed(text: str) -> tuple[list[IPNetwork], set[str]]:
    """`10.1.0.0/16,intranet.example`: networks and exact host names opened despite the policy."""
    networks: list[IPNetwork] = []
    hosts: set[str] = set()
    for entry in filter(None, (part.strip() for part in text.split(","))):
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
            continue
        except ValueError:
            pass
        # Not a network: a host name, unless it was meant as an address (digits and dots, a prefix length).
        if "/" in entry or ":" in entry or re.fullmatch(r"[\d.]+", entry) or not _HOST_NAME.match(entry.lower()):
            raise ValueError(f"entry {entry!r} is neither a network (10.1.0.0/16, 192.0.2.7, 2001:db8::/32) "
                             "nor a host name")
        hosts.add(entry.lower())
    return networks, hosts


# The installed build's version (certificates and HAR files name it).
SERVICE_VERSION = version("screenshot-service")

def _private_key(path: str, fits: Callable[[object], bool], wanted: str) -> None:
    """A key file setting checked at start: readable as an unencrypted PKCS#8 PEM private key, of the kind `fits`
    accepts (`wanted` says which, and how to make one). Nothing to check when unset."""
    if not path:
        return
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(f"cannot read an unencrypted PKCS#8 PEM private key from it ({error})") from None
    if not fits(key):
        raise ValueError(f"the key must be {wanted}")


class RenderSettings(BaseSettings):
    """How workers run Chromium and bound each capture."""

    model_config = SettingsConfigDict(env_prefix="SCREENSHOT_", extra="ignore")

    chromium_path: str = Field(
        "/usr/bin/chromium-headless-shell", description=(
        "Chromium executable: Debian's headless shell (package chromium-headless-shell, the same Chromium without "
        "window and UI: half the memory, contexts in a tenth of the time); `/usr/bin/chromium` (the full browser) "
        "also works. No browser is ever downloaded."))
    chromium_args: str = Field("", description=(
        "Extra Chromium flags, shell-quoted. `--disable-features=` and `--enable-features=` lists are merged into "
        "the service's own (Chromium keeps only the last of each)."))
    chromium_sandbox: Literal["auto", "on", "off"] = Field(
        "auto", description=(
        "Chromium's sandbox: `auto` is on unless the worker runs as root (Chromium cannot sandbox as root), `on`, "
        "`off`. In a container it needs user namespaces ([deploying](operating.md#deploying))."))
    reuse_contexts: bool = Field(
        True, description=(
        "A worker keeps the page of an organisation's job for its next job: after the job the page is unloaded "
        "(about:blank, navigated from the page so its renderer stays), its history reset, its sessionStorage and "
        "window.name emptied, and the cookies, storage (localStorage, IndexedDB, Cache API, ...) and HTTP cache of "
        "every origin it reached, and its permissions, wiped. A job that changed the page's own settings (device or "
        "other emulation, blocking, headers, click/hover) leaves a new page in the same context instead. Another "
        "organisation's job never gets that context. Saves Chromium a page (and often a renderer) per job. `false`: "
        "a new context per job."))
    interactive_reserve: float = Field(
        0.25, ge=0, le=0.9, description=(
        "The share of the workers kept free for interactive captures (those a client waits for: sync `/take` and "
        "`/animate`, `/compare`) while they keep coming (one within the last 10 s): batch work (async captures, bulk "
        "entries, monitor runs) may then occupy the rest only. Likewise for quick captures (those not heavy: a full "
        "page, a PDF, an archive, a delay, vision, a recording): while they keep coming, heavy and batch work together "
        "may occupy the rest only. At least one worker when there are two or more, never all of them; 0 lets batch "
        "and heavy work take every worker. See [sharing one deployment](operating.md#sharing-one-deployment)."))
    pin_batch_work: bool = Field(
        True, description=(
        "While that reserve is in force, a worker renders batch work on the machine's CPUs but the reserve's share "
        "of them (one at least, never all; on 2 CPUs, batch on the second only): the captures a client waits for "
        "keep those CPUs to themselves. Any other job, and batch work when no interactive capture comes, runs on "
        "every CPU. CPU affinity of the worker's threads, Chromium's included: no privilege needed. Where the worker "
        "may raise a thread's scheduling back (CAP_SYS_NICE: root outside a container; a container given "
        "`SYS_NICE`), that batch work's Chromium and driver also run in the idle scheduling class (`SCHED_IDLE`: "
        "only on CPU time no other work wants) for the first second of each such job, then in the ordinary class "
        "again (a machine busy with other work delays a batch job by that second at most), and in the ordinary class "
        "for any other job. Where the kernel groups threads by session (autogroup: most distributions' kernels, "
        "outside a container), each session gets an equal share whatever its threads' class, and Chromium runs in a "
        "session of its own: for that same first second the worker also sets that session's nice to 19, and back to "
        "0 after it and for any other job (no privilege needed). Without either, affinity alone. `false`: every job "
        "on every CPU, in the ordinary class, its session at nice 0."))
    kept_pages: int = Field(
        2, ge=1, le=16, description=(
        "With SCREENSHOT_REUSE_CONTEXTS, how many organisations' pages a worker keeps at once (the most recently "
        "served, each in its own context). The fair hand-off serves organisations in turn ([sharing one "
        "deployment](operating.md#sharing-one-deployment)), so a worker switches between them: each page kept saves "
        "a new context (about 130 ms) when its organisation comes back, for some 20-40 MiB of Chromium's memory. 1 "
        "to 16."))
    consent_rules_dir: str = Field(
        "", json_schema_extra={"shown_default": "the checkout's `deploy/npm/node_modules/@duckduckgo/autoconsent`"},
        description=(
        "Where autoconsent, the rules of `block_cookie_banners`, is installed ([cookie "
        "banners](using.md#cookie-banners))."))
    jobs_per_browser: int = Field(500, ge=1, description="Chromium is restarted after this many jobs.")
    worker_slots: int = Field(
        1, ge=1, le=8, description=(
        "Jobs a worker process renders at once, each in a browser context of its own on the worker's one Chromium. "
        "Each slot counts as a worker in the hand-off, /readyz and /metrics. A slot beyond the first costs a page "
        "and its renderer instead of a whole worker (its Python, driver and Chromium): less memory per job, but a "
        "browser crash fails every slot's job (each runs once more on the new one), a restart after "
        "SCREENSHOT_JOBS_PER_BROWSER waits for every slot's job, and batch work is not kept off the interactive "
        "reserve's CPUs (SCREENSHOT_PIN_BATCH_WORK) since the slots share the browser. 1 to 8."))
    chromium_low_memory: bool = Field(
        True, description=(
        "Chromium's low-end-device mode: smaller caches, tile and image-decode budgets, and a JavaScript heap limit "
        "of about 290 MB per page instead of 3.7 GB. Captures are the same pixel for pixel (tested); a worker needs "
        "about 60 MiB less under load. `false` for pages that need more JavaScript memory (over the limit a page "
        "crashes: `internal_application_error`)."))
    chromium_memory_mb: int = Field(
        160, ge=0, description=(
        "After a job, when Chromium's private memory (summed over its processes, from /proc) is above this many MiB "
        "for each job slot (SCREENSHOT_WORKER_SLOTS), the worker has Chromium free its caches and the kept page "
        "collect the job's JavaScript garbage, in the background before the next job (a few ms; heavy pages leave "
        "100-250 MB behind). `0`: never."))
    regions: str = Field(
        "", description=(
        "Region labels of this deployment's workers (`us-east,eu-west`) that `servers_region` may name; set on the "
        "API and the workers. Empty: `servers_region` is refused."))
    worker_regions: str | None = Field(
        None, json_schema_extra={"shown_default": "all of SCREENSHOT_REGIONS"}, description=(
        "The regions this worker serves, besides jobs that name none (a worker in Frankfurt: `eu-central`)."))
    store_endpoint: str = Field(
        "", json_schema_extra={"shown_default": "empty (Amazon S3)"}, description=(
        "S3-compatible endpoint that `store=true` uploads to when a request gives no `storage_endpoint` (the "
        "company's MinIO, say). Credentials always come from the request."))
    allow_private_networks: bool = Field(
        False, description="Let captures reach loopback and private addresses (development, tests).")
    allowed_networks: str = Field(
        "", description=(
        "CIDRs and exact host names captures may reach despite the policy (`10.1.0.0/16,intranet.example`)."))
    @field_validator("regions", "worker_regions")
    @classmethod
    def _region_labels(cls, value: str | None) -> str | None:
        if value is not None:
            region_labels(value)
        return value

    @field_validator("allowed_networks")
    @classmethod
    def _allowed_networks(cls, value: str) -> str:
        parse_allowed(value)
        return value

    @field_validator("certify_key_file")
    @classmethod
    def _certify_key_file(cls, value: str) -> str:
        _private_key(value, lambda key: isinstance(key, Ed25519PrivateKey),
                     "an Ed25519 key (openssl genpkey -algorithm ed25519)")
        return value

    @field_validator("archive_key_file")
    @classmethod
    def _archive_key_file(cls, value: str) -> str:
        _private_key(value, lambda key: isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp384r1",
                     "an ECDSA P-384 key (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384)")
        return value

    @field_validator("resolve_overrides")
    @classmethod
    def _resolve_overrides(cls, value: str) -> str:
        parse_overrides(value)
        return value

    @model_validator(mode="after")
    def _country_proxies(self) -> RenderSettings:
        for country, url in configured_proxies().items():
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname:
                raise ValueError(f"SCREENSHOT_PROXY_{country.upper()}: {url.split('@')[-1]!r} is not an http proxy "
                                 "URL (http://user:password@host:port/)")
        return self

    @model_validator(mode="after")
    def _served_regions_offered(self) -> RenderSettings:
        unknown = [label for label in self.served_regions() if label not in region_labels(self.regions)]
        if unknown:
            raise ValueError(f"worker_regions names {', '.join(unknown)}, not in SCREENSHOT_REGIONS "
                             f"({self.regions or 'empty'}); set both")
        return self

    def served_regions(self) -> list[str]:
        """The regions whose jobs this worker takes (besides those naming no region)."""
        return region_labels(self.regions if self.worker_regions is None else self.worker_regions)

    ca_certificates: str = Field(
        "", description=(
        "PEM file of extra certificate authorities Chromium trusts, for internal sites signed by a private CA "
        "(certificate checks stay on; needs `certutil`, Debian `libnss3-tools`)."))
    resolve_overrides: str = Field(
        "", description=(
        "`host=ip,host=ip`: names resolved to fixed addresses before the policy applies (split-horizon DNS, tests)."))
    max_image_pixels: int = Field(
        100_000_000, ge=1, description="Largest output image; beyond it `resulting_image_too_large`.")
    png_compression: Literal["fast", "small"] = Field(
        "fast", description=(
        "How a PNG result is compressed (lossless either way: the same pixels). `fast`: zlib's fastest level without "
        "row filters, about a quarter to half faster to encode for somewhat larger files (bench/README.md has the "
        "figures). `small`: zlib's default level with filters. For much smaller PNGs at some loss, `image_quality` "
        "makes a palette PNG."))
    max_result_bytes: int = Field(
        200 * 1024 * 1024, ge=1, description="Largest output in bytes; beyond it `resulting_image_too_large`.")
    deadline_grace_seconds: float = Field(
        5.0, ge=0, description="Time a job that overran its timeout gets to clean up before Chromium is restarted.")
    hidden_page_wait: float = Field(
        5.0, ge=0, description=(
        "Longest a capture waits, in seconds, for a page that hides itself while it loads (an A/B test's "
        "anti-flicker snippet: its root or body transparent or hidden until the test's script arrives or the "
        "snippet's own timer gives up); never more than half the time left. 0: no wait (the blank-capture guard "
        "still retakes a one-colour shot once)."))
    vision_base_url: str = Field(
        "https://api.openai.com/v1", description=(
        "OpenAI-compatible API for `vision_*` requests (`POST {base}/chat/completions`, the caller's key as bearer "
        "token)."))
    vision_model: str = Field("gpt-4o-mini", description="Model named in vision requests.")
    vision_timeout: float = Field(60.0, gt=0, description=(
        "Seconds a vision request may take (it also has to fit in the capture's `timeout`)."))
    har_max_bytes: int = Field(
        25 * 1024 * 1024, ge=64 * 1024, description=(
        "Largest HAR file of `har=true`, in bytes (at least 65536): past it the bodies of `har_content=embed` are "
        "left out, largest first, then the latest entries; the HAR's comment says what was left out."))
    archive_max_bytes: int = Field(
        50 * 1024 * 1024, ge=64 * 1024, description=(
        "Most bytes of bodies in the web archive of `archive=true` and `format=wacz` (at least 65536): past it "
        "bodies are left out, largest first, their records marked `WARC-Truncated`, and the answer's "
        "`x-service-archive-truncated` says how many."))
    archive_key_file: str = Field(
        "", json_schema_extra={"shown_default": "none: generated once, kept in Redis"}, description=(
        "ECDSA P-384 private key (PKCS#8 PEM, unencrypted) that signs the WACZ of `archive=true` and `format=wacz`; "
        "every API and worker reads the same file. Unset: the first process that needs one makes it and keeps it in "
        "Redis (`config:archive_key`). `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out "
        "archive.pem` makes one; `GET /v1/screenshot/archive/public-key` publishes its public half."))
    certify_key_file: str = Field(
        "", json_schema_extra={"shown_default": "none: generated once, kept in Redis"}, description=(
        "Ed25519 private key (PKCS#8 PEM, unencrypted) that `certify=true` signs with; every API and worker reads "
        "the same file. Unset: the first process that needs one makes it and keeps it in Redis "
        "(`config:certify_key`); back it up, or set a file, so that certificates stay verifiable against the same "
        "key. `openssl genpkey -algorithm ed25519 -out certify.pem` makes one. A file that is not an Ed25519 key "
        "stops start-up."))
    job_secret: str = Field(
        "", json_schema_extra={"shown_default": "generated by `run`"}, description=(
        "Secret the API and workers share to hand callers' credentials (vision keys, and `cookies`, `headers`, "
        "`authorization`, `proxy` and credentials in the `url`) to the worker sealed (AES-GCM), so none is stored in "
        "Redis. `run` makes one per start; set the same value on API and workers when they run separately (unset "
        "there: requests with those parameters are refused)."))
