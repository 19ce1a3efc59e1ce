"""`python -m webhook serve ...`: the webhook without the rest of the `fivespot` CLI (tests,
benchmarks, and anyone running only the webhook)."""

import sys

from webhook.cli import main

sys.exit(main())
