"""markdown_content=main: the article of a page as Markdown, measured on saved real article pages whose
article text is known (tests/material/articles, from Scrapinghub's article extraction benchmark): the words of each
Markdown against the article's, as precision and recall, whole page and main content side by side."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import Org
from tests.support.pages.watch import ARTICLES, ARTICLES_DIR
from tests.support.site import Site

pytestmark = pytest.mark.browser
TRUTH = {name: entry["articleBody"] for name, entry in
         json.loads((ARTICLES_DIR / "ground-truth.json").read_text()).items()}


def words(text: str) -> Counter[str]:
    """Lowercase words of a text or a Markdown document (its link and image targets are not words of it)."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)
    text = re.sub(r"\]\([^)]*\)", "] ", text)
    return Counter(re.findall(r"[^\W_]+", text.lower()))


def scores(markdown: str, truth: str) -> tuple[float, float]:
    """(precision, recall) of the Markdown's words against the article's."""
    found, wanted = words(markdown), words(truth)
    common = sum((found & wanted).values())
    return common / max(1, sum(found.values())), common / max(1, sum(wanted.values()))


def markdown(client: httpx.Client, org: Org, site: Site, path: str, **params: str) -> str:
    response = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url(path),
                                                          "format": "markdown", **params})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/markdown")
    return response.text


def test_the_main_content_is_the_article_and_the_whole_page_is_not(client: httpx.Client, org: Org,
                                                                     site: Site) -> None:
    def both(name: str) -> tuple[str, str]:
        path = f"/articles/{name}.html"
        return markdown(client, org, site, path), markdown(client, org, site, path, markdown_content="main")

    with ThreadPoolExecutor(2) as pool:
        taken = dict(zip(ARTICLES, pool.map(both, ARTICLES), strict=True))
    measured = {name: (scores(whole, TRUTH[name]), scores(main, TRUTH[name])) for name, (whole, main) in taken.items()}
    mean = [sum(pair[mode][part] for pair in measured.values()) / len(measured) for mode in (0, 1) for part in (0, 1)]
    sys.stderr.write("\nmarkdown_content: precision/recall whole page " + f"{mean[0]:.3f}/{mean[1]:.3f}, main "
                     f"{mean[2]:.3f}/{mean[3]:.3f}; per page " + json.dumps(
                         {name[:8]: [round(value, 3) for pair in result for value in pair]
                          for name, result in measured.items()}) + "\n")
    whole_precision, whole_recall, main_precision, main_recall = mean
    assert main_recall >= whole_recall - 0.01, measured  # the article is all there
    assert main_precision >= 0.85 and main_precision >= whole_precision + 0.2, measured  # and little else
    for name, (whole, main) in taken.items():
        assert len(main) < len(whole), name
        assert main.startswith("# "), (name, main[:200])  # led by its title


def test_an_article_hidden_until_a_script_runs_is_still_found(client: httpx.Client, org: Org, site: Site) -> None:
    name = "b0cf2bbf0192315eec95ede9c59bbf4ae58699275739d590edc24b012e3e8800"  # pv-magazine: a plain news page
    path = f"/articles/{name}-hidden.html"
    whole = markdown(client, org, site, path)
    main = markdown(client, org, site, path, markdown_content="main")
    assert scores(whole, TRUTH[name])[1] < 0.05  # nothing of it is visible
    precision, recall = scores(main, TRUTH[name])
    assert recall >= 0.8 and precision >= 0.8, (precision, recall, main[:500])


def test_the_content_artefact_can_be_the_article_too(client: httpx.Client, org: Org, site: Site) -> None:
    name = ARTICLES[1]
    answer = client.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": site.url(f"/articles/{name}.html"), "response_type": "json",
        "metadata_content": "true", "metadata_content_format": "markdown", "markdown_content": "main"})
    assert answer.status_code == 200, answer.text
    content = httpx.get(answer.json()["content"]["url"], timeout=30).text
    assert scores(content, TRUTH[name])[0] >= 0.8


@pytest.mark.parametrize("params", [{"markdown_content": "main"}, {"markdown_content": "main", "format": "html"},
                                    {"markdown_content": "article", "format": "markdown"}])
def test_markdown_content_is_checked(client: httpx.Client, org: Org, site: Site, params: dict[str, str]) -> None:
    answer = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url("/colours.html"),
                                                        **params})
    assert answer.status_code == 400
    assert [detail["field"] for detail in answer.json()["error_details"]] == ["markdown_content"]
