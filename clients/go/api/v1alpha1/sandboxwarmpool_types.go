package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A SandboxWarmPool keeps spec.replicas pods warm for one template and owner: a new Sandbox
// whose spec, without idempotencyKey and lifecycle, equals them is bound to one of its Ready warm pods instead
// of waiting for a new pod.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=sandboxwarmpools,singular=sandboxwarmpool,scope=Namespaced,shortName=swp
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.workspaceOwner`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The pool: how many warm pods, of which template and owner.
	Spec SandboxWarmPoolSpec `json:"spec"`

	// Observed state, written by sandbox-controller only.
	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty"`
}

// SandboxWarmPoolSpec is a pool: how many warm pods, of which template and owner.
type SandboxWarmPoolSpec struct {
	// Warm pods to keep (0..1000).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas int32 `json:"replicas"`

	// Owner whose shared workspace the warm pods mount from the start (<root>/<owner>/...).
	// The identity that creates or changes the pool must be allowed to `use` workspaces.sandbox.dev
	// named like the owner in this namespace (RBAC), unless the operator chose ownerAuthorization: namespace.
	// Its warm pods are only ever bound to Sandboxes of this namespace and this owner whose own authorization
	// verifies. Omit it for pods with no shared workspace.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`
	// +optional
	WorkspaceOwner string `json:"workspaceOwner,omitempty"`

	// The pod-shaping part of a Sandbox spec, with the same limits and defaults: a Sandbox
	// with this spec (and this owner) gets one of the pool's warm pods.
	Template SandboxTemplate `json:"template"`
}

// SandboxTemplate is the pod-shaping part of a SandboxSpec (image, command,
// args, env, resources, runtimeClassName, network) with the same limits and defaults.
//
// +kubebuilder:validation:XValidation:rule="(has(self.command) ? self.command.map(s, size(s)).sum() : 0) + (has(self.args) ? self.args.map(s, size(s)).sum() : 0) + (has(self.env) ? self.env.map(e, size(e.name) + (has(e.value) ? size(e.value) : 0)).sum() : 0) <= 32768",message="command, args and env together may hold at most 32768 characters; pass larger inputs through the workspace"
type SandboxTemplate struct {
	// Container image the sandbox runs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^\x00]*$`
	Image string `json:"image"`

	// Entrypoint array; replaces the image's ENTRYPOINT when set (at most 64 items of 32768 characters).
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=32768
	// +kubebuilder:validation:items:Pattern=`^[^\x00]*$`
	// +optional
	Command []string `json:"command,omitempty"`

	// Arguments to the entrypoint; replace the image's CMD when set (at most 256 items of 32768 characters).
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=32768
	// +kubebuilder:validation:items:Pattern=`^[^\x00]*$`
	// +optional
	Args []string `json:"args,omitempty"`

	// Environment variables set in the sandbox container (at most 256).
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// Compute resources of the sandbox container (core/v1 ResourceRequirements). Defaults
	// to requests = limits = cpu 2, memory 4Gi.
	// +kubebuilder:default={requests:{cpu:"2",memory:"4Gi"},limits:{cpu:"2",memory:"4Gi"}}
	// +optional
	Resources *ResourceRequirements `json:"resources,omitempty"`

	// RuntimeClass the sandbox Pod runs with (for example gvisor or kata).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^\x00]*$`
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`

	// The network the warm pods get beyond their floor (contract section 9): the allow
	// profiles they name. Part of the template fingerprint: a Sandbox gets a warm pod only when it
	// names the same profiles (or none, as the pool). The identity that creates the pool or changes
	// its template must be allowed to `use` each. No default: absent stays absent.
	// +optional
	Network *SandboxNetwork `json:"network,omitempty"`
}

// SandboxWarmPoolStatus is the observed state of a pool, written by
// sandbox-controller only.
type SandboxWarmPoolStatus struct {
	// Warm pods of the present template (Ready or not).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Warm pods Ready to be bound.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// The label selector of the warm pods (for the scale subresource).
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Selector string `json:"selector,omitempty"`

	// SHA-256 of the RFC 8785 form of the template and owner.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	TemplateFingerprint string `json:"templateFingerprint,omitempty"`

	// Since when the present template is in place; its warm pods are bound only after the
	// settle time (docs/api.md).
	// +optional
	TemplateSince *metav1.Time `json:"templateSince,omitempty"`

	// The metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// The controller's sealed note that the owner authorization record of the pool was made while
	// the admission webhook was in force; a later change of the webhook configuration does not take
	// it back (docs/api.md).
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	OwnerAuthorizationVerified string `json:"ownerAuthorizationVerified,omitempty"`

	// Ready (the pool is authorized and full) and its reason.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
}

// SandboxWarmPoolList is a list of SandboxWarmPools.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}
