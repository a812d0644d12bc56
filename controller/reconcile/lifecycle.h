/* Sandbox lifecycle (contract sections 2 and 5a): what the controller does
 * with spec.lifecycle, the one mutable part of a spec (parsed by
 * sandbox/spec.h).
 *
 * A bound Sandbox is active while it is not suspended, not expired and not
 * being deleted; a pod runs while at least one Sandbox bound to it is
 * active. Expired (shutdownTime reached) is final for a Sandbox. A pod no
 * active Sandbox holds is released: a claim record (sandbox/claimrec.h)
 * saying what became of its generation is written first, then the pod is
 * deleted with its uid and resourceVersion as preconditions, so a Sandbox
 * that joined it in between keeps it. The decisions are here; the writes go
 * through the shared writes (reconcile/writes.h). */
#ifndef SBX_RECONCILE_LIFECYCLE_H
#define SBX_RECONCILE_LIFECYCLE_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "reconcile/view.h"
#include "sandbox/spec.h"

struct sbx_controller;
struct sbx_view;

/* A Sandbox whose shutdownTime is reached (and not yet marked Expired):
 * releases its pod if no active Sandbox holds it (the claim record first,
 * Expired when nothing can resume it), marks it Expired (Ready=False/Expired,
 * event SandboxExpired) and, with shutdownPolicy Delete, deletes it. Also for
 * a Sandbox already Expired (a crash between those steps). Returns the
 * reconcile's result (0, a delay, -1). */
int sbx_lc_expire(struct sbx_controller *c, struct sbx_view *v);
/* A suspended Sandbox: releases its pod if no active Sandbox holds it,
 * marks it Suspended (suspendedGeneration, event SandboxSuspended). */
int sbx_lc_suspend(struct sbx_controller *c, struct sbx_view *v, int bound);
/* A Sandbox being deleted (a tenant's finalizer may hold it for ever): not
 * active, so it holds its pod no more, as a Sandbox gone: the pod is
 * released unless another active Sandbox holds it (no claim record when no
 * Sandbox holds it at all), and a quota slot v took before its pod existed
 * is given back. Nothing is written to v. Returns the reconcile's result
 * (0, a delay, -1). */
int sbx_lc_terminating(struct sbx_controller *c, struct sbx_view *v);
/* A bound Sandbox that is active again (resumed, or its pod released while
 * it was not looked at): authorized anew (a record of a later run than the
 * suspension), then its pod re-created under the same name with the same
 * claim time, or the one that stands adopted. */
int sbx_lc_resume(struct sbx_controller *c, struct sbx_view *v);
/* 1 when the pod pod_name of v's generation was released by the controller
 * (a claim record of it verifies), so a missing pod is no out-of-band
 * deletion; *rec (NULL ok) gets the record. */
struct sbx_claimrec;
int sbx_lc_released(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name, struct sbx_claimrec *rec);
/* 1 when every Sandbox holding pod (its owner references) is inactive, and
 * at least one expired, none suspended: the generation expired though no
 * record says so yet (the controller was down at a shutdownTime). *expired
 * (size n) gets an expired holder's name. */
int sbx_lc_pod_expired(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, char *expired, size_t n);
/* Observes the resume latency once the resumed Sandbox is Ready. */
void sbx_lc_ready(struct sbx_controller *c, const struct sbx_view *v);
/* Forgets the resume of the Sandbox uid being timed, if any: it was
 * suspended again, expired or deleted before it was Ready, so its next
 * resume is timed from its own start (and a map of resumes never Ready does
 * not grow to its cap). */
void sbx_lc_resume_forget(struct sbx_controller *c, const char *uid);
/* A generation of v's key with no pod seen but a verified claim record rec
 * (a SandboxClaim object): a key older than its lifetime goes on to the next
 * generation; another spec is IdempotencyKeyConflict; Expired is the stored
 * outcome (phase Expired, naming the Sandbox whose expiry it shares, no
 * pod); Suspended binds v to the generation and, v being active, re-creates
 * its pod under the same name and claim time; Bound (the generation is
 * claimed) completes a warm take (reconcile/warm.h) or adopts the pod read
 * live, and is EX_CREATE when the cold pod it names is still to be made. */
