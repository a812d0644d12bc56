package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "sandbox.dev/api/v1alpha1"
	"sandbox.dev/client-go/clientset/versioned/fake"
)

func withStatus(phase v1alpha1.SandboxPhase, gen int64, conds ...v1alpha1.Condition) *v1alpha1.Sandbox {
	return &v1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "task", Namespace: ns, Generation: gen},
		Spec:       v1alpha1.SandboxSpec{Image: "img", IdempotencyKey: "task-42"},
		Status:     v1alpha1.SandboxStatus{Phase: phase, ObservedGeneration: 1, Conditions: conds},
	}
}

func cond(t, status, reason, msg string) v1alpha1.Condition {
	return v1alpha1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg}
}

// Every status a wait can meet: done, a typed error naming the server's
// message, or keep waiting.
func TestClassify(t *testing.T) {
	yes := true
	suspendedSpec := withStatus(v1alpha1.PhaseRunning, 1)
	suspendedSpec.Spec.Lifecycle = &v1alpha1.SandboxLifecycle{Suspend: &yes}
	deleting := withStatus(v1alpha1.PhaseRunning, 1)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := []struct {
		name string
		sb   *v1alpha1.Sandbox
		want state
		done bool
		kind error
		says string
	}{
		{"ready", withStatus(v1alpha1.PhaseRunning, 1, cond("Bound", "True", "PodCreated", ""), cond("Ready", "True", "PodReady", "")), ready, true, nil, ""},
		{"pending", withStatus(v1alpha1.PhasePending, 1, cond("Ready", "False", "PodPending", "")), ready, false, nil, ""},
		{"no status yet", withStatus("", 1), ready, false, nil, ""},
		{"stale ready", withStatus(v1alpha1.PhaseRunning, 2, cond("Ready", "True", "PodReady", "")), ready, false, nil, ""},
		{"quota waiting", withStatus(v1alpha1.PhasePending, 1, cond("Bound", "False", "QuotaWaiting", "3 of 3 active")), ready, false, nil, ""},
		{"key conflict", withStatus(v1alpha1.PhaseRejected, 1, cond("Bound", "False", "IdempotencyKeyConflict", "held by team-a/first")), ready, false, ErrKeyConflict, "held by team-a/first"},
		{"rejected even when stale", withStatus(v1alpha1.PhaseRejected, 5, cond("Bound", "False", "InvalidSpec", "bad runtime class")), ready, false, ErrRejected, "bad runtime class"},
		{"quota exceeded", withStatus(v1alpha1.PhaseRejected, 1, cond("Bound", "False", "QuotaExceeded", "alice has 3 of 3")), ready, false, ErrQuota, "alice has 3 of 3"},
		{"expired", withStatus(v1alpha1.PhaseExpired, 1, cond("Ready", "False", "Expired", "expired with team-a/first")), ready, false, ErrExpired, "expired with team-a/first"},
		{"owner", withStatus(v1alpha1.PhasePending, 1, cond("Bound", "False", "OwnerNotAuthorized", "no record")), ready, false, ErrOwnerNotAuthorized, "no record"},
		// The controller refuses a run it cannot authorize as Rejected: the Bound reason names the refusal.
		{"owner refused at run", withStatus(v1alpha1.PhaseRejected, 1, cond("Bound", "False", "OwnerNotAuthorized", "workspace owner alice: no record")), ready, false, ErrOwnerNotAuthorized, "workspace owner alice: no record"},
		{"network profile refused at run", withStatus(v1alpha1.PhaseRejected, 1, cond("Bound", "False", "NetworkProfileNotAuthorized", "network profiles web: no record")), ready, false, ErrRejected, "network profiles web: no record"},
		{"foreign pod", withStatus(v1alpha1.PhasePending, 1, cond("Bound", "False", "ForeignPodConflict", "seal")), ready, false, ErrForeignPod, "seal"},
		{"invalid spec", withStatus(v1alpha1.PhasePending, 1, cond("Bound", "False", "InvalidSpec", "image")), ready, false, ErrRejected, "image"},
		{"pod missing", withStatus(v1alpha1.PhaseFailed, 1, cond("Ready", "False", "PodMissing", "gone")), ready, false, ErrFailed, "gone"},
		{"suspended", withStatus(v1alpha1.PhaseSuspended, 1), ready, false, ErrSuspended, "resume it first"},
		{"suspend asked", suspendedSpec, ready, false, ErrSuspended, "resume it first"},
		{"deleting", deleting, ready, false, ErrFailed, "being deleted"},
		{"wait suspended: done", withStatus(v1alpha1.PhaseSuspended, 1), suspended, true, nil, ""},
		{"wait suspended: not yet", withStatus(v1alpha1.PhaseRunning, 1), suspended, false, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := classify(tc.sb, tc.want)
			if o.done != tc.done {
				t.Fatalf("done %v, want %v", o.done, tc.done)
			}
			if tc.kind == nil {
				if o.err != nil {
					t.Fatalf("error %v, want none", o.err)
				}
				return
			}
			var e *Error
			if !errors.Is(o.err, tc.kind) || !errors.As(o.err, &e) || !strings.Contains(e.Message, tc.says) || e.Name != "task" {
				t.Fatalf("got %v, want %v saying %q", o.err, tc.kind, tc.says)
			}
		})
	}
}

