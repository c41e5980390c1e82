"""What a job keeps off its page, in one place: the requests it blocks (ads and trackers by EasyList and
EasyPrivacy, `block_requests`, `block_resources`, chat and social widgets) and what it refuses or hides on
the page (cookie banners through autoconsent, or on evidence; chat and social UIs; ad elements). The
pipeline meets it three times: before the page loads, once it has loaded, and after the page was prepared.
"""

from __future__ import annotations

from render.browser.tabs import Tab
from render.contract.options import TakeOptions
from render.page.annoyances import Annoyances
from render.page.blocking import FilterLists, RequestBlocker, wanted
from render.page.consent import RuleSet


class Shield:
    """One job's blocking and hiding."""

    def __init__(self, options: TakeOptions, lists: FilterLists, consent_rules: RuleSet | None) -> None:
        self.annoyances = Annoyances(options, consent_rules)
        self.blocker = RequestBlocker(options, lists, self.annoyances) if wanted(options) else None

    @property
    def changes_page(self) -> bool:
        """Whether the page gets init scripts the job cannot take back (then it is not reused as is)."""
        return (self.blocker is not None and self.blocker.changes_page) or self.annoyances.changes_page

    async def before_load(self, tab: Tab) -> None:
        """Requests paused for the blocker (or, without one, no longer paused after an earlier job's blocking);
        autoconsent and the widgets' style sheet in every document."""
        if self.blocker is not None:
            await self.blocker.attach(tab)
        else:
            await tab.pause_only_credentials()
        await self.annoyances.install(tab)

    async def after_load(self, tab: Tab, deadline: float) -> None:
        """Ad elements hidden, banners refused or hidden: before preparing, as overlays would be in the way of
        clicks."""
        if self.blocker is not None:
            await self.blocker.hide_ad_elements(tab)
        await self.annoyances.clear(tab, deadline)

    async def after_preparation(self, tab: Tab, deadline: float) -> None:
        """What appeared while the page waited or was prepared (a banner shown late, after a click)."""
        await self.annoyances.clear(tab, deadline)
