module sandbox.dev/hack/faultproxy

go 1.25.0
