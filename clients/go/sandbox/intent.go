package sandbox

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	v1alpha1 "sandbox.dev/api/v1alpha1"
)

// defaultResources is the CRD's schema default: the server stores it in
// every Sandbox created without resources.
var defaultResources = map[string]any{
	"requests": map[string]any{"cpu": "2", "memory": "4Gi"},
	"limits":   map[string]any{"cpu": "2", "memory": "4Gi"},
}

// comparable is a spec as a generic JSON value, with what the server adds or
// may change taken out: lifecycle (mutable, not the intent) and the default
// resources; quantities as strings (the server keeps them as sent, and 2 and
// "2" are the same quantity).
func comparable(spec *v1alpha1.SandboxSpec) (map[string]any, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "lifecycle")
	res, ok := m["resources"].(map[string]any)
	if !ok {
		m["resources"] = defaultResources
		return m, nil
	}
	for _, level := range []string{"requests", "limits"} {
		if q, ok := res[level].(map[string]any); ok {
			for k, v := range q {
				q[k] = fmt.Sprint(v)
			}
		}
	}
	return m, nil
}

// intentDifference is "" when stored is the request sent, else a sentence
// naming the first field that differs.
func intentDifference(sent, stored *v1alpha1.SandboxSpec) (string, error) {
	a, err := comparable(sent)
	if err != nil {
		return "", err
	}
	b, err := comparable(stored)
	if err != nil {
		return "", err
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !reflect.DeepEqual(a[k], b[k]) {
			return fmt.Sprintf("spec.%s differs (this request: %s; stored: %s)", k, show(a, k), show(b, k)), nil
		}
	}
	return "", nil
}

// identityDifference is "" when key and owner are the same, else which one differs.
func identityDifference(sent, stored *v1alpha1.SandboxSpec) string {
	switch {
	case sent.IdempotencyKey != stored.IdempotencyKey:
		return fmt.Sprintf("its idempotency key is %q, not %q", clip(stored.IdempotencyKey), clip(sent.IdempotencyKey))
	case sent.WorkspaceOwner != stored.WorkspaceOwner:
		return fmt.Sprintf("its workspace owner is %q, not %q", clip(stored.WorkspaceOwner), clip(sent.WorkspaceOwner))
	}
	return ""
}

func show(m map[string]any, k string) string {
	v, ok := m[k]
	if !ok {
		return "absent"
	}
	data, _ := json.Marshal(v)
	return clip(string(data))
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}
