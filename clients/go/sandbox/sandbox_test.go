package sandbox

import (
	"context"
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "sandbox.dev/api/v1alpha1"
	"sandbox.dev/client-go/clientset/versioned/fake"
)

const ns = "team-a"

// newClient is a Client on a fake clientset whose sleeps are recorded, not slept.
func newClient(objs ...*v1alpha1.Sandbox) (*Client, *fake.Clientset, *[]time.Duration) {
	// NewClientset needs an OpenAPI schema of the types (clients/go/README.md).
	cs := fake.NewSimpleClientset()
	// Added under the real resource: the fake's constructor would guess "sandboxs".
	for _, o := range objs {
		if err := cs.Tracker().Create(v1alpha1.SchemeGroupVersion.WithResource("sandboxes"), o, o.Namespace); err != nil {
			panic(err)
		}
	}
	c := New(cs, ns)
	var slept []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return ctx.Err() }
	return c, cs, &slept
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

var reset = &url.Error{Op: "Post", URL: "https://127.0.0.1/apis", Err: syscall.ECONNRESET}

func request() Request {
	return Request{Name: "task", Key: "task-42", Owner: "alice", Image: "registry.local/agent:1.0",
		Command: []string{"sleep", "infinity"}}
}

// creates records every create the fake saw (name and key) and lets the
// test decide each answer: after(n) runs after the n-th create (from 1) is
// stored or refused by the fake's own tracker.
func creates(cs *fake.Clientset, answer func(n int, stored error) error) *[][2]string {
	var seen [][2]string
	cs.PrependReactor("create", "sandboxes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sb := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.Sandbox)
		seen = append(seen, [2]string{sb.Name, sb.Spec.IdempotencyKey})
		err := cs.Tracker().Create(a.GetResource(), sb, a.GetNamespace())
		if err2 := answer(len(seen), err); err2 != nil {
			return true, nil, err2
		}
		if err != nil {
			return true, nil, err
		}
		return true, sb, nil
	})
	return &seen
}

// A create whose answer is lost is retried with the same name and key; the
// AlreadyExists of the retry is read back, verified and returned: one Sandbox.
func TestCreateLostResponseOneSandbox(t *testing.T) {
	for _, named := range []bool{true, false} {
		c, cs, slept := newClient()
		seen := creates(cs, func(n int, _ error) error {
			if n == 1 {
				return reset // stored, but the client never hears of it
			}
			return nil
		})
		r := request()
		if !named {
			r.Name, r.Key = "", "" // both made up once, kept across the retry
		}
		sb, err := c.Create(ctx(t), r)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if len(*seen) != 2 || (*seen)[0] != (*seen)[1] {
			t.Fatalf("attempts %v: want two with one name and key", *seen)
		}
		if sb.Name != (*seen)[0][0] || sb.Spec.IdempotencyKey != (*seen)[0][1] {
			t.Fatalf("returned %s/%s, sent %v", sb.Name, sb.Spec.IdempotencyKey, (*seen)[0])
		}
		list, _ := cs.SandboxV1alpha1().Sandboxes(ns).List(ctx(t), metav1.ListOptions{})
		if len(list.Items) != 1 {
			t.Fatalf("%d Sandboxes, want 1", len(list.Items))
		}
		if len(*slept) != 1 || (*slept)[0] < 100*time.Millisecond {
			t.Fatalf("backoff %v, want one wait of at least 100ms", *slept)
		}
		if !named && (!strings.HasPrefix(sb.Name, "sandbox-") || !strings.HasPrefix(sb.Spec.IdempotencyKey, "sbxc-")) {
			t.Fatalf("made-up name and key %q %q", sb.Name, sb.Spec.IdempotencyKey)
		}
	}
}

// A request that timed out on its own (rest.Config.Timeout: the error is
// context.DeadlineExceeded, wrapped, while the caller's ctx lives on) may hide
// a success like a reset: retried with the same name and key, one Sandbox.
func TestCreateRequestTimeoutRetried(t *testing.T) {
	c, cs, _ := newClient()
	timedOut := &url.Error{Op: "Post", URL: "https://127.0.0.1/apis", Err: context.DeadlineExceeded}
	seen := creates(cs, func(n int, _ error) error {
		if n == 1 {
			return timedOut // stored; the client's own timer ran out first
		}
		return nil
	})
	r := request()
	r.Name, r.Key = "", ""
	sb, err := c.Create(ctx(t), r)
	if err != nil {
		t.Fatalf("Create after a request timeout: %v", err)
	}
	if len(*seen) != 2 || (*seen)[0] != (*seen)[1] || sb.Name != (*seen)[0][0] {
		t.Fatalf("attempts %v, returned %s: want two with one name and key", *seen, sb.Name)
	}
	list, _ := cs.SandboxV1alpha1().Sandboxes(ns).List(ctx(t), metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("%d Sandboxes, want 1", len(list.Items))
	}
}

