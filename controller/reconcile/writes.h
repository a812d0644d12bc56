/* The writes the parts of the controller share: a Sandbox's status and
 * events, and its pod built, created or read. */
#ifndef SBX_RECONCILE_WRITES_H
#define SBX_RECONCILE_WRITES_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "kube/errors.h"
#include "reconcile/view.h"
#include "sandbox/status.h"

struct sbx_controller;

/* A new owner reference to the Sandbox name (uid): apiVersion, kind, name
 * and uid, no controller or blockOwnerDeletion (caller owns it). */
cJSON *sbx_rc_sandbox_ref(const char *name, const char *uid);
/* status.binding as SBX_BIND_* (absent or unknown: Adopted). */
int sbx_rc_binding_how(const char *binding);
/* Records an Event on v. */
void sbx_rc_event(struct sbx_controller *c, const struct sbx_view *v, const char *type, const char *reason,
		  const char *msg);
/* Writes v's status when it differs from the cached one: 1 written, 0
 * unchanged (or the Sandbox is gone), -1 error. */
int sbx_rc_write_status(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_status_in *in);
/* sbx_rc_write_status with v's resourceVersion as a precondition, for the
 * lifecycle: a lifecycle change made meanwhile (an extension, a resume) wins
 * and is looked at again. 1 written, 0 unchanged, REQUEUE_BUSY_MS on a
 * conflict, -1. */
int sbx_rc_write_status_guarded(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_status_in *in);
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
/* Deletes pod from ns with its uid as precondition (a pod re-created under
 * the name is not this one). 0 when it is gone or going (or another pod has
 * the name now), -1 (logged). */
int sbx_rc_delete_pod(struct sbx_controller *c, const char *ns, const cJSON *pod);
/* Logs a failed pod create (of pod_name, for sandbox: a Sandbox or pool
 * name), at most about once a second for the whole process: a broken
 * admission chain fails every Sandbox alike. */
void sbx_rc_log_create_failure(const char *ns, const char *sandbox, const char *pod_name, enum kube_err e,
			       const char *msg);
/* The pod this controller builds for v under pod_name, of claim name claim
 * (NULL: pod_name), claimed at claimed, with seal (caller frees; NULL when
 * the builder refuses, see sbx_pod_build). */
cJSON *sbx_rc_build_pod(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name, const char *claim,
			const char *claimed, const char *seal);
/* Creates v's pod pod_name of claim name claim (NULL: pod_name) claimed at
 * claimed_at (NULL: now). */
enum kube_err sbx_rc_create_pod(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name,
				const char *claim, const char *claimed_at, cJSON **out, struct kube_error *err);
/* The path of the Sandbox v. */
void sbx_rc_path(char *out, size_t n, const struct sbx_view *v);
/* The Sandbox status subresource path of v. */
void sbx_rc_path_status(char *out, size_t n, const struct sbx_view *v);
/* The idempotency key lifetime, seconds. */
long sbx_rc_key_lifetime(const struct sbx_controller *c);
/* The path of pod ns/name. */
void sbx_rc_pod_path(char *out, size_t n, const char *ns, const char *name);

/* Deletes path with preconditions uid (and resourceVersion when given).
 * Returns 0 (deleted or gone), REQUEUE_BUSY_MS (it changed meanwhile: look
 * again), or -1. */
int sbx_rc_delete(struct sbx_controller *c, const char *path, const char *uid, const char *rv);

#endif
