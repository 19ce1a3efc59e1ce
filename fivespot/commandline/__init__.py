"""What every fivespot command shares at its edge: the exit codes, the error boundary, and the
limits on the files and YAML it reads (`yamlbounds`).

Every entry point (`fivespot ...`, `python -m fivespot.webhook|controllers|controllers.spotschedules|devcluster`)
runs its handler through `boundary.run`, so no traceback reaches a user: an unexpected exception
becomes one line naming the command, the exception and where it was raised, with a documented
exit code, and the full trace is printed with `--debug` (or kept in the JSON log of the
long-running processes). It imports nothing of fivespot, so every package may use it.
"""
