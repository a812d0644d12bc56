package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A SandboxNetworkProfile is an allow profile the operator names: the egress a
// sandbox pod gets beyond its network floor when its Sandbox names the profile
// in spec.network.profiles and its creator may `use` the profile (RBAC verb use
// on sandboxnetworkprofiles.sandbox.dev). CIDRs and ports only: NetworkPolicy
// has no domain names, so neither has a profile. A profile never lifts the
// floor: the controller excepts every floor range a CIDR holds (link-local,
// 100.64.0.0/10, fc00::/7, fe80::/10, network.clusterCIDRs, the API server's
// addresses) and leaves out a CIDR inside one.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=sandboxnetworkprofiles,singular=sandboxnetworkprofile,scope=Cluster,shortName=sbxnp
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="a profile's name is a DNS label: at most 63 lowercase letters, digits and '-'"
type SandboxNetworkProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// What the profile allows.
	Spec SandboxNetworkProfileSpec `json:"spec"`
}

// SandboxNetworkProfileSpec is what a profile allows.
type SandboxNetworkProfileSpec struct {
	// Destinations the pods of Sandboxes naming this profile may connect to (at
	// most 32).
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Egress []NetworkProfileEgress `json:"egress"`
}

// NetworkProfileEgress is one destination range and its ports.
type NetworkProfileEgress struct {
	// An IPv4 or IPv6 CIDR with no host bits set (192.0.2.0/24, 2001:db8::/32,
	// 0.0.0.0/0). Domain names are not supported.
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="must be an IPv4 or IPv6 CIDR with no host bits set (domain names are not supported: NetworkPolicy has none)"
	CIDR string `json:"cidr"`

	// Ports allowed in that range (at most 16); omitted: every port.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Ports []NetworkProfilePort `json:"ports,omitempty"`
}

// NetworkProfilePort is a port or a range of ports of one protocol.
//
// +kubebuilder:validation:XValidation:rule="!has(self.endPort) || self.endPort >= self.port",message="endPort must not be below port"
type NetworkProfilePort struct {
	// TCP or UDP.
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol"`

	// The port, or the first of the range.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// The last port of the range (at least port).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	EndPort *int32 `json:"endPort,omitempty"`
}

// SandboxNetworkProfileList is a list of SandboxNetworkProfiles.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type SandboxNetworkProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxNetworkProfile `json:"items"`
}