// watched makes the fake signal each watch it opens, once the watch is
// registered with the fake's tracker: the tracker does not replay events from
// a resourceVersion as a server does, so a change made before registration
// would be lost and the test would wait for nothing.
func watched(cs *fake.Clientset) chan struct{} {
	opened := make(chan struct{}, 16)
	cs.PrependWatchReactor("sandboxes", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace())
		opened <- struct{}{}
		return true, w, err
	})
	return opened
}

// WaitReady follows a watch: it returns once the status says Ready, not
// before, and never polls.
func TestWaitReadyByWatch(t *testing.T) {
	c, cs, _ := newClient(withStatus(v1alpha1.PhasePending, 1, cond("Ready", "False", "PodPending", "")))
	opened := watched(cs)
	gets := 0
	cs.PrependReactor("get", "sandboxes", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	type result struct {
		sb  *v1alpha1.Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() { sb, err := c.WaitReady(ctx(t), "task"); done <- result{sb, err} }()
	select {
	case <-opened:
	case r := <-done:
		t.Fatalf("returned before watching: %v %v", r.sb, r.err)
	}
	sbs := cs.SandboxV1alpha1().Sandboxes(ns)
	// Another Sandbox's event is not this one's (the fake ignores the field selector).
	other := withStatus(v1alpha1.PhaseRunning, 1, cond("Ready", "True", "PodReady", ""))
	other.Name = "other"
	if _, err := sbs.Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("returned before Ready: %v %v", r.sb, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	ready := withStatus(v1alpha1.PhaseRunning, 1, cond("Bound", "True", "PodCreated", ""), cond("Ready", "True", "PodReady", ""))
	ready.Status.PodName = "sbx-0123"
	if _, err := sbs.UpdateStatus(context.Background(), ready, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.sb.Status.PodName != "sbx-0123" {
		t.Fatalf("got %v, %v", r.sb, r.err)
	}
	if gets != 1 {
		t.Fatalf("%d GETs: one read, then the watch", gets)
	}
}

// A watch that is too old (410) is read afresh; a Sandbox deleted while
// waited for is NotFound; a wait out of time names the last status.
func TestWaitReadyGoneDeletedAndTimeout(t *testing.T) {
	c, cs, _ := newClient(withStatus(v1alpha1.PhasePending, 1))
	opened := watched(cs) // after the 410 reactor below: only the second watch signals
	first := true
	cs.PrependWatchReactor("sandboxes", func(k8stesting.Action) (bool, watch.Interface, error) {
		if !first {
			return false, nil, nil
		}
		first = false
		w := watch.NewFake()
		go w.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
		return true, w, nil
	})
	gets := 0
	cs.PrependReactor("get", "sandboxes", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { _, err := c.WaitReady(ctx(t), "task"); done <- err }()
	<-opened // the second watch, after the 410 and a fresh GET
	if err := cs.SandboxV1alpha1().Sandboxes(ns).Delete(context.Background(), "task", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !apierrors.IsNotFound(err) {
		t.Fatalf("got %v, want NotFound", err)
	}
	if gets != 2 {
		t.Fatalf("%d GETs, want 2 (the 410 reads afresh)", gets)
	}

	c, _, _ = newClient(withStatus(v1alpha1.PhasePending, 1, cond("Bound", "False", "Waiting", "the API refused the pod")))
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.WaitReady(short, "task")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Bound=False/Waiting: the API refused the pod") {
		t.Fatalf("got %v", err)
	}
}

// A wait follows one Sandbox, the one of the uid it first read: read afresh
// after a 410, the name holds another Sandbox (this one deleted, another
// request made under its name, Ready): not this one's Ready but NotFound
// naming the other uid. An event of another uid ends the wait the same way.
func TestWaitReadyNeverTakesAnotherSandboxOfTheName(t *testing.T) {
	gvr := v1alpha1.SchemeGroupVersion.WithResource("sandboxes")
	other := func() *v1alpha1.Sandbox {
		b := withStatus(v1alpha1.PhaseRunning, 1, cond("Bound", "True", "PodCreated", ""), cond("Ready", "True", "PodReady", ""))
		b.UID, b.Spec.IdempotencyKey, b.Spec.WorkspaceOwner = "uid-b", "someone-else", "bob"
		return b
	}
	a := withStatus(v1alpha1.PhasePending, 1)
	a.UID = "uid-a"
	c, cs, _ := newClient(a)
	first := true
	cs.PrependWatchReactor("sandboxes", func(k8stesting.Action) (bool, watch.Interface, error) {
		if !first {
			return false, nil, nil
		}
		first = false
		// While this watch is too old, the name changes hands.
		_ = cs.Tracker().Delete(gvr, ns, "task")
		_ = cs.Tracker().Create(gvr, other(), ns)
		w := watch.NewFake()
		go w.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
		return true, w, nil
	})
	got, err := c.WaitReady(ctx(t), "task")
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "another Sandbox (uid uid-b)") {
		t.Fatalf("after the 410: got %v (uid %v), want NotFound naming uid-b", err, uidOf(got))
	}
	if got == nil || got.UID != "uid-a" {
		t.Fatalf("returned Sandbox uid %v, want the one waited for (uid-a)", uidOf(got))
	}

	c, cs, _ = newClient(a.DeepCopy())
	cs.PrependWatchReactor("sandboxes", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		go w.Add(other())
		return true, w, nil
	})
	if _, err := c.WaitReady(ctx(t), "task"); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "uid-b") {
		t.Fatalf("an event of another uid: got %v, want NotFound naming uid-b", err)
	}

	// WaitReadyUID: the uid Create returned, not the one the first read finds.
	c, _, _ = newClient(other())
	if _, err := c.WaitReadyUID(ctx(t), "task", "uid-a"); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "uid-b") {
		t.Fatalf("WaitReadyUID of uid-a on uid-b: got %v, want NotFound naming uid-b", err)
	}
	c, _, _ = newClient(other())
	if sb, err := c.WaitReadyUID(ctx(t), "task", "uid-b"); err != nil || sb.UID != "uid-b" {
		t.Fatalf("WaitReadyUID of the uid there: %v %v", uidOf(sb), err)
	}
}

func uidOf(sb *v1alpha1.Sandbox) any {
	if sb == nil {
		return nil
	}
	return sb.UID
}

// An error event that may pass (a 500 from a broken stream, an etcd
// timeout, a 429) re-opens the watch after a backoff, and the wait goes on;
// one that will not (403) ends it with that error.
func TestWaitReadyReopensTheWatchAfterATransientErrorEvent(t *testing.T) {
	c, cs, slept := newClient(withStatus(v1alpha1.PhasePending, 1))
	opened := watched(cs) // the second watch only: the reactor below goes first
	first := true
	cs.PrependWatchReactor("sandboxes", func(k8stesting.Action) (bool, watch.Interface, error) {
		if !first {
			return false, nil, nil
		}
		first = false
		w := watch.NewFake()
		go w.Error(&apierrors.NewInternalError(errors.New("unable to decode an event from the watch stream: " +
			"stream error: stream ID 5; INTERNAL_ERROR; received from peer")).ErrStatus)
		return true, w, nil
	})
	done := make(chan error, 1)
	go func() { _, err := c.WaitReady(ctx(t), "task"); done <- err }()
	select {
	case <-opened:
	case err := <-done:
		t.Fatalf("a 500 error event ended the wait: %v", err)
	}
	ready := withStatus(v1alpha1.PhaseRunning, 1, cond("Bound", "True", "PodCreated", ""), cond("Ready", "True", "PodReady", ""))
	if _, err := cs.SandboxV1alpha1().Sandboxes(ns).UpdateStatus(context.Background(), ready, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("got %v, want Ready", err)
	}
	if len(*slept) != 1 {
		t.Fatalf("slept %v, want one backoff before the watch was opened again", *slept)
	}

	c, cs, _ = newClient(withStatus(v1alpha1.PhasePending, 1))
	cs.PrependWatchReactor("sandboxes", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		go w.Error(&apierrors.NewForbidden(v1alpha1.Resource("sandboxes"), "task", errors.New("no watch for you")).ErrStatus)
		return true, w, nil
	})
	if _, err := c.WaitReady(ctx(t), "task"); !apierrors.IsForbidden(err) {
		t.Fatalf("a 403 error event: got %v, want Forbidden", err)
	}
}

