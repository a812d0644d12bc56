// Package sandbox is the idempotency contract of sandbox-controller on top of
// the typed clientset: create a Sandbox exactly once (one name and one key
// across every retry, AlreadyExists read back and checked to be this
// request), wait for it by watch, suspend, resume, extend and delete it, with
// typed errors (ErrKeyConflict, ErrOwnerNotAuthorized, ErrForeignPod,
// ErrExpired, ErrQuota, ...). It does what the Python client
// (clients/python) does, and both pass the same conformance table
// (clients/conformance.yaml).
package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "sandbox.dev/api/v1alpha1"
	"sandbox.dev/client-go/clientset/versioned"
	typed "sandbox.dev/client-go/clientset/versioned/typed/api/v1alpha1"
)

// Client creates and follows the Sandboxes of one namespace.
type Client struct {
	sandboxes typed.SandboxInterface
	namespace string
	// Backoff between retries: Initial doubles after each attempt up to
	// Maximum, with up to 25 % jitter; a Retry-After is a lower bound.
	Initial, Maximum time.Duration
	// sleep waits (tests replace it); it returns early when ctx ends.
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Client for the Sandboxes of namespace.
func New(cs versioned.Interface, namespace string) *Client {
	return &Client{sandboxes: cs.SandboxV1alpha1().Sandboxes(namespace), namespace: namespace,
		Initial: 100 * time.Millisecond, Maximum: 5 * time.Second, sleep: sleepCtx}
}

// Namespace is the namespace the Client works in.
func (c *Client) Namespace() string { return c.namespace }

// Request is one intent: what a create asks for.
type Request struct {
	// Name of the Sandbox; a fresh "sandbox-<hex>" when empty. It stays the
	// same across the create's retries: never generateName, which a retried
	// POST would turn into a second object.
	Name string
	// Key is the idempotency key; a fresh "sbxc-<hex>" when empty (each
	// Create call is then its own intent).
	Key   string
	Image string
	// Command and Args; Env, Resources (nil: the server's default, 2 CPU and
	// 4Gi) and RuntimeClassName as in the Sandbox spec.
	Command          []string
	Args             []string
	Env              []v1alpha1.EnvVar
	Resources        *v1alpha1.ResourceRequirements
	RuntimeClassName string
	// Owner mounts that owner's workspace; the caller must be allowed to use it.
	Owner string
	// ShutdownAfter sets spec.lifecycle.shutdownTime that long after the
	// create (0: none); ShutdownPolicy is Retain (default) or Delete.
	ShutdownAfter  time.Duration
	ShutdownPolicy v1alpha1.ShutdownPolicy
	Labels         map[string]string
	Annotations    map[string]string
}

// object is the Sandbox a request creates.
func (c *Client) object(r Request) (*v1alpha1.Sandbox, error) {
	if r.Image == "" {
		return nil, errors.New("sandbox: Request.Image is required")
	}
	if r.Name == "" {
		r.Name = "sandbox-" + randomHex(5)
	}
	if r.Key == "" {
		r.Key = "sbxc-" + randomHex(16)
	}
	sb := &v1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: c.namespace, Labels: r.Labels, Annotations: r.Annotations},
		Spec: v1alpha1.SandboxSpec{Image: r.Image, Command: r.Command, Args: r.Args, Env: r.Env,
			Resources: r.Resources, RuntimeClassName: r.RuntimeClassName, IdempotencyKey: r.Key,
			WorkspaceOwner: r.Owner},
	}
	if r.ShutdownAfter > 0 || r.ShutdownPolicy != "" {
		sb.Spec.Lifecycle = &v1alpha1.SandboxLifecycle{ShutdownPolicy: r.ShutdownPolicy}
		if r.ShutdownAfter > 0 {
			t := metav1.NewTime(time.Now().Add(r.ShutdownAfter).Truncate(time.Second))
			sb.Spec.Lifecycle.ShutdownTime = &t
		}
	}
	return sb, nil
}

