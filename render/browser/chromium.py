"""Debian's Chromium as a supervised process: its flags, its binary, how it is launched through Playwright,
and what the worker asks of it as a whole (its version, its memory, a memory-pressure signal)."""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from playwright.async_api import Browser, CDPSession, Playwright, async_playwright

from render.browser.trust import chromium_home
from render.settings import RenderSettings

log = logging.getLogger(__name__)
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
STOP_TIMEOUT_SECONDS = 10
# Playwright's driver is a Node process; V8's default young generation (16 MB semi-spaces) made it about
# 40 MB larger for no measurable speed. Only young garbage is bounded: the old generation must stay
# free to hold a large screenshot on its way through.
DRIVER_NODE_OPTIONS = "--max-semi-space-size=1"
# Chromium frees its caches (decoded images, fonts, tiles) on this signal; a page's JavaScript garbage stays.
MEMORY_PRESSURE = ("Memory.simulatePressureNotification", {"level": "critical"})

# Flags for a quiet, deterministic headless Chromium with no calls home. Feature switches are in the
# lists below: Chromium keeps only the last --disable-features (and --enable-features) it is given.
CHROMIUM_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--disable-gpu",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-dev-shm-usage",
    # Software compositing in the browser process instead of a GPU process of its own (no GPU here): one
    # process and about 10 MB less.
    "--in-process-gpu",
    # WebRTC sends UDP (STUN, TURN, media) straight from the renderer's sockets, around the egress proxy and
    # so around the network policy. With this policy it uses only what goes through the proxy (TURN over a
    # CONNECT tunnel, which the policy checks); measured: a page's STUN requests to loopback stopped.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    # navigator.webdriver is true under automation, and some pages and consent banners hide from such
    # visitors; a screenshot shows what people see.
    "--disable-blink-features=AutomationControlled",
]
# Playwright's own lists (its chromiumSwitches, version pinned in requirements.lock; a unit test checks they
# are still complete). Playwright puts them on the command line first, so ours, last, must repeat them.
PLAYWRIGHT_DISABLED_FEATURES = [
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding",
    "ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect", "TcpPortRandomizationWin",
    "OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch", "msForceBrowserSignIn",
    "msEdgeUpdateLaunchServicesPreferredVersion",
]
PLAYWRIGHT_ENABLED_FEATURES = ["CDPScreenshotNewSurface", "SkipListAccountsWithoutGaiaCookies"]
DISABLED_FEATURES = [
    *PLAYWRIGHT_DISABLED_FEATURES,
    # A new frame host, Blink frame and compositor for every document: much of a navigation's CPU, and a kept
    # page navigates twice a job (to its URL, then to about:blank).
    "RenderDocument",
    # Chromium's own spare renderer duplicates what the supervisor's prepared tab does, at a cost per job.
    "SpareRendererForSitePerProcess",
    # Headless Chromium also builds the omnibox's WebUI popups for every window: renderers nothing ever shows,
    # which keep memory.
    "WebUIOmniboxPopup", "WebUIOmniboxAimPopup", "WebUIOmniboxFullPopup",
]
# Without its sandbox (`--no-sandbox`), Chromium's zygotes (two processes that only fork renderers) and a
# network service process of its own isolate nothing: the network service runs in the browser process and
# renderers are started directly: less memory over the worker's processes, no slower. With the sandbox on, both
# stay as they are.
UNSANDBOXED_ARGS = ["--no-sandbox", "--no-zygote", "--enable-features=NetworkServiceInProcess2"]
# settings.chromium_low_memory. Smaller caches and a smaller JavaScript heap limit; the 4-bit tiles Chromium
# uses on low-end phones need 512 MB of RAM or less, so captures stay the same pixel for pixel.
LOW_MEMORY_ARGS = ["--enable-low-end-device-mode"]
FEATURE_SWITCHES = ("--disable-features=", "--enable-features=")


def chromium_arguments(extra: list[str], *, sandbox: bool = True, low_memory: bool = False) -> list[str]:
    """CHROMIUM_ARGS (with UNSANDBOXED_ARGS without the sandbox, LOW_MEMORY_ARGS in low-memory mode), then
    `extra` (the operator's), with every feature list merged into one switch each."""
    features = {FEATURE_SWITCHES[0]: list(DISABLED_FEATURES), FEATURE_SWITCHES[1]: list(PLAYWRIGHT_ENABLED_FEATURES)}
    args = []
    ours = [*CHROMIUM_ARGS, *([] if sandbox else UNSANDBOXED_ARGS), *(LOW_MEMORY_ARGS if low_memory else [])]
    for arg in [*ours, *extra]:
        switch = next((prefix for prefix in FEATURE_SWITCHES if arg.startswith(prefix)), None)
        if switch is None:
            args.append(arg)
        else:
            features[switch] += [name for name in arg[len(switch):].split(",") if name not in features[switch]]
    return [*args, *(switch + ",".join(names) for switch, names in features.items())]



