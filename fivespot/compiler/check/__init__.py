"""The checker: `fivespot check`, `fivespot test` and `fivespot audit`, the compiler's second product.

Compiling turns a config repo into cluster artifacts; checking decides objects as the API server
would admit them under those artifacts, offline: objects read from files as kubectl sends them
(`objectyaml`), decided (`objects`, on forked workers for a large input: `pool`; the policies read
and CEL compiled kept between runs: `cache`; one governor per field among the objects given:
`governance`), a config repo's Fixtures run (`fixtures`), stored objects audited (`audit`), and the
results shown (`render`). It imports the compiling side (a Fixture's repo is compiled in memory);
the compiling side never imports it (`.importlinter`).
"""
