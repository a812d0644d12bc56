package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "sandbox.dev/api/v1alpha1"
)

// patchLifecycle merge-patches spec.lifecycle, the one mutable part of the
// spec (fieldValidation Strict: a server that does not know a field refuses it
// rather than dropping it).
func (c *Client) patchLifecycle(ctx context.Context, name string, lifecycle map[string]any) (*v1alpha1.Sandbox, error) {
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"lifecycle": lifecycle}})
	if err != nil {
		return nil, err
	}
	var sb *v1alpha1.Sandbox
	err = c.retry(ctx, func() error {
		var err error
		sb, err = c.sandboxes.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{FieldValidation: "Strict"})
		return err
	})
	return sb, apiError(err, c.namespace, name, false)
}

// Suspend releases the Sandbox's pod (deleted once every Sandbox bound to it
// is suspended, expired or gone); the workspace stays. WaitSuspended waits
// for it.
func (c *Client) Suspend(ctx context.Context, name string) (*v1alpha1.Sandbox, error) {
	return c.patchLifecycle(ctx, name, map[string]any{"suspend": true})
}

// Resume asks for the Sandbox's pod again (the same name, spec and mounts),
// authorized anew for the caller, and waits until it is Ready (the Sandbox
// of the uid the patch answered with: WaitReadyUID).
func (c *Client) Resume(ctx context.Context, name string) (*v1alpha1.Sandbox, error) {
	sb, err := c.patchLifecycle(ctx, name, map[string]any{"suspend": false})
	if err != nil {
		return nil, err
	}
	return c.WaitReadyUID(ctx, name, sb.UID)
}

// Extend moves spec.lifecycle.shutdownTime to d from now.
func (c *Client) Extend(ctx context.Context, name string, d time.Duration) (*v1alpha1.Sandbox, error) {
	t := metav1.NewTime(time.Now().Add(d).Truncate(time.Second))
	return c.patchLifecycle(ctx, name, map[string]any{"shutdownTime": t})
}

// Delete deletes the Sandbox (its pod goes with the last Sandbox bound to
// it). It reports whether this call deleted it: false, with no error, when
// there was none of the name when it was called; a retry that finds it gone
// after a first attempt whose answer was lost counts as deleted (the lost
// answer did it).
func (c *Client) Delete(ctx context.Context, name string) (bool, error) {
	return c.DeleteUID(ctx, name, "")
}

// DeleteUID is Delete for the Sandbox of that uid only, such as the one
// Create returned (a uid precondition): once that Sandbox is gone and another
// was made under the name, the other is left alone and DeleteUID reports
// false, as when the name is empty. An empty uid is Delete.
//
// The Sandbox is read first, so that "gone" is decided by what stood there
// when the call began: a delete of a Sandbox gone already whose refusal
// (404, or the uid's Conflict) was lost meets the same refusal when sent
// again, and without the read would count as deleted.
func (c *Client) DeleteUID(ctx context.Context, name string, uid types.UID) (bool, error) {
	sb, err := c.Get(ctx, name)
	if apierrors.IsNotFound(err) || (err == nil && uid != "" && sb.UID != uid) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	attempts := 0
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = c.retry(ctx, func() error {
		attempts++
		return c.sandboxes.Delete(ctx, name, opts)
	})
	if apierrors.IsNotFound(err) || (uid != "" && uidPreconditionFailed(err)) {
		return attempts > 1, nil
	}
	return err == nil, err
}

// uidPreconditionFailed: the API server refused a delete guarded by a uid
// because the name holds another object. Its words changed across releases
// ("Precondition failed: UID in precondition: ..." before, "the UID in the
// precondition (...) does not match the UID in record (...)" in 1.35); both
// are a Conflict naming the precondition.
func uidPreconditionFailed(err error) bool {
	if !apierrors.IsConflict(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "UID in the precondition") || strings.Contains(msg, "UID in precondition")
}
