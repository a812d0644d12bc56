/* The controller's wiring: informers and their handlers, the work queue and
 * its workers, start-up and release (main.c drives it). The decision each
 * worker runs is reconcile/reconcile.h. */
#ifndef SBX_RECONCILE_CONTROLLER_H
#define SBX_RECONCILE_CONTROLLER_H

#include <stddef.h>

#include "reconcile/state.h"

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
/* The work queue's order (before start): fair across namespaces and owners
 * (0, the default) or one FIFO (1, a baseline). */
void sbx_controller_set_fifo(struct sbx_controller *c, int fifo);
/* The fair queue's caps (before start): reconciles of one namespace, and of
 * one owner of it, at once (< 0: workers/8 and workers/16, at least 1; 0: no
 * cap). */
void sbx_controller_set_caps(struct sbx_controller *c, int per_namespace, int per_owner);
/* The fair queue's caps while tenants share it (workqueue_set_shared_caps,
 * a linger of SBX_SHARED_LINGER_MS; < 0: workers/32 and workers/64, at least
 * 1; 0: none). */
void sbx_controller_set_shared_caps(struct sbx_controller *c, int per_namespace, int per_owner);
#define SBX_SHARED_LINGER_MS 1000
/* The fair queue's rate while tenants share it (workqueue_set_shared_rate;
 * 0, the default: none). */
void sbx_controller_set_shared_rate(struct sbx_controller *c, double per_second);
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

#endif
