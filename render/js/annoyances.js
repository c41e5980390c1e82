// The page side of render/annoyances.py, evaluated as `([task, argument]) => result`.
([task, argument]) => {
  // Undoes the scroll lock an overlay left on <html> and <body>: overflow hidden, or the body pinned
  // with position: fixed.
  const unlockScrolling = () => {
    for (const element of [document.documentElement, document.body]) {
      if (!element) continue;
      const style = getComputedStyle(element);
      if (style.overflowY === 'hidden' || style.overflowY === 'clip') {
        element.style.setProperty('overflow-y', 'visible', 'important');
      }
      if (style.position === 'fixed') {
        element.style.setProperty('position', 'static', 'important');
        element.style.setProperty('top', 'auto', 'important');
      }
    }
  };

  // Known platforms: when one of their elements is on the page, its scroll lock goes too.
  // Returns whether any was found.
  const unlockAfterPlatforms = (selectors) => {
    const found = selectors.some((selector) => document.querySelector(selector) !== null);
    if (found) unlockScrolling();
    return found;
  };

  // block_banners_by_heuristics: hides overlays about cookies, consent, newsletters or sign-up, then
  // restores scrolling. An overlay is a fixed or sticky element, or a modal dialog, at an edge of the
  // viewport or over its centre. Returns how many elements it hid.
  const hideByHeuristics = () => {
    const CONSENT = /cookie|consent|gdpr|ccpa|your privacy|privacy (settings|preferences|choices)|datenschutz|einwilligung|rgpd|galletas|consentement/i;
    const SIGN_UP = /newsletter|subscribe|sign[ -]?up|join our|mailing list|e-?mail address|inscri|anmelden|abonn/i;
    const MAX_TEXT = 2500;  // more text than this is page content, not a banner (e.g. a fixed app shell)
    const width = innerWidth, height = innerHeight;

    function* elements(root) {
      for (const element of root.querySelectorAll('*')) {
        yield element;
        if (element.shadowRoot) yield* elements(element.shadowRoot);
      }
    }
    const isDialog = (el) => el.matches('dialog[open], [role=dialog], [role=alertdialog], [aria-modal=true]');
    const visible = (el, box) => box.width >= 1 && box.height >= 1
      && el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
    const asksForSomething = (el) => el.querySelector('input[type=email], input[name*=mail], form') !== null;
    const translucent = (style) => {
      const alpha = style.backgroundColor.match(/rgba\(.*,\s*([\d.]+)\)/);
      return (alpha && +alpha[1] > 0 && +alpha[1] < 1) || (+style.opacity < 1 && +style.opacity > 0)
        || (style.backdropFilter && style.backdropFilter !== 'none');
    };

    const overlays = [], backdrops = [];
    for (const el of elements(document)) {
      if (el === document.body || el === document.documentElement) continue;
      const style = getComputedStyle(el);
      const pinned = style.position === 'fixed' || style.position === 'sticky';
      if (!pinned && !isDialog(el)) continue;
      const box = el.getBoundingClientRect();
      if (!visible(el, box)) continue;
      const text = el.innerText || '';
      const coversViewport = box.width >= width * 0.8 && box.height >= height * 0.8;
      if (coversViewport && text.trim().length < 20 && style.position === 'fixed' && translucent(style)) {
        backdrops.push(el);  // the dimmed layer behind a modal: hidden only along with one
        continue;
      }
      if (text.length > MAX_TEXT || el.querySelector('main, article, nav, [role=navigation]')) continue;
      if (el.matches('header, nav, [role=navigation], [role=banner]')) continue;
      const atEdge = box.top <= height * 0.15 || box.bottom >= height * 0.85;
      const centred = Math.abs(box.left + box.width / 2 - width / 2) < width * 0.25
        && Math.abs(box.top + box.height / 2 - height / 2) < height * 0.25;
      if (!atEdge && !centred) continue;
      // Consent banners go wherever they are; a sign-up bar only when it is a modal or asks for an address
      // (a sticky header with a "Sign up" link stays).
      const consent = CONSENT.test(text);
      const signUp = SIGN_UP.test(text) && (isDialog(el) || centred || asksForSomething(el));
      if (consent || signUp) overlays.push(el);
    }

    const hidden = overlays.filter((el) => !overlays.some((other) => other !== el && other.contains(el)));
    if (hidden.length) hidden.push(...backdrops);
    for (const el of hidden) el.style.setProperty('display', 'none', 'important');
    if (hidden.length) unlockScrolling();
    return hidden.length;
  };

  return { unlockAfterPlatforms, hideByHeuristics }[task](argument);
}
