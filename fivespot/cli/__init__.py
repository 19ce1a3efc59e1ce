"""The `fivespot` command: the top of the house, one table of subcommands over the packages.

It owns no behaviour of its own: each subcommand is registered by the package it belongs to
(`fivespot.compiler.cli`, `fivespot.webhook.cli`, `fivespot.controllers.cli`,
`fivespot.controllers.spotschedules.cli`) and runs behind `fivespot.commandline.boundary`;
`main.py` is the parser and the table.
"""
