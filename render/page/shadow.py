"""`include_shadow_dom`: the page's content with what its web components render in their shadow roots.

A plain serialization (`page.content()`) holds the light DOM only: a component's text lives in its shadow
root, so it is missing from the HTML and the Markdown. Shadow roots are found over CDP, which sees closed
ones too (a page's scripts cannot), and handed to the page's own serializers:
- HTML: `getHTML({shadowRoots})` writes each root as a declarative `<template shadowrootmode>` inside its
  host, which a browser parses back into the same shadow tree;
- Markdown: the composed tree as a person reads it (each host's shadow content in place of its children,
  slotted children where the slots are), without what is not rendered, as `VISIBLE_DOCUMENT` does for the
  light DOM.
Roots inside frames belong to other documents and are left out, as the frames' content is.
"""

from __future__ import annotations

from typing import Any

from render.browser.tabs import Tab

_HTML = """function (...roots) {
  const outer = this.documentElement.cloneNode(false).outerHTML;
  const close = outer.lastIndexOf('</');
  const inner = this.documentElement.getHTML({ shadowRoots: roots });
  const doctype = this.doctype ? '<!DOCTYPE ' + this.doctype.name + '>' : '';
  return doctype + outer.slice(0, close) + inner + outer.slice(close);
}"""

_COMPOSED = """function (...roots) {
  const rootOf = new Map(roots.map((root) => [root.host, root]));
  const SKIPPED = new Set(['script', 'style', 'template', 'noscript']);
  const copy = (node) => {
    if (node.nodeType === Node.TEXT_NODE) return node.cloneNode();
    if (node.nodeType !== Node.ELEMENT_NODE || SKIPPED.has(node.localName)) return null;
    if (node.localName === 'slot') {
      const assigned = node.assignedNodes({ flatten: true });
      const fragment = document.createDocumentFragment();
      for (const child of assigned.length ? assigned : node.childNodes) {
        const made = copy(child);
        if (made) fragment.append(made);
      }
      return fragment;
    }
    if (!node.checkVisibility({ visibilityProperty: true })
        && getComputedStyle(node).display !== 'contents') return null;
    const made = node.cloneNode(false);
    for (const child of (rootOf.get(node) || node).childNodes) {
      const part = copy(child);
      if (part) made.append(part);
    }
    return made;
  };
  const body = this.body ? copy(this.body) : null;
  const head = this.head ? this.head.cloneNode(true) : null;
  const html = this.documentElement.cloneNode(false);
  if (head) html.append(head);
  if (body) html.append(body);
  return '<!DOCTYPE html>' + html.outerHTML;
}"""


async def _roots(tab: Tab) -> list[dict[str, str]]:
    """Every shadow root of the top document (open, closed and user-agent ones of form controls excluded),
    as CDP call arguments."""
    tree = await tab.send("DOM.getDocument", {"depth": -1, "pierce": True})
    found: list[int] = []

    def walk(node: dict[str, Any]) -> None:
        for root in node.get("shadowRoots", []):
            if root.get("shadowRootType") != "user-agent":
                found.append(root["backendNodeId"])
            walk(root)
        for child in node.get("children", []):
            walk(child)  # a frame's document is `contentDocument`, not a child: not walked

    walk(tree["root"])
    arguments = []
    for backend_id in found:
        resolved = await tab.send("DOM.resolveNode", {"backendNodeId": backend_id})
        arguments.append({"objectId": resolved["object"]["objectId"]})
    return arguments


async def serialize(tab: Tab, *, composed: bool) -> str:
    """The top document with its shadow roots: as HTML with declarative shadow roots, or (`composed`) as
    the composed tree a person reads, for Markdown."""
    arguments = await _roots(tab)
    document = await tab.send("Runtime.evaluate", {"expression": "document"})
    result = await tab.send("Runtime.callFunctionOn", {
        "functionDeclaration": _COMPOSED if composed else _HTML, "objectId": document["result"]["objectId"],
        "arguments": arguments, "returnByValue": True})
    if "exceptionDetails" in result:
        raise RuntimeError(f"include_shadow_dom: {result['exceptionDetails'].get('text', 'failed')}")
    return str(result["result"]["value"])
