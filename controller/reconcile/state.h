/* The controller's state (struct sbx_controller): what every part of the
 * controller reads, in a header of its own so that they need not include
 * each other for it. Filled and started by the wiring (reconcile/controller.h);
 * the decision for one Sandbox is reconcile/reconcile.h. */
#ifndef SBX_RECONCILE_STATE_H
#define SBX_RECONCILE_STATE_H

#include <pthread.h>

#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/workqueue.h"
#include "sandbox/config.h"
#include "sandbox/seal.h"

/* The kinds of the work queue's items (kube/workqueue.h), each keyed
 * "<ns>/<name>": a Sandbox's reconcile; a claim record's collection, queued
 * for when its key's lifetime ends (a timer, no poll); a warm pool's
 * reconcile; a SandboxQuota's status; a quota slot whose pod is gone; a
 * warm pod no pool owns; a sandbox pod no Sandbox holds. */
enum sbx_work { SBX_WORK_SANDBOX,
		SBX_WORK_CLAIM,
		SBX_WORK_POOL,
		SBX_WORK_QUOTA,
		SBX_WORK_SLOT,
		SBX_WORK_ORPHAN,
		SBX_WORK_POD_ORPHAN };

struct sbx_strset;	/* a set of short strings (digests, uids) */
struct sbx_quota_state; /* per-owner quota bookkeeping (reconcile/quota.h) */
struct sbx_inforce;	/* whether the mutating webhook was in force (reconcile/inforce.h) */
struct sbx_pool_state;	/* warm pool bookkeeping (reconcile/pool.h) */
struct sbx_reauthz;	/* answers about recorded identities (reconcile/reauthz.h) */
struct sbx_written;	/* our status writes the cache has not shown yet */
struct strmap;		/* base/strmap.h */
struct sbx_ws_waiters;	/* who waits for a workspace preparation (reconcile/wsgate.h) */
struct sbx_netkeep;	/* the network floor's keeper (reconcile/netkeep.h) */
struct sbx_netverify;	/* whether NetworkPolicy is enforced (reconcile/netverify.h) */

struct sbx_controller {
	struct kube_client *kc;		       /* borrowed */
	const struct sbx_config *cfg;	       /* borrowed */
	const struct sbx_seal_keys *seal_keys; /* borrowed; [0] signs, all verify */
	int workers;
	int fifo;		     /* the work queue's order: 1 FIFO, 0 fair */
	int cap_ns, cap_owner;	     /* the fair queue's caps (< 0: from workers) */
	int shared_ns, shared_owner; /* its caps while tenants share it (< 0: from workers) */
	double shared_rate;	     /* a sharing backlog's starts a second (0: none) */

	pthread_mutex_t informers_mu; /* guards the informer pointers below (read by /readyz) */
	struct informer *sandboxes;   /* owned from here on */
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
	/* Quotas (reconcile/quota.h): SandboxQuotas by namespace, the quota
	 * slots (SandboxClaims of state Slot) by owner key, and what the caches
	 * count per owner. */
	struct informer *quotas;
	struct informer *slots;
	struct sbx_quota_state *quota_state;
	struct informer *profiles;   /* SandboxNetworkProfiles (sandbox/netprofile.h), cluster-scoped */
	struct sbx_reauthz *reauthz; /* may a pool's author still use its owner */
	long warm_settle_s;	     /* a pool's template serves only after this long */
	double warm_refill_qps;	     /* warm pods created per second, all pools */
	char webhook_config[254];    /* its name; "" = none, so nothing is in force */
	struct workqueue *queue;
	struct event_recorder *events;
	struct sbx_strset *inflight;	  /* scope digests being claimed */
	struct sbx_strset *announced;	  /* Sandbox uids whose binding was reported */
	struct sbx_strset *pods_gone;	  /* scope digests whose pod left the pod cache lately */
	struct sbx_strset *pods_made;	  /* scope digests whose pod we made, not yet in the pod cache */
	struct sbx_strset *released;	  /* pod uids whose release DELETE was answered lately */
	struct sbx_written *written;	  /* our status writes the Sandbox cache has not shown */
	struct sbx_written *created_pods; /* our pod creates the pod cache has not shown */
	struct strmap *resume_starts;	  /* Sandbox uid -> when its resume was seen (lifecycle.c) */
	/* Owners' folders (sandbox/wsprep.h, reconcile/wsgate.h): the
	 * preparation pods known Succeeded lately, those a worker looks at
	 * right now, and the image they run when the config names none ("" =
	 * the default). */
	struct sbx_strset *prepared, *prep_looked;
	struct informer *prep_pods;	     /* the preparation pods (label sandbox.dev/workspace-init) */
	struct sbx_ws_waiters *prep_waiters; /* work queue items waiting for one */
	char prep_image[512];
	struct sbx_netkeep *netkeep;	 /* NULL with network.policies false */
	struct sbx_netverify *netverify; /* NULL when nothing is probed */
	pthread_t *threads;
};

/* Queues the object ns/name as an item of kind, after after_ms (0: now),
 * in owner's flow (NULL or "": ownerless, the namespace's own flow); a NULL
 * ns or name queues nothing. Any thread. (reconcile/controller.c, which
 * owns the queue; declared here so that its parts need not include it.) */
void sbx_controller_enqueue(struct sbx_controller *c, enum sbx_work kind, const char *ns, const char *name,
			    const char *owner, long after_ms);

#endif
