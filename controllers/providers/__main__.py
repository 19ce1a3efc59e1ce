"""`python -m controllers.providers manual|time-based|capital-markets --bundle PATH ...`: the
same command as `fivespot provider ...`, runnable without the `fivespot` entry point."""

import sys

from controllers.providers.cli import main

sys.exit(main())
