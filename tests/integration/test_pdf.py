"""PDF as complete as Gotenberg's: custom sheets, the page's CSS size, scale, page ranges, header and
footer templates, tagged PDF with an outline, document metadata. Checked on the files themselves: poppler's
pdfinfo and pdftotext, qpdf --check, and pikepdf for the structure tree, outline and XMP metadata."""

from __future__ import annotations

import glob
import io
import re
import subprocess
from pathlib import Path

import httpx
import pikepdf
import pytest

from tests.conftest import Org
from tests.support.site import Site

pytestmark = pytest.mark.browser
POINTS_PER_MM = 72 / 25.4
CHAPTERS = "".join(f"<h2>Chapter {n}</h2>" + "<p>Lorem ipsum dolor sit amet.</p>" * 40 for n in range(1, 4))
BOOK = f"<!DOCTYPE html><html><head><title>The Book</title></head><body><h1>The Book</h1>{CHAPTERS}</body></html>"


def pdf(client: httpx.Client, org: Org, **params: object) -> bytes:
    response = client.post("/v1/screenshot/take", json={"access_key": org.access_key, "format": "pdf", **params})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/pdf"
    return response.content


def info(data: bytes, tmp_path: Path) -> dict[str, str]:
    """pdfinfo's fields, after qpdf --check found the file sound."""
    path = tmp_path / "out.pdf"
    path.write_bytes(data)
    checked = subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    output = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in output.splitlines())}


def page_texts(data: bytes, tmp_path: Path) -> list[str]:
    path = tmp_path / "text.pdf"
    path.write_bytes(data)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout
    return text.split("\f")[:-1]


def size_mm(found: dict[str, str]) -> tuple[float, float]:
    width, height = re.findall(r"[\d.]+", found["Page size"])[:2]
    return float(width) / POINTS_PER_MM, float(height) / POINTS_PER_MM


def test_a_custom_sheet_scale_and_page_ranges(client: httpx.Client, org: Org, tmp_path: Path) -> None:
    sheet = {"html": BOOK, "pdf_width": "100mm", "pdf_height": "150mm"}
    printed = pdf(client, org, **sheet)
    whole = info(printed, tmp_path)
    assert size_mm(whole) == pytest.approx((100, 150), abs=0.5)
    pages = int(whole["Pages"])
    assert pages >= 4
    assert int(info(pdf(client, org, **sheet, pdf_scale=0.5), tmp_path)["Pages"]) < pages
    ranged = pdf(client, org, **sheet, pdf_page_ranges="2-3")
    assert int(info(ranged, tmp_path)["Pages"]) == 2
    assert page_texts(ranged, tmp_path) == page_texts(printed, tmp_path)[1:3]  # pages 2 and 3 of the whole


def test_the_page_s_css_size_wins_when_preferred(client: httpx.Client, org: Org, tmp_path: Path) -> None:
    page = "<style>@page { size: 120mm 80mm; }</style><p>A card</p>"
    # A4 (Chromium turns it the way the page's size is turned).
    assert sorted(size_mm(info(pdf(client, org, html=page), tmp_path))) == pytest.approx([210, 297], abs=1)
    preferred = info(pdf(client, org, html=page, pdf_prefer_css_page_size=True), tmp_path)
    assert size_mm(preferred) == pytest.approx((120, 80), abs=0.5)


def test_header_and_footer_templates_carry_page_numbers_and_the_title(client: httpx.Client, org: Org,
                                                                     tmp_path: Path) -> None:
    header = '<div style="font-size: 10px; margin-left: 1cm">Header of <span class="title"></span></div>'
    footer = ('<div style="font-size: 10px; margin-left: 1cm">Page <span class="pageNumber"></span> of '
              '<span class="totalPages"></span></div>')
    data = pdf(client, org, html=BOOK, pdf_margin="20mm", pdf_header_template=header, pdf_footer_template=footer)
    texts = page_texts(data, tmp_path)
    assert len(texts) >= 3
    for number, text in enumerate(texts, start=1):
        assert "Header of The Book" in text, text[:300]
        assert f"Page {number} of {len(texts)}" in text, text[-300:]
    plain = page_texts(pdf(client, org, html=BOOK, pdf_margin="20mm"), tmp_path)
    assert not any("Page 1 of" in text or "Header of" in text for text in plain)


