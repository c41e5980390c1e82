"""Reading videos back with ffprobe and ffmpeg: stream facts and decoded frames."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path


def probe(video: bytes) -> dict:  # type: ignore[type-arg]
    """The first video stream (codec_name, width, height, pix_fmt, nb_read_frames) and the format's
    duration in seconds, as ffprobe reads them."""
    with tempfile.NamedTemporaryFile() as file:
        file.write(video)
        file.flush()
        found = json.loads(subprocess.run(
            ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
             "stream=codec_name,width,height,pix_fmt,nb_read_frames,profile:format=duration,format_name",
             "-of", "json", file.name], capture_output=True, check=True).stdout)
    stream = found["streams"][0]
    stream["frames"] = int(stream.pop("nb_read_frames"))
    stream["duration"] = float(found["format"]["duration"])
    stream["container"] = found["format"]["format_name"]
    return stream  # type: ignore[no-any-return]


def frames(video: bytes, width: int, height: int) -> list[bytes]:
    """Every frame as packed RGB24 rows."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in"
        source.write_bytes(video)
        raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(source), "-f", "rawvideo", "-pix_fmt", "rgb24",
                              "-"], capture_output=True, check=True).stdout
    size = width * height * 3
    return [raw[i:i + size] for i in range(0, len(raw), size)]


def rgb(frame: bytes, width: int, x: int, y: int) -> tuple[int, int, int]:
    offset = (y * width + x) * 3
    return frame[offset], frame[offset + 1], frame[offset + 2]


def ssim(video: bytes, frame: int, still: bytes) -> float:
    """SSIM (ffmpeg's ssim filter, all planes) of frame `frame` of `video` against the image `still`."""
    with tempfile.TemporaryDirectory() as tmp:
        source, image = Path(tmp) / "in", Path(tmp) / "still"
        source.write_bytes(video)
        image.write_bytes(still)
        said = subprocess.run(
            ["ffmpeg", "-v", "info", "-i", str(source), "-i", str(image), "-lavfi",
             f"[0:v]select=eq(n\\,{frame}),setpts=PTS-STARTPTS[a];[1:v]setpts=PTS-STARTPTS[b];[a][b]ssim",
             "-frames:v", "1", "-f", "null", "-"], capture_output=True, check=True, text=True).stderr
    return float(said.rsplit(" All:", 1)[1].split()[0])
