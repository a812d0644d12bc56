package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnvVar is one environment variable of the sandbox container.
type EnvVar struct {
	// Name of the environment variable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^\x00]*$`
	Name string `json:"name"`

	// Value of the environment variable.
	// +kubebuilder:validation:MaxLength=32768
	// +kubebuilder:validation:Pattern=`^[^\x00]*$`
	// +optional
	Value string `json:"value,omitempty"`
}

// ResourceList maps a resource name (cpu, memory, ...) to a quantity.
//
// A quantity is kept as the API stores it, an integer or a string (Quantity):
// the CRD accepts any string of at most 64 characters there and the
// controller refuses one that is not a quantity (Rejected, InvalidSpec), so a
// Sandbox with a bad quantity still decodes and a list of Sandboxes never
// fails on another tenant's object. Read one with
// resource.ParseQuantity(q.String()).
//
// +kubebuilder:validation:MaxProperties=16
// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(string(self[k])) <= 64)",message="resource names are at most 253 characters and quantities at most 64"
type ResourceList map[string]Quantity

// Quantity is one value of a ResourceList: a JSON integer or string, kept as
// its text whatever its size (intstr.IntOrString holds an int32, so memory
// in bytes, such as 4294967296, would not decode) and written back as it came:
// an integer stays an integer, a string a string. Make one with
// QuantityFromString or QuantityFromInt64; the zero value is the string "".
//
// +kubebuilder:validation:XIntOrString
// +kubebuilder:validation:Type=""
type Quantity struct {
	text   string `json:"-"`
	number bool   `json:"-"`
}

// QuantityFromString is the quantity s as a string ("2", "500m", "4Gi").
func QuantityFromString(s string) Quantity { return Quantity{text: s} }

// QuantityFromInt64 is the quantity n as an integer.
func QuantityFromInt64(n int64) Quantity {
	return Quantity{text: strconv.FormatInt(n, 10), number: true}
}

// String is the quantity's text: the string, or the integer's digits as the
// API sent them.
func (q Quantity) String() string { return q.text }

// IsNumber says whether the API holds it as a JSON number.
func (q Quantity) IsNumber() bool { return q.number }

// MarshalJSON writes the integer as a JSON number, the string as a string.
func (q Quantity) MarshalJSON() ([]byte, error) {
	if q.number {
		return []byte(q.text), nil
	}
	return json.Marshal(q.text)
}

// UnmarshalJSON reads a JSON number (its text, of any size) or a string;
// null leaves q as it is.
func (q *Quantity) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*q = Quantity{text: s}
		return nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return fmt.Errorf("a quantity is a number or a string, not %.40s", data)
	}
	*q = Quantity{text: n.String(), number: true}
	return nil
}

// ResourceRequirements are the compute resources of the sandbox container:
// the limits and requests of core/v1 ResourceRequirements.
type ResourceRequirements struct {
	// Maximum amount of compute resources allowed.
	// +optional
	Limits ResourceList `json:"limits,omitempty"`

	// Minimum amount of compute resources required.
	// +optional
	Requests ResourceList `json:"requests,omitempty"`
}

// Condition is a condition of a status, in the shape of metav1.Condition
// (the same fields in the same order, so metav1.Condition(c) converts one;
// AsMeta converts a list) with the CRDs' own limits.
type Condition struct {
	// Condition type (Bound or Ready).
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`

	// Status of the condition.
	// +kubebuilder:validation:Enum="True";"False";Unknown
	Status metav1.ConditionStatus `json:"status"`

	// The metadata.generation the condition was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// When the condition last changed status.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`

	// CamelCase reason for the last transition.
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`

	// Human-readable details.
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message"`
}

// AsMeta returns the conditions as metav1.Conditions, for the helpers of
// k8s.io/apimachinery/pkg/api/meta (FindStatusCondition, IsStatusConditionTrue).
func AsMeta(conditions []Condition) []metav1.Condition {
	out := make([]metav1.Condition, len(conditions))
	for i, c := range conditions {
		out[i] = metav1.Condition(c)
	}
	return out
}

// FindCondition returns the condition of that type, or nil.
func FindCondition(conditions []Condition, conditionType string) *Condition {
	for i := range conditions {
		if conditions[i].Type == conditionType {
			return &conditions[i]
		}
	}
	return nil
}
