// The page side of render/consent.py, run in every document before autoconsent's Playwright bundle
// (dist/autoconsent.playwright.js, unmodified), which talks to its host through
// window.autoconsentSendMessage. This answers the bundle's `init` at once with the configuration and
// the rules (no round trip to the worker per frame) and forwards to the worker only what it acts on:
// `eval` (run by the worker in the frame's main world, as autoconsent's own Playwright runner does) and
// what the bundle found and did (the worker waits for an opt-out under way before it captures).
// __BINDING__, __CONFIG__ and __RULES__ are filled in by render/consent.py.
(() => {
  const toWorker = window.__BINDING__;
  if (typeof toWorker !== 'function' || window.autoconsentSendMessage) return;
  const config = __CONFIG__;
  const FORWARDED = new Set(['eval', 'cmpDetected', 'popupFound', 'optOutResult', 'optInResult', 'autoconsentDone']);
  let rules = null;
  window.autoconsentSendMessage = async (message) => {
    if (!message || typeof message !== 'object') return;
    if (message.type === 'init') {
      rules = rules || JSON.parse(__RULES__);
      // The bundle sets autoconsentReceiveMessage right after sending `init`.
      queueMicrotask(() => window.autoconsentReceiveMessage(
        { type: 'initResp', config, rules: { autoconsent: [], compact: rules } }));
    } else if (FORWARDED.has(message.type)) {
      const { type, id, code, cmp, result } = message;
      toWorker({ type, id, code, cmp, result: type === 'eval' ? undefined : result });
    }
  };
})();
