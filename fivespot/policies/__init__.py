"""The built-in policy library and the engine that evaluates it, defined once.

`admission` holds every ValidatingAdmissionPolicy's CEL as a named constant; `cel` is the one
CEL engine (compile, type-check, estimate cost, evaluate); `admission_eval` decides, offline,
what the API server's admission decides for a custom resource. The compiler emits and
pre-checks these rules, `fivespot check` and the webhook's polyfill evaluate them. (The
field-path rule is part of the cluster API: `fivespot.api.fieldpath`.)
"""