// Suspend and resume are merge patches of spec.lifecycle, Strict; resume
// waits for Ready.
func TestSuspendResumeDelete(t *testing.T) {
	c, cs, _ := newClient(withStatus(v1alpha1.PhaseRunning, 1, cond("Ready", "True", "PodReady", "")))
	var patches []string
	cs.PrependReactor("patch", "sandboxes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		patches = append(patches, string(p.GetPatch()))
		return false, nil, nil
	})
	if _, err := c.Suspend(ctx(t), "task"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx(t), "task"); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"spec":{"lifecycle":{"suspend":true}}}`, `{"spec":{"lifecycle":{"suspend":false}}}`}
	if strings.Join(patches, " ") != strings.Join(want, " ") {
		t.Fatalf("patches %q, want %q", patches, want)
	}
	// The first delete's answer is lost: the retry finds it gone and says deleted.
	n := 0
	cs.PrependReactor("delete", "sandboxes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n++
		if n == 1 {
			_ = cs.Tracker().Delete(a.GetResource(), ns, "task")
			return true, nil, reset
		}
		return false, nil, nil
	})
	if deleted, err := c.Delete(ctx(t), "task"); !deleted || err != nil {
		t.Fatalf("Delete: %v %v", deleted, err)
	}
	if deleted, err := c.Delete(ctx(t), "task"); deleted || err != nil {
		t.Fatalf("Delete of a missing Sandbox: %v %v", deleted, err)
	}
}

// lossyDeletes answers the fake's deletes as the API server does (a uid
// precondition checked against the stored object: a Conflict in the words of
// 1.35) and loses the answer of the first of every pair: the server acted
// (deleted, or refused), the client saw a reset and sends it again.
func lossyDeletes(cs *fake.Clientset) *int {
	n := 0
	cs.PrependReactor("delete", "sandboxes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n++
		d := a.(k8stesting.DeleteAction)
		obj, err := cs.Tracker().Get(a.GetResource(), ns, d.GetName())
		if err == nil {
			stored := obj.(*v1alpha1.Sandbox).UID
			if pre := d.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil && *pre.UID != stored {
				err = apierrors.NewConflict(v1alpha1.Resource("sandboxes"), d.GetName(), fmt.Errorf(
					"the UID in the precondition (%s) does not match the UID in record (%s). "+
						"The object might have been deleted and then recreated", *pre.UID, stored))
			} else {
				err = cs.Tracker().Delete(a.GetResource(), ns, d.GetName())
			}
		}
		if n%2 == 1 {
			return true, nil, reset
		}
		return true, nil, err
	})
	return &n
}

// A delete reports true only for a Sandbox that was there when it was
// called: once it is gone, or another was made under the name, a delete sent
// again after its answer (404, or the uid's Conflict) was lost deletes
// nothing and says false, as the first answer would have; the other Sandbox
// stays. A delete whose success was lost and that finds it gone says true.
func TestDeleteOfASandboxGoneBeforeIsFalseAcrossLostAnswers(t *testing.T) {
	mine := withStatus(v1alpha1.PhaseRunning, 1)
	mine.UID = "uid-1"
	c, cs, _ := newClient(mine)
	lossyDeletes(cs)
	if deleted, err := c.DeleteUID(ctx(t), "task", "uid-1"); !deleted || err != nil {
		t.Fatalf("DeleteUID of the Sandbox there, its answer lost: %v %v, want true", deleted, err)
	}
	if deleted, err := c.DeleteUID(ctx(t), "task", "uid-1"); deleted || err != nil {
		t.Fatalf("DeleteUID once it is gone, its answer lost: %v %v, want false, no error", deleted, err)
	}
	if deleted, err := c.Delete(ctx(t), "task"); deleted || err != nil {
		t.Fatalf("Delete once it is gone, its answer lost: %v %v, want false, no error", deleted, err)
	}
	other := withStatus(v1alpha1.PhaseRunning, 1)
	other.UID = "uid-2"
	if err := cs.Tracker().Create(v1alpha1.SchemeGroupVersion.WithResource("sandboxes"), other, ns); err != nil {
		t.Fatal(err)
	}
	if deleted, err := c.DeleteUID(ctx(t), "task", "uid-1"); deleted || err != nil {
		t.Fatalf("DeleteUID with the name holding another Sandbox, its answer lost: %v %v, want false, no error",
			deleted, err)
	}
	if sb, err := c.Get(ctx(t), "task"); err != nil || sb.UID != "uid-2" {
		t.Fatalf("the other Sandbox: %v %v", sb, err)
	}
}

// DeleteUID sends the uid as a precondition. When the name holds another
// Sandbox by then (made between DeleteUID's read, which saw uid-1, and its
// delete) the API server refuses it with a Conflict (in the words of 1.35 and
// of the releases before): that Sandbox is left alone, and DeleteUID reports
// false with no error. Delete sends no precondition.
func TestDeleteUIDLeavesASandboxMadeUnderTheNameSince(t *testing.T) {
	for _, words := range []string{
		`the UID in the precondition (uid-1) does not match the UID in record (uid-2). The object might have been deleted and then recreated`,
		`Precondition failed: UID in precondition: uid-1, UID in object meta: uid-2`,
	} {
		read := withStatus(v1alpha1.PhaseRunning, 1)
		read.UID = "uid-1"
		c, cs, _ := newClient(read)
		var sent []*metav1.Preconditions
		cs.PrependReactor("delete", "sandboxes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			pre := a.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions
			sent = append(sent, pre)
			if pre != nil && pre.UID != nil {
				return true, nil, apierrors.NewConflict(v1alpha1.Resource("sandboxes"), "task", errors.New(words))
			}
			return false, nil, nil
		})
		deleted, err := c.DeleteUID(ctx(t), "task", "uid-1")
		if deleted || err != nil {
			t.Fatalf("DeleteUID with the name holding another Sandbox (%q): %v %v, want false, no error", words, deleted, err)
		}
		if len(sent) != 1 || sent[0] == nil || sent[0].UID == nil || *sent[0].UID != "uid-1" {
			t.Fatalf("preconditions sent: %+v, want the uid uid-1 once", sent)
		}
		if _, err := c.Get(ctx(t), "task"); err != nil {
			t.Fatalf("the other Sandbox: %v", err)
		}
		if deleted, err := c.Delete(ctx(t), "task"); !deleted || err != nil || sent[1] != nil {
			t.Fatalf("Delete: %v %v, preconditions %+v", deleted, err, sent[1])
		}
	}
}
