"""`python -m fivespot ...`: the `fivespot` command without its console script."""

import sys

from fivespot.cli.main import main

sys.exit(main())
