"""Pages with real consent libraries on them, and pages that only look like cookie banners.

Every page is the same article (`ARTICLE`): a page of the "Daily Crumb" with text, coloured blocks and
a footer, three screens tall. A consent page adds one library from the npm registry, set up the way
its README shows (tests/consent/package.json pins them; `make test` installs them into
tests/consent/node_modules, they are never committed). A look-alike page adds something a heuristic
could take for a banner and must leave alone.

With `block_cookie_banners`, a consent page must capture exactly like the bare article: the banner
gone, whatever it left behind (backdrop, blur, scroll lock, reserved padding) undone. A look-alike
page must capture exactly like itself without the option.
"""

from __future__ import annotations

import mimetypes
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

NODE_MODULES = Path(__file__).parents[2] / "consent" / "node_modules"
LIBRARY_URL = "/consent/npm/"

ARTICLE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>The Daily Crumb</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { margin: 0; font: 16px/1.5 "Liberation Sans", sans-serif; color: #222; background: #fff; }
.masthead { background: #23395d; color: #fff; padding: 16px 32px; font-size: 22px; }
main { padding: 8px 32px; max-width: 880px; }
.block { height: 260px; margin: 24px 0; background: linear-gradient(90deg, #c0392b, #2e86c1); }
.block.alt { background: linear-gradient(90deg, #27ae60, #f1c40f); }
.page-footer { background: #eee; padding: 24px 32px; color: #555; }
</style>
{head}</head><body>
<div class="masthead">The Daily Crumb</div>
<main>
<h1>How the harbour got its lighthouse back</h1>
<p>For forty years the lighthouse on the north pier stood dark. Volunteers spent three winters taking
the lamp room apart, cleaning each prism by hand and rebuilding the clockwork that turns the lens.</p>
<div class="block"></div>
<p>The keeper's logbooks, found in a cellar in town, told them how the light was run: wicks trimmed at
dusk, the weights wound every four hours, and the glass polished each morning before breakfast.</p>
<div class="block alt"></div>
<p>On the night it was lit again, the whole town walked out along the pier. Ships in the bay answered
with their horns, and the light swept over the water as it had in their grandparents' time.</p>
<div class="block"></div>
<p>The harbour board has promised to keep it burning. A small museum in the keeper's cottage now shows
the logbooks, the old wicks and a photograph of the last keeper with his dog on the gallery.</p>
<div class="block alt"></div>
<p>Visitors can climb the tower on Saturdays from April to October.</p>
</main>
<div class="page-footer">The Daily Crumb &middot; Harbour Street 4 &middot; Letters to the editor welcome</div>
<script>{probe}</script>{body}</body></html>"""

# Keeps <html data-scroll-lock> up to date (read back with format=html): "none", or how scrolling is
# locked. It changes no pixel; it follows every change to the document, styles included.
SCROLL_LOCK_PROBE = """(() => {
  const update = () => {
    const locks = [document.documentElement, document.body].map((element) => {
      const style = getComputedStyle(element);
      return style.position === 'fixed' ? 'fixed' : ['hidden', 'clip'].includes(style.overflowY) ? 'overflow' : '';
    }).filter(Boolean);
    const value = locks.length ? locks.join(' ') : 'none';
    if (document.documentElement.dataset.scrollLock !== value) document.documentElement.dataset.scrollLock = value;
  };
  new MutationObserver(update).observe(document.documentElement, { attributes: true, childList: true,
    subtree: true, characterData: true });
  update();
})();"""


@dataclass(frozen=True)
class ConsentPage:
    """One library in one style, as its README sets it up."""

    name: str
    package: str  # the npm package, for the report
    style: str  # "bar" or "modal"
    head: str = ""
    body: str = ""
    # What of the library styles the page itself (a style sheet that sets the body's font): a visitor who
    # refused sees it too, so the page is compared with the article with this in its head.
    keeps: str = ""


def _lib(path: str) -> str:
    return LIBRARY_URL + path


_OSANO = (f'<link rel="stylesheet" href="{_lib("cookieconsent/build/cookieconsent.min.css")}">'
          f'<script src="{_lib("cookieconsent/build/cookieconsent.min.js")}"></script>')
_OSANO_PALETTE = '"palette": {"popup": {"background": "#000"}, "button": {"background": "#f1d600"}}'

_VANILLA = (f'<link rel="stylesheet" href="{_lib("vanilla-cookieconsent/dist/cookieconsent.css")}">'
            f'<script src="{_lib("vanilla-cookieconsent/dist/cookieconsent.umd.js")}"></script>')
_VANILLA_TEXT = """language: { default: 'en', translations: { en: {
  consentModal: { title: 'We use cookies', description: 'Cookies help us understand how the site is read.',
    acceptAllBtn: 'Accept all', acceptNecessaryBtn: 'Reject all', showPreferencesBtn: 'Manage preferences' },
  preferencesModal: { title: 'Cookie preferences', acceptAllBtn: 'Accept all', acceptNecessaryBtn: 'Reject all',
    savePreferencesBtn: 'Save preferences', sections: [{ title: 'Analytics', linkedCategory: 'analytics' }] } } } },
categories: { necessary: { enabled: true, readOnly: true }, analytics: {} },
onConsent: ({ cookie }) => { document.documentElement.dataset.consent = cookie.categories.join(' '); }"""

_KLARO_SERVICES = """services: [{ name: 'analytics', title: 'Web analytics', purposes: ['analytics'] }],
translations: { en: { purposes: { analytics: 'Analytics' } } }"""

_TARTEAUCITRON = f"""<script src="{_lib("tarteaucitronjs/tarteaucitron.js")}"></script>
<script>tarteaucitron.init({{ privacyUrl: "", bodyPosition: "bottom", hashtag: "#tarteaucitron",
  cookieName: "tarteaucitron", orientation: "{{orientation}}", groupServices: false, showDetailsOnClick: true,
  serviceDefaultState: "wait", showAlertSmall: false, cookieslist: false, showIcon: true,
  iconPosition: "BottomRight", adblocker: false, DenyAllCta: true, AcceptAllCta: true, highPrivacy: true,
  handleBrowserDNTRequest: false, removeCredit: false, moreInfoLink: true, useExternalCss: false,
  mandatory: true, mandatoryCta: true }});
(tarteaucitron.job = tarteaucitron.job || []).push('gtag');</script>"""

_OREJIME = (f'<link rel="stylesheet" href="{_lib("orejime/dist/orejime-standard.css")}">'
            '<script>window.orejimeConfig = { privacyPolicyUrl: "/privacy", {extra}'
            'purposes: [{ id: "analytics", title: "Analytics", cookies: ["_ga"] }] };</script>'
            f'<script src="{_lib("orejime/dist/orejime-standard-en.js")}"></script>')

_COOKIEBANNER = f'<script id="cookiebanner" src="{_lib("cookiebanner/dist/cookiebanner.min.js")}" {{attrs}}></script>'

CONSENT_PAGES = [
    ConsentPage("osano-bottom-bar", "cookieconsent", "bar", body=f"""{_OSANO}<script>
window.cookieconsent.initialise({{ {_OSANO_PALETTE}, "position": "bottom" }});</script>"""),
    ConsentPage("osano-top-pushdown", "cookieconsent", "bar", body=f"""{_OSANO}<script>
window.cookieconsent.initialise({{ {_OSANO_PALETTE}, "position": "top", "static": true }});</script>"""),
    ConsentPage("osano-opt-out-floating", "cookieconsent", "bar", body=f"""{_OSANO}<script>
window.cookieconsent.initialise({{ {_OSANO_PALETTE}, "position": "bottom-left", "type": "opt-out" }});</script>"""),
    ConsentPage("vanilla-bar", "vanilla-cookieconsent", "bar", body=f"""{_VANILLA}<script>
CookieConsent.run({{ guiOptions: {{ consentModal: {{ layout: 'bar', position: 'bottom' }} }}, {_VANILLA_TEXT} }});
</script>"""),
    ConsentPage("vanilla-box-blocking", "vanilla-cookieconsent", "modal", body=f"""{_VANILLA}<script>
CookieConsent.run({{ disablePageInteraction: true,
  guiOptions: {{ consentModal: {{ layout: 'box', position: 'middle center' }} }}, {_VANILLA_TEXT} }});
</script>"""),
    ConsentPage("klaro-notice", "klaro", "bar", body=f"""<script>var klaroConfig = {{ {_KLARO_SERVICES} }};</script>
<script defer src="{_lib("klaro/dist/klaro.js")}"></script>"""),
    ConsentPage("klaro-must-consent", "klaro", "modal", body=f"""<script>var klaroConfig = {{ mustConsent: true,
{_KLARO_SERVICES} }};</script><script defer src="{_lib("klaro/dist/klaro.js")}"></script>"""),
    ConsentPage("tarteaucitron-bottom", "tarteaucitronjs", "bar",
                head=_TARTEAUCITRON.replace("{orientation}", "bottom")),
    ConsentPage("tarteaucitron-middle", "tarteaucitronjs", "modal",
                head=_TARTEAUCITRON.replace("{orientation}", "middle")),
    ConsentPage("orejime-banner", "orejime", "bar", head=_OREJIME.replace("{extra}", "")),
    ConsentPage("orejime-forced-modal", "orejime", "modal", head=_OREJIME.replace("{extra}", "forceModal: true, ")),
    ConsentPage("cookies-eu-banner", "cookies-eu-banner", "bar", body=f"""<style>
#cookies-eu-banner {{ position: fixed; left: 0; right: 0; bottom: 0; background: #333; color: #fff;
  padding: 12px 32px; }}</style>
<template id="cookies-eu-banner-template"><div id="cookies-eu-banner">
By continuing to visit this site, you accept the use of cookies by Google Analytics for statistical purposes.
<button id="cookies-eu-reject">Reject</button> <button id="cookies-eu-accept">Accept</button></div></template>
<script src="{_lib("cookies-eu-banner/dist/cookies-eu-banner.global.js")}"></script>
<script>CookiesEuBanner.createCookiesBanner({{ onAccept: () => {{}} }});</script>"""),
    ConsentPage("bootstrap-cookie-alert", "bootstrap-cookie-alert", "bar",
                head=f'<link rel="stylesheet" href="{_lib("bootstrap-cookie-alert/cookiealert.css")}">',
                body=f"""<div class="alert text-center cookiealert" role="alert">
<b>Do you like cookies?</b> &#x1F36A; We use cookies to ensure you get the best experience on our website.
<a href="https://cookiesandyou.com/" target="_blank">Learn more</a>
<button type="button" class="btn btn-primary btn-sm acceptcookies">I agree</button></div>
<script src="{_lib("bootstrap-cookie-alert/cookiealert.js")}"></script>"""),
    ConsentPage("porsche-web-component", "@porscheofficial/cookie-consent-banner", "bar", body=f"""<script type="module"
src="{_lib("@porscheofficial/cookie-consent-banner/dist/cookie-consent-banner/cookie-consent-banner.esm.js")}"></script>
<cookie-consent-banner btn-label-accept-and-continue="Agree and continue"
  btn-label-only-essential-and-continue="Continue with technically required cookies only"
  btn-label-persist-selection-and-continue="Save selection and continue"
  btn-label-select-all-and-continue="Select all and continue"
  content-settings-description="You can decide which cookies are used by selecting the respective options below.">
  We use cookies and similar technologies to provide certain features, enhance the user experience and deliver
  content that is relevant to your interests. By clicking on "Agree and continue", you declare your consent to
  the use of the aforementioned cookies.
</cookie-consent-banner>"""),
    ConsentPage("cookie-notice", "cookie-notice", "bar", body=f"""<script
src="{_lib("cookie-notice/dist/cookie.notice.min.js")}"></script>
<script>new cookieNoticeJS({{ learnMoreLinkEnabled: true, learnMoreLinkHref: '/privacy' }});</script>"""),
    ConsentPage("vanilla-cloud", "vanilla-cookieconsent", "bar", body=f"""{_VANILLA}<script>
CookieConsent.run({{ guiOptions: {{ consentModal: {{ layout: 'cloud inline', position: 'bottom center' }} }},
  {_VANILLA_TEXT} }});</script>"""),
    ConsentPage("osano-edgeless-top-right", "cookieconsent", "bar", body=f"""{_OSANO}<script>
window.cookieconsent.initialise({{ {_OSANO_PALETTE}, "theme": "edgeless", "position": "top-right",
  "type": "opt-in" }});</script>"""),
    ConsentPage("tarteaucitron-top", "tarteaucitronjs", "bar", head=_TARTEAUCITRON.replace("{orientation}", "top")),
    ConsentPage("tarteaucitron-popup", "tarteaucitronjs", "modal",
                head=_TARTEAUCITRON.replace("{orientation}", "popup")),
    ConsentPage("cookiebanner-bar", "cookiebanner", "bar", body=_COOKIEBANNER.replace("{attrs}", "")),
    ConsentPage("cookiebanner-mask", "cookiebanner", "modal",
                body=_COOKIEBANNER.replace("{attrs}", 'data-position="top" data-mask="true"')),
    # A site's own banner, no library: a script reserves room for it with the body's padding.
    ConsentPage("own-bar-reserving-room", "(none)", "bar", body="""<div id="consent" style="position:fixed;top:0;
left:0;right:0;background:#102030;color:#fff;padding:14px 32px">We use cookies to measure how our articles are
read. <button>Accept</button> <button>Reject</button></div><script>
setTimeout(() => { document.body.style.paddingTop = document.getElementById('consent').offsetHeight + 'px'; }, 0);
</script>"""),
    # A site's own banner that its framework renders again on every animation frame (a new element each
    # time), locking the scroll with a class: whenever the capture happens, a banner has just come.
    ConsentPage("own-bar-every-frame", "(none)", "bar", body="""<style>.consent-open { overflow: hidden }</style>
<script>
const renderConsent = () => {
  document.getElementById('consent')?.remove();
  document.body.insertAdjacentHTML('beforeend', '<div id="consent" style="position:fixed;left:0;right:0;bottom:0;'
    + 'background:#203040;color:#fff;padding:14px 32px">We use cookies to measure how our articles are read. '
    + '<button>Accept</button> <button>Reject</button></div>');
  document.documentElement.classList.add('consent-open');
  requestAnimationFrame(renderConsent);
};
addEventListener('load', () => requestAnimationFrame(renderConsent));
</script>"""),
    # A site's own banner in the markup from the start, shown only by a style sheet that a script asks for
    # after load and that comes late (LATE_STYLE_SECONDS): no element changes when it becomes a banner.
    ConsentPage("own-bar-late-style", "(none)", "bar", body="""<div id="consent" style="display:none">We use
cookies to measure how our articles are read. <button>Accept</button> <button>Reject</button></div><script>
addEventListener('load', () => document.head.insertAdjacentHTML('beforeend',
  '<link rel="stylesheet" href="/consent/late-style.css">'));
</script>"""),
    # Held out: added once the libraries above passed, and checked the same way (they passed as they are).
    ConsentPage("cookie-consent-js", "cookie-consent-js", "modal", body=f"""<link rel="stylesheet"
href="{_lib("cookie-consent-js/src/cookie-consent.css")}">
<script src="{_lib("cookie-consent-js/src/cookie-consent.js")}"></script>
<script>const cookieConsent = new CookieConsent({{
  contentUrl: "{_lib("cookie-consent-js/cookie-consent-content")}", privacyPolicyUrl: "/privacy" }});</script>"""),
    ConsentPage("cookie-though", "cookie-though", "bar", body=f"""<script src="{_lib("cookie-though/dist/lib.js")}">
</script><script>CookieThough.init({{
  policies: [{{ id: 'essential', label: 'Strictly necessary cookies', category: 'essential',
                description: 'We need these cookies for the site to work.' }},
             {{ id: 'statistics', label: 'Statistics', category: 'statistics',
                description: 'They tell us how our articles are read.' }}],
  essentialLabel: 'Always on', permissionLabels: {{ accept: 'Accept', acceptAll: 'Accept all', decline: 'Decline' }},
  cookiePreferenceKey: 'cookie-preferences',
  header: {{ title: 'cookie though?', subTitle: "You're probably fed up with these banners...",
             description: 'Everybody wants to show their best side, and so do we. That is why we use cookies.' }},
  cookiePolicy: {{ url: '/cookies', label: 'Read the full cookie declaration' }}, customizeLabel: 'Customize' }});
</script>"""),
    # Its README's set-up, but `implicit: false`: with `true` it accepts on the visitor's first scroll, and
    # a full-page capture scrolls.
    ConsentPage("gdpr-cookie-notice", "gdpr-cookie-notice", "bar", body=f"""<link rel="stylesheet"
href="{_lib("gdpr-cookie-notice/dist/style.css")}"><script src="{_lib("gdpr-cookie-notice/dist/script.js")}"></script>
<script>gdprCookieNotice({{ locale: 'en', timeout: 500, expiration: 30, implicit: false, statement: '/cookies',
  performance: ['JSESSIONID'], analytics: ['ga'], marketing: ['SSID'] }});</script>"""),
    # Held out, second round (after the first round's fixes).
    # Its README imports it through a bundler; `module` stands in for the bundler's CommonJS wrapper.
    ConsentPage("js-cookie-consent", "js-cookie-consent", "modal",
                keeps=f'<link rel="stylesheet" href="{_lib("js-cookie-consent/dist/css/styles.css")}">',
                body=f"""<script>var module = {{ exports: {{}} }};</script>
<script src="{_lib("js-cookie-consent/dist/index.js")}"></script><script>module.exports({{
  cookieName: 'cookiesGDPR', message: 'We use cookies to provide you with the best experience of our articles.',
  options: [{{ title: 'Essential cookies', description: 'These cookies are strictly necessary.', key: 'essential',
               disabled: true, checked: true }},
            {{ title: 'Marketing analytics cookies', description: 'These cookies tell us how the site is read.',
               key: 'analytics', disabled: false, checked: false }}],
  learnMore: '/cookies', expiration: 7, color: '#6666ff' }});</script>"""),
    ConsentPage("simple-cookie-consent", "simple-cookie-consent", "bar", body=f"""<link rel="stylesheet"
href="{_lib("simple-cookie-consent/dist/simple-cookie-consent.min.css")}">
<script src="{_lib("simple-cookie-consent/dist/simple-cookie-consent.min.js")}"></script>
<script>const SimpleCookieConsent = window["simple-cookie-consent.js"];
new (SimpleCookieConsent.default || SimpleCookieConsent)();</script>"""),
    ConsentPage("eu-cookie-law", "eu-cookie-law", "bar", body=f"""<script
src="{_lib("eu-cookie-law/dist/index.js")}"></script>"""),
]


@dataclass(frozen=True)
class LookAlike:
    """Something fixed or modal that a heuristic could take for a cookie banner."""

    name: str
    body: str


LOOK_ALIKES = [
    LookAlike("recipe-jump-bar", """<div style="position:fixed;left:0;right:0;bottom:0;background:#7b3f00;color:#fff;
padding:12px 32px;font-size:18px">Chocolate chip cookies &middot; <a href="#recipe" style="color:#ffd">Jump to
recipe</a> <button>Print</button></div>"""),
    LookAlike("cookie-tin-promo", """<div style="position:fixed;left:0;right:0;top:0;background:#c0392b;color:#fff;
padding:10px 32px;text-align:center">Free delivery on cookie tins this week only!
<button>Shop now</button> <button aria-label="Close">&times;</button></div>"""),
    LookAlike("footer-cookie-policy-link", """<div style="position:fixed;left:0;right:0;bottom:0;background:#222;
color:#ccc;padding:8px 32px;font-size:13px">&copy; 2026 The Daily Crumb &middot; <a href="/privacy"
style="color:#ccc">Privacy</a> &middot; <a href="/cookies" style="color:#ccc">Cookie policy</a> &middot;
<a href="/terms" style="color:#ccc">Terms</a></div>"""),
    LookAlike("newsletter-inline", """<div role="dialog" aria-label="Newsletter" style="margin:24px 32px;border:2px
solid #23395d;padding:16px">Get the Daily Crumb in your inbox. We never share your address and use no tracking
cookies. <button>Subscribe</button></div>"""),
    LookAlike("cookie-recipe-modal", """<div role="dialog" aria-modal="true" style="position:fixed;left:50%;top:50%;
transform:translate(-50%,-50%);width:420px;background:#fff8e7;border:3px solid #7b3f00;padding:24px;
box-shadow:0 4px 24px rgba(0,0,0,.3)"><h2>Grandma's cookies</h2><p>Cream the butter and sugar, add the eggs,
then fold in flour and chocolate. Bake 12 minutes.</p><button>Accept challenge</button>
<button>Next recipe</button></div>"""),
    # A site's fixed tab bar: its navigation, though it links to "Your privacy" and "Settings".
    LookAlike("app-tab-bar", """<div style="position:fixed;left:0;right:0;bottom:0;background:#eef;padding:8px 32px">
<nav style="display:flex;gap:24px"><a href="/">Home</a><a href="/recipes">Recipes</a><a href="/saved">Saved</a>
<a href="/privacy">Your privacy</a><a href="/settings">Settings</a></nav></div>"""),
    # Bars in the page's flow, at its top and its bottom, that are not consent banners.
    LookAlike("personal-data-notice", """<script>document.body.insertAdjacentHTML('afterbegin',
'<div style="background:#fffbe6;padding:8px 32px">New: download your personal data from your account page. '
+ '<button>Got it</button></div>');</script>"""),
    LookAlike("div-footer-privacy", """<div style="background:#ddd;padding:12px 32px">Your privacy matters to us.
<a href="/privacy">Privacy settings</a> <a href="/terms">Terms</a> <a href="/contact">Contact</a></div>"""),
]


def page(head: str = "", body: str = "") -> bytes:
    return (ARTICLE.replace("{head}", head).replace("{probe}", SCROLL_LOCK_PROBE).replace("{body}", body)
            .encode())


@cache
def _library_files() -> dict[str, Path]:
    """Every file of the corpus's packages by its URL path (none when the corpus is not installed)."""
    if not NODE_MODULES.is_dir():
        return {}
    return {LIBRARY_URL + str(path.relative_to(NODE_MODULES)): path
            for path in NODE_MODULES.rglob("*") if path.is_file() and ".bin" not in path.parts}


def _file(path: Path) -> tuple[int, str, bytes]:
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind.endswith("javascript"):
        kind += "; charset=utf-8"
    return 200, kind, path.read_bytes()


LATE_STYLE_SECONDS = 0.8
LATE_STYLE = b"""#consent { display: block !important; position: fixed; left: 0; right: 0; bottom: 0;
  background: #203040; color: #fff; padding: 14px 32px }"""


def _late_style(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    time.sleep(LATE_STYLE_SECONDS)
    return 200, "text/css", LATE_STYLE


def routes() -> dict[str, Any]:
    html = "text/html; charset=utf-8"
    table: dict[str, Any] = {"/consent/article.html": lambda q: (200, html, page()),
                             "/consent/late-style.css": _late_style}
    for consent in CONSENT_PAGES:
        table[f"/consent/{consent.name}.html"] = (
            lambda c: lambda q: (200, html, page(c.keeps + c.head, c.body)))(consent)
        if consent.keeps:
            table[f"/consent/{consent.name}/without-banner.html"] = (
                lambda c: lambda q: (200, html, page(c.keeps)))(consent)
    for look_alike in LOOK_ALIKES:
        table[f"/consent/look-alike/{look_alike.name}.html"] = (
            lambda a: lambda q: (200, html, page(body=a.body)))(look_alike)
    for url, path in _library_files().items():
        table[url] = (lambda p: lambda q: _file(p))(path)
    return table
