package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Sandbox asks for one isolated Pod that mounts its owner's shared workspace.
// Creation is idempotent: Sandboxes with the same namespace, workspace owner,
// idempotency key and spec share one Pod.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=sandboxes,singular=sandbox,scope=Namespaced,shortName=sbx
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.podName`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.spec.idempotencyKey`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.workspaceOwner`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Shutdown",type=string,JSONPath=`.spec.lifecycle.shutdownTime`,priority=1,description="spec.lifecycle.shutdownTime, when the Sandbox stops holding its pod."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The requested sandbox. Immutable after creation except lifecycle: to ask for
	// something else, create a new Sandbox. Strings may not contain NUL characters
	// (the spec fingerprint is computed over them).
	Spec SandboxSpec `json:"spec"`

	// Observed state, written by sandbox-controller only.
	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxSpec is the requested sandbox.
//
// +kubebuilder:validation:XValidation:rule="self.image == oldSelf.image && has(self.command) == has(oldSelf.command) && (!has(self.command) || self.command == oldSelf.command) && has(self.args) == has(oldSelf.args) && (!has(self.args) || self.args == oldSelf.args) && has(self.env) == has(oldSelf.env) && (!has(self.env) || self.env == oldSelf.env) && has(self.resources) == has(oldSelf.resources) && (!has(self.resources) || self.resources == oldSelf.resources) && has(self.runtimeClassName) == has(oldSelf.runtimeClassName) && (!has(self.runtimeClassName) || self.runtimeClassName == oldSelf.runtimeClassName) && has(self.idempotencyKey) == has(oldSelf.idempotencyKey) && (!has(self.idempotencyKey) || self.idempotencyKey == oldSelf.idempotencyKey) && has(self.workspaceOwner) == has(oldSelf.workspaceOwner) && (!has(self.workspaceOwner) || self.workspaceOwner == oldSelf.workspaceOwner) && has(self.network) == has(oldSelf.network) && (!has(self.network) || self.network == oldSelf.network)",message="spec is immutable after creation except spec.lifecycle; create a new Sandbox for a new intent"
// +kubebuilder:validation:XValidation:rule="(has(self.command) ? self.command.map(s, size(s)).sum() : 0) + (has(self.args) ? self.args.map(s, size(s)).sum() : 0) + (has(self.env) ? self.env.map(e, size(e.name) + (has(e.value) ? size(e.value) : 0)).sum() : 0) <= 32768",message="command, args and env together may hold at most 32768 characters; pass larger inputs through the workspace"
type SandboxSpec struct {
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

	// Compute resources of the sandbox container (core/v1 ResourceRequirements).
	// Defaults to requests = limits = cpu 2, memory 4Gi.
	// +kubebuilder:default={requests:{cpu:"2",memory:"4Gi"},limits:{cpu:"2",memory:"4Gi"}}
	// +optional
	Resources *ResourceRequirements `json:"resources,omitempty"`

	// RuntimeClass the sandbox Pod runs with (for example gvisor or kata).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^\x00]*$`
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`

	// Caller-chosen idempotency key, 1 to 255 bytes, no control characters.
	// Scoped by the server to namespace and workspace owner (or, without an
	// owner, to the exact spec): retries with the same key get the same Pod,
	// and never another tenant's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1f\x7f-\x{9f}]+$`
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 255",message="idempotencyKey must be at most 255 bytes (UTF-8)"
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`

	// Owner whose shared workspace is mounted (<root>/<owner>/...). The creator
	// must be allowed to `use` workspaces.sandbox.dev named like the owner in this
	// namespace (RBAC), unless the operator chose ownerAuthorization: namespace. Must match
	// ^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$. Omit it for a sandbox with no shared
	// workspace; an empty string is invalid, never "no owner".
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`
	// +optional
	WorkspaceOwner string `json:"workspaceOwner,omitempty"`

	// The network the sandbox pod gets beyond its floor (contract section 9):
	// the allow profiles it names. Part of the spec fingerprint. No default:
	// absent stays absent (a pod reaches only DNS).
	// +optional
	Network *SandboxNetwork `json:"network,omitempty"`

	// When this Sandbox's use of its pod ends, and whether it is paused. The one
	// part of spec that may change after creation; never part of the spec
	// fingerprint or the scope digest (changing it never changes which pod the
	// Sandbox shares). No field has a default: absent stays absent.
	// +optional
	Lifecycle *SandboxLifecycle `json:"lifecycle,omitempty"`
}

// SandboxNetwork is what a sandbox pod may reach beyond its network floor.
type SandboxNetwork struct {
	// Names of cluster-scoped SandboxNetworkProfiles whose egress the pod gets
	// (at most 8, distinct). The creator must be allowed to `use`
	// sandboxnetworkprofiles.sandbox.dev of each name (RBAC); a profile never
	// lifts the floor (other owners' sandboxes, the API server, 169.254.0.0/16,
	// 100.64.0.0/10, fc00::/7, fe80::/10 stay unreachable).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	Profiles []string `json:"profiles"`
}

