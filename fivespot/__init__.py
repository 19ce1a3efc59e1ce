"""The `fivespot` command: the top of the house, one table of subcommands over the packages.

It owns no behaviour of its own: each subcommand is registered by the package it belongs to
(`compiler.cli`, `webhook.cli`, `controllers.cli`, `controllers.spotschedules.cli`) and runs behind
`commandline.boundary`.
"""

from commandline.leanimports import import_msgspec

import_msgspec()  # before any package imports msgspec (see commandline.leanimports)
