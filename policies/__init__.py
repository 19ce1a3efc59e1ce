"""The built-in policy library: every rule fivespot enforces, defined once.

The compiler emits these rules into CRD schemas, CEL rules and admission policies; the offline
checker and the webhook evaluate them; the controllers re-check them before every write. Keeping
the definitions here is what lets all of those layers agree.
"""
