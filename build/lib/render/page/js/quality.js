// The page side of render/page/quality.py, evaluated as `(rules) => findings`: whether the page is a bot
// challenge (render/page/rules/challenges.toml), and whether it shows anything at all (text, or a visible
// image, video, canvas, SVG or frame).
(rules) => {
  const visible = (el) => el.checkVisibility({ opacityProperty: true, visibilityProperty: true })
    && el.getBoundingClientRect().width >= 2 && el.getBoundingClientRect().height >= 2;
  const text = (document.body ? document.body.innerText : '').trim();
  const media = [...document.querySelectorAll('img, video, canvas, svg, iframe, picture, object, embed')]
    .some(visible);
  const challenge = (() => {
    const title = document.title.trim();
    for (const vendor of rules.vendors) {
      const byTitle = (vendor.titles || []).find((pattern) => new RegExp(`^(${pattern})$`, 'i').test(title));
      if (byTitle) return { vendor: vendor.name, evidence: `title: ${title}` };
      const bySelector = (vendor.selectors || []).find((selector) => document.querySelector(selector));
      if (bySelector) return { vendor: vendor.name, evidence: bySelector };
    }
    if (text.length <= rules.wallText) {
      const widget = rules.widgets.find((selector) => [...document.querySelectorAll(selector)].some(visible));
      if (widget) return { vendor: 'CAPTCHA', evidence: widget };
    }
    return null;
  })();
  return { challenge, empty: !text && !media, textLength: text.length };
}