// The stored object of this request that is being deleted is not returned as
// created (it and its pod are about to go): ErrFailed, as the Python client
// refuses it.
func TestCreateExistingBeingDeletedIsNotReturned(t *testing.T) {
	r := request()
	stored, err := New(fake.NewSimpleClientset(), ns).object(r)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	stored.DeletionTimestamp = &now
	stored.Finalizers = []string{"example.com/hold"}
	c, _, _ := newClient(stored)
	sb, err := c.Create(ctx(t), r)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("Create of a Sandbox being deleted: %v, %v; want ErrFailed saying so", sb, err)
	}
}

// 5xx and 429 may hide a success: retried, never sooner than Retry-After.
func TestCreateRetriesServerErrorsHonouringRetryAfter(t *testing.T) {
	c, cs, slept := newClient()
	seen := creates(cs, func(n int, _ error) error {
		switch n {
		case 1:
			return apierrors.NewInternalError(errors.New("etcd is busy"))
		case 2:
			return apierrors.NewTooManyRequests("slow down", 3)
		}
		return nil
	})
	// The 500 came after the object was stored (it may hide a success), so
	// the third attempt meets AlreadyExists: verified, this request.
	if _, err := c.Create(ctx(t), request()); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if len(*seen) != 3 {
		t.Fatalf("%d attempts, want 3", len(*seen))
	}
	if len(*slept) != 2 || (*slept)[1] < 3*time.Second {
		t.Fatalf("waits %v: want two, the second at least the 3 s of Retry-After", *slept)
	}
}

// What no retry fixes is returned at once, as the typed error it is.
func TestCreateRefusalsAreTypedAndNotRetried(t *testing.T) {
	forbidden := func(msg string) error {
		return apierrors.NewForbidden(v1alpha1.Resource("sandboxes"), "task", errors.New(msg))
	}
	invalid := func(msg string) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422,
			Reason: metav1.StatusReasonInvalid, Message: msg}}
	}
	cases := []struct {
		name   string
		answer error
		kind   error
		status int32
	}{
		{"owner", forbidden(`admission webhook "mutate.sandboxes.sandbox.dev" denied the request: bob may not use workspace owner "alice" in namespace team-a: missing permission "use" on workspaces.sandbox.dev "alice"`), ErrOwnerNotAuthorized, 403},
		{"quota", forbidden(`exceeded quota: q, requested: count/sandboxes.sandbox.dev=1, used: count/sandboxes.sandbox.dev=2, limited: count/sandboxes.sandbox.dev=2`), ErrQuota, 403},
		{"key", invalid(`admission webhook "validate.sandboxes.sandbox.dev" denied the request: spec.idempotencyKey: Invalid value: "task-42": the key is held by Sandbox team-a/first with another spec`), ErrKeyConflict, 422},
		{"invalid", invalid(`Sandbox.sandbox.dev "task" is invalid: spec.image: Required value`), ErrRejected, 422},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, cs, slept := newClient()
			attempts := 0
			cs.PrependReactor("create", "sandboxes", func(k8stesting.Action) (bool, runtime.Object, error) {
				attempts++
				return true, nil, tc.answer
			})
			_, err := c.Create(ctx(t), request())
			var e *Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &e) {
				t.Fatalf("got %v (%T), want %v", err, err, tc.kind)
			}
			if e.Status != tc.status || e.Namespace != ns || e.Name != "task" || e.Message == "" {
				t.Fatalf("error fields %+v", e)
			}
			if !strings.Contains(err.Error(), tc.answer.(apierrors.APIStatus).Status().Message) {
				t.Fatalf("the server's message is lost: %q", err)
			}
			if attempts != 1 || len(*slept) != 0 {
				t.Fatalf("%d attempts, waits %v: a refusal is not retried", attempts, *slept)
			}
		})
	}
	// Other answers come back as client-go's own errors.
	c, cs, _ := newClient()
	cs.PrependReactor("create", "sandboxes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewBadRequest("no")
	})
	if _, err := c.Create(ctx(t), request()); !apierrors.IsBadRequest(err) {
		t.Fatalf("got %v, want the BadRequest as it came", err)
	}
}

