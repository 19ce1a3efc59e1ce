"""The fivespot compiler: config repo specs in, cluster artifacts out.

Spec models and loading (with file:line errors), one emitter per artifact kind, deterministic
writing, and the `fivespot` command line.
"""
