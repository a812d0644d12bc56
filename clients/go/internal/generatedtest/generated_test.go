// Package generatedtest tests the generated code of the module together with
// the types: the scheme, deepcopy, the fake clientset, informers and listers,
// and the decoding of a Sandbox as the API server stores it.
package generatedtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "sandbox.dev/api/v1alpha1"
	"sandbox.dev/client-go/clientset/versioned/fake"
	"sandbox.dev/client-go/informers/externalversions"
)

// A Sandbox as the API server returns it: defaults applied, a quantity as a
// number and one that is no quantity at all (the CRD allows any string; the
// controller refuses it), status with conditions.
const stored = `{
  "apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
  "metadata": {"name": "fix-42", "namespace": "team-a", "uid": "u1", "generation": 2, "resourceVersion": "7"},
  "spec": {"image": "registry.local/agent:1.0", "command": ["sleep", "infinity"],
           "env": [{"name": "A", "value": "1"}, {"name": "B"}],
           "resources": {"requests": {"cpu": 2, "memory": "4Gi"}, "limits": {"cpu": "lots"}},
           "idempotencyKey": "task-42", "workspaceOwner": "alice",
           "lifecycle": {"shutdownTime": "2026-12-01T18:00:00Z", "shutdownPolicy": "Delete", "suspend": false}},
  "status": {"phase": "Running", "podName": "sbx-0123", "binding": "Created", "observedGeneration": 2,
             "claimedAt": "2026-11-30T10:00:00Z",
             "conditions": [{"type": "Ready", "status": "True", "reason": "PodReady", "message": "",
                             "lastTransitionTime": "2026-11-30T10:00:02Z", "observedGeneration": 2}]}
}`

func TestDecodeAsStored(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(stored), nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	sb, ok := obj.(*v1alpha1.Sandbox)
	if !ok || gvk.Kind != "Sandbox" {
		t.Fatalf("decoded %T %v", obj, gvk)
	}
	s := sb.Spec
	if s.Resources.Requests["cpu"] != v1alpha1.QuantityFromInt64(2) || s.Resources.Limits["cpu"] != v1alpha1.QuantityFromString("lots") ||
		s.Env[1].Value != "" || s.Lifecycle.ShutdownPolicy != v1alpha1.ShutdownDelete || *s.Lifecycle.Suspend ||
		!s.Lifecycle.ShutdownTime.Equal(&metav1.Time{Time: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)}) {
		t.Fatalf("spec decoded as %+v", s)
	}
	ready := v1alpha1.FindCondition(sb.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || sb.Status.Binding != v1alpha1.BindingCreated {
		t.Fatalf("status decoded as %+v", sb.Status)
	}
	if m := v1alpha1.AsMeta(sb.Status.Conditions); m[0].Reason != "PodReady" || m[0].ObservedGeneration != 2 {
		t.Fatalf("AsMeta: %+v", m)
	}
	// Deepcopy shares nothing.
	cp := sb.DeepCopy()
	cp.Spec.Command[0] = "changed"
	cp.Spec.Resources.Requests["cpu"] = v1alpha1.QuantityFromString("9")
	*cp.Spec.Lifecycle.Suspend = true
	cp.Status.Conditions[0].Reason = "changed"
	if sb.Spec.Command[0] != "sleep" || sb.Spec.Resources.Requests["cpu"] != v1alpha1.QuantityFromInt64(2) ||
		*sb.Spec.Lifecycle.Suspend || sb.Status.Conditions[0].Reason != "PodReady" {
		t.Fatal("the deep copy shares memory with the original")
	}
}

// A valid quantity of any size decodes, in a list with other Sandboxes, and is
// written back as it came: an integer beyond int32 (bytes of memory) stays
// that integer, a string stays a string.
func TestDecodeLargeIntegerQuantity(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	list := `{"apiVersion": "sandbox.dev/v1alpha1", "kind": "SandboxList", "metadata": {}, "items": [
	  {"metadata": {"name": "big", "namespace": "team-a"},
	   "spec": {"image": "img", "resources": {"requests": {"cpu": 2, "memory": 4294967296},
	                                          "limits": {"cpu": "2", "memory": 99999999999999999999999}}}},
	  {"metadata": {"name": "small", "namespace": "team-a"}, "spec": {"image": "img"}}]}`
	obj, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(list), nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	l, ok := obj.(*v1alpha1.SandboxList)
	if !ok || len(l.Items) != 2 {
		t.Fatalf("decoded %T %+v", obj, obj)
	}
	r := l.Items[0].Spec.Resources
	if m := r.Requests["memory"]; m.String() != "4294967296" {
		t.Fatalf("memory decoded as %q", m.String())
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"limits":{"cpu":"2","memory":99999999999999999999999},"requests":{"cpu":2,"memory":4294967296}}`
	if string(data) != want {
		t.Fatalf("written back as %s, want %s", data, want)
	}
}

// The fake clientset, an informer and its lister see what the typed client writes.
func TestInformerAndLister(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := fake.NewSimpleClientset()
	f := externalversions.NewSharedInformerFactory(cs, 0)
	inf := f.Sandbox().V1alpha1().Sandboxes()
	lister := inf.Lister()
	pools := f.Sandbox().V1alpha1().SandboxWarmPools().Lister()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced,
		f.Sandbox().V1alpha1().SandboxWarmPools().Informer().HasSynced) {
		t.Fatal("caches did not sync")
	}
	sbs := cs.SandboxV1alpha1().Sandboxes("team-a")
	if _, err := sbs.Create(ctx, &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "team-a"},
		Spec: v1alpha1.SandboxSpec{Image: "img", IdempotencyKey: "k"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.SandboxV1alpha1().SandboxWarmPools("team-a").Create(ctx, &v1alpha1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a"},
		Spec:       v1alpha1.SandboxWarmPoolSpec{Replicas: 3, Template: v1alpha1.SandboxTemplate{Image: "img"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		sb, err1 := lister.Sandboxes("team-a").Get("a")
		p, err2 := pools.SandboxWarmPools("team-a").Get("p")
		if err1 == nil && err2 == nil {
			if sb.Spec.IdempotencyKey != "k" || p.Spec.Replicas != 3 {
				t.Fatalf("listed %+v %+v", sb.Spec, p.Spec)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the listers never saw the objects: %v %v", err1, err2)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
