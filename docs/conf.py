"""Sphinx configuration of the fivespot documentation site (`make docs`, built strictly in `make test`).

Sphinx with MyST rather than Material for MkDocs (docs/contributing/docs.md): every page stays
Markdown, and Sphinx resolves every link between pages, to a heading or to a label, at build time,
so with warnings as errors a broken link fails the build; the CLI reference is generated from the
parser itself (sphinx-argparse). The kinds' page is written by `fivespot reference` (`make reference`) and
checked current by the suite; the metrics, alerts and exit codes are rendered from the code at
build time (docs/_ext/fivespot_docs.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from fivespot.commandline.docs import DOCS_URL  # noqa: E402

project = "fivespot"
author = "the fivespot authors"
copyright = "the fivespot authors, Apache-2.0"

extensions = ["myst_parser", "sphinxarg.ext", "fivespot_docs"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_ext", "README.md", "**/README.md"]
root_doc = "index"

myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

html_theme = "furo"
html_title = "fivespot"
html_baseurl = DOCS_URL
html_static_path: list[str] = []
html_copy_source = False
html_show_sourcelink = False

# A reference that does not resolve is a warning, and `make docs` makes every warning an error.
nitpicky = True
