"""MkDocs hooks for the documentation site (see mkdocs.yml).

- CHANGELOG.md becomes the changelog page and CONTRIBUTING.md the contributors'
  page, so each is written once, where a visitor of the repository finds it
  too. (README.md is not a page: it is the short front door of the repository
  and the package index, and links into these pages.)
- Links are rewritten for the site: to a page under docs/ relative to the
  page, to the type stubs as a link to the API reference, and to any other
  file of the repository (which the site does not carry) as its plain label.
- Sphinx-style roles in the docstrings (``:class:`Lock```) are shown as code.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
DOCS = "docs"
# Pages made from files outside docs/: (site page, repository file).
BROUGHT_IN = {"changelog.md": "CHANGELOG.md", "contributing.md": "CONTRIBUTING.md"}
STUBS = "python/ferrolock/_ferrolock.pyi"
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj):(?=<code>)")


def on_files(files, config):
    for page, source in BROUGHT_IN.items():
        files.append(File.generated(config, page, content=(ROOT / source).read_text(encoding="utf-8")))
    return files


def _rewrite(target: str, page_repo_path: str, page_site_path: str):
    """The site's link for `target` written in the page at `page_repo_path`,
    or None when the site has no such page (the label stays, unlinked)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
        return target  # a URL, or an anchor on the same page
    path, hash_, anchor = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo_path), path))
    if repo_path == STUBS:
        site_path = "api.md"
    elif repo_path.startswith(DOCS + "/"):
        site_path = repo_path[len(DOCS) + 1 :]
    else:
        site_path = {source: page for page, source in BROUGHT_IN.items()}.get(repo_path)
        if site_path is None:
            return None
    relative = posixpath.relpath(site_path, posixpath.dirname(page_site_path) or ".")
    return relative + hash_ + anchor


def on_page_markdown(markdown, page, config, files):
    site_path = page.file.src_uri
    repo_path = BROUGHT_IN.get(site_path, f"{DOCS}/{site_path}")
    out, in_code = [], False
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line.lstrip()):
            in_code = not in_code
        if not in_code:

            def link(m):
                bang, label, target = m.groups()
                new = _rewrite(target, repo_path, site_path)
                return label if new is None and not bang else f"{bang}[{label}]({new or target})"

            line = LINK.sub(link, line)
        out.append(line)
    return "".join(out)


def on_page_content(html, page, config, files):
    return ROLE.sub("", html)
