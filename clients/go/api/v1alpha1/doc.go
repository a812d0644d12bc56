// Package v1alpha1 holds the Go types of the sandbox.dev/v1alpha1 API of
// sandbox-controller: Sandbox, SandboxWarmPool and SandboxClaim.
//
// The CustomResourceDefinitions under crd/ in the repository are the API; these
// types describe exactly their schemas (fields, types, enums, limits, required
// fields and the documentation of every field). hack/gen-go.sh drift checks
// it: it renders the schema these types and their kubebuilder markers describe
// with controller-gen and compares it with crd/ field by field.
//
// Deepcopy and the scheme registration are generated (hack/gen-go.sh); the
// typed clientset, listers, informers and apply configurations are in the
// module sandbox.dev/client-go.
//
// +k8s:deepcopy-gen=package
// +groupName=sandbox.dev
package v1alpha1
