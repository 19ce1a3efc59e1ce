"""The fivespot compiler: config repo specs in, cluster artifacts out; and its checker.

Spec models and loading (with file:line errors), one emitter per artifact kind, deterministic
writing, and the compiler's commands (`cli`: `init`, `schema`, `reference`, `compile`,
`run-example`, `check`, `test`). The checker (`check/`: `fivespot check`, `test` and `audit`)
decides objects under the compiled policies, offline; it imports the compiling side, never the
reverse.
"""
