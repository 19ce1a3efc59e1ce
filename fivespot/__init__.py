"""fivespot: every part of it lives under this one package, so that installing it beside other
packages shadows none of them (decision 0037).

`cli` is the `fivespot` command; below it `devcluster`, then `compiler`, `webhook`,
`controllers` and `deploy`, then `runtime` and `policies`, then `api` and `commandline` (the
layers in `.importlinter`, enforced by `make imports`).
"""


from fivespot.commandline.leanimports import import_msgspec

import_msgspec()  # before any package imports msgspec (see commandline.leanimports)
