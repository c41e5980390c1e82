"""Test pages imitating chat and social widgets as the real vendors ship them (cookie banners: pages/consent.py).

Each widget's page loads the script its snippet loads (same host and path, served locally over
HTTPS through the test resolver and the test CA) and contains the markup that script renders (same
ids and classes), as a red box at the widget's own place on a white page. Scrolling is locked the
way a chat widget locks it. The requests the site saw and the
pixels of the capture tell whether the platform was blocked and hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Imitation:
    name: str
    script: str  # the script URL of the platform's snippet, without scheme; a leading '/' is first-party
    markup: str  # what the script renders; `{style}` marks the visible element
    lock: str = ""  # the class the widget puts on <html> or <body>, e.g. "body.chat-open"


CHATS = [
    Imitation("Intercom", "widget.intercom.io/widget/abc123de",
              '<div id="intercom-container"><div class="intercom-app"><iframe class="intercom-launcher-frame" '
              'name="intercom-launcher-frame" title="Intercom live chat" style="{style}"></iframe></div></div>'),
    Imitation("Drift", "js.driftt.com/include/1700000000000/abcdefgh1234.js",
              '<div id="drift-frame-controller" class="drift-frame-controller" style="{style}"></div>'),
    Imitation("Crisp", "client.crisp.chat/l.js",
              '<div class="crisp-client"><div id="crisp-chatbox" style="{style}"></div></div>'),
    Imitation("Zendesk", "static.zdassets.com/ekr/snippet.js?key=0a1b2c3d-4e5f",
              '<div><iframe id="launcher" title="Opens a widget where you can find more information" '
              'style="{style}"></iframe></div>'),
    Imitation("HubSpot", "js.usemessages.com/conversations-embed.js",
              '<div id="hubspot-messages-iframe-container" class="widget-align-right" style="{style}">'
              '<iframe title="Chat Widget"></iframe></div>'),
    Imitation("Tawk-to", "embed.tawk.to/5f0c1b2a3d4e5f6a7b8c9d0e/default",
              '<div class="widget-visible"><iframe title="chat widget" style="{style}"></iframe></div>'),
    Imitation("LiveChat", "cdn.livechatinc.com/tracking.js",
              '<div id="chat-widget-container" style="{style}"><iframe id="chat-widget" '
              'title="LiveChat chat widget"></iframe></div>'),
    Imitation("Olark", "static.olark.com/jsclient/loader.js",
              '<div id="olark-wrapper"><div id="olark-container" style="{style}"></div></div>'),
    Imitation("Tidio", "code.tidio.co/abcdefghijklmnopqrstuvwxyz012345.js",
              '<div id="tidio-chat"><iframe id="tidio-chat-iframe" title="Tidio Chat" style="{style}"></iframe></div>'),
    Imitation("Freshchat", "wchat.freshchat.com/js/widget.js",
              '<div id="fc_frame" style="{style}"><iframe id="fc_widget" title="Chat"></iframe></div>'),
    Imitation("Gorgias", "config.gorgias.chat/bundle-loader/01ABCDEFGH",
              '<div id="gorgias-chat-container"><iframe id="chat-button" title="Gorgias live chat messenger" '
              'style="{style}"></iframe></div>'),
    Imitation("Help-Scout", "beacon-v2.helpscout.net/",
              '<div id="beacon-container"><div class="BeaconFabButtonFrame" style="{style}"><iframe '
              'title="Help Scout Beacon - Open"></iframe></div></div>'),
    Imitation("Chatwoot", "app.chatwoot.com/packs/js/sdk.js",
              '<div class="woot--bubble-holder"><a class="woot-widget-bubble woot-elements--right" '
              'style="{style}"></a></div>'),
    Imitation("Smartsupp", "www.smartsuppchat.com/loader.js?",
              '<div id="smartsupp-widget-container"><div style="{style}"><iframe id="chat-application">'
              '</iframe></div></div>'),
    Imitation("JivoChat", "code.jivosite.com/widget/AbCdEf1234",
              '<jdiv><jdiv class="globalClass_ET" style="{style}"></jdiv></jdiv>'),
    Imitation("Userlike", "userlike-cdn-widgets.s3-eu-west-1.amazonaws.com/0a1b2c3d4e5f.js",
              '<div id="userlike"><div id="userlike-tab" style="{style}"></div></div>'),
    Imitation("Facebook-chat", "connect.facebook.net/en_US/sdk/xfbml.customerchat.js",
              '<div class="fb-customerchat" page_id="1234567890"><span><iframe data-testid="bubble_iframe" '
              'title="Chat" style="{style}"></iframe></span></div>'),
]

# Social widgets: the element each vendor's script renders (or the markup its snippet asks the page to
# write, which the script turns into a button).
SOCIALS = [
    Imitation("Facebook", "connect.facebook.net/en_US/sdk.js",
              '<div class="fb-like" data-href="https://publisher.test/" data-layout="button_count" style="{style}">'
              '</div>'),
    Imitation("X", "platform.twitter.com/widgets.js",
              '<a class="twitter-share-button" href="https://twitter.com/intent/tweet" style="{style}">Post</a>'),
    Imitation("LinkedIn", "platform.linkedin.com/in.js",
              '<span class="IN-widget" style="{style}"><button>Share</button></span>'),
    Imitation("Pinterest", "assets.pinterest.com/js/pinit.js",
              '<span data-pin-log="button_pinit" style="{style}"></span>'),
    Imitation("Tumblr", "assets.tumblr.com/share-button.js",
              '<a class="tumblr-share-button" href="https://www.tumblr.com/share" style="{style}"></a>'),
    Imitation("VK", "vk.com/js/api/openapi.js", '<div id="vk_like" style="{style}"></div>'),
    Imitation("AddThis", "s7.addthis.com/js/300/addthis_widget.js",
              '<div class="addthis_inline_share_toolbox" style="{style}"></div>'),
    Imitation("ShareThis", "platform-api.sharethis.com/js/sharethis.js",
              '<div class="sharethis-inline-share-buttons" style="{style}"></div>'),
    Imitation("AddToAny", "static.addtoany.com/menu/page.js",
              '<div class="a2a_kit a2a_kit_size_32" style="{style}"><a class="a2a_button_x"></a></div>'),
    Imitation("Shareaholic", "cdn.shareaholic.net/assets/pub/shareaholic.js",
              '<div class="shareaholic-canvas" data-app="share_buttons" style="{style}"></div>'),
]

KINDS = {"chats": CHATS, "socials": SOCIALS}
LOCKS = {"chats"}  # the kinds whose widgets lock scrolling (their pages start locked)
TLS_HOSTS = sorted({urlsplit("//" + imitation.script).hostname or "" for imitations in KINDS.values()
                    for imitation in imitations} - {""})
VIEWPORT = (600, 400)
RED, GREEN, WHITE = (255, 0, 0), (0, 255, 0), (255, 255, 255)

# Run as `scripts`: paints the probe green when <html> and <body> scroll, red when either is locked.
LOCK_PROBE_SCRIPT = (
    "const locked = [document.documentElement, document.body].some((element) => {"
    " const style = getComputedStyle(element);"
    " return style.overflowY === 'hidden' || style.overflowY === 'clip' || style.position === 'fixed'; });"
    " document.getElementById('lock-probe').style.background = locked ? '#ff0000' : '#00ff00';")
PROBE_POINT = (300, 380)


# Banners no rule knows, next to fixed and sticky elements that are not banners (they must stay).
HEURISTICS = """<!DOCTYPE html><html><head><title>heuristics</title><style>
html, body { margin: 0; background: #ffffff; }
#lock-probe { position: fixed; left: 0; top: 300px; width: 40px; height: 20px; background: #000; }
</style></head><body style="overflow:hidden">
<header style="position:sticky;top:0;height:50px;background:#0000ff;color:#0000ff">Logo
  <nav><a href="/pricing">Pricing</a> <a href="/signup">Sign up</a></nav></header>
<div class="promo" style="position:fixed;top:50px;left:0;width:100%;height:30px;background:#00ffff;color:#00ffff">
  Free shipping this week. <a href="/signup">Sign up</a> for more deals.</div>
<article style="height:3000px"><h1>Baking</h1><p>Our favourite cookie recipes.</p></article>
<div class="x7-shade" style="position:fixed;inset:0;background:rgba(0,0,0,0.5)"></div>
<div role="dialog" aria-modal="true"
     style="position:fixed;left:200px;top:130px;width:200px;height:100px;background:#ff00ff;color:#ff00ff">
  Join our newsletter <input type="email" placeholder="you@example.com"> <button>Subscribe</button></div>
<div class="x7-notice" style="position:fixed;bottom:0;left:0;width:100%;height:60px;background:#ff0000;color:#ff0000">
  We use cookies to improve your experience. <button>OK</button></div>
<div class="to-top" style="position:fixed;right:10px;bottom:70px;width:40px;height:40px;background:#ffff00"></div>
<div id="lock-probe"></div>
</body></html>"""
HEURISTICS_POINTS = {  # what each point shows once the banners are gone
    "header": ((300, 10), (0, 0, 255)), "promo bar": ((300, 65), (0, 255, 255)),
    "back-to-top button": ((570, 310), (255, 255, 0)), "cookie bar": ((300, 380), WHITE),
    "newsletter dialog and its shade": ((300, 180), WHITE), "scrolling": ((20, 310), GREEN),
}


def cell(index: int) -> tuple[int, int]:
    """Top-left corner of platform `index`'s red box; its centre is 40 px right and down."""
    return (index % 6) * 100 + 10, (index // 6) * 100 + 10


def page(kind: str, only: str | None, port: int) -> str:
    """The page of one platform (`only`) or of all platforms of a kind."""
    imitations = KINDS[kind]
    chosen = [(index, imitation) for index, imitation in enumerate(imitations) if only in (None, imitation.name)]
    lock_classes: dict[str, list[str]] = {"html": [], "body": []}
    parts = []
    for index, imitation in chosen:
        left, top = cell(index)
        style = (f"position:fixed;left:{left}px;top:{top}px;width:80px;height:80px;margin:0;padding:0;"
                 "border:0;background:#ff0000;color:#ff0000;overflow:hidden")
        parts.append(imitation.markup.replace("{style}", style))
        first_party = imitation.script.startswith("/")
        source = imitation.script if first_party else f"https://{_with_port(imitation.script, port)}"
        parts.append(f'<script src="{source}" async></script>')
        if imitation.lock:
            element, name = imitation.lock.split(".")
            lock_classes[element].append(name)
    locks = "".join(f".{name} {{ overflow: hidden; }}" for names in lock_classes.values() for name in names)
    inline_lock = "" if any(lock_classes.values()) or kind not in LOCKS else ' style="overflow:hidden"'
    return (f'<!DOCTYPE html><html class="{" ".join(lock_classes["html"])}"><head><title>{kind}</title><style>'
            f"html, body {{ margin: 0; background: #ffffff; }} {locks}"
            "#lock-probe { position: fixed; left: 0; top: 360px; width: 100%; height: 40px; background: #000; }"
            "#content { height: 3000px; }"
            f'</style></head><body class="{" ".join(lock_classes["body"])}"{inline_lock}>'
            f'<div id="content"></div><div id="lock-probe"></div>{"".join(parts)}</body></html>')


def _with_port(script: str, port: int) -> str:
    host, _, rest = script.partition("/")
    return f"{host}:{port}/{rest}"


def script_paths() -> set[str]:
    return {urlsplit("//" + imitation.script if not imitation.script.startswith("/") else imitation.script).path
            for imitations in KINDS.values() for imitation in imitations}


def routes(port: int) -> dict[str, Any]:
    """The pages (`/annoyances/<kind>.html?only=Name`) and every platform's script path."""

    def page_route(kind: str) -> Any:
        return lambda q: (200, "text/html; charset=utf-8", page(kind, q.get("only", [None])[0], port).encode())

    table: dict[str, Any] = {f"/annoyances/{kind}.html": page_route(kind) for kind in KINDS}
    table["/annoyances/heuristics.html"] = lambda q: (200, "text/html; charset=utf-8", HEURISTICS.encode())
    for path in script_paths():
        table[path] = lambda q: (200, "application/javascript", b"/* the platform would render its UI here */")
    return table


def requested(log: list[tuple[str, dict[str, str]]], imitation: Imitation) -> bool:
    """Whether the site received the request for the platform's script."""
    parts = urlsplit(imitation.script if imitation.script.startswith("/") else "//" + imitation.script)
    host = parts.hostname
    return any(path == parts.path and (host is None or headers.get("host", "").split(":")[0] == host)
               for path, headers in list(log))
