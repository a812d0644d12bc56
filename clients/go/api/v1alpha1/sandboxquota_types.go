package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A SandboxQuota limits what one workspace owner may hold in its namespace: active sandboxes
// (pods of Pending and Running Sandboxes, resumed ones included; retries of one intent count
// once) and warm pods of its pools. With spec.owner it is that owner's; without, it is every
// owner's of the namespace that has no SandboxQuota of its own, ownerless Sandboxes included
// (counted as one owner). Set by the operator; the controller binds within it.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=sandboxquotas,singular=sandboxquota,scope=Namespaced,shortName=sbxq
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Max-Active",type=integer,JSONPath=`.spec.maxActive`
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="Max-Warm",type=integer,JSONPath=`.spec.maxWarm`
// +kubebuilder:printcolumn:name="Warm",type=integer,JSONPath=`.status.warm`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The limits, and whose they are.
	Spec SandboxQuotaSpec `json:"spec"`

	// What is counted, written by sandbox-controller only.
	// +optional
	Status SandboxQuotaStatus `json:"status,omitempty"`
}

// SandboxQuotaSpec is a quota: the limits, whose they are, and what a Sandbox past them gets.
type SandboxQuotaSpec struct {
	// The workspace owner the quota is for. Omitted: every owner of the namespace without a
	// SandboxQuota of its own, and ownerless Sandboxes, each counted on its own.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`
	// +optional
	Owner string `json:"owner,omitempty"`

	// The most active sandboxes the owner may hold in the namespace: pods of Sandboxes that
	// are Pending or Running (a resume counts; Sandboxes sharing one pod, retries of one intent,
	// count once). Omitted: no limit.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxActive *int32 `json:"maxActive,omitempty"`

	// The most warm pods the owner's SandboxWarmPools may hold in the namespace together.
	// Omitted: no limit.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxWarm *int32 `json:"maxWarm,omitempty"`

	// What a Sandbox past maxActive gets: Queue (it waits, Bound=False/QuotaWaiting, and is
	// bound in arrival order when a slot frees) or Reject (phase Rejected,
	// Bound=False/QuotaExceeded, the stored outcome for its key; admission refuses it at once
	// where it can). Omitted: Queue.
	// +kubebuilder:validation:Enum=Queue;Reject
	// +optional
	Mode QuotaMode `json:"mode,omitempty"`
}

// QuotaMode is what a Sandbox past its owner's quota gets.
type QuotaMode string

// The modes of a SandboxQuota.
const (
	QuotaQueue  QuotaMode = "Queue"
	QuotaReject QuotaMode = "Reject"
)

// SandboxQuotaStatus is what is counted against the quota, summed over the owners it governs.
type SandboxQuotaStatus struct {
	// Active sandboxes held (quota slots, one per intent).
	// +optional
	Active int32 `json:"active"`

	// Warm pods of the owners' pools.
	// +optional
	Warm int32 `json:"warm"`

	// Suspended Sandboxes (they hold no slot; a resume needs one), reported apart.
	// +optional
	Suspended int32 `json:"suspended"`

	// Sandboxes waiting for a slot (mode Queue).
	// +optional
	Waiting int32 `json:"waiting"`

	// The same per owner, for a quota without spec.owner: at most 100 owners, those holding the
	// most first; the ownerless Sandboxes as owner "".
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Owners []QuotaOwnerStatus `json:"owners,omitempty"`

	// The metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// QuotaOwnerStatus is what one owner holds.
type QuotaOwnerStatus struct {
	// The owner ("" for ownerless Sandboxes).
	// +kubebuilder:validation:MaxLength=63
	Owner string `json:"owner"`

	// Active sandboxes held.
	Active int32 `json:"active"`

	// Warm pods.
	Warm int32 `json:"warm"`

	// Suspended Sandboxes.
	Suspended int32 `json:"suspended"`

	// Sandboxes waiting for a slot.
	Waiting int32 `json:"waiting"`
}

// SandboxQuotaList is a list of SandboxQuotas.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type SandboxQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxQuota `json:"items"`
}
