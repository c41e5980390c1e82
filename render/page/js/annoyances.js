// The page side of render/page/annoyances.py, evaluated as `([task, argument]) => result`.
//
// A banner is hidden only on evidence that it is one: it is on top of the page (fixed, sticky or a
// modal dialog, and what the page shows at its centre; or a bar a script put above or below everything
// else in the page's flow, which must then name cookies or consent), it speaks of consent (cookies used
// for something, consent, personal data, in several languages: never the word "cookie" alone), and it
// offers a consent action among its own controls (accept, refuse, settings, OK, close). A sign-up
// overlay needs a modal dialog or a centred box with an e-mail field. Nothing with the page's own
// content in it (main, article, nav, header, footer, or more text than a banner has) is ever hidden.
([task, argument]) => {
  const CONSENT = new RegExp([
    // English
    String.raw`\b(we|this (web)?site|our (web)?site|(web)?site)\b[^.]{0,80}\b(use|uses|using|store|place)s?\b[^.]{0,40}\bcookies?`,
    String.raw`\bcookies?\b[^.]{0,80}\b(consent|privacy|personal|track|analytic|advertis|partners?|experience|third[- ]party|statistic|marketing|preferences|functional|necessary|essential|improve|personali[sz]e|measure|technologies|purposes|policy)`,
    String.raw`\b(consent|your privacy|privacy (settings|preferences|choices)|personal (data|information)|data protection|gdpr|ccpa)\b`,
    String.raw`\b(use of|accept|allow|enable)\b[^.]{0,30}\bcookies?\b`,
    String.raw`\b(collect|process)\b[^.]{0,60}\b(data|information)\b`,
    // German, French, Spanish, Italian, Dutch, Portuguese, Polish, Swedish, Danish, Norwegian, Czech
    String.raw`\b(wir (verwenden|nutzen|setzen) cookies|einwilligung|datenschutz|zustimmung|consentement|vie privée|données personnelles|traceurs|consentimiento|privacidad|datos personales|consenso|toestemming|persoonsgegevens|consentimento|privacidade|dados pessoais|zgod[ay]|prywatno|pliki cookie|samtycke|kakor|samtykke|personvern|informasjonskapsler|soubory cookie|souhlas\w*|osobní údaje)\b`,
  ].join('|'), 'i');
  // A control's whole label (lower case, spaces collapsed, punctuation stripped).
  const ACTION = new RegExp('^(' + [
    String.raw`(i )?(accept|agree|allow|consent|understand|understood)\b.{0,40}`,
    String.raw`(i )?(reject|decline|deny|refuse|disagree|dismiss|close|continue|save|manage|customi[sz]e|configure|adjust|change|more options|(cookie )?(settings|preferences|options))\b.{0,60}`,
    String.raw`(that'?s|that is|it'?s) (ok|okay|fine)|let me choose|choose|no,? thanks?`,
    String.raw`(only|use only|accept only|allow only)? ?(necessary|essential|required|strictly necessary)( cookies)?( only)?`,
    String.raw`ok|okay|got it|yes|no|no thanks|x|×|✕|✖|✗|╳`,
    String.raw`(alle )?(akzeptieren|ablehnen|zustimmen|annehmen)|einverstanden|verstanden|einstellungen|nur (notwendige|essenzielle).{0,30}|speichern`,
    String.raw`(tout )?(accepter|refuser)|j'accepte|je refuse|continuer sans accepter|param[eé]trer|param[eè]tres|personnaliser|g[eé]rer.{0,30}`,
    String.raw`(aceptar|rechazar)( todo| todas)?|configurar|acepto|accett[ao]( tutto)?|rifiut[ao]( tutto)?|impostazioni`,
    String.raw`(alles )?(accepteren|weigeren)|akkoord|instellingen|aceitar( todos)?|rejeitar|recusar|akceptuj[eę]|odrzu[cć].{0,20}|zgadzam si[eę]|ustawienia`,
    String.raw`godk[aä]nn.{0,20}|acceptera.{0,20}|avvisa.{0,20}|afvis.{0,20}|godta.{0,20}|avvis.{0,20}`,
    String.raw`souhlas[ií]m|rozum[ií]m|p[řr]ijmout( v[šs]e)?|odm[ií]tnout( v[šs]e)?|nastaven[ií].{0,30}`,
  ].join('|') + ')$', 'i');
  // A banner that never says "cookie" or "consent" (Klaro: "Services we would like to use") still offers
  // to accept and to refuse, and names what for.
  const ACCEPT = /^(i )?(accept|agree|allow|enable|(alle )?akzeptieren|zustimmen|(tout )?accepter|aceptar|accetta|accepteren|aceitar)\b/i;
  const REFUSE = /^(i )?(reject|decline|deny|refuse|disable|(only )?(necessary|essential)|(alle )?ablehnen|(tout )?refuser|rechazar|rifiuta|weigeren|rejeitar|recusar)\b/i;
  const PURPOSES = /analytic|marketing|advertis|tracking|statistic|services|purposes|partners|vendors|personali[sz]/i;
  const COOKIES_OR_CONSENT = /cooki|consent|einwillig|zustimm|consentement|consentimiento|consenso|toestemming|samtyk|samtyc|zgod|souhlas|kakor|informasjonskaps/i;
  const SIGN_UP = /newsletter|subscribe|sign[ -]?up|join our|mailing list|inscri|anmelden|abonn/i;
  const MAX_TEXT = 3000;  // more text than this is page content, not a banner
  const CONTROLS = 'button, [role=button], a, input[type=button], input[type=submit], [class*=button], [class*=btn]';
  const width = innerWidth, height = innerHeight;

  function* elements(root) {
    for (const element of root.querySelectorAll('*')) {
      yield element;
      if (element.shadowRoot) yield* elements(element.shadowRoot);
    }
  }
  function* controls(element) {
    yield* element.querySelectorAll(CONTROLS);
    for (const host of element.querySelectorAll('*')) if (host.shadowRoot) yield* controls(host.shadowRoot);
    if (element.shadowRoot) yield* controls(element.shadowRoot);
  }
  // The first of what names a control that is not blank: an icon button's text is only the white space around
  // its image, and its name is in its aria-label, its title or the image's alt text.
  const label = (control) => ([control.innerText, control.textContent, control.value,
    control.getAttribute('aria-label'), control.getAttribute('title'), control.querySelector('img[alt]')?.alt]
    .find((name) => name && name.trim()) || '')
    .toLowerCase().replace(/[\s\u00a0]+/g, ' ').replace(/[.!:;"“”«»()\[\]]/g, '').trim();
  const isDialog = (el) => el.matches('dialog[open], [role=dialog], [role=alertdialog], [aria-modal=true]');
  const visible = (el, box) => box.width >= 1 && box.height >= 1
    && el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
  // Whether `outer` is `inner` or holds it, across shadow roots (a host holds what its shadow root draws).
  const holds = (outer, inner) => {
    for (let node = inner; node; node = node.parentNode || node.host) if (node === outer) return true;
    return false;
  };
  // Whether the page shows `el` (or something inside it) at the middle of its visible part. Text slotted into
  // a web component is its host's child: a shadow root's hit test on it gives the host.
  const onTop = (el, box) => {
    const x = Math.min(Math.max((box.left + box.right) / 2, 0), width - 1);
    const y = Math.min(Math.max((box.top + box.bottom) / 2, 0), height - 1);
    const hit = el.getRootNode().elementFromPoint(x, y);
    return hit !== null && (holds(el, hit) || holds(hit, el));
  };
  // Page content: a lot of text, the page's main content, or its navigation (a banner's own row of two or
  // three links in a <nav> is not).
  const pageContent = (el, text) => text.length > MAX_TEXT
    || el.querySelector('main, article, [role=main]') !== null
    || el.matches('main, article, nav, header, footer, [role=main], [role=navigation], [role=banner], [role=contentinfo]')
    || [...el.querySelectorAll('nav, [role=navigation]')].some((nav) => nav.querySelectorAll('a').length > 4);
  const overlay = (el, style) => style.position === 'fixed' || style.position === 'sticky' || isDialog(el);
  // A bar in the page's flow rather than over it: a child of <body> above or below everything else on the
  // page (a script put it first or last), no taller than a bar.
  const SKIPPED = new Set(['SCRIPT', 'STYLE', 'LINK', 'NOSCRIPT', 'TEMPLATE']);
  const rendered = (el) => !SKIPPED.has(el.tagName) && el.getClientRects().length > 0;
  const edgeBar = (el, box) => {
    if (el.parentElement !== document.body || box.height > height * 0.35) return false;
    const shown = [...document.body.children].filter(rendered);
    return shown.length > 1 && (shown[0] === el || shown[shown.length - 1] === el);
  };
  const centred = (box) => Math.abs(box.left + box.width / 2 - width / 2) < width * 0.25
    && Math.abs(box.top + box.height / 2 - height / 2) < height * 0.25;
  const inViewport = (box) => box.bottom > 0 && box.top < height && box.right > 0 && box.left < width;
  // A control of the banner's own (a button or link, or anything short the pointer turns into a hand on,
  // like a "✖" drawn in a div) whose label is a consent action.
  const consentAction = (el) => {
    for (const control of controls(el)) {
      const text = label(control);
      if (text.length <= 80 && ACTION.test(text)) return true;
    }
    for (const child of el.querySelectorAll('div, span, i, b')) {
      if (child.childElementCount > 1) continue;
      const text = label(child);
      if (text.length <= 40 && ACTION.test(text) && getComputedStyle(child).cursor === 'pointer') return true;
    }
    return false;
  };
  const acceptsAndRefuses = (el) => {
    let accepts = false, refuses = false;
    for (const control of controls(el)) {
      const text = label(control);
      if (text.length > 60) continue;
      accepts ||= ACCEPT.test(text);
      refuses ||= REFUSE.test(text);
    }
    return accepts && refuses;
  };
  // What a consent tool leaves once answered: a small pinned button to change the choice ("Cookie
  // policy", a cookie icon). Hidden only in a job that saw a banner.
  const REVISIT = /cookie|consent|privacy|datenschutz|confidentialit|privacidad|gdpr|tracking/i;
  const revisitButton = (el, style, box) => style.position === 'fixed' && box.width * box.height < width * height * 0.04
    && box.width < width / 2 && (el.innerText || '').trim().length <= 40
    && [el, ...el.querySelectorAll(CONTROLS)].some((control) => (control.matches(CONTROLS)
      || getComputedStyle(control).cursor === 'pointer') && REVISIT.test(label(control)));

  // What an element says: with what its own shadow root shows (a web component that draws its banner
  // there), and what is slotted into it from outside its shadow root (a web component's banner text
  // usually is).
  const textOf = (el, shown) => {
    let text = (shown ? el.innerText : el.textContent) || '';
    for (const child of el.shadowRoot ? el.shadowRoot.children : []) {
      if (!['STYLE', 'SCRIPT', 'LINK', 'TEMPLATE'].includes(child.tagName)) {
        text += ' ' + ((shown ? child.innerText : child.textContent) || '');
      }
    }
    for (const slot of el.querySelectorAll('slot')) {
      for (const node of slot.assignedNodes({ flatten: true })) text += ' ' + (node.textContent || '');
    }
    return text.replace(/\s+/g, ' ').trim();
  };

  // The outermost overlays that are consent banners (or, with `signUp`, sign-up overlays; with `seen`,
  // the buttons a consent tool leaves), among `candidates`. One that is shown must be what the page shows
  // at its middle; one not shown yet (transparent, or outside the viewport: it fades or slides in) is
  // taken on its wording and actions alone.
  const banners = ({ signUp, seen }, candidates) => {
    const found = [];
    for (const el of candidates) {
      if (el === document.body || el === document.documentElement || !el.isConnected) continue;
      if (found.some((other) => other.contains(el))) continue;
      const style = getComputedStyle(el);
      if (style.display === 'none') continue;
      const inFlow = !overlay(el, style);
      if (inFlow && el.parentElement !== document.body) continue;
      const box = el.getBoundingClientRect();
      if (box.width < 1 || box.height < 1) continue;
      if (inFlow && !edgeBar(el, box)) continue;
      const shown = inViewport(box) && el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
      const text = textOf(el, shown);
      if (!text && !seen) continue;
      if (pageContent(el, text)) continue;
      if (shown && !onTop(el, box)) continue;
      const consent = (CONSENT.test(text) && consentAction(el)) || (PURPOSES.test(text) && acceptsAndRefuses(el));
      // A bar in the page's flow must name cookies or consent itself: a notice about personal data is not one.
      if (inFlow && !(consent && COOKIES_OR_CONSENT.test(text))) continue;
      const asksForAddress = signUp && shown && SIGN_UP.test(text) && (isDialog(el) || centred(box))
        && el.querySelector('input[type=email], input[name*=mail i], input[placeholder*=mail i]') !== null;
      if (consent || asksForAddress || (seen && revisitButton(el, style, box))) found.push(outermost(el, text));
    }
    return found;
  };
  // The banner's outermost box: its ancestors up to <body> that hold nothing but the banner (a consent
  // tool's root, a web component's host), so what they draw around it (a backdrop in a ::before) goes too.
  const outermost = (el, text) => {
    let top = el;
    for (let up = top.parentElement || top.getRootNode().host; up && up !== document.body
         && up !== document.documentElement; up = up.parentElement || up.getRootNode().host) {
      const own = (up.innerText || up.textContent || '').trim();
      if (own.length > text.length + 40 || pageContent(up, own)) break;
      top = up;
    }
    return top;
  };
  const everywhere = () => elements(document);

  // What a banner leaves behind once it is gone: the dimmed or blurred layer behind a modal (a fixed
  // element over the whole viewport, on top, with next to no text), a blur on the page's outer boxes,
  // and the scroll lock on <html>/<body> (overflow hidden, or the body pinned with position: fixed).
  // `heights`: of the banners just hidden; inline padding or margin a script put on <html>/<body> to make
  // room for one of them goes too.
  const undoLeftovers = (heights = []) => {
    let undone = 0;
    for (const el of [document.documentElement, document.body]) {
      for (const property of ['padding-top', 'padding-bottom', 'margin-top', 'margin-bottom']) {
        const value = parseFloat(el?.style.getPropertyValue(property));
        if (value > 0 && heights.some((height) => Math.abs(height - value) <= 2)) {
          el.style.removeProperty(property);
          undone++;
        }
      }
    }
    for (const el of elements(document)) {
      if (el === document.body || el === document.documentElement) continue;
      const style = getComputedStyle(el);
      if (style.position !== 'fixed') continue;
      const box = el.getBoundingClientRect();
      if (box.width < width * 0.9 || box.height < height * 0.9 || !visible(el, box)) continue;
      if ((el.innerText || '').trim().length > 20 || !onTop(el, box)) continue;
      el.style.setProperty('display', 'none', 'important');
      undone++;
    }
    const outer = [document.documentElement, document.body, ...(document.body ? document.body.children : [])];
    for (const el of outer) {
      const style = getComputedStyle(el);
      if (style.filter.includes('blur(')) { el.style.setProperty('filter', 'none', 'important'); undone++; }
      if (style.backdropFilter && style.backdropFilter.includes('blur(')) {
        el.style.setProperty('backdrop-filter', 'none', 'important');
        undone++;
      }
    }
    return undone + unlockScroll();
  };
  const unlockScroll = () => {
    let undone = 0;
    for (const el of [document.documentElement, document.body]) {
      if (!el) continue;
      const style = getComputedStyle(el);
      if (style.overflowY === 'hidden' || style.overflowY === 'clip') {
        el.style.setProperty('overflow-y', 'visible', 'important');
        undone++;
      }
      if (style.position === 'fixed') {
        const offset = -parseFloat(style.top) || 0;
        el.style.setProperty('position', 'static', 'important');
        el.style.setProperty('top', 'auto', 'important');
        if (offset > 0) window.scrollTo({left: window.scrollX, top: offset, behavior: 'instant'});
        undone++;
      }
    }
    return undone;
  };

  const shownNow = (el) => {
    const box = el.getBoundingClientRect();
    return inViewport(box) && el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
  };
  // A web component's own style sheet can keep its host shown past an inline `display: none !important`
  // (`:host { display: block !important }` wins over it: the shadow tree's important rules come first):
  // the host then gets a rule of its own in its shadow root, more specific than any a component writes.
  const HOST_HIDDEN = ':host(:not(#screenshot-service-shown)) { display: none !important; }';
  const hideOne = (el) => {
    el.style.setProperty('display', 'none', 'important');
    if (el.getClientRects().length && el.shadowRoot) {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(HOST_HIDDEN);
      el.shadowRoot.adoptedStyleSheets = [...el.shadowRoot.adoptedStyleSheets, sheet];
    }
    if (el.getClientRects().length) el.style.setProperty('visibility', 'hidden', 'important');
  };
  const hide = (found, seen) => {
    const heights = found.map((el) => el.getBoundingClientRect().height);
    for (const el of found) hideOne(el);
    if (found.length || seen) undoLeftovers(heights);
    return found.length;
  };

  // Whether autoconsent found a banner in this document (render/page/js/consent.js says so here as it tells the
  // worker, which may hear it late).
  const consentSeen = () => window[Symbol.for('screenshot-service.consent-seen')] === true;

  // The banners on the page now. Without `hide`, a page with banners is left alone (autoconsent may still
  // refuse them: the worker waits for it, then asks again with `hide`). Otherwise they are hidden, and,
  // when any banner was seen in this job (`seen`), what they left; then the page is watched until it is
  // unloaded, for a banner that comes later: one a script renders after load, a web component that
  // hydrates, or one that only becomes a banner when its style sheet arrives (no element changes then:
  // each style sheet that loads has the whole page looked at again). Once a banner was seen, a scroll lock
  // put on <html>/<body> later (a class added as the banner opens) goes too. Returns how many banners it
  // found, how many of them were shown and how many it hid.
  const clearBanners = (given) => {
    const options = { ...given, seen: given.seen || consentSeen() };
    const found = banners(options, everywhere());
    const shown = found.filter(shownNow).length;
    if (found.length && !options.hide) return { found: found.length, shown, hidden: 0 };
    const hidden = hide(found, options.seen);
    const key = Symbol.for('screenshot-service.banner-watch');
    if (window[key]) {  // what the watch saw stays seen: it may have hidden a banner since the last call
      window[key].options = { ...options, seen: options.seen || hidden > 0 || window[key].options.seen };
      return { found: found.length, shown, hidden };
    }
    const watch = { options: { ...options, seen: options.seen || hidden > 0 }, pending: new Set(), outer: false };
    window[key] = watch;
    const check = () => {
      const candidates = new Set();
      for (const node of watch.pending) {
        for (let up = node; up && up !== document.body; up = up.parentElement || up.getRootNode().host) {
          candidates.add(up);  // the banner may be an ancestor that was there, empty, before
        }
        for (const el of elements(node)) candidates.add(el);
        if (node.shadowRoot) for (const el of elements(node.shadowRoot)) candidates.add(el);
      }
      watch.pending.clear();
      watch.options.seen ||= consentSeen();
      if (hide(banners(watch.options, candidates), watch.options.seen)) watch.options.seen = true;
      else if (watch.outer && watch.options.seen) unlockScroll();
      watch.outer = false;
    };
    // Right away, not in a later task: the worker's next request (the capture itself) may be that task.
    const queue = () => {
      if (watch.pending.size || watch.outer) check();
    };
    new MutationObserver((records) => {
      for (const record of records) {
        if (record.type === 'childList') {
          for (const node of record.addedNodes) if (node.nodeType === 1) watch.pending.add(node);
        } else if (record.target === document.documentElement || record.target === document.body) {
          watch.outer = true;
        } else if (record.target.style.display !== 'none') {
          watch.pending.add(record.target);
        }
      }
      queue();
    }).observe(document.documentElement, { childList: true, subtree: true, attributes: true,
      attributeFilter: ['class', 'style', 'hidden', 'open'] });
    document.addEventListener('load', (event) => {
      if (event.target instanceof HTMLLinkElement || event.target instanceof HTMLStyleElement) {
        if (document.body) watch.pending.add(document.body);
        watch.outer = true;
        queue();
      }
    }, true);
    return { found: found.length, shown, hidden };
  };

  // Known platforms (render/page/rules/*.toml): when one of their elements is on the page, its scroll lock goes.
  const unlockAfterPlatforms = (selectors) => {
    const found = selectors.some((selector) => document.querySelector(selector) !== null);
    if (found) undoLeftovers();
    return found;
  };

  // Consent banners shown now that wall the page off (metadata_quality): a modal dialog, a box over a quarter
  // or more of the viewport, or a banner while the page's scrolling is locked. A bar along an edge is not one.
  const consentWalls = () => {
    const locked = [document.documentElement, document.body].some((el) => el && (
      ['hidden', 'clip'].includes(getComputedStyle(el).overflowY) || getComputedStyle(el).position === 'fixed'));
    return banners({ signUp: false, seen: false }, everywhere()).filter(shownNow).map((el) => {
      const box = el.getBoundingClientRect();
      const visibleArea = Math.max(0, Math.min(box.right, width) - Math.max(box.left, 0))
        * Math.max(0, Math.min(box.bottom, height) - Math.max(box.top, 0));
      return { coverage: Math.round(visibleArea / (width * height) * 100) / 100, dialog: isDialog(el), locked,
               text: (el.innerText || '').trim().slice(0, 120) };
    }).filter((wall) => wall.dialog || wall.locked || wall.coverage >= 0.25);
  };

  return { clearBanners, unlockAfterPlatforms, consentWalls }[task](argument);
}
