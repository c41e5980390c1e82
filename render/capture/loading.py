"""Loading a job's page through the egress: its upstream proxy, and the navigation with the egress's refusals
said as such (a private address, a name that does not resolve), not as the host's error or a network failure."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.async_api import Response

from render.browser.tabs import Tab
from render.contract.errors import ErrorDetail, NameNotResolved, NetworkError, RequestNotValid
from render.contract.options import TakeOptions
from render.contract.request_params import country_proxy
from render.contract.timings import Stopwatch
from render.net.egress import EgressProxy
from render.net.policy import AddressNotAllowed, NetworkPolicy
from render.net.traffic import REFUSED_HEADER, Upstream
from render.page.navigation import check_host_status, load_source


async def upstream(options: TakeOptions, policy: NetworkPolicy) -> Upstream | None:
    """The job's upstream proxy: the caller's `proxy` (under the network policy) or the operator's
    proxy for `ip_country_code` (trusted: it is configuration); hosts of `proxy_bypass_hosts` are reached
    directly (still under the network policy)."""
    bypass = tuple(pattern.lower() for pattern in options.proxy_bypass_hosts)
    if options.proxy is not None:
        host, port, authorization = Upstream.parse(options.proxy)
        try:
            address = await policy.checked_address(host)
        except AddressNotAllowed as refused:
            raise RequestNotValid(f"proxy: {refused}.", [ErrorDetail("proxy", "address not allowed")]) from None
        return Upstream(host, str(address), port, authorization, bypass)
    country_url = country_proxy(options)
    if country_url is not None:
        host, port, authorization = Upstream.parse(country_url)
        return Upstream(host, str((await policy.resolve(host))[0]), port, authorization, bypass)
    return None


async def load(tab: Tab, options: TakeOptions, egress: EgressProxy | None, deadline: float, clock: Stopwatch
               ) -> Response | None:
    """Load the source; a navigation the egress stopped (a redirect to a private address, a name that
    does not resolve) is reported as such, not as the host's error or a generic network failure."""
    try:
        response = await load_source(tab.page, options, deadline, clock, check_status=False, refused_hosts=(
            (lambda: {refusal.host for refusal in egress.traffic(tab.listener).refusals}) if egress is not None
            else frozenset))
    except NetworkError:
        # An https navigation the egress refused fails its tunnel: the refusal says why.
        # Chromium may reach for other hosts meanwhile (an error page asks accounts.google.com): the
        # refusal of the page's own host explains the failure, else the first one (a redirect's target).
        refusals = egress.traffic(tab.listener).refusals if egress is not None else []
        host = urlsplit(options.url or "").hostname
        refusal = next((r for r in refusals if r.host == host), refusals[0] if refusals else None)
        if refusal is not None and refusal.kind == "unresolved":
            raise NameNotResolved(refusal.reason) from None
        if refusal is not None:
            raise NetworkError(f"Could not load {options.url or 'the page'}: {refusal.reason}.") from None
        raise
    if response is None:
        return None
    # A plain-http navigation the egress refused gets the egress's own answer, marked as such.
    marker = response.headers.get(REFUSED_HEADER)
    if marker == "unresolved":
        raise NameNotResolved(await response.text())
    if marker:
        raise NetworkError(f"Could not load {options.url}: {await response.text()}.")
    check_host_status(response, options)
    return response
