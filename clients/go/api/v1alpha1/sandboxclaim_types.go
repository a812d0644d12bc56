package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What one generation of an idempotency key became when its pod is not the
// whole story: Suspended (released; its Sandboxes may resume it), Expired (a
// late retry within the key's lifetime gets Expired, no pod) or Rejected (its
// owner's quota was full in mode Reject: a retry gets Rejected, no pod); or a
// quota slot the generation holds (Slot). Written by sandbox-controller only.
//
// +genclient
// +genclient:onlyVerbs=get,list,watch
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=sandboxclaims,singular=sandboxclaim,scope=Namespaced,shortName=sbxclaim
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.podName`
// +kubebuilder:printcolumn:name="Sandbox",type=string,JSONPath=`.spec.sandbox`
// +kubebuilder:printcolumn:name="Key-Expires",type=date,JSONPath=`.spec.keyExpiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The record, sealed by the controller.
	Spec SandboxClaimSpec `json:"spec"`
}

// SandboxClaimSpec is the record, sealed by the controller.
type SandboxClaimSpec struct {
	// The scope digest of the key.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{32}$`
	ScopeDigest string `json:"scopeDigest"`

	// The key's generation (0 for sbx-<digest>, n for sbx-<digest>-<n>).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9999
	Generation int64 `json:"generation"`

	// The generation's pod, re-created under this name on a resume.
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName"`

	// When the key was claimed.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	ClaimedAt metav1.Time `json:"claimedAt"`

	// When the key's lifetime ends; an Expired record is collected then.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	KeyExpiresAt metav1.Time `json:"keyExpiresAt"`

	// The spec fingerprint of the generation.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SpecFingerprint string `json:"specFingerprint"`

	// The workspace owner of the generation, when it has one.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	WorkspaceOwner string `json:"workspaceOwner,omitempty"`

	// Bound (the generation's pod is podName: the claim of a scope that may go warm),
	// Suspended (released, resumable), Expired (final for the key's lifetime), Rejected
	// (refused by its owner's quota in mode Reject: final for the key's lifetime), Slot (this
	// record is one of its owner's quota slots, named sbxq-<owner key>-<n>, held by the
	// generation while its pod is active) or WarmSlot (one of its owner's warm slots, named
	// sbxw-<owner key>-<n>, held by the warm pod podName of the pool that owns it while that
	// pod is warm; scopeDigest is then the owner key).
	State ClaimState `json:"state"`

	// The Sandbox whose suspension or expiry released the pod (Rejected: the Sandbox refused;
	// Slot: the Sandbox that took the slot).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Sandbox string `json:"sandbox,omitempty"`

	// When the state was recorded.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Since *metav1.Time `json:"since,omitempty"`

	// Suspended and Expired: the uid of the pod released (absent in records written by earlier
	// versions). A bound Sandbox whose pod is gone resumes it only when the record is of that pod.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	PodUID string `json:"podUID,omitempty"`

	// HMAC-SHA256 of the record under the controller's seal key.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Seal string `json:"seal"`
}

// ClaimState is what a generation of a key became.
// +kubebuilder:validation:Enum=Bound;Suspended;Expired;Rejected;Slot;WarmSlot
type ClaimState string

// The states of a claim record.
const (
	ClaimBound     ClaimState = "Bound"
	ClaimSuspended ClaimState = "Suspended"
	ClaimExpired   ClaimState = "Expired"
	ClaimRejected  ClaimState = "Rejected"
	ClaimSlot      ClaimState = "Slot"
	ClaimWarmSlot  ClaimState = "WarmSlot"
)

// SandboxClaimList is a list of SandboxClaims.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}
