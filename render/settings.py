"""Settings of the render workers (environment, prefix SCREENSHOT_)."""

from __future__ import annotations

import ipaddress
import os
import re
from importlib.metadata import version
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PROXY_VARIABLE = re.compile(r"^SCREENSHOT_PROXY_([A-Z]{2})$")
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

class RenderSettings(BaseSettings):
    """How workers run Chromium and bound each capture."""

    model_config = SettingsConfigDict(env_prefix="SCREENSHOT_", extra="ignore")

    chromium_path: str = Field(
        "/usr/bin/chromium-headless-shell", description="Chromium executable: Debian's headless shell (package "
        "chromium-headless-shell, the same Chromium without the browser's window and UI: half the memory and "
        "twice as fast to open a context as /usr/bin/chromium, which also works). No browser is ever "
        "downloaded.")
    chromium_args: str = Field("", description="Extra Chromium flags, space-separated (shell quoting). "
                               "--disable-features= and --enable-features= lists are merged into the service's own.")
    chromium_sandbox: Literal["auto", "on", "off"] = Field(
        "auto", description="Chromium's sandbox: auto is on unless the worker runs as root (Chromium cannot "
        "sandbox as root). In a container it needs user namespaces: see README, Deploying.")
    reuse_contexts: bool = Field(
        True, description="Keep the page between jobs of the same organisation: after a job it is unloaded, "
        "its history reset and the cookies, storage, sessionStorage and cache of every origin it reached and "
        "its permissions wiped; a job that changed the page's settings (device, emulation, blocking, "
        "headers) leaves a new page in the same context. Saves Chromium a page (or context) per job. Off: "
        "a new context per job.")
    interactive_reserve: float = Field(
        0.25, ge=0, le=0.9, description="The share of the workers kept free for interactive captures (those a "
        "client waits for) while such captures keep coming (one within the last 10 s): batch work (async "
        "captures, bulk entries, monitor runs) may then occupy the rest only. At least one worker when there are "
        "two or more, never all of them. 0: batch may take every worker.")
    pin_batch_work: bool = Field(
        True, description="While the interactive reserve is in force (interactive captures keep coming), a worker "
        "renders batch work (async captures, bulk entries, monitor runs) on the machine's CPUs but the reserve's "
        "share of them (one at least, never all): the captures a client waits for keep those CPUs to themselves "
        "(CPU affinity, which needs no privilege). Any other job, and batch work when no interactive capture "
        "comes, runs on every CPU. Off: every job on every CPU.")
    kept_pages: int = Field(
        2, ge=1, le=16, description="With reuse_contexts, how many organisations' pages a worker keeps at once "
        "(the most recently served; each its own context). The fair hand-off serves organisations in turn, so "
        "a worker switches between them: keeping the page of each of the last few saves a new context (about "
        "130 ms) at every switch, for some 20-40 MiB of Chromium's memory per page kept.")
    consent_rules_dir: str = Field(
        "", description="Where DuckDuckGo's autoconsent (npm @duckduckgo/autoconsent, the rules of "
        "block_cookie_banners) is installed. Empty: deploy/npm/node_modules/@duckduckgo/autoconsent of the "
        "checkout, where `make` installs the version deploy/npm/package.json pins (the container image sets "
        "this to its own copy). Without it, block_cookie_banners only hides banners on evidence.")
    jobs_per_browser: int = Field(500, ge=1, description="Restart Chromium after this many jobs.")
    chromium_low_memory: bool = Field(
        True, description="Chromium's low-end-device mode: smaller caches, tile and image-decode budgets, and a "
        "JavaScript heap of about 290 MB per page instead of 3.7 GB. Captures are the same pixel for pixel "
        "(tested); a worker needs about 60 MB less under load. Turn it off for pages that need more JavaScript "
        "memory (they crash: internal_application_error).")
    chromium_memory_mb: int = Field(
        160, ge=0, description="After a job, when Chromium's private memory (summed over its processes) is above "
        "this many MiB, the worker has Chromium free its caches (a memory-pressure signal) and the kept page "
        "collect the job's JavaScript garbage, in the background before the next job (a few ms). Heavy pages "
        "leave 100-250 MB that the next page rarely needs. 0: never.")
    regions: str = Field(
        "", description="Region labels this deployment's workers are labelled with, comma-separated "
        "(us-east,eu-west): a request's servers_region must name one (else request_not_valid, naming these) and "
        "only workers serving it take the job. Requests without servers_region go to any worker. Set it on "
        "the API and on the workers. Empty: servers_region is refused.")
    worker_regions: str | None = Field(
        None, description="The regions of SCREENSHOT_REGIONS this worker serves, besides the jobs that name "
        "none (a worker in Frankfurt: eu-central). Unset: every region of SCREENSHOT_REGIONS (one host).")
    store_endpoint: str = Field(
        "", description="The S3-compatible endpoint store=true uploads to when a request gives no "
        "storage_endpoint (the company's MinIO, say; the hosted API's dashboard setting). Empty: Amazon S3. "
        "Credentials always come from the request.")
    allow_private_networks: bool = Field(
        False, description="Let captures reach loopback and private addresses (development, tests).")
    allowed_networks: str = Field(
        "", description="CIDRs and host names captures may reach despite the private-network policy.")
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
        if value:
            try:
                key = serialization.load_pem_private_key(Path(value).read_bytes(), password=None)
            except (OSError, ValueError, TypeError) as error:
                raise ValueError(f"cannot read an unencrypted PKCS#8 PEM private key from it ({error})") from None
            if not isinstance(key, Ed25519PrivateKey):
                raise ValueError("the key must be an Ed25519 key (openssl genpkey -algorithm ed25519)")
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
        "", description="PEM file of extra certificate authorities Chromium trusts (internal sites signed by "
        "a private CA); needs certutil (Debian: libnss3-tools).")
    resolve_overrides: str = Field(
        "", description="host=ip,host=ip: names resolved to fixed addresses before the policy applies.")
    max_image_pixels: int = Field(
        100_000_000, ge=1, description="Largest output image in pixels; beyond: resulting_image_too_large.")
    png_compression: Literal["fast", "small"] = Field(
        "fast", description="How Chromium compresses a PNG it sends as the result. PNG is lossless: the pixels "
        "are the same either way. fast: zlib's fastest level, no row filters (a 1280x1024 capture of a flat page "
        "takes about 35 ms instead of 46 and weighs 46 KB instead of 25; of a photo-heavy page 66 ms instead of "
        "129 for 3% more bytes). small: zlib's default level with filters.")
    max_result_bytes: int = Field(
        200 * 1024 * 1024, ge=1, description="Largest output in bytes; beyond: resulting_image_too_large.")
    deadline_grace_seconds: float = Field(
        5.0, ge=0, description="Extra time a job gets to clean up after its timeout before Chromium is "
        "restarted.")
    hidden_page_wait: float = Field(
        5.0, ge=0, description="Longest a capture waits, in seconds, for a page that hides itself while it loads "
        "(an A/B test's anti-flicker snippet: its root or body transparent or hidden until the test's script "
        "arrives or the snippet's own timer, often 4 s, gives up); never more than half the time left.")
    vision_base_url: str = Field(
        "https://api.openai.com/v1", description="OpenAI-compatible API that `vision_*` requests are sent to "
        "(POST {base}/chat/completions).")
    vision_model: str = Field("gpt-4o-mini", description="Model named in vision requests.")
    vision_timeout: float = Field(60.0, gt=0, description="Seconds a vision request may take (within the "
                                  "capture's timeout).")
    har_max_bytes: int = Field(
        25 * 1024 * 1024, ge=64 * 1024, description="Largest HAR file of har=true, in bytes: past it the bodies "
        "(har_content=embed) are left out, largest first, then the latest entries; the HAR's comment says so.")
    certify_key_file: str = Field(
        "", description="Ed25519 private key (PKCS#8 PEM) that certify=true signs with; every API and worker needs "
        "the same file. Empty: one is generated once and kept in Redis (back it up, or set a file, to verify old "
        "certificates against the same key). `openssl genpkey -algorithm ed25519 -out certify.pem` makes one.")
    job_secret: str = Field(
        "", description="Secret shared by the API and the workers to pass callers' vision keys without "
        "storing them (`run` generates one; set it when API and workers run separately).")
