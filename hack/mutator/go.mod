module sandbox.dev/hack/mutator

go 1.25.0