// AlreadyExists is never taken for success unless the stored object is this
// request: same key and owner (else ErrIntentMismatch) and same spec (else
// ErrKeyConflict), the server's defaults and the lifecycle aside.
func TestCreateAlreadyExistsIsVerified(t *testing.T) {
	stored := func(mutate func(*v1alpha1.SandboxSpec)) *v1alpha1.Sandbox {
		sb := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: ns},
			Spec: v1alpha1.SandboxSpec{Image: "registry.local/agent:1.0", Command: []string{"sleep", "infinity"},
				IdempotencyKey: "task-42", WorkspaceOwner: "alice",
				Resources: &v1alpha1.ResourceRequirements{
					Requests: v1alpha1.ResourceList{"cpu": v1alpha1.QuantityFromString("2"), "memory": v1alpha1.QuantityFromString("4Gi")},
					Limits:   v1alpha1.ResourceList{"cpu": v1alpha1.QuantityFromString("2"), "memory": v1alpha1.QuantityFromString("4Gi")}}}}
		mutate(&sb.Spec)
		return sb
	}
	yes := true
	cases := []struct {
		name   string
		mutate func(*v1alpha1.SandboxSpec)
		req    func(*Request)
		kind   error // nil: the stored Sandbox is returned
		says   string
	}{
		{"same request, server defaults", func(*v1alpha1.SandboxSpec) {}, func(*Request) {}, nil, ""},
		{"lifecycle changed since", func(s *v1alpha1.SandboxSpec) { s.Lifecycle = &v1alpha1.SandboxLifecycle{Suspend: &yes} },
			func(*Request) {}, nil, ""},
		{"quantity as a number", func(s *v1alpha1.SandboxSpec) {
			s.Resources = &v1alpha1.ResourceRequirements{Requests: v1alpha1.ResourceList{"cpu": v1alpha1.QuantityFromInt64(1)}}
		}, func(r *Request) {
			r.Resources = &v1alpha1.ResourceRequirements{Requests: v1alpha1.ResourceList{"cpu": v1alpha1.QuantityFromString("1")}}
		}, nil, ""},
		{"other key", func(s *v1alpha1.SandboxSpec) { s.IdempotencyKey = "other" }, func(*Request) {}, ErrIntentMismatch,
			`its idempotency key is "other", not "task-42"`},
		{"other owner", func(s *v1alpha1.SandboxSpec) { s.WorkspaceOwner = "bob" }, func(*Request) {}, ErrIntentMismatch,
			`its workspace owner is "bob", not "alice"`},
		{"other spec", func(s *v1alpha1.SandboxSpec) { s.Command = []string{"sleep", "1"} }, func(*Request) {}, ErrKeyConflict,
			"spec.command differs"},
		{"other resources", func(*v1alpha1.SandboxSpec) {}, func(r *Request) {
			r.Resources = &v1alpha1.ResourceRequirements{Requests: v1alpha1.ResourceList{"cpu": v1alpha1.QuantityFromString("1")}}
		}, ErrKeyConflict, "spec.resources differs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := newClient(stored(tc.mutate))
			r := request()
			tc.req(&r)
			sb, err := c.Create(ctx(t), r)
			if tc.kind == nil {
				if err != nil || sb.Name != "task" {
					t.Fatalf("got %v, %v: want the stored Sandbox", sb, err)
				}
				return
			}
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want %v saying %q", err, tc.kind, tc.says)
			}
		})
	}
}

// A failure of the certificate is not a passing failure.
func TestRetryAfterClassifies(t *testing.T) {
	if _, ok := retryAfter(reset); !ok {
		t.Fatal("a reset connection is retried")
	}
	if _, ok := retryAfter(context.Canceled); ok {
		t.Fatal("a cancelled call is not retried")
	}
	if _, ok := retryAfter(&url.Error{Op: "Post", Err: x509UnknownAuthority()}); ok {
		t.Fatal("an unknown certificate authority is not retried")
	}
	if _, ok := retryAfter(errors.New("json: cannot unmarshal")); ok {
		t.Fatal("a local error is not retried")
	}
	if d, ok := retryAfter(apierrors.NewServerTimeout(v1alpha1.Resource("sandboxes"), "create", 7)); !ok || d != 7*time.Second {
		t.Fatalf("server timeout: %v %v", d, ok)
	}
}

func x509UnknownAuthority() error { return x509.UnknownAuthorityError{} }