enum sbx_examine sbx_lc_claim_record(struct sbx_controller *c, struct sbx_view *v, const cJSON *rec, int *delay);
/* The stored outcome for a new Sandbox v of an expired generation (its pod
 * still there, or its record): phase Expired, Bound=False/Expired naming
 * holder and the key's expiry. Returns 0 or -1. */
int sbx_lc_report_expired_key(struct sbx_controller *c, struct sbx_view *v, const char *holder, const char *pod_name,
			      const char *key_expires_at);
/* Whether v's owner authorization holds for a new claim (fresh) or a
 * resume: a verified record (of the creation: requested-by, or of a resume:
 * resumed-by), of a later generation than the last suspension, made while
 * the webhook was in force (the creation's at its creationTimestamp when
 * check_creation, a resume's at its issue). 1, or 0 with OwnerNotAuthorized
 * reported and *r the result. */
int sbx_lc_owner_authorized(struct sbx_controller *c, struct sbx_view *v, int check_creation, int *r);
/* How long after its issue an owner authorization record stands for the
 * use of the owner without asking again: the webhook's own answer is up to
 * 10 s old when it issues the record (kube/accesscache.h). */
#define SBX_AUTHZ_RECHECK_S 15
/* Whether the identity that created v (or, for a resume, resumed it), with
 * records verified by sbx_lc_owner_authorized and
 * sbx_lc_network_authorized, may still use v's owner and each allow profile
 * v names, now that v's pod is about to be made (or its workspace prepared,
 * or a warm pod taken): asked again (reconcile/reauthz.h, answers kept
 * 15 s / 5 s) when that comes more than SBX_AUTHZ_RECHECK_S after the
 * record was issued (a quota wait, a slow folder preparation, the controller
 * down), so that a right taken away meanwhile makes no pod. A pod already
 * made for the run is never asked about (docs/api.md, "When the right to an
 * owner is revoked"). 1 yes (or nothing to ask); 0 no, -1 cannot tell now,
 * each with the message for the Sandbox in msg and *reason
 * (OwnerNotAuthorized, NetworkProfileNotAuthorized). */
int sbx_lc_still_allowed(struct sbx_controller *c, const struct sbx_view *v, int resume, const char **reason,
			 char *msg, size_t msglen);
/* sbx_lc_still_allowed for a pod made for v's own request (a new generation,
 * or a suspended one v joins): 1, or 0 with *r the result (a refusal
 * reported, Pending/OwnerNotAuthorized or NetworkProfileNotAuthorized,
 * looked at again later; -1 when it cannot be told now). */
int sbx_lc_claim_allowed(struct sbx_controller *c, const struct sbx_view *v, int *r);
/* Whether v may get a pod with the allow profiles it names (none: 1): the
 * webhook's record of their `use` verifies (sandbox.dev/network-authorization
 * of the creation; made while the webhook was in force when check_creation
 * and it is watched), else Rejected/NetworkProfileNotAuthorized; and each
 * still exists, else Pending/NetworkProfileNotFound, looked at again after
 * REQUEUE_PROFILE_MS. 1, or 0 with *r the result. */
int sbx_lc_network_authorized(struct sbx_controller *c, struct sbx_view *v, int check_creation, int *r);

/* The queue's items of sandbox pods no Sandbox holds (sandbox/verify.h,
 * sbx_pod_orphaned): the pod name of ns is read live and, still one, its
 * owner references are put back for the Sandboxes of its namespace bound
 * to it (status podName and podUID) that are not being deleted; with none,
 * and no other Sandbox of its scope that is not being deleted (that one
 * adopts it, or finds it foreign: a seal replayed onto a forged pod), it is
 * deleted with its uid and resourceVersion as preconditions, so a Sandbox
 * that adopted it meanwhile keeps it. Waits while a claim of its
 * scope is in flight or our status write is not in the cache. 0, a delay,
 * or -1. */
int sbx_lc_collect_orphan(struct sbx_controller *c, const char *ns, const char *name);

#endif
