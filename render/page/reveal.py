"""Pages that hide themselves while they load, captured once they show.

An A/B-testing tool's anti-flicker snippet hides the whole page from its first byte until the tool's script
has applied the experiment, or until the snippet's own timer gives up: Google Optimize puts `async-hide` on
`<html>` (`opacity: 0`, 4 s by default), VWO, Adobe Target and Convert set `opacity: 0` on `<body>` or
`<html>`, Kameleoon `visibility: hidden` on everything. Where that script never comes (refused by the
network policy or by `block_trackers`, or slow), the page stays invisible for the snippet's whole timeout
and a capture taken at `load` is one colour: a person waits the few seconds and sees the page. So a capture
waits for such a page to show itself (SCREENSHOT_HIDDEN_PAGE_WAIT at most, and never past half the time left),
then two frames for it to be drawn. A page that hides nothing costs one evaluation.

A page that shows itself by degrees is waited for the same way, briefly: an animation or transition running
as the page is ready and ending within ENTRANCE_MS (a fixed header fading in over 300 ms at load, in a saved
NYT page) is let finish, so a fast capture is not a washed-out one.
"""

from __future__ import annotations

import time

from playwright.async_api import Error as PlaywrightError

from render.browser.tabs import Tab

# An animation or transition running as the page is ready that ends within this (a header fading in at load, a
# button's colour easing in) is waited for, so the capture shows where it ends, as a person a moment later sees.
ENTRANCE_MS = 1000

# Resolves with the milliseconds waited (0: the page hid nothing), or -1 when it still hides after `limit` ms.
# A page hides itself when its root or body is fully transparent or hidden. Shown again (a class or style
# removed, a style sheet taken out, a timer's own change), a fade it starts on the root or body is waited for
# too, within the limit, then two frames so the shown page is what the compositor holds.
_WAIT_UNTIL_SHOWN = """async (limit) => {
  const started = performance.now();
  const ENTRANCE_MS = {entrance_ms};
  const hides = (element) => {
    if (!element) return false;
    const style = getComputedStyle(element);
    return style.opacity === '0' || style.visibility === 'hidden';
  };
  const hidden = () => hides(document.documentElement) || hides(document.body);
  const drawn = async () => {  // two frames, so what the page shows now is what the compositor holds
    for (let i = 0; i < 2; i++) await new Promise((resolve) => requestAnimationFrame(resolve));
  };
  const settled = async () => {  // entrances about to end (a header fading in at load), waited for
    const most = Math.min(ENTRANCE_MS, limit - (performance.now() - started));
    const ending = document.getAnimations().filter((animation) => {
      if (animation.playState !== 'running' || !(animation.playbackRate > 0) || !animation.effect) return false;
      const left = (animation.effect.getComputedTiming().endTime - animation.currentTime) / animation.playbackRate;
      return Number.isFinite(left) && left <= most;
    });
    if (!ending.length) return false;
    await Promise.race([Promise.allSettled(ending.map((animation) => animation.finished)),
                        new Promise((resolve) => setTimeout(resolve, most))]);  // one paused meanwhile
    return true;
  };
  if (!hidden()) {
    if (!await settled()) return 0;
    await drawn();
    return Math.max(1, Math.round(performance.now() - started));
  }
  const shown = await new Promise((resolve) => {
    const finish = (value) => { observer.disconnect(); clearInterval(poll); resolve(value); };
    const look = () => {
      if (!hidden()) finish(true);
      else if (performance.now() - started >= limit) finish(false);
    };
    const observer = new MutationObserver(look);
    observer.observe(document, { attributes: true, childList: true, subtree: true });
    const poll = setInterval(look, 50);  // a change no mutation shows (a timer's inline style is one; a transition)
  });
  if (!shown) return -1;
  const fades = [document.documentElement, document.body].filter(Boolean)
    .flatMap((element) => element.getAnimations());
  const left = limit - (performance.now() - started);
  if (fades.length && left > 0) {
    await Promise.race([Promise.allSettled(fades.map((fade) => fade.finished)),
                        new Promise((resolve) => setTimeout(resolve, left))]);
  }
  await drawn();
  return Math.round(performance.now() - started);
}""".replace("{entrance_ms}", str(ENTRANCE_MS))
TIME_SHARE = 0.5  # of the time left, the most a capture waits for a hidden page


async def wait_until_shown(tab: Tab, deadline: float, most_seconds: float) -> float | None:
    """Wait for a page that hides itself to show itself, and for entrances about to end: the seconds waited
    (0.0 when it hid nothing and nothing was ending), or None when it still hides after `most_seconds` (or half
    the time left before `deadline`)."""
    limit = min(most_seconds, max(0.0, deadline - time.monotonic()) * TIME_SHARE)
    try:
        waited = await tab.run(_WAIT_UNTIL_SHOWN, round(limit * 1000))
    except PlaywrightError:  # navigated away meanwhile: the next document is what the capture gets
        return 0.0
    return None if waited < 0 else waited / 1000