// SandboxLifecycle says when a Sandbox's use of its pod ends, and whether it
// is paused.
type SandboxLifecycle struct {
	// RFC 3339 time at which the Sandbox stops holding its pod: it becomes
	// Expired (final), and the pod goes when no active Sandbox holds it. May be
	// moved later or earlier before it is reached; a time in the past expires
	// it now.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// What happens to this Sandbox at shutdownTime: Retain (absent means Retain)
	// keeps it with phase Expired; Delete deletes it.
	// +optional
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`

	// true releases the pod (deleted once every Sandbox bound to it is
	// suspended, expired or gone) while the workspace stays; false again resumes
	// it under the same name, with the same spec and mounts, authorized anew
	// for the identity that resumes.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// ShutdownPolicy is what happens to a Sandbox at its shutdownTime.
// +kubebuilder:validation:Enum=Retain;Delete
type ShutdownPolicy string

const (
	// ShutdownRetain keeps the Sandbox with phase Expired (also when absent).
	ShutdownRetain ShutdownPolicy = "Retain"
	// ShutdownDelete deletes the Sandbox.
	ShutdownDelete ShutdownPolicy = "Delete"
)

// SandboxStatus is the observed state of a Sandbox, written by
// sandbox-controller only.
type SandboxStatus struct {
	// Pending, Running, Succeeded or Failed follow the bound Pod (Failed also when
	// it was deleted out of band); Rejected when no Pod can be bound; Suspended
	// while spec.lifecycle.suspend is true; Expired once shutdownTime is reached
	// (final), also for a new Sandbox whose key's generation already expired.
	// +optional
	Phase SandboxPhase `json:"phase,omitempty"`

	// IP address of the bound Pod while it runs.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	PodIP string `json:"podIP,omitempty"`

	// The metadata.generation at which the controller last suspended this
	// Sandbox; a resume needs an owner authorization of a later generation.
	// +optional
	SuspendedGeneration int64 `json:"suspendedGeneration,omitempty"`

	// Name of the Pod this Sandbox is bound to.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PodName string `json:"podName,omitempty"`

	// UID of the bound Pod; a Pod re-created under the same name is a different
	// Pod and does not count as the bound one.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	PodUID string `json:"podUID,omitempty"`

	// Idempotency scope digest (namespace, owner, key), 32 lowercase hex digits.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{32}$`
	// +optional
	ScopeDigest string `json:"scopeDigest,omitempty"`

	// SHA-256 of the canonical (RFC 8785) spec, 64 lowercase hex digits.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	SpecFingerprint string `json:"specFingerprint,omitempty"`

	// Created when this Sandbox created the Pod; Adopted when it was bound to a Pod
	// an earlier Sandbox with the same scope and key created; Warm when it was bound
	// to a Ready warm pod of a SandboxWarmPool.
	// +optional
	Binding SandboxBinding `json:"binding,omitempty"`

	// When the idempotency key was claimed (the Pod's claim time).
	// +optional
	ClaimedAt *metav1.Time `json:"claimedAt,omitempty"`

	// When the idempotency key stops matching new Sandboxes.
	// +optional
	KeyExpiresAt *metav1.Time `json:"keyExpiresAt,omitempty"`

	// The metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Bound and Ready conditions.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
}

// SandboxPhase is where a Sandbox stands.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Rejected;Suspended;Expired
type SandboxPhase string

// The phases of a Sandbox.
const (
	PhasePending   SandboxPhase = "Pending"
	PhaseRunning   SandboxPhase = "Running"
	PhaseSucceeded SandboxPhase = "Succeeded"
	PhaseFailed    SandboxPhase = "Failed"
	PhaseRejected  SandboxPhase = "Rejected"
	PhaseSuspended SandboxPhase = "Suspended"
	PhaseExpired   SandboxPhase = "Expired"
)

// SandboxBinding says how a Sandbox came to its Pod.
// +kubebuilder:validation:Enum=Created;Adopted;Warm
type SandboxBinding string

// The bindings of a Sandbox.
const (
	BindingCreated SandboxBinding = "Created"
	BindingAdopted SandboxBinding = "Adopted"
	BindingWarm    SandboxBinding = "Warm"
)

// The condition types of a Sandbox, and the reasons the controller gives
// (docs/api.md has the table).
const (
	ConditionBound = "Bound"
	ConditionReady = "Ready"

	ReasonPodCreated             = "PodCreated"
	ReasonPodAdopted             = "PodAdopted"
	ReasonWaiting                = "Waiting"
	ReasonIdempotencyKeyConflict = "IdempotencyKeyConflict"
	ReasonInvalidSpec            = "InvalidSpec"
	ReasonForeignPodConflict     = "ForeignPodConflict"
	ReasonOwnerNotAuthorized     = "OwnerNotAuthorized"
	ReasonQuotaWaiting           = "QuotaWaiting"
	ReasonQuotaExceeded          = "QuotaExceeded"
	ReasonPodPending             = "PodPending"
	ReasonPodSucceeded           = "PodSucceeded"
	ReasonPodFailed              = "PodFailed"
	ReasonPodMissing             = "PodMissing"
	ReasonPodTampered            = "PodTampered"
	ReasonNotBound               = "NotBound"
	ReasonSuspended              = "Suspended"
	ReasonExpired                = "Expired"
)

// SandboxList is a list of Sandboxes.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}
