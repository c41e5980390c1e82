"""ffmpeg as a subprocess fed encoded frames through a pipe: no frame ever touches the disk.

The output goes to a temporary file only where a container needs to seek back (mp4's index moved to
the front, mov), and is read back and removed at once.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import IO

import ffmpeg

from render.contract.errors import InternalError, ServiceError

# Per format: codec and its options. mp4 plays in every browser (H.264 High, yuv420p, faststart).
_CODECS: dict[str, dict[str, str | int]] = {
    "mp4": {"vcodec": "libx264", "pix_fmt": "yuv420p", "preset": "veryfast", "crf": 20, "movflags": "+faststart"},
    "webm": {"vcodec": "libvpx-vp9", "pix_fmt": "yuv420p", "deadline": "realtime", "cpu-used": 8, "row-mt": 1,
             "b:v": 0, "crf": 32},
    "avi": {"vcodec": "mpeg4", "pix_fmt": "yuv420p", "q:v": 3},
    "mov": {"vcodec": "prores_ks", "profile:v": 4, "pix_fmt": "yuv444p10le"},
    "gif": {},
}
_MUXERS = {"mp4": "mp4", "webm": "webm", "avi": "avi", "mov": "mov", "gif": "gif"}


class EncodingFailed(ServiceError):
    """ffmpeg refused the frames or crashed: reported as an internal error with its last words."""

    code = InternalError.code
    status = InternalError.status
    report = True


@dataclass(frozen=True)
class VideoSpec:
    fps: int
    format: str
    width: int  # output size (even for yuv420p formats)
    height: int
    crop: tuple[int, int, int, int] | None = None  # x, y, w, h of the frame kept (aspect_ratio)
    alpha: bool = False  # frames are PNG with transparency (mov + omit_background)


class Encoder:
    """`write(frame)` each encoded frame (JPEG, or PNG with alpha) in order, then `finish()` for the bytes."""

    def __init__(self, spec: VideoSpec) -> None:
        self.spec = spec
        self.frames = 0
        fd, self._path = tempfile.mkstemp(suffix=f".{spec.format}", prefix="animate-")
        os.close(fd)
        stream = ffmpeg.input("pipe:", format="image2pipe", framerate=spec.fps,
                              vcodec="png" if spec.alpha else "mjpeg")
        if spec.crop is not None:
            x, y, w, h = spec.crop
            stream = stream.crop(x, y, w, h)
        stream = stream.filter("scale", spec.width, spec.height, flags="lanczos")
        if spec.format == "gif":  # a palette made for this video, in one pass
            split = stream.split()
            palette = split[0].filter("palettegen", stats_mode="diff")
            stream = ffmpeg.filter([split[1], palette], "paletteuse", dither="sierra2_4a")
        codec = dict(_CODECS[spec.format])
        if spec.alpha:
            codec["pix_fmt"] = "yuva444p10le"
        output = stream.output(self._path, format=_MUXERS[spec.format], r=spec.fps, **codec)
        self._process: subprocess.Popen[bytes] = output.overwrite_output().global_args(
            "-hide_banner", "-loglevel", "error", "-threads", "2").run_async(pipe_stdin=True, pipe_stderr=True)
        assert self._process.stdin is not None
        self._stdin: IO[bytes] = self._process.stdin

    def write(self, frame: bytes) -> None:
        try:
            self._stdin.write(frame)
        except BrokenPipeError:
            raise self._failure("ffmpeg stopped reading frames") from None
        self.frames += 1

    def finish(self) -> bytes:
        """Close the input, wait for ffmpeg, return the video."""
        try:
            with contextlib.suppress(BrokenPipeError):
                self._stdin.close()
            if self._process.wait(timeout=120) != 0:
                raise self._failure(f"ffmpeg exited with {self._process.returncode}")
            with open(self._path, "rb") as video:
                return video.read()
        finally:
            self.close()

    def close(self) -> None:
        """Kill ffmpeg if it still runs (a failed or timed-out job) and remove the output file."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path)

    def _failure(self, what: str) -> EncodingFailed:
        self.close()
        said = (self._process.stderr.read() if self._process.stderr else b"").decode(errors="replace").strip()
        return EncodingFailed(f"The video could not be encoded ({what}): {said[-300:] or 'no message'}.")
