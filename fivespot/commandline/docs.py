"""Where the docs site is published, and the address of one of its pages.

Messages, warnings and alerts point a user at the page that explains them; a link into a README
section moves when the README does, so every pointer names a page of the site (built from docs/ by
`make docs`). The suite checks that each address a message names is a page, and its anchor a
heading, of the built site (tests/docs/test_docs_site.py).
"""

from __future__ import annotations

from typing import Final

DOCS_URL: Final = "https://finos.github.io/fivespot/"
"""The site's root, as pyproject.toml's Documentation URL gives it."""


def page(path: str) -> str:
    """`explanation/webhook.html#who-may-connect-to-the-webhook` -> its address on the site."""
    return DOCS_URL + path


WHO_MAY_CALL_THE_WEBHOOK: Final = page("explanation/webhook.html#who-may-connect-to-the-webhook")
"""The API server's addresses per platform (kind, EKS, GKE, OpenShift), for `allowedSources`."""

WEBHOOK_CLIENT_AUTHENTICATION: Final = page(
    "how-to/webhook-rollout.html#optional-the-api-server-authenticates-itself")
"""How to make the API server present a client certificate to the webhook (mutual TLS)."""

DELETING_A_SCHEDULED_MACHINE: Final = page(
    "explanation/machine-controller.html#deleting-a-scheduledmachine")
"""What to do when a ScheduledMachine cannot leave (its finalizer, the way out)."""
