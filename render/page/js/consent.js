// The page side of render/page/consent.py, run at the start of every document of a page that has served a
// block_cookie_banners job. It asks the worker (through the binding __BINDING__) whether the job now on
// the page wants autoconsent; only then does it run autoconsent's Playwright bundle
// (dist/autoconsent.playwright.js, unmodified, compiled only when called), with the configuration and
// the rules for this document the worker answered. Otherwise it does nothing more.
//
// The bundle talks to its host through window.autoconsentSendMessage: its `init` is answered here at
// once; the worker is sent only what it acts on: what the bundle found and did (the worker waits for an
// opt-out under way before it captures) and each new look it starts for a consent platform (the worker
// gives it its first two, the second with its heuristic, for a banner it has not taken). The rules'
// snippets run inline (`isMainWorld`: this script is in the page's main world), so no `eval` is sent.
(() => {
  // The page side of render/page/annoyances.py (render/page/js/annoyances.js), compiled with this script (which
  // Chromium keeps compiled) so that the worker's looks at a block_cookie_banners job's page each cost a call.
  if (!Object.hasOwn(window, Symbol.for('screenshot-service.annoyances'))) {
    Object.defineProperty(window, Symbol.for('screenshot-service.annoyances'), { value: (
__PAGE_SIDE__
    ) });
  }
  const toWorker = window.__BINDING__;
  if (typeof toWorker !== 'function' || window.autoconsentSendMessage) return;
  const FORWARDED = new Set(['cmpDetected', 'popupFound', 'optOutResult', 'optInResult', 'autoconsentDone']);
  const autoconsent = () => {
__BUNDLE__
  };
  toWorker({ type: 'init', url: location.href }).then((answer) => {
    if (!answer || window.autoconsentSendMessage) return;
    let looks = 0;
    window.autoconsentSendMessage = async (message) => {
      if (!message || typeof message !== 'object') return;
      if (message.type === 'init') {
        // The bundle sets autoconsentReceiveMessage right after sending `init`.
        queueMicrotask(() => window.autoconsentReceiveMessage(
          { type: 'initResp', config: answer.config, rules: { autoconsent: [], compact: JSON.parse(answer.rules) } }));
      } else if (message.type === 'report') {
        const attempts = message.state?.findCmpAttempts || 0;
        if (attempts > looks && attempts <= 3) {
          looks = attempts;
          toWorker({ type: 'looking', attempts });
        }
      } else if (FORWARDED.has(message.type)) {
        const { type, cmp, result } = message;
        // Said in the page too, where render/page/js/annoyances.js decides what to hide: a worker short of CPU
        // may hear this only after its first look, when the banner has already faded out and left its button.
        if (type !== 'cmpDetected') window[Symbol.for('screenshot-service.consent-seen')] = true;
        toWorker({ type, cmp, result });
      }
    };
    autoconsent();
  }, () => {});
})();
