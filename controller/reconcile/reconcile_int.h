/* What the reconcile's decision (reconcile.c) and lifecycle (lifecycle.c)
 * share inside the controller: the view of one Sandbox and the writes both
 * make. Not an API: nothing outside controller/reconcile includes it. */
#ifndef SBX_RECONCILE_RECONCILE_INT_H
#define SBX_RECONCILE_RECONCILE_INT_H

#include <time.h>

#include <cjson/cJSON.h>

#include "kube/errors.h"
#include "reconcile/lifecycle.h"
#include "reconcile/reconcile.h"
#include "reconcile/state.h"
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
/* The idempotency key lifetime, seconds. */
long sbx_rc_key_lifetime(const struct sbx_controller *c);

#endif
