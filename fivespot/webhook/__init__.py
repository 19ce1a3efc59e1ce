"""The fivespot admission webhook: what CEL cannot check, served over TLS."""
