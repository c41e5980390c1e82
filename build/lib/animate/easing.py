"""The 13 easing curves of `scroll_easing`: progress in [0, 1] to position in [0, 1].

The standard polynomial family (the curves of easings.net): `ease_in_N` is t^N, `ease_out_N` its mirror
1 - (1 - t)^N, and `ease_in_out_N` runs ease_in_N over the first half and ease_out_N over the second,
meeting at (0.5, 0.5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

Easing = Callable[[float], float]
EasingName = Literal[
    "linear", "ease_in_quad", "ease_out_quad", "ease_in_out_quad", "ease_in_cubic", "ease_out_cubic",
    "ease_in_out_cubic", "ease_in_quart", "ease_out_quart", "ease_in_out_quart", "ease_in_quint",
    "ease_out_quint", "ease_in_out_quint",
]
_POWERS = {"quad": 2, "cubic": 3, "quart": 4, "quint": 5}


def _in(power: int) -> Easing:
    return lambda t: t ** power


def _out(power: int) -> Easing:
    return lambda t: 1 - (1 - t) ** power


def _in_out(power: int) -> Easing:
    return lambda t: 2 ** (power - 1) * t ** power if t < 0.5 else 1 - (-2 * t + 2) ** power / 2


EASINGS: dict[str, Easing] = {"linear": lambda t: t}
for _name, _power in _POWERS.items():
    EASINGS[f"ease_in_{_name}"] = _in(_power)
    EASINGS[f"ease_out_{_name}"] = _out(_power)
    EASINGS[f"ease_in_out_{_name}"] = _in_out(_power)


def ease(name: str, progress: float) -> float:
    """The curve `name` at `progress`, clamped to [0, 1]."""
    return EASINGS[name](min(1.0, max(0.0, progress)))