def test_a_tagged_pdf_with_an_outline_of_its_headings(client: httpx.Client, org: Org, tmp_path: Path) -> None:
    untagged = pdf(client, org, html=BOOK)
    assert info(untagged, tmp_path).get("Tagged") == "no"
    with pikepdf.open(io.BytesIO(untagged)) as document:
        assert "/StructTreeRoot" not in document.Root and "/Outlines" not in document.Root
    tagged = pdf(client, org, html=BOOK, pdf_outline=True)
    assert info(tagged, tmp_path)["Tagged"] == "yes"
    with pikepdf.open(io.BytesIO(tagged)) as document:
        assert "/StructTreeRoot" in document.Root
        with document.open_outline() as outline:
            titles = [(item.title, [child.title for child in item.children]) for item in outline.root]
    assert titles == [("The Book", ["Chapter 1", "Chapter 2", "Chapter 3"])]


def test_document_metadata_in_the_info_dictionary_and_xmp(client: httpx.Client, org: Org, tmp_path: Path) -> None:
    data = pdf(client, org, html=BOOK, pdf_title="Annual report 2026", pdf_author="Jeanne Durand",
               pdf_subject="Results of the year", pdf_keywords="report, results, 2026")
    found = info(data, tmp_path)
    assert (found["Title"], found["Author"], found["Subject"], found["Keywords"]) == (
        "Annual report 2026", "Jeanne Durand", "Results of the year", "report, results, 2026")
    with pikepdf.open(io.BytesIO(data)) as document:
        xmp = document.open_metadata()
        assert xmp["dc:title"] == "Annual report 2026" and xmp["dc:creator"] == ["Jeanne Durand"]
    assert info(pdf(client, org, html=BOOK), tmp_path)["Title"] == "The Book"  # else the page's title


@pytest.mark.parametrize(("params", "field"), [
    ({"pdf_page_ranges": "9-12"}, "pdf_page_ranges"),
    ({"pdf_page_ranges": "5-2"}, "pdf_page_ranges"),
    ({"pdf_width": "100mm"}, "pdf_height"),
    ({"pdf_scale": 3}, "pdf_scale"),
    ({"pdf_width": "wide", "pdf_height": "10cm"}, "pdf_width"),
    ({"pdf_header_template": "x" * 20000}, "pdf_header_template"),
    # A stylesheet or font by URL stops Chromium's print ("Printing failed", once a 500): refused on arrival.
    ({"pdf_header_template": "<link rel=stylesheet href='/evidence/style.css'><p>h</p>"}, "pdf_header_template"),
    ({"pdf_footer_template": "<style>@import url(/evidence/style.css);</style><p>f</p>"}, "pdf_footer_template"),
    ({"pdf_footer_template": "<style>@font-face { font-family: f; src: url(/f.ttf) }</style>"}, "pdf_footer_template"),
    ({"pdf_header_template": "<svg><style>@\\69mport 'x.css';</style></svg>"}, "pdf_header_template"),
])
def test_bad_pdf_options_name_their_field(client: httpx.Client, org: Org, params: dict[str, object],
                                          field: str) -> None:
    response = client.post("/v1/screenshot/take", json={"access_key": org.access_key, "format": "pdf",
                                                        "html": "<p>one page</p>", **params})
    assert response.status_code == 400, response.text
    assert field in [detail["field"] for detail in response.json()["error_details"]], response.json()


def test_a_template_draws_with_what_it_carries(client: httpx.Client, org: Org, tmp_path: Path) -> None:
    """Inline styles, a <style> element and a picture as a data: URL print; a picture by URL is drawn as nothing
    (never fetched) and the print still succeeds."""
    header = ("<style>.t { font-size: 10px; color: #204080 }</style><div class='t'>Inline header "
              "<img alt='' src='data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42m"
              "Nk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='><img alt='' src='http://nothing.invalid/a.png'></div>")
    data = pdf(client, org, html=BOOK, pdf_margin="20mm", pdf_header_template=header)
    path = tmp_path / "templated.pdf"
    path.write_bytes(data)
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    assert "Inline header" in text


def test_the_site_s_pages_print_too(client: httpx.Client, org: Org, site: Site, tmp_path: Path) -> None:
    found = info(pdf(client, org, url=site.url("/article.html"), pdf_tagged=True, pdf_paper_format="letter"),
                 tmp_path)
    assert found["Tagged"] == "yes" and size_mm(found) == pytest.approx((215.9, 279.4), abs=1)


