"""What the API and the workers agree on about visual diffs (`POST /compare`, monitors): the request's own fields,
the compare job a worker runs on two stored shots, and the change it reports. Pure: the API imports it.

A compare job is a `JobRequest` of kind `compare` whose options are a `CompareJob`: two keys in the service's
storage (the API checked that both belong to the caller) and the threshold. The worker answers a result whose
stored output is the diff image and whose metadata holds `comparison` (`Change.to_json`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from render.contract.errors import ErrorDetail, RequestNotValid
from render.contract.formats import FORMATS

COMPARE_KIND = "compare"
DEFAULT_THRESHOLD = 24  # a channel differing by more counts as changed (render.output.compare.THRESHOLD)
ThresholdValue = Annotated[int, Field(ge=0, le=255, description=(
    "How far (0-255) one of a pixel's channels must differ for the pixel to count as changed: the default, 24, "
    "keeps anti-aliasing and JPEG noise out."))]
ShareValue = Annotated[float, Field(ge=0, le=1)]


class CompareRequest(BaseModel):
    """The body of `POST /v1/screenshot/compare`, besides its two sides (validated as /take options)."""

    model_config = ConfigDict(extra="forbid")

    before: dict[str, Any] = Field(description="The older shot: /take parameters, or {\"reference\": ...} of an "
                                               "earlier image result of this organisation.")
    after: dict[str, Any] = Field(description="The newer shot, the same way.")
    threshold: ThresholdValue = DEFAULT_THRESHOLD
    change_threshold: ShareValue = Field(0.0, description=(
        "`changed` is true when more than this share (0-1) of the newer shot's pixels changed."))
    response_type: Literal["json", "by_format"] = Field("json", description=(
        "json: the change and links to the three images; by_format: the diff image (PNG), the change in "
        "x-service-change-* headers."))
    access_key: str | None = Field(None, description="Or the X-Access-Key header.")


@dataclass(frozen=True)
class CompareJob:
    """A compare job's options: which stored shots, in the caller's storage, and how."""

    before: str
    after: str
    threshold: int = DEFAULT_THRESHOLD

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Change:
    """What changed from one shot to the next, as `/compare`, monitor runs and their webhooks report it."""

    changed_share: float  # of the newer shot's pixels
    ssim: float  # 1.0: the same picture
    boxes: list[dict[str, int]]  # {x, y, width, height} of each changed region, largest first
    inserted_rows: int  # rows the newer shot has that the older has not (the page grew)
    removed_rows: int
    width: int
    height: int

    def changed(self, share: float) -> bool:
        """Whether more than `share` of the pixels changed (any change at all when 0)."""
        return self.changed_share > share

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Change:
        return cls(**data)


def check_comparable(options: Any, side: str) -> None:
    """Only images are compared (a compare's side, a monitor's request): `request_not_valid` naming `side.format`."""
    if FORMATS[options.format].kind != "image":
        raise RequestNotValid(f"{side}: format must be an image format to be compared (png, jpeg, webp, ...).",
                              [ErrorDetail(f"{side}.format", "must be an image format")])
