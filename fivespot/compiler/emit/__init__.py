"""One emitter per artifact kind. Each is a pure function `Repo -> list[Artifact]`: it builds
objects and never writes files; `fivespot.compiler.output` renders and writes them all at once.
"""