# Debian's shell wrappers and the binaries they start.
DEBIAN_BINARIES = {
    Path("/usr/bin/chromium"): Path("/usr/lib/chromium/chromium"),
    Path("/usr/bin/chromium-headless-shell"): Path("/usr/lib/chromium/chromium-headless-shell"),
}


def private_bytes(pid: int) -> int:
    """Memory only `pid` holds (resident, not file-backed or shared), from /proc; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return 0
    return (int(fields[1]) - int(fields[2])) * PAGE_SIZE


def sandboxed(setting: str) -> bool:
    """Whether Chromium runs with its sandbox: `auto` means unless root, where Chromium refuses it."""
    if setting == "auto":
        return os.geteuid() != 0
    return setting == "on"


def chromium_binary(configured: str) -> str:
    """The Chromium executable to launch.

    Debian's /usr/bin/chromium is a shell wrapper that adds flags from /etc/chromium.d: it loads every
    installed extension (uBlock Origin among them, which would silently block content in every
    capture), turns on GPU rasterization and exports Google API keys. Captures must be deterministic,
    so the wrapper's own binary is launched directly, with only the flags set here (and the
    headless shell's wrapper is skipped too: one process less).
    """
    binary = DEBIAN_BINARIES.get(Path(configured))
    return str(binary) if binary is not None and binary.exists() else configured


class Chromium:
    """One Chromium, launched through Playwright with the service's flags; a `Process` for the supervisor."""

    name = "chromium"

    def __init__(self, settings: RenderSettings, proxy_url: str | None = None) -> None:
        self.settings = settings
        self.proxy_url = proxy_url
        self.browser: Browser | None = None
        self._playwright: Playwright | None = None
        self._session: tuple[Browser, CDPSession] | None = None
        # Chromium's own home, holding the extra certificate authorities when some are configured.
        self._home: Path | None = None
        if settings.ca_certificates:
            self._home = Path(tempfile.mkdtemp(prefix="screenshot-chromium-home-"))
            try:
                chromium_home(Path(settings.ca_certificates), self._home)
            except BaseException:
                shutil.rmtree(self._home, ignore_errors=True)
                raise

    @property
    def version(self) -> str:
        """Full version of the running Chromium ("156.0.8078.79")."""
        return self.browser.version if self.browser else "0.0.0.0"

    @property
    def major(self) -> str:
        """Major version of the running Chromium, for user agents that match it."""
        return self.version.split(".")[0]

    def started(self) -> bool:
        return self.browser is not None

    def alive(self) -> bool:
        return self.browser is not None and self.browser.is_connected()

    async def start(self) -> None:
        """Launch Chromium (and Playwright's driver the first time)."""
        if self._playwright is None:
            os.environ.setdefault("NODE_OPTIONS", DRIVER_NODE_OPTIONS)  # the driver inherits the environment
            self._playwright = await async_playwright().start()
        sandbox = sandboxed(self.settings.chromium_sandbox)
        args = chromium_arguments(shlex.split(self.settings.chromium_args), sandbox=sandbox,
                                  low_memory=self.settings.chromium_low_memory)
        if self.proxy_url is not None:
            # Everything through the egress proxy, loopback included (Chromium bypasses it by default).
            args += [f"--proxy-server={self.proxy_url}", "--proxy-bypass-list=<-loopback>"]
        try:
            self.browser = await self._playwright.chromium.launch(
                executable_path=chromium_binary(self.settings.chromium_path),
                args=args,
                chromium_sandbox=sandbox,
                env={**os.environ, "HOME": str(self._home)} if self._home else None,
            )
        except Exception:
            if sandbox:
                log.error("Chromium did not start with its sandbox on. In a container the sandbox needs user "
                          "namespaces: run the worker with deploy/seccomp-chromium.json (Docker: --security-opt "
                          "seccomp=deploy/seccomp-chromium.json) or see docs/operating.md, Deploying; as a last resort "
                          "set SCREENSHOT_CHROMIUM_SANDBOX=off.")
            raise

    async def stop(self) -> None:
        """Close Chromium now."""
        browser, self.browser = self.browser, None
        if browser is None:
            return
        try:
            await asyncio.wait_for(browser.close(), STOP_TIMEOUT_SECONDS)
        except Exception:
            log.warning("chromium did not close cleanly", exc_info=True)

    async def close(self) -> None:
        """Stop Chromium and Playwright's driver, and remove Chromium's home."""
        await self.stop()
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)

    async def session(self) -> CDPSession:
        """A CDP session with the running Chromium itself (not one of its pages); never starts one."""
        browser = self.browser
        if browser is None or not browser.is_connected():
            raise RuntimeError("chromium is not running")
        if self._session is None or self._session[0] is not browser:
            self._session = (browser, await browser.new_browser_cdp_session())
        return self._session[1]

    async def private_memory(self) -> int:
        """Bytes of private memory Chromium's processes hold now."""
        processes = await (await self.session()).send("SystemInfo.getProcessInfo")
        return sum(private_bytes(process["id"]) for process in processes["processInfo"])

    async def relieve_memory(self) -> None:
        """Have Chromium free its caches (a critical memory-pressure signal)."""
        await (await self.session()).send(*MEMORY_PRESSURE)
