package sandbox

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "sandbox.dev/api/v1alpha1"
)

// state is what a wait waits for.
type state int

const (
	ready state = iota
	suspended
)

// outcome is where a Sandbox stands for a wait: done, a typed error (it will
// never get there), or still on its way (neither).
type outcome struct {
	done bool
	err  error
}

// classify reads a Sandbox's status for a wait. Final states (Rejected,
// Expired) count even in a status older than the object's generation;
// everything else only in a status of the current generation.
func classify(sb *v1alpha1.Sandbox, want state) outcome {
	ns, name := sb.Namespace, sb.Name
	st := &sb.Status
	bound := v1alpha1.FindCondition(st.Conditions, v1alpha1.ConditionBound)
	readyC := v1alpha1.FindCondition(st.Conditions, v1alpha1.ConditionReady)
	fail := func(kind error, c *v1alpha1.Condition, reason, fallback string) outcome {
		msg := fallback
		if c != nil && c.Message != "" {
			msg = c.Message
		}
		return outcome{err: newError(kind, ns, name, reason, "Sandbox %s/%s: %s", ns, name, msg)}
	}
	reasonOf := func(c *v1alpha1.Condition) string {
		if c == nil {
			return ""
		}
		return c.Reason
	}
	switch st.Phase {
	case v1alpha1.PhaseRejected:
		r := reasonOf(bound)
		if fallback, kind := refusal(r); kind != nil {
			return fail(kind, bound, r, fallback)
		}
		return fail(ErrRejected, bound, r, "rejected")
	case v1alpha1.PhaseExpired:
		return fail(ErrExpired, readyC, v1alpha1.ReasonExpired, "expired (its shutdownTime has passed)")
	}
	if sb.DeletionTimestamp != nil {
		return outcome{err: newError(ErrFailed, ns, name, "Deleting", "Sandbox %s/%s is being deleted", ns, name)}
	}
	if st.ObservedGeneration < sb.Generation {
		return outcome{} // the controller has not seen this generation yet
	}
	if want == suspended {
		return outcome{done: st.Phase == v1alpha1.PhaseSuspended}
	}
	if bound != nil && bound.Status == metav1.ConditionFalse {
		if fallback, kind := refusal(bound.Reason); kind != nil {
			return fail(kind, bound, bound.Reason, fallback)
		}
	}
	if readyC != nil && readyC.Status == metav1.ConditionTrue {
		return outcome{done: true}
	}
	lc := sb.Spec.Lifecycle
	if st.Phase == v1alpha1.PhaseSuspended || (lc != nil && lc.Suspend != nil && *lc.Suspend) {
		return outcome{err: newError(ErrSuspended, ns, name, v1alpha1.ReasonSuspended,
			"Sandbox %s/%s is suspended; resume it first", ns, name)}
	}
	switch r := reasonOf(readyC); {
	case st.Phase == v1alpha1.PhaseFailed || st.Phase == v1alpha1.PhaseSucceeded ||
		r == v1alpha1.ReasonPodTampered || r == v1alpha1.ReasonPodMissing ||
		r == v1alpha1.ReasonPodFailed || r == v1alpha1.ReasonPodSucceeded:
		if r == "" {
			r = string(st.Phase)
		}
		return fail(ErrFailed, readyC, r, "the pod is "+strings.ToLower(string(st.Phase)))
	}
	return outcome{}
}

// refusal is the kind of error a Bound=False reason ends a wait with, and
// its message for a condition that has none; a nil kind for a reason that
// does not. The reason decides in phase Rejected too: the controller refuses
// a run it cannot authorize (OwnerNotAuthorized) and a SandboxQuota in
// Reject mode refuses (QuotaExceeded) with that phase.
func refusal(reason string) (string, error) {
	switch reason {
	case v1alpha1.ReasonOwnerNotAuthorized:
		return "the workspace owner is not authorized", ErrOwnerNotAuthorized
	case v1alpha1.ReasonForeignPodConflict:
		return "a foreign pod holds the sandbox's pod name", ErrForeignPod
	case v1alpha1.ReasonIdempotencyKeyConflict:
		return "idempotency key conflict", ErrKeyConflict
	case v1alpha1.ReasonQuotaExceeded:
		return "quota exceeded", ErrQuota
	case v1alpha1.ReasonInvalidSpec:
		return "invalid spec", ErrRejected
	}
	return "", nil
}