def test_an_encrypted_pdf_opens_with_its_password_and_keeps_its_permissions(client: httpx.Client, org: Org,
                                                                           tmp_path: Path) -> None:
    data = pdf(client, org, html=BOOK, pdf_user_password="open sesame", pdf_owner_password="master key",
               pdf_permissions=["print", "accessibility"])
    assert b"open sesame" not in data and b"master key" not in data
    with pytest.raises(pikepdf.PasswordError):
        pikepdf.open(io.BytesIO(data))
    with pikepdf.open(io.BytesIO(data), password="open sesame") as document:
        encryption = document.encryption
        assert document.is_encrypted and encryption.R == 6 and encryption.bits == 256
        assert str(encryption.stream_method).endswith("aesv3")  # AES-256
        allowed = document.allow
        assert allowed.print_lowres and allowed.accessibility
        assert not (allowed.extract or allowed.modify_other or allowed.modify_annotation or allowed.print_highres)
        assert len(document.pages) >= 3
    path = tmp_path / "locked.pdf"
    path.write_bytes(data)
    checked = subprocess.run(["qpdf", "--password=open sesame", "--check", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = subprocess.run(["pdfinfo", "-upw", "open sesame", str(path)], capture_output=True, text=True).stdout
    assert re.search(r"^Encrypted: +yes", shown, re.M), shown
    # Only an owner password: it opens without one, and its permissions hold.
    owner_only = pdf(client, org, html=BOOK, pdf_owner_password="master key", pdf_permissions=[])
    with pikepdf.open(io.BytesIO(owner_only)) as document:
        assert document.is_encrypted and not document.allow.print_lowres and not document.allow.extract


@pytest.mark.parametrize(("params", "field"), [
    ({"pdf_permissions": ["print"]}, "pdf_permissions"),
    ({"pdf_user_password": "x", "pdf_permissions": ["fly"]}, "pdf_permissions"),
    ({"pdf_user_password": ""}, "pdf_user_password"),
    ({"pdf_owner_password": "é" * 3}, "pdf_owner_password"),
])
def test_bad_encryption_options_name_their_field_never_the_password(client: httpx.Client, org: Org,
                                                                   params: dict[str, object], field: str) -> None:
    response = client.post("/v1/screenshot/take", json={"access_key": org.access_key, "format": "pdf",
                                                        "html": "<p>one page</p>", **params})
    assert response.status_code == 400, response.text
    assert any(detail["field"].split(".")[0] == field for detail in response.json()["error_details"]), response.json()
    assert "éé" not in response.text


@pytest.mark.parametrize("level", ["2b", "3b"])
def test_an_archival_pdf_a(client: httpx.Client, org: Org, tmp_path: Path, level: str) -> None:
    """No maintained PDF/A validator installs here from Debian, PyPI or npm (veraPDF is a Java program of its own
    site): the test checks what PDF/A-2b and -3b require that qpdf, poppler and pikepdf can see: a sound file,
    the PDF/A identification in XMP, an sRGB output intent with its ICC profile, every font embedded, no
    encryption, and the title kept in the information dictionary and XMP alike."""
    data = pdf(client, org, html=BOOK, pdf_a=level, pdf_title="Archived book", pdf_author="Jeanne Durand")
    found = info(data, tmp_path)
    assert found["Title"] == "Archived book" and found["Encrypted"] == "no"
    with pikepdf.open(io.BytesIO(data)) as document:
        xmp = document.open_metadata()
        assert (xmp["pdfaid:part"], xmp["pdfaid:conformance"]) == (level[0], "B")
        assert xmp["dc:title"] == "Archived book"
        [intent] = document.Root.OutputIntents
        assert intent.S == "/GTS_PDFA1" and intent.DestOutputProfile.N == 3  # RGB
        assert str(intent.OutputConditionIdentifier) == "sRGB"
        [profile] = glob.glob("/usr/share/ghostscript/*/iccprofiles/srgb.icc")[-1:]
        assert intent.DestOutputProfile.read_bytes() == Path(profile).read_bytes()
    path = tmp_path / "archive.pdf"
    path.write_bytes(data)
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout.splitlines()[2:]
    assert fonts and all(line.split()[-5] == "yes" for line in fonts), fonts  # the "emb" column


def test_pdf_a_refuses_encryption(client: httpx.Client, org: Org) -> None:
    response = client.post("/v1/screenshot/take", json={"access_key": org.access_key, "format": "pdf",
                                                        "html": "<p>one</p>", "pdf_a": "2b", "pdf_user_password": "x"})
    assert response.status_code == 400 and "pdf_a" in [d["field"] for d in response.json()["error_details"]]
