import os
import pytest
from tests.integration.test_consent import image, take
from tests.plain import differing_pixels
pytestmark = pytest.mark.browser
NAMES = os.environ.get("DEBUG_NAMES", "").split(",")
@pytest.mark.parametrize("name", NAMES)
def test_debug(client, org, site, name):
    url = site.url(f"/consent/{name}.html")
    for delay in ("0", "1"):
        im = image(client, org, url, full_page="true", block_cookie_banners="true", delay=delay)
        im.write_to_file(f"/tmp/shots/dbg-{name}-{delay}.png")
    image(client, org, site.url("/consent/article.html"), full_page="true").write_to_file("/tmp/shots/article-full.png")