// describe is "phase Pending; Bound=False/Waiting: ...; Ready=False/NotBound"
// or "no status yet".
func describe(sb *v1alpha1.Sandbox) string {
	var parts []string
	if sb.Status.Phase != "" {
		parts = append(parts, "phase "+string(sb.Status.Phase))
	}
	for _, t := range []string{v1alpha1.ConditionBound, v1alpha1.ConditionReady} {
		if c := v1alpha1.FindCondition(sb.Status.Conditions, t); c != nil {
			s := fmt.Sprintf("%s=%s/%s", t, c.Status, c.Reason)
			if c.Message != "" {
				s += ": " + c.Message
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "no status yet"
	}
	return strings.Join(parts, "; ")
}

// WaitReady waits until the Sandbox's pod is Ready and returns the Sandbox
// as it was then. It reads the Sandbox once and then follows a watch from
// that resourceVersion (re-opened after a break or an error event the retry
// policy retries, such as a 500 or a 429, after a backoff; read afresh after
// a 410), never polling. It follows the Sandbox of the uid it first read:
// once the name holds another Sandbox (this one deleted, another made under
// its name), it ends with a NotFound error naming the other uid
// (apierrors.IsNotFound), never with another request's Sandbox. It returns
// early with a typed error when the Sandbox can never be Ready (ErrRejected,
// ErrKeyConflict, ErrExpired, ErrOwnerNotAuthorized, ErrForeignPod, ErrQuota,
// ErrFailed, ErrSuspended), and with ctx's error, naming the last status
// seen, when ctx ends first.
func (c *Client) WaitReady(ctx context.Context, name string) (*v1alpha1.Sandbox, error) {
	return c.wait(ctx, name, "", ready)
}

// WaitReadyUID is WaitReady for the Sandbox of that uid only, such as the
// one Create returned: a Sandbox of another uid under the name, from the
// first read on, ends the wait with NotFound.
func (c *Client) WaitReadyUID(ctx context.Context, name string, uid types.UID) (*v1alpha1.Sandbox, error) {
	return c.wait(ctx, name, uid, ready)
}

// WaitSuspended waits until the Sandbox is Suspended.
func (c *Client) WaitSuspended(ctx context.Context, name string) (*v1alpha1.Sandbox, error) {
	return c.wait(ctx, name, "", suspended)
}

// WaitSuspendedUID is WaitSuspended for the Sandbox of that uid only.
func (c *Client) WaitSuspendedUID(ctx context.Context, name string, uid types.UID) (*v1alpha1.Sandbox, error) {
	return c.wait(ctx, name, uid, suspended)
}

// replaced is the error of a wait whose name holds another Sandbox than the
// one of the uid it follows: NotFound, as Python's client raises it.
func replaced(ns, name string, uid types.UID) error {
	err := apierrors.NewNotFound(v1alpha1.Resource("sandboxes"), name)
	err.ErrStatus.Message = fmt.Sprintf("Sandbox %s/%s was deleted while waiting: the name now holds another "+
		"Sandbox (uid %s)", ns, name, uid)
	return err
}

// retryWatch is a watch ended by an error event the retry policy retries.
type retryWatch struct{ err error }

func (e *retryWatch) Error() string { return e.err.Error() }

func (c *Client) wait(ctx context.Context, name string, uid types.UID, want state) (*v1alpha1.Sandbox, error) {
	var last *v1alpha1.Sandbox
	timedOut := func(err error) error {
		seen := "no status yet"
		if last != nil {
			seen = describe(last)
		}
		return fmt.Errorf("waiting for Sandbox %s/%s: %w (last seen: %s)", c.namespace, name, err, seen)
	}
	delay := c.Initial
	for {
		sb, err := c.Get(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return last, timedOut(ctx.Err())
			}
			return last, err
		}
		if uid == "" {
			uid = sb.UID
		} else if sb.UID != uid {
			return last, replaced(c.namespace, name, sb.UID)
		}
		last = sb
		for {
			if o := classify(last, want); o.done || o.err != nil {
				return last, o.err
			}
			var again bool
			last, again, err = c.follow(ctx, last, want)
			var rw *retryWatch
			switch {
			case ctx.Err() != nil:
				return last, timedOut(ctx.Err())
			case errors.As(err, &rw):
				// Back off (never sooner than a Retry-After), then watch again from last.
				wait, _ := retryAfter(rw.err)
				wait = max(wait, time.Duration(float64(delay)*(1+0.25*mrand.Float64())))
				if c.sleep(ctx, wait) != nil {
					return last, timedOut(ctx.Err())
				}
				delay = min(delay*2, c.Maximum)
				continue
			case err != nil:
				return last, err
			}
			delay = c.Initial
			if again {
				break // read afresh: the watch's version is too old
			}
		}
	}
}

// follow reads one watch from last's resourceVersion until a state that ends
// the wait; it returns the newest object seen, and again when the Sandbox
// must be read afresh (410 Gone). An error event the retry policy retries is
// a *retryWatch; an object of another uid than last's ends it with NotFound.
func (c *Client) follow(ctx context.Context, last *v1alpha1.Sandbox, want state) (*v1alpha1.Sandbox, bool, error) {
	var w watch.Interface
	err := c.retry(ctx, func() error {
		var err error
		w, err = c.sandboxes.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", last.Name).String(),
			ResourceVersion: last.ResourceVersion, AllowWatchBookmarks: true,
		})
		return err
	})
	if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
		return last, true, nil
	}
	if err != nil {
		return last, false, err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return last, false, nil // the server ended it: watch again from last
			}
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
					return last, true, nil
				}
				if _, ok := retryAfter(err); ok {
					return last, false, &retryWatch{err}
				}
				return last, false, err
			case watch.Deleted:
				return last, false, apierrors.NewNotFound(v1alpha1.Resource("sandboxes"), last.Name)
			case watch.Bookmark:
				if sb, ok := ev.Object.(*v1alpha1.Sandbox); ok {
					last = last.DeepCopy()
					last.ResourceVersion = sb.ResourceVersion
				}
			case watch.Added, watch.Modified:
				sb, ok := ev.Object.(*v1alpha1.Sandbox)
				if !ok {
					return last, false, errors.New("watch sent an object that is not a Sandbox")
				}
				if sb.Name != last.Name {
					continue // a server (or fake) that ignores the field selector
				}
				if last.UID != "" && sb.UID != last.UID {
					return last, false, replaced(last.Namespace, last.Name, sb.UID)
				}
				last = sb
				if o := classify(last, want); o.done || o.err != nil {
					return last, false, nil
				}
			}
		}
	}
}
