"""`python -m fivespot.controllers.spotschedules manual|time-based|capital-markets --bundle PATH ...`: the
same command as `fivespot provider ...`, runnable without the `fivespot` entry point."""

import sys

from fivespot.controllers.spotschedules.cli import main

sys.exit(main())
