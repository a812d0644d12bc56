/* The reconcile loop: turns each Sandbox into exactly one Pod per scope and key.
 *
 * Correctness never depends on the cache or on leader election: the Pod's name
 * is derived from the scope digest, so the create itself is the atomic claim,
 * and AlreadyExists (or an unknown outcome) leads to a live GET and a full
 * verification (sandbox/verify.h) before anything is adopted. The informer
 * caches only drive the work queue and let the loop skip API calls it can
 * prove unnecessary. The wiring that feeds it is reconcile/controller.h. */
#ifndef SBX_RECONCILE_RECONCILE_H
#define SBX_RECONCILE_RECONCILE_H

#include "kube/errors.h"

struct sbx_controller;

/* Reconciles one Sandbox "namespace/name". Returns 0 when done, a positive
 * delay in ms to look again later, or -1 to retry with backoff. */
int sbx_reconcile(struct sbx_controller *c, const char *key);
/* What sbx_reconcile_ex tells beside its result. */
struct sbx_reconcile_result {
	long retry_after_ms; /* with -1: the least delay the API asked for (Retry-After, ms; 0 none) */
	int timer;	     /* with a delay: it is only the wait for a shutdownTime */
};
/* sbx_reconcile that fills res (NULL ok). */
int sbx_reconcile_ex(struct sbx_controller *c, const char *key, struct sbx_reconcile_result *res);

/* Whether the API's refusal of a pod create means the Sandbox's spec can never
 * yield a valid pod (Rejected/InvalidSpec), rather than a decision of this
 * cluster now (Waiting, retried). Final only for a 422 Invalid whose every
 * cause is a field validation (FieldValue*, not Forbidden) of a pod field the
 * spec controls (the container's image, command, args, env, resources, or
 * spec.runtimeClassName), and whose message does not come from admission
 * (webhooks, ValidatingAdmissionPolicy). Policies, quotas, webhooks (any
 * code), and failures in fields the controller's configuration controls are
 * not final. */
int sbx_pod_refusal_is_final(const struct kube_error *e);

#endif