// Create creates the Sandbox of r exactly once and returns it as stored; it
// does not wait (WaitReady does).
//
// A failure that may hide a success (the connection broke, a timeout, 5xx,
// 429 after its Retry-After) is retried with the same name and key until ctx
// ends. An AlreadyExists answer is read back: the stored Sandbox must carry
// the same key, owner and spec as sent (the server's default resources
// accounted for, lifecycle left out); it is then this request's own earlier
// attempt and is returned. Another request's object is ErrIntentMismatch
// (another key or owner) or ErrKeyConflict (same key and owner, another
// spec), never a success; this request's own object being deleted is
// ErrFailed. Refusals are typed: ErrOwnerNotAuthorized,
// ErrKeyConflict (the webhook's 422), ErrQuota, ErrRejected.
func (c *Client) Create(ctx context.Context, r Request) (*v1alpha1.Sandbox, error) {
	sent, err := c.object(r)
	if err != nil {
		return nil, err
	}
	ns, name := c.namespace, sent.Name
	var created *v1alpha1.Sandbox
	err = c.retry(ctx, func() error {
		var err error
		created, err = c.sandboxes.Create(ctx, sent.DeepCopy(), metav1.CreateOptions{FieldValidation: "Strict"})
		return err
	})
	if err == nil {
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, apiError(err, ns, name, true)
	}
	// Our own earlier attempt (its answer lost), an earlier call with this
	// name, or someone else's object: read it and check.
	stored, err := c.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if why := identityDifference(&sent.Spec, &stored.Spec); why != "" {
		return nil, &Error{Kind: ErrIntentMismatch, Namespace: ns, Name: name, Status: 409, Reason: "AlreadyExists",
			Message: fmt.Sprintf("Sandbox %s/%s already exists and is another request: %s", ns, name, why)}
	}
	why, err := intentDifference(&sent.Spec, &stored.Spec)
	if err != nil {
		return nil, err
	}
	if why != "" {
		return nil, &Error{Kind: ErrKeyConflict, Namespace: ns, Name: name, Status: 409, Reason: "AlreadyExists",
			Message: fmt.Sprintf("Sandbox %s/%s already exists with this key and owner but another spec: %s", ns, name, why)}
	}
	if stored.DeletionTimestamp != nil {
		return nil, newError(ErrFailed, ns, name, "Deleting", "Sandbox %s/%s exists but is being deleted", ns, name)
	}
	return stored, nil
}

// Get reads a Sandbox, retrying what may be a passing failure until ctx ends.
func (c *Client) Get(ctx context.Context, name string) (*v1alpha1.Sandbox, error) {
	var sb *v1alpha1.Sandbox
	err := c.retry(ctx, func() error {
		var err error
		sb, err = c.sandboxes.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	return sb, err
}

// retry calls fn until it succeeds, fails with an error retryAfter does not
// retry, or ctx would end before the next attempt; the last error is returned
// as it came.
func (c *Client) retry(ctx context.Context, fn func() error) error {
	delay := c.Initial
	for {
		err := fn()
		if err == nil {
			return nil
		}
		wait, ok := retryAfter(err)
		if !ok || ctx.Err() != nil {
			return err
		}
		jittered := time.Duration(float64(delay) * (1 + 0.25*mrand.Float64()))
		wait = max(wait, jittered)
		if deadline, has := ctx.Deadline(); has && time.Until(deadline) <= wait {
			return err
		}
		if c.sleep(ctx, wait) != nil {
			return err
		}
		delay = min(delay*2, c.Maximum)
	}
}

// retryAfter says whether err may hide a success and how long to wait at
// least before trying again: 429 and 5xx answers (their Retry-After), and
// failures of the connection itself, a request's own timeout among them
// (rest.Config.Timeout ends each request with context.DeadlineExceeded while
// the caller's ctx lives on; retry stops when that one ends). Other answers,
// a cancelled call and TLS certificate failures (no retry fixes those) are
// not retried.
func retryAfter(err error) (time.Duration, bool) {
	if errors.Is(err, context.Canceled) {
		return 0, false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return 0, true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		if code != 429 && code < 500 {
			return 0, false
		}
		if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
			return time.Duration(min(s, math.MaxInt32)) * time.Second, true
		}
		return 0, true
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verification *tls.CertificateVerificationError
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verification) {
		return 0, false
	}
	// The connection: refused, reset, timed out, cut short (client-go wraps
	// the transport's errors in *url.Error, and a body cut short in an error
	// that says "Please retry").
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "Please retry") || strings.Contains(err.Error(), "http2: ") {
		return 0, true
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
