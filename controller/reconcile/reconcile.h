/* The reconcile loop: turns each Sandbox into exactly one Pod per scope and key.
 *
 * Correctness never depends on the cache or on leader election: the Pod's name
 * is derived from the scope digest, so the create itself is the atomic claim,
 * and AlreadyExists (or an unknown outcome) leads to a live GET and a full
 * verification (sandbox/verify.h) before anything is adopted. The informer
 * caches only drive the work queue and let the loop skip API calls it can
 * prove unnecessary. */
#ifndef SBX_RECONCILE_RECONCILE_H
#define SBX_RECONCILE_RECONCILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/workqueue.h"
#include "sandbox/config.h"
#include "sandbox/seal.h"

struct sbx_strset; /* a set of short strings (digests, uids) */
struct sbx_inforce; /* whether the mutating webhook was in force (reconcile/inforce.h) */
struct sbx_pool_state; /* warm pool bookkeeping (reconcile/pool.h) */
struct sbx_written; /* our status writes the cache has not shown yet */

struct sbx_controller {
	struct kube_client *kc;          /* borrowed */
	const struct sbx_config *cfg;    /* borrowed */
	const struct sbx_seal_keys *seal_keys; /* borrowed; [0] signs, all verify */
	int workers;

	pthread_mutex_t informers_mu;    /* guards the informer pointers below (read by /readyz) */
	struct informer *sandboxes;      /* owned from here on */
	struct informer *pods;
	/* ownerAuthorization accessReview only: the product's
	 * MutatingWebhookConfiguration (one object, by name), and what was seen
	 * of it, to tell whether it was in force when a Sandbox was made. */
	struct informer *webhooks;
	struct sbx_inforce *inforce;
	struct informer *claims; /* SandboxClaims (sandbox/claimrec.h), by scope digest */
	/* Warm pools (reconcile/pool.h, reconcile/warm.h). */
	struct informer *pools;	    /* SandboxWarmPools */
	struct informer *pool_pods; /* warm pods (label sandbox.dev/pool), by pool uid */
	struct sbx_pool_state *pool_state;
	long warm_settle_s;	 /* a pool's template serves only after this long */
	double warm_refill_qps; /* warm pods created per second, all pools */
	char webhook_config[254]; /* its name; "" = none, so nothing is in force */
	struct workqueue *queue;
	struct event_recorder *events;
	struct sbx_strset *inflight;  /* scope digests being claimed */
	struct sbx_strset *announced; /* Sandbox uids whose binding was reported */
	struct sbx_strset *pods_gone;	/* scope digests whose pod left the pod cache lately */
	struct sbx_strset *released;	/* pod uids whose release DELETE was answered lately */
	struct sbx_written *written;      /* our status writes the Sandbox cache has not shown */
	struct sbx_written *created_pods; /* our pod creates the pod cache has not shown */
	pthread_t *threads;
};

/* Fills c; kc, cfg and the seal key must outlive the controller. */
void sbx_controller_init(struct sbx_controller *c, struct kube_client *kc, const struct sbx_config *cfg,
			 const struct sbx_seal_keys *seal_keys, int workers);
/* Names the MutatingWebhookConfiguration whose webhook must be in force for
 * an owner to be mounted (default "sandbox-controller"; "" = none: no owner
 * is ever mounted in accessReview mode). Before start. */
void sbx_controller_set_webhook_config(struct sbx_controller *c, const char *name);
/* Warm pool settings (before start): the settle time of a pool's template
 * (default 90 s) and the refill rate (default 10 pods/s). */
void sbx_controller_set_warm(struct sbx_controller *c, long settle_s, double refill_qps);
/* Starts the informers and waits for their first sync (up to timeout_ms;
 * 0 does not wait: poll sbx_controller_synced, e.g. between signal checks).
 * Every replica runs them (the admission webhook reads them, and readiness
 * never depends on holding the lease); their events fill the work queue,
 * which only workers drain. Returns 0, or -1 with a message in err. */
int sbx_controller_start_caches(struct sbx_controller *c, long timeout_ms, char *err, size_t errlen);
/* Starts the workers (and the event recorder): on the lease holder only, or
 * at once without leader election. Caches must have started. Returns 0, or
 * -1 with a message in err. */
int sbx_controller_start_workers(struct sbx_controller *c, char *err, size_t errlen);
/* Both of the above. */
int sbx_controller_start(struct sbx_controller *c, long timeout_ms, char *err, size_t errlen);
/* Stops the informers, drains the queue, joins the workers and frees what
 * start created. Safe on a controller that never started. */
void sbx_controller_release(struct sbx_controller *c);
/* 1 once both caches have synced (for /readyz). Safe to call from any thread
 * at any time between init and release, also while start or release runs. */
int sbx_controller_synced(struct sbx_controller *c);

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
