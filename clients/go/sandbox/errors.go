package sandbox

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The kinds of error this package returns. Test with errors.Is; errors.As
// with *Error gives the Sandbox, the HTTP status and the server's message.
// API answers that are none of these come back as the client-go error they
// are (apierrors.IsNotFound and the like work on them).
var (
	// ErrKeyConflict: the idempotency key is held by another Sandbox with a
	// different spec in the same scope (the webhook's 422 naming the holder,
	// Bound=False/IdempotencyKeyConflict, or an existing object of the same
	// name, key and owner holding another spec).
	ErrKeyConflict = errors.New("idempotency key conflict")
	// ErrIntentMismatch: a Sandbox of the requested name exists and is another
	// request (another key or owner). It is never returned as if it were this one.
	ErrIntentMismatch = errors.New("the name is held by another request")
	// ErrOwnerNotAuthorized: the caller may not use the workspace owner (403
	// at create naming the owner and the permission, or
	// Bound=False/OwnerNotAuthorized).
	ErrOwnerNotAuthorized = errors.New("workspace owner not authorized")
	// ErrForeignPod: a pod the controller cannot verify holds the Sandbox's
	// pod name (Bound=False/ForeignPodConflict).
	ErrForeignPod = errors.New("foreign pod holds the sandbox's pod name")
	// ErrExpired: the Sandbox reached its shutdownTime, or its key's
	// generation had already expired (phase Expired); final.
	ErrExpired = errors.New("sandbox expired")
	// ErrQuota: a quota refused the Sandbox: Bound=False/QuotaExceeded
	// (phase Rejected, a SandboxQuota in Reject mode) or the API server's
	// ResourceQuota ("exceeded quota", 403). A Sandbox waiting for a slot
	// (QuotaWaiting) is still waited for.
	ErrQuota = errors.New("quota exceeded")
	// ErrRejected: the Sandbox can never get a pod (the API refused the
	// object, or phase Rejected, for example InvalidSpec).
	ErrRejected = errors.New("sandbox rejected")
	// ErrFailed: the bound pod failed, exited, went missing or was tampered
	// with, or the Sandbox is being deleted.
	ErrFailed = errors.New("sandbox failed")
	// ErrSuspended: a wait for Ready on a suspended Sandbox (resume it first).
	ErrSuspended = errors.New("sandbox suspended")
)

// Error is the typed error of this package: Kind is one of the Err* values.
type Error struct {
	Kind      error
	Namespace string
	Name      string
	// Status is the HTTP status of an API answer; 0 when the error comes from
	// the Sandbox's status (a condition or the phase).
	Status int32
	// Reason is the API's Status.reason or the condition's reason.
	Reason string
	// Message is the server's own message where there is one.
	Message string
	// Err is the API error it came from, if any.
	Err error
}

func (e *Error) Error() string { return e.Message }

// Is makes errors.Is(err, ErrKeyConflict) and the like work.
func (e *Error) Is(target error) bool { return target == e.Kind }

func (e *Error) Unwrap() error { return e.Err }

func newError(kind error, ns, name, reason, format string, args ...any) *Error {
	return &Error{Kind: kind, Namespace: ns, Name: name, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// apiError turns an API answer to a write into a typed error; any other
// error comes back as it is. With creating, 400 and 422 answers are the
// create's refusals: a key held by another spec is ErrKeyConflict, anything
// else about the object ErrRejected.
func apiError(err error, ns, name string, creating bool) error {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return err
	}
	st := status.Status()
	kind := error(nil)
	switch {
	case st.Code == 403 && strings.Contains(st.Message, "workspaces.sandbox.dev"):
		kind = ErrOwnerNotAuthorized
	case st.Code == 403 && strings.Contains(st.Message, "exceeded quota"):
		kind = ErrQuota
	case creating && st.Code == 422 && strings.Contains(st.Message, "spec.idempotencyKey") &&
		strings.Contains(st.Message, "held by"):
		kind = ErrKeyConflict
	case creating && (st.Code == 400 || st.Code == 422):
		kind = ErrRejected
	default:
		return err
	}
	return &Error{Kind: kind, Namespace: ns, Name: name, Status: st.Code, Reason: string(st.Reason),
		Message: st.Message, Err: err}
}
