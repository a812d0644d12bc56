/* What the reconcile's decision (reconcile.c) and lifecycle (lifecycle.c)
 * share inside the controller: the view of one Sandbox and the writes both
 * make. Not an API: nothing outside controller/sandbox includes it. */
#ifndef SBX_SANDBOX_RECONCILE_INT_H
#define SBX_SANDBOX_RECONCILE_INT_H

#include <time.h>

#include <cjson/cJSON.h>

#include "kube/errors.h"
#include "sandbox/lifecycle.h"
#include "sandbox/reconcile.h"
#include "sandbox/scope.h"
#include "sandbox/status.h"

#define SBX_API "sandbox.dev/v1alpha1"
#define SBX_ANN_CLAIMED_AT_KEY "sandbox.dev/claimed-at"
#define REQUEUE_BUSY_MS 25
#define REQUEUE_WAIT_MS 1000
#define REQUEUE_FOREIGN_MS 30000

/* Everything one reconcile needs about its Sandbox, borrowed from `obj`. */
struct sbx_view {
	const cJSON *obj;
	const char *ns, *name, *uid;
	long long generation;
	time_t created;
	const cJSON *spec, *status;
	const char *owner; /* NULL when spec.workspaceOwner is absent */
	const char *key;   /* NULL when spec.idempotencyKey is absent */
	struct sbx_scope scope;
	struct sbx_lifecycle lc;
	time_t now;
	long retry_after_ms; /* set by claim: the API's Retry-After for the next attempt */
	int timer;	     /* the result is only the wait for the shutdownTime */
};

/* What a pod or record found for a generation means for the claim: done
 * (reported), try the next generation, retry (backoff or soon), or create
 * the cold pod of the generation now. */
enum sbx_examine { EX_DONE, EX_NEXT_GENERATION, EX_RETRY, EX_RETRY_SOON, EX_CREATE };

/* How a Sandbox is bound: status.binding Adopted, Created or Warm. */
#define SBX_BIND_ADOPTED 0
#define SBX_BIND_CREATED 1
#define SBX_BIND_WARM 2
/* status.binding as SBX_BIND_* (absent or unknown: Adopted). */
int sbx_rc_binding_how(const char *binding);
/* 1 when the live pod is certified for v: the whole pod, not only its sealed
 * identity (sbx_pod_payload_verify); else 0 with the reason in why. */
int sbx_rc_payload_matches(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, char *why,
			   size_t whylen);

/* Records an Event on v. */
void sbx_rc_event(struct sbx_controller *c, const struct sbx_view *v, const char *type, const char *reason,
		  const char *msg);
/* Writes v's status when it differs from the cached one: 1 written, 0
 * unchanged (or the Sandbox is gone), -1 error. */
int sbx_rc_write_status(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_status_in *in);
/* Reports a Sandbox that gets no pod (phase, Bound=False/reason, Ready=False
 * NotBound) and, when the reason is new, an Event. 0 or -1. */
int sbx_rc_report_unbound(struct sbx_controller *c, const struct sbx_view *v, const char *phase, const char *reason,
			  const char *msg, const char *event_reason);
/* The status of v bound to pod_name (pod NULL: gone), how SBX_BIND_*. */
struct sbx_status_in sbx_rc_bound_status(const struct sbx_view *v, const cJSON *pod, const char *pod_name,
					 const char *pod_uid, int how, const char *claimed, const char *expires,
					 const char *msg);
/* Writes the bound status for pod (how SBX_BIND_*) and, on the first
 * binding, the event. */
int sbx_rc_report_bound(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, int how);
/* Logs a failed pod create (of pod_name, for sandbox: a Sandbox or pool
 * name), at most about once a second for the whole process: a broken
 * admission chain fails every Sandbox alike. */
void sbx_rc_log_create_failure(const char *ns, const char *sandbox, const char *pod_name, enum kube_err e,
			       const char *msg);
/* Deletes pod from ns with its uid as precondition (a pod re-created under
 * the name is not this one). 0 when it is gone or going (or another pod has
 * the name now), -1 (logged). */
int sbx_rc_delete_pod(struct sbx_controller *c, const char *ns, const cJSON *pod);
/* The live pod ns/name into *pod (NULL: it does not exist). 0 or -1. */
int sbx_rc_get_pod(struct sbx_controller *c, const char *ns, const char *name, cJSON **pod);
/* The pod this controller builds for v under pod_name, of claim name claim
 * (NULL: pod_name), claimed at claimed, with seal (caller frees; NULL when
 * the builder refuses, see sbx_pod_build). */
cJSON *sbx_rc_build_pod(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name, const char *claim,
			const char *claimed, const char *seal);
/* Creates v's pod pod_name of claim name claim (NULL: pod_name) claimed at
 * claimed_at (NULL: now). */
enum kube_err sbx_rc_create_pod(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name,
				const char *claim, const char *claimed_at, cJSON **out, struct kube_error *err);
/* The claim name of a scope pod: its sandbox.dev/claim, else its name. */
const char *sbx_rc_claim_of(const cJSON *pod);
/* Decides what a live pod found under a claim name means for v (adopts it
 * when it verifies); *delay gets a requeue delay. */
enum sbx_examine sbx_rc_examine(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, int *delay);
/* The Sandbox status subresource path of v. */
void sbx_rc_path_status(char *out, size_t n, const struct sbx_view *v);
/* Whether the product's mutating webhook was in force for operation on v's
 * namespace at `made`: 1, or 0 with OwnerNotAuthorized reported and *r the
 * reconcile's result. */
int sbx_rc_webhook_in_force(struct sbx_controller *c, struct sbx_view *v, const char *operation, time_t made, int *r);
/* Where an owner's folders are in their preparation (sandbox/wsgate.c). */
struct sbx_ws_wait {
	char why[768];	     /* for the Sandbox (or pool) while they are not ready */
	int report;	     /* 1: worth a status write (slow, failed, refused) */
	long delay_ms;	     /* with 0: look again then */
	long retry_after_ms; /* with -1: the API's Retry-After */
};
struct sbx_wsprep_for;
/* Whether owner's folders in ns are prepared: 1 (also without owner, or with
 * workspace.prepare off), 0 while the preparation pod runs (made here when
 * missing, owned by forobj; the work queue's queue_key is queued again when
 * it is done, failed or gone), -1 when its create was refused or it failed
 * (retry with backoff); w says why. Reads the preparation pods' cache: no
 * request while it waits. */
int sbx_ws_prepared(struct sbx_controller *c, const char *ns, const char *owner,
		    const struct sbx_wsprep_for *forobj, const char *queue_key, struct sbx_ws_wait *w);
/* The set of work queue keys waiting for a preparation pod (caller frees
 * with sbx_ws_waiters_free; NULL is a no-op there). */
struct sbx_ws_waiters *sbx_ws_waiters_new(void);
void sbx_ws_waiters_free(struct sbx_ws_waiters *w);
/* A preparation pod (trimmed) was added, changed or (deleted 1) removed:
 * the keys waiting for it are queued when it is done, failed or gone. */
void sbx_ws_on_prep_pod(struct sbx_controller *c, const cJSON *pod, int deleted);
/* sbx_ws_prepared for v's owner before a pod of v is created: 1, or 0 with
 * Waiting reported when w says it is worth it and *r the reconcile's result
 * (a delay, or -1). */
int sbx_rc_workspace_ready(struct sbx_controller *c, struct sbx_view *v, int *r);
/* The idempotency key lifetime, seconds. */
long sbx_rc_key_lifetime(const struct sbx_controller *c);

#endif
