// Command applycheck is the apply-configuration round trip of
// e2e/test_conformance.sh: server-side apply of a whole Sandbox by one field
// manager, then of its lifecycle alone by another, against the real API
// server (the webhook in force) and controller.
//
// Usage: KUBECONFIG=... applycheck NAMESPACE NAME OWNER
//
// It prints what it did and exits 1 on the first result that is not what
// server-side apply promises.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "sandbox.dev/api/v1alpha1"
	ac "sandbox.dev/client-go/applyconfiguration/api/v1alpha1"
	"sandbox.dev/client-go/clientset/versioned"
	"sandbox.dev/client-go/sandbox"
)

func fail(format string, args ...any) {
	fmt.Printf("applycheck: FAIL "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: applycheck NAMESPACE NAME OWNER")
		os.Exit(2)
	}
	ns, name, owner := os.Args[1], os.Args[2], os.Args[3]
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fail("%v", err)
	}
	cs := versioned.NewForConfigOrDie(cfg)
	sbs := cs.SandboxV1alpha1().Sandboxes(ns)
	helper := sandbox.New(cs, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// 1. The agent applies the whole intent.
	whole := ac.Sandbox(name, ns).WithSpec(ac.SandboxSpec().
		WithImage("registry.local/agent:1.0").WithCommand("sleep", "infinity").
		WithIdempotencyKey(name).WithWorkspaceOwner(owner))
	sb, err := sbs.Apply(ctx, whole, metav1.ApplyOptions{FieldManager: "agent", Force: true})
	if err != nil {
		fail("apply of the Sandbox: %v", err)
	}
	fmt.Printf("applycheck: applied %s/%s as field manager agent (uid %s)\n", ns, name, sb.UID)
	if sb, err = helper.WaitReady(ctx, name); err != nil {
		fail("wait Ready: %v", err)
	}
	pod := sb.Status.PodName
	fmt.Printf("applycheck: Ready on pod %s\n", pod)

	// 2. Another manager applies the lifecycle alone: it owns that field and
	// nothing else, and the spec stays the agent's.
	suspend := func(v bool) *v1alpha1.Sandbox {
		lc := ac.Sandbox(name, ns).WithSpec(ac.SandboxSpec().WithLifecycle(ac.SandboxLifecycle().WithSuspend(v)))
		sb, err := sbs.Apply(ctx, lc, metav1.ApplyOptions{FieldManager: "lifecycle"})
		if err != nil {
			fail("apply of the lifecycle alone (suspend=%v): %v", v, err)
		}
		return sb
	}
	sb = suspend(true)
	if sb.Spec.Image != "registry.local/agent:1.0" || sb.Spec.IdempotencyKey != name || sb.Spec.WorkspaceOwner != owner ||
		!reflect.DeepEqual(sb.Spec.Command, []string{"sleep", "infinity"}) {
		fail("the lifecycle apply changed the spec: %+v", sb.Spec)
	}
	owned := managers(sb)
	fmt.Printf("applycheck: field managers after the lifecycle apply: %v\n", owned)
	if !reflect.DeepEqual(owned["lifecycle"], []string{"f:spec/f:lifecycle/f:suspend"}) {
		fail("the lifecycle manager owns %v, want spec.lifecycle.suspend alone", owned["lifecycle"])
	}
	if !contains(owned["agent"], "f:spec/f:image") || contains(owned["agent"], "f:spec/f:lifecycle/f:suspend") {
		fail("the agent owns %v, want the spec without the lifecycle", owned["agent"])
	}
	if sb, err = helper.WaitSuspended(ctx, name); err != nil {
		fail("wait Suspended: %v", err)
	}
	fmt.Printf("applycheck: Suspended (phase %s)\n", sb.Status.Phase)

	// 3. The agent re-applies its intent: the lifecycle it does not own stays.
	if sb, err = sbs.Apply(ctx, whole, metav1.ApplyOptions{FieldManager: "agent", Force: true}); err != nil {
		fail("re-apply of the Sandbox: %v", err)
	}
	if sb.Spec.Lifecycle == nil || sb.Spec.Lifecycle.Suspend == nil || !*sb.Spec.Lifecycle.Suspend {
		fail("the agent's re-apply dropped the lifecycle it does not own: %+v", sb.Spec.Lifecycle)
	}
	fmt.Println("applycheck: the agent's re-apply left spec.lifecycle.suspend=true alone")

	// 4. The lifecycle manager resumes: the same pod comes back.
	suspend(false)
	if sb, err = helper.WaitReady(ctx, name); err != nil {
		fail("wait Ready after resume: %v", err)
	}
	if sb.Status.PodName != pod {
		fail("resumed on pod %s, want %s", sb.Status.PodName, pod)
	}
	fmt.Printf("applycheck: resumed on the same pod %s; round trip done\n", pod)
}

// managers maps each field manager that applied to the leaf fields of spec it
// owns ("f:spec/f:image"); metadata is left out (the admission webhook stamps
// its annotations in the name of whoever writes).
func managers(sb *v1alpha1.Sandbox) map[string][]string {
	out := map[string][]string{}
	for _, m := range sb.ManagedFields {
		if m.Operation != metav1.ManagedFieldsOperationApply || m.FieldsV1 == nil {
			continue
		}
		var tree map[string]any
		if err := json.Unmarshal(m.FieldsV1.Raw, &tree); err != nil {
			fail("managedFields of %s: %v", m.Manager, err)
		}
		var leaves []string
		if spec, ok := tree["f:spec"].(map[string]any); ok {
			walk("f:spec", spec, &leaves)
		}
		sort.Strings(leaves)
		out[m.Manager] = leaves
	}
	return out
}

func walk(prefix string, tree map[string]any, out *[]string) {
	for k, v := range tree {
		if k == "." {
			continue
		}
		p := k
		if prefix != "" {
			p = prefix + "/" + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !(len(sub) == 1 && sub["."] != nil) {
			walk(p, sub, out)
			continue
		}
		*out = append(*out, p)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
