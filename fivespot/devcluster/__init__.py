"""A real local control plane (kube-apiserver + etcd built from Go modules) for tests and demos.

It is started the way controller-runtime's envtest starts one: RBAC authorization, a generated
serving and client CA, an admin client certificate and service-account signing keys, so the real
authorizer and real admission decide everything the tests assert.
"""
