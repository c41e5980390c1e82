"""/animate through HTTP: every format decoded by ffprobe, sizes, durations and frame counts, real-time
recording, and scroll positions read back from each frame of a page whose colour encodes its height."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from animate.options import parse_animate_options
from animate.timeline import plan
from tests.conftest import Org, RunningService
from tests.support.servers import process_tree
from tests.support.site import Site
from tests.support.videos import frames, probe, rgb, ssim

pytestmark = pytest.mark.browser
PAGE_HEIGHT = 4000


def animate(client: httpx.Client, org: Org, **params: str) -> httpx.Response:
    return client.get("/v1/screenshot/animate", params={"access_key": org.access_key, **params}, timeout=120)


def commands_below(service: RunningService) -> list[list[str]]:
    """The command line of every process the service's processes started, and of theirs."""
    commands = []
    for process in service.processes.values():
        for pid in process_tree(process.pid)[1:]:
            try:
                commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0"))
            except OSError:
                continue  # ended meanwhile
    return commands


def scroll_of(frame: bytes, width: int) -> float:
    """The page's scroll position in a frame of /gradient.html: at the top row red is y / 16 and blue
    255 - y / 16; their mean halves the compression noise."""
    red, _, blue = rgb(frame, width, width // 2, 1)
    return (red + (255 - blue)) / 2 * 16


@pytest.mark.parametrize("easing", ["linear", "ease_in_out_quint", "ease_out_cubic", "ease_in_quad"])
def test_scroll_frames_follow_the_easing_curve(client: httpx.Client, org: Org, site: Site, easing: str) -> None:
    params = {"url": site.url("/gradient.html"), "scenario": "scroll", "duration": "3", "viewport_width": "320",
              "viewport_height": "240", "scroll_by": "1200", "scroll_duration": "1000", "scroll_delay": "300",
              "scroll_back": "false", "scroll_complete": "false", "scroll_easing": easing}
    response = animate(client, org, **params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "video/mp4"
    facts = probe(response.content)
    assert (facts["codec_name"], facts["pix_fmt"], facts["width"], facts["height"]) == ("h264", "yuv420p", 320, 240)
    assert facts["frames"] == 90 and abs(facts["duration"] - 3) <= 1 / 30
    timeline = plan(parse_animate_options(params), PAGE_HEIGHT - 240)
    errors = [abs(scroll_of(frame, 320) - timeline.position(index * 1000 / 30))
              for index, frame in enumerate(frames(response.content, 320, 240))]
    assert len(errors) == 90
    assert max(errors) <= 48, f"frame {errors.index(max(errors))} is {max(errors):.0f} px off the curve"
    # The curves differ: mid-step, where the page is tells which easing ran.
    assert timeline.position(500) == pytest.approx(1200 * {"linear": 0.5, "ease_in_out_quint": 0.5,
                                                           "ease_out_cubic": 0.875, "ease_in_quad": 0.25}[easing])


@pytest.mark.parametrize(("fmt", "codec", "pix_fmt"), [
    ("mp4", "h264", "yuv420p"), ("webm", "vp9", "yuv420p"), ("gif", "gif", "bgra"), ("mov", "prores", None),
    ("avi", "mpeg4", "yuv420p"),
])
def test_every_format_decodes_with_its_codec(client: httpx.Client, org: Org, site: Site, fmt: str, codec: str,
                                             pix_fmt: str | None) -> None:
    response = animate(client, org, url=site.url("/colours.html"), format=fmt, duration="1", viewport_width="160",
                       viewport_height="120")
    assert response.status_code == 200, response.text
    facts = probe(response.content)
    assert facts["codec_name"] == codec and (facts["width"], facts["height"]) == (160, 120)
    if pix_fmt is not None:
        assert facts["pix_fmt"] == pix_fmt
    assert facts["frames"] == 30
    assert abs(facts["duration"] - 1) <= 1 / 30 + 0.02
    first = frames(response.content, 160, 120)[0]
    assert rgb(first, 160, 80, 20)[0] > 200 and rgb(first, 160, 80, 100)[2] > 200  # red top, blue bottom


def test_mov_keeps_the_alpha_with_omit_background(client: httpx.Client, org: Org, site: Site) -> None:
    response = animate(client, org, html="<p style='color:red'>hi</p>", format="mov", omit_background="true",
                       duration="1", viewport_width="160", viewport_height="120")
    assert response.status_code == 200, response.text
    facts = probe(response.content)
    assert facts["codec_name"] == "prores" and facts["pix_fmt"].startswith("yuva444")
    assert facts["profile"] == "4444"


def test_default_records_in_real_time(client: httpx.Client, org: Org, site: Site) -> None:
    response = animate(client, org, url=site.url("/fading.html"), duration="3", viewport_width="160",
                       viewport_height="120")
    assert response.status_code == 200, response.text
    recorded = frames(response.content, 160, 120)
    assert len(recorded) == 90
    first, last = rgb(recorded[0], 160, 80, 60), rgb(recorded[-1], 160, 80, 60)
    assert first[0] > 150 and first[2] < 100, first  # still mostly red when recording starts
    assert last[0] < 30 and last[2] > 220, last  # the 2 s fade is over by the end of the 3 s


@pytest.mark.parametrize(("params", "size"), [
    ({"aspect_ratio": "1:1"}, (240, 240)), ({"aspect_ratio": "16:9"}, (320, 180)), ({"width": "160"}, (160, 120)),
    ({"height": "60"}, (80, 60)), ({"width": "200", "height": "100"}, (200, 100)),
    ({"device_scale_factor": "2"}, (320, 240)),
])
def test_output_size_and_aspect_ratio(client: httpx.Client, org: Org, site: Site, params: dict[str, str],
                                      size: tuple[int, int]) -> None:
    response = animate(client, org, url=site.url("/colours.html"), duration="1", viewport_width="320",
                       viewport_height="240", **params)
    assert response.status_code == 200, response.text
    facts = probe(response.content)
    assert (facts["width"], facts["height"]) == size


def test_scroll_till_selector_scroll_back_and_complete(client: httpx.Client, org: Org, site: Site) -> None:
    response = animate(client, org, url=site.url("/gradient.html"), scenario="scroll", duration="10",
                       viewport_width="320", viewport_height="240", scroll_till_selector="#mark",
                       scroll_till_selector_adjust_top="400", scroll_by="5000", scroll_duration="600",
                       scroll_delay="200", scroll_easing="linear", scroll_back_algorithm="once")
    assert response.status_code == 200, response.text
    recorded = frames(response.content, 320, 240)
    # Down to 2000 px in 0.6 s, 0.2 s pause, back up in 0.6 s; scroll_complete ends the video there,
    # on the frame at 1.4 s.
    assert len(recorded) == 43
    positions = [scroll_of(frame, 320) for frame in recorded]
    assert abs(max(positions) - 2000) <= 48 and positions[-1] <= 48
    assert probe(response.content)["duration"] == pytest.approx(43 / 30, abs=1 / 30 + 0.02)


def test_scroll_try_navigate_follows_a_hinted_link(client: httpx.Client, org: Org, site: Site) -> None:
    response = animate(client, org, url=site.url("/gradient.html"), scenario="scroll", duration="2",
                       viewport_width="160", viewport_height="120", scroll_try_navigate="true",
                       scroll_navigate_after="1000", scroll_back="false")
    assert response.status_code == 200, response.text
    recorded = frames(response.content, 160, 120)
    assert len(recorded) == 60
    assert rgb(recorded[10], 160, 80, 100)[1] < 30 and rgb(recorded[10], 160, 80, 100)[2] > 30  # the gradient
    later = recorded[45]
    assert rgb(later, 160, 80, 20)[0] > 200 and rgb(later, 160, 80, 100)[2] > 200  # /colours.html
    assert any(q == "from=gradient" for q in site.queries_to("/colours.html"))


def test_json_answers_a_stored_video(client: httpx.Client, org: Org, site: Site) -> None:
    response = animate(client, org, url=site.url("/colours.html"), duration="1", format="webm",
                       response_type="json", viewport_width="160", viewport_height="120")
    assert response.status_code == 200, response.text
    video = httpx.get(response.json()["screenshot_url"])
    assert video.headers["content-type"] == "video/webm" and probe(video.content)["codec_name"] == "vp9"


@pytest.mark.parametrize(("params", "field", "code"), [
    ({"duration": "31"}, "duration", "request_not_valid"),
    ({"duration": "0"}, "duration", "request_not_valid"),
    ({"format": "png"}, "format", "request_not_valid"),
    ({"full_page": "true"}, "full_page", "request_not_valid"),
    ({"scroll_by": "100"}, "scroll_by", "request_not_valid"),
    ({"scenario": "scroll", "scroll_easing": "bouncy"}, "scroll_easing", "request_not_valid"),
    ({"aspect_ratio": "wide"}, "aspect_ratio", "request_not_valid"),
    ({"omit_background": "true"}, "omit_background", "request_not_valid"),
    ({"scenario": "scroll", "scroll_till_selector": "#nothing"}, "scroll_till_selector", "selector_not_found"),
])
def test_bad_parameters_name_the_field(client: httpx.Client, org: Org, site: Site, params: dict[str, str],
                                       field: str, code: str) -> None:
    response = animate(client, org, url=site.url("/gradient.html"), viewport_width="160", viewport_height="120",
                       duration=params.pop("duration", "1"), **params)
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == code
    assert field in [d["field"] for d in response.json()["error_details"]]


def test_a_recording_out_of_time_is_a_timeout_and_leaves_no_ffmpeg(service: RunningService, client: httpx.Client,
                                                                   org: Org, site: Site) -> None:
    # The page takes 3 s to load, the recording 3 s more: past the 5 s timeout while ffmpeg is encoding.
    response = animate(client, org, url=site.url("/slow?ms=3000"), duration="3", timeout="5",
                       viewport_width="160", viewport_height="120")
    assert response.status_code == 500, response.text
    assert response.json()["error_code"] == "timeout_error"
    assert "timeout" in response.json()["error_message"]
    # Among the service's own processes: another test process may be recording beside this one.
    leftover = [" ".join(command) for command in commands_below(service) if Path(command[0]).name == "ffmpeg"
                or any(re.search(r"animate-.*\.mp4", part) for part in command)]
    assert leftover == [], f"ffmpeg still running: {leftover}"


def test_scroll_navigate_to_url_goes_there(client: httpx.Client, org: Org, site: Site) -> None:
    response = animate(client, org, url=site.url("/gradient.html"), scenario="scroll", duration="1",
                       viewport_width="160", viewport_height="120", scroll_try_navigate="true",
                       scroll_navigate_after="300", scroll_back="false",
                       scroll_navigate_to_url=site.url("/colours.html?to=given"))
    assert response.status_code == 200, response.text
    last = frames(response.content, 160, 120)[-1]
    assert rgb(last, 160, 80, 20)[0] > 200 and rgb(last, 160, 80, 100)[2] > 200  # /colours.html
    assert "to=given" in site.queries_to("/colours.html")


TEXT_PAGE = ("<!DOCTYPE html><html><body style='margin:0;font:16px/24px serif;color:#222'>"
             + "".join(f"<p style='margin:0;padding:0 12px'>Line {n}: the quick brown fox jumps over the lazy dog, "
                       f"0123456789 ({n * 7 % 97})</p>" for n in range(200)) + "</body></html>")


def test_sixty_frames_a_second_each_where_the_curve_says_and_as_sharp_as_a_still(
        client: httpx.Client, org: Org, site: Site) -> None:
    """frame_rate=60: twice the frames, each still at its eased position (frame-exact); the text in a frame
    is as sharp as a still capture at the same scroll offset (SSIM of the decoded frame against /take's PNG)."""
    params = {"url": site.url("/gradient.html"), "scenario": "scroll", "duration": "2", "frame_rate": "60",
              "viewport_width": "320", "viewport_height": "240", "scroll_by": "1200", "scroll_duration": "1000",
              "scroll_delay": "300", "scroll_back": "false", "scroll_complete": "false"}
    response = animate(client, org, **params)
    assert response.status_code == 200, response.text
    facts = probe(response.content)
    assert facts["frames"] == 120 and abs(facts["duration"] - 2) <= 1 / 60
    timeline = plan(parse_animate_options(params), PAGE_HEIGHT - 240)
    errors = [abs(scroll_of(frame, 320) - timeline.position(index * 1000 / 60))
              for index, frame in enumerate(frames(response.content, 320, 240))]
    assert len(errors) == 120 and max(errors) <= 48, f"frame {errors.index(max(errors))} is off the curve"
    # Text: at rest at the top (frame 0), then at 360 px from 200 ms to 1.2 s (frame 30 is at 500 ms).
    video = animate(client, org, html=TEXT_PAGE, scenario="scroll", duration="1", frame_rate="60",
                    viewport_width="640", viewport_height="360", scroll_by="360", scroll_duration="200",
                    scroll_delay="1000", scroll_back="false", scroll_complete="false", scroll_easing="linear")
    assert video.status_code == 200, video.text
    view = {"html": TEXT_PAGE, "viewport_width": "640", "viewport_height": "360", "access_key": org.access_key}
    top = client.get("/v1/screenshot/take", params=view)
    scrolled = client.get("/v1/screenshot/take", params={**view, "clip_x": "0", "clip_y": "360", "clip_width": "640",
                                                          "clip_height": "360"})
    assert top.status_code == scrolled.status_code == 200, scrolled.text
    similarity = [ssim(video.content, 0, top.content), ssim(video.content, 30, scrolled.content)]
    assert min(similarity) >= 0.97, similarity
    assert ssim(video.content, 0, scrolled.content) < 0.9  # a frame somewhere else is told apart
