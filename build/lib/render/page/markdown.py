"""The `markdown` source: Markdown rendered to a complete, styled page before it is loaded.

Its library is imported on first use: a worker that never meets Markdown never holds it.
"""

from __future__ import annotations

import html as html_lib

# A readable, self-contained page style: no external fonts or assets.
MARKDOWN_STYLE = """
:root { color-scheme: light dark; }
body { font-family: "Liberation Sans", "Noto Sans", Arial, sans-serif; line-height: 1.6;
       max-width: 860px; margin: 0 auto; padding: 32px 24px; color: #1f2328; background: #ffffff; }
h1, h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; }
code, pre { font-family: "Liberation Mono", monospace; background: #f6f8fa; border-radius: 6px; }
code { padding: .2em .4em; font-size: 85%; }
pre { padding: 16px; overflow: auto; }
pre code { padding: 0; background: none; }
blockquote { margin: 0; padding: 0 1em; color: #59636e; border-left: .25em solid #d1d9e0; }
table { border-collapse: collapse; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; }
img { max-width: 100%; }
"""


def markdown_to_html(text: str, title: str = "Document") -> str:
    """Render Markdown (CommonMark with tables and strikethrough) to a complete, styled page."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    body = renderer.render(text)
    return (
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
        f"<title>{html_lib.escape(title)}</title><style>{MARKDOWN_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )
