"""`python -m fivespot.webhook serve ...`: the webhook without the rest of the `fivespot` CLI (tests,
benchmarks, and anyone running only the webhook)."""

import sys

from fivespot.webhook.cli import main

sys.exit(main())
