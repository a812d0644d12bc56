/* The wiring of the controller (controller.h): informers and their
 * handlers, the work queue and its workers, start-up and release. The
 * decision each worker runs is reconcile.c. */
#define _GNU_SOURCE
#include "reconcile/controller.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/jsonget.h"
#include "base/ktime.h"
#include "base/strmap.h"
#include "base/xmalloc.h"
#include "reconcile/ctlmetrics.h"
#include "reconcile/inforce.h"
#include "reconcile/lifecycle.h"
#include "reconcile/netkeep.h"
#include "sandbox/netprofile.h"
#include "reconcile/netverify.h"
#include "reconcile/pool.h"
#include "reconcile/quota.h"
#include "reconcile/reauthz.h"
#include "reconcile/reconcile.h"
#include "reconcile/records.h"
#include "reconcile/strset.h"
#include "reconcile/warmslot.h"
#include "reconcile/written.h"
#include "reconcile/wsgate.h"
#include "sandbox/api.h"
#include "sandbox/claimrec.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/quota.h"
#include "sandbox/trim.h"
#include "sandbox/verify.h"
#include "sandbox/wsprep.h"

/* How long after a pod left the pod cache its scope reads records live:
 * far longer than one watch lags behind another while both are current. */
#define PODS_GONE_MS 120000

static void wq_depth(void *ctx, size_t d)
{
	obs_metric_set(sbx_m.wq_depth, sbx_ctl_label, (double)d);
}
static void wq_adds(void *ctx)
{
	obs_metric_add(sbx_m.wq_adds, sbx_ctl_label, 1);
}
static void wq_retries(void *ctx)
{
	obs_metric_add(sbx_m.wq_retries, sbx_ctl_label, 1);
}
static void wq_queued(void *ctx, double s)
{
	obs_metric_observe(sbx_m.wq_queued, sbx_ctl_label, s);
}
static void wq_worked(void *ctx, double s)
{
	obs_metric_observe(sbx_m.wq_worked, sbx_ctl_label, s);
}
static const char *const bucket_label[WORKQUEUE_NS_BUCKETS] = { "0", "1", "2", "3", "4", "5", "6", "7",
								"8", "9", "10", "11", "12", "13", "14", "15" };
static void wq_ns_depth(void *ctx, int bucket, size_t d)
{
	obs_metric_set(sbx_m.wq_ns_depth, &bucket_label[bucket], (double)d);
}
static void wq_ns_queued(void *ctx, int bucket, double s)
{
	obs_metric_observe(sbx_m.wq_ns_queued, &bucket_label[bucket], s);
}
static void wq_tenants(void *ctx, size_t namespaces, size_t flows)
{
	obs_metric_set(sbx_m.wq_namespaces, NULL, (double)namespaces);
	obs_metric_set(sbx_m.wq_flows, NULL, (double)flows);
}

/* ---- wiring: informers, queue, workers ---- */

void sbx_controller_enqueue(struct sbx_controller *c, enum sbx_work kind, const char *ns, const char *name,
			    const char *owner, long after_ms)
{
	if (!ns || !name)
		return;
	char key[600]; /* names are DNS subdomains: 600 bytes hold any key */
	snprintf(key, sizeof key, "%s/%s", ns, name);
	workqueue_add_flow_after(c->queue, (int)kind, key, owner ? owner : "", after_ms);
}

/* Queues the Sandbox "ns/name" in its owner's flow (NULL: ownerless, one
 * flow per namespace). */
static void enqueue_key(struct sbx_controller *c, const char *ns, const char *name, const char *owner)
{
	sbx_controller_enqueue(c, SBX_WORK_SANDBOX, ns, name, owner, 0);
}

/* Queues pod when it is a sandbox pod no Sandbox holds (sandbox/verify.h,
 * sbx_pod_orphaned: its Sandbox deleted with --cascade=orphan, or its
 * owner references removed), for sbx_lc_collect_orphan. */
static void enqueue_pod_orphan(struct sbx_controller *c, const cJSON *pod)
{
	if (!c->queue || !pod || !sbx_pod_orphaned(pod, c->seal_keys))
		return;
	sbx_controller_enqueue(c, SBX_WORK_POD_ORPHAN, meta_str(pod, "namespace"), meta_str(pod, "name"),
			       annotation(pod, SBX_ANN_OWNER), 0);
}

/* Moves the Sandbox gauge by phase: +d for obj's status.phase. */
static void count_phase(const cJSON *obj, double d)
{
	const char *phase = jstr(jobj(obj, "status"), "phase");
	const char *lv[] = { phase && *phase ? phase : "None" };
	obs_metric_add(sbx_m.phases, lv, d);
}

static void enqueue_sandbox(void *ctx, const cJSON *obj)
{
	enqueue_key(ctx, meta_str(obj, "namespace"), meta_str(obj, "name"), jstr(jobj(obj, "spec"), "workspaceOwner"));
}

static void on_sandbox_add(void *ctx, const cJSON *obj)
{
	count_phase(obj, 1);
	sbx_quota_on_sandbox(ctx, obj, 0);
	enqueue_sandbox(ctx, obj);
}

static void on_sandbox_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	struct sbx_controller *c = ctx;
	int own = sbx_written_own_update(c->written, old_obj, new_obj);
	count_phase(old_obj, -1);
	count_phase(new_obj, 1);
	sbx_quota_on_sandbox(c, new_obj, 0);
	if (!own)
		enqueue_sandbox(ctx, new_obj);
}

/* The garbage collector removes the pod once its last owner is gone; we only
 * forget that the Sandbox's binding was announced. */
static void enqueue_pod_owners(void *ctx, const cJSON *pod);

static void on_sandbox_delete(void *ctx, const cJSON *obj)
{
	struct sbx_controller *c = ctx;
	count_phase(obj, -1);
	sbx_quota_on_sandbox(c, obj, 1);
	const char *uid = meta_str(obj, "uid");
	sbx_written_lagging(c->written, uid, NULL);
	sbx_lc_resume_forget(c, uid);
	if (uid) {
		static const char *const kinds[] = { "tampered", "expired", "suspended", "resumed" };
		char key[96];
		sbx_strset_del(c->announced, uid);
		for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
			snprintf(key, sizeof key, "%s/%s", kinds[i], uid);
			sbx_strset_del(c->announced, key);
		}
	}
	/* The other Sandboxes holding its pod may now hold it alone while
	 * suspended or expired: they decide whether it is released. Its
	 * references gone before it, its pod is no one's any more. */
	const char *pod = jstr(jobj(obj, "status"), "podName");
	cJSON *p = pod && c->pods ? informer_get(c->pods, meta_str(obj, "namespace"), pod) : NULL;
	if (p) {
		enqueue_pod_owners(c, p);
		enqueue_pod_orphan(c, p);
	}
	cJSON_Delete(p);
}

/* A pod changed: look again at every Sandbox that owns it. */
static void enqueue_pod_owners(void *ctx, const cJSON *pod)
{
	struct sbx_controller *c = ctx;
	const char *ns = meta_str(pod, "namespace");
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(jobj(pod, "metadata"), "ownerReferences"))
	{
		const char *kind = jstr(ref, "kind"), *api = jstr(ref, "apiVersion"), *name = jstr(ref, "name");
		if (kind && api && !strcmp(kind, "Sandbox") && !strncmp(api, "sandbox.dev/", 12))
			enqueue_key(c, ns, name, annotation(pod, SBX_ANN_OWNER));
	}
}

/* 1 when the trimmed objects a and b differ at most in resourceVersion: the
 * trim keeps only what a reconcile reads, so such an update (the scheduler's
 * binding, another controller's condition) tells the owner nothing. */
static int same_but_version(const cJSON *a, const cJSON *b)
{
	if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
		return 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, a)
	{
		const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
		if (!y)
			return 0;
		if (!strcmp(x->string, "metadata") && cJSON_IsObject(x) && cJSON_IsObject(y)) {
			int nx = 0, ny = 0;
			const cJSON *f;
			cJSON_ArrayForEach(f, x)
			{
				if (!strcmp(f->string, "resourceVersion"))
					continue;
				nx++;
				if (!cJSON_Compare(f, cJSON_GetObjectItemCaseSensitive(y, f->string), 1))
					return 0;
			}
			cJSON_ArrayForEach(f, y) ny += strcmp(f->string, "resourceVersion") != 0;
			if (nx != ny)
				return 0;
		} else if (!cJSON_Compare(x, y, 1)) {
			return 0;
		}
	}
	return 1;
}

static void on_pod_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	if (!same_but_version(old_obj, new_obj)) {
		sbx_quota_on_pod(ctx, new_obj, 0);
		enqueue_pod_owners(ctx, new_obj);
		enqueue_pod_orphan(ctx, new_obj);
	}
}

/* A pod appeared (or left) in the cache: it no longer lags behind our create. */
static void pod_changed(struct sbx_controller *c, const cJSON *pod)
{
	const char *d = jstr(jobj(jobj(pod, "metadata"), "labels"), SBX_LABEL_DIGEST);
	if (d)
		sbx_strset_del(c->pods_made, d);
	sbx_written_lagging(c->created_pods, meta_str(pod, "uid"), NULL);
	enqueue_pod_owners(c, pod);
}

static void on_pod_add(void *ctx, const cJSON *pod)
{
	sbx_netkeep_pod(ctx, pod, 0);
	sbx_quota_on_pod(ctx, pod, 0);
	pod_changed(ctx, pod);
	enqueue_pod_orphan(ctx, pod); /* also those left while the controller was down */
}

/* A pod left: for a while its scope's claims read the records live (its
 * release record may still be on its way to the record cache). */
static void on_pod_delete(void *ctx, const cJSON *pod)
{
	struct sbx_controller *c = ctx;
	const char *d = jstr(jobj(jobj(pod, "metadata"), "labels"), SBX_LABEL_DIGEST);
	if (d)
		sbx_strset_add_for(c->pods_gone, d, PODS_GONE_MS);
	sbx_quota_on_pod_gone(c, pod); /* its quota slot goes with it */
	sbx_quota_on_pod(c, pod, 1);
	sbx_netkeep_pod(c, pod, 1);
	pod_changed(c, pod);
}

/* The webhook configuration changed: remember when what it enforces did. */
static void on_webhooks_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	struct sbx_controller *c = ctx;
	sbx_inforce_observe(c->inforce, old_obj, new_obj, time(NULL));
}

/* A pool looks at all its members each time: its pods' events (several per
 * pod, hundreds a second in a burst) are folded into one reconcile per this. */
#define POOL_COALESCE_MS 100

static void on_claim(void *ctx, const cJSON *obj)
{
	struct sbx_controller *c = ctx;
	const char *ns = meta_str(obj, "namespace"), *name = meta_str(obj, "name");
	const char *state = jstr(jobj(obj, "spec"), "state");
	time_t until;
	if (!ns || !name || !state || (strcmp(state, "Expired") && strcmp(state, "Rejected")) ||
	    ktime_parse_rfc3339(jstr(jobj(obj, "spec"), "keyExpiresAt"), &until) < 0)
		return;
	char key[600];
	snprintf(key, sizeof key, "%s/%s", ns, name);
	double ms = ((double)until + SBX_REC_COLLECT_GRACE_S - (double)time(NULL)) * 1000 + 100;
	workqueue_add_flow_after(c->queue, SBX_WORK_CLAIM, key, jstr(jobj(obj, "spec"), "workspaceOwner"),
				 ms > 7 * 86400 * 1000.0 ? 7 * 86400 * 1000L : (long)ms);
}

static void on_claim_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	on_claim(ctx, new_obj);
}

/* Queues the pool ns/name of owner (NULL: none) now, or after_ms from now:
 * events of its pods within that window fold into one reconcile (the queue
 * keeps a waiting key once), so a pool's cost follows time, not how many of
 * its pods changed. */
static void enqueue_pool_after(struct sbx_controller *c, const char *ns, const char *name, const char *owner,
			       long after_ms)
{
	sbx_controller_enqueue(c, SBX_WORK_POOL, ns, name, owner, after_ms);
}

static void on_pool(void *ctx, const cJSON *obj)
{
	enqueue_pool_after(ctx, meta_str(obj, "namespace"), meta_str(obj, "name"),
			   jstr(jobj(obj, "spec"), "workspaceOwner"), 0);
}

/* The trimmed pool changed in what its reconcile acts on: its spec or its
 * metadata (generation, deletion, the authorization stamps), not the
 * resourceVersion alone or the status (the controller's own writes). A
 * tenant's label or annotation, which the trim does not keep, or our status
 * write, requeues nothing (issue 23: such updates requeued a pool at once). */
static void on_pool_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	if (sbx_changed_beyond_status(old_obj, new_obj))
		on_pool(ctx, new_obj);
}

/* A profile changed, came or went: the policies of the sets that name it
 * are rendered again (reconcile/netkeep.h). */
static void on_profile(void *ctx, const cJSON *obj)
{
	(void)obj;
	sbx_netkeep_profiles_changed(ctx);
}

static void on_profile_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	(void)old_obj;
	on_profile(ctx, new_obj);
}

/* A pool left: its namespace still claims through records for a while
 * (sbx_warm_record_namespace); the garbage collector takes its pods. */
static void on_pool_delete(void *ctx, const cJSON *obj)
{
	struct sbx_controller *c = ctx;
	sbx_pool_gone(c->pool_state, meta_str(obj, "namespace"), time(NULL), c->warm_settle_s);
	sbx_pool_forget(c->pool_state, meta_str(obj, "uid"));
}

/* A warm pod changed: its pool (the owner reference) looks again; one no
 * pool owns is deleted (sbx_pool_collect_orphan). */
static void enqueue_pod_pool(struct sbx_controller *c, const cJSON *pod)
{
	if (sbx_pool_orphaned(pod)) {
		if (c->queue)
			sbx_controller_enqueue(c, SBX_WORK_ORPHAN, meta_str(pod, "namespace"), meta_str(pod, "name"),
					       annotation(pod, SBX_ANN_OWNER), 0);
		return;
	}
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(jobj(pod, "metadata"), "ownerReferences"))
	{
		const char *kind = jstr(ref, "kind"), *api = jstr(ref, "apiVersion");
		if (kind && api && !strcmp(kind, SBX_POOL_KIND) && !strncmp(api, "sandbox.dev/", 12))
			enqueue_pool_after(c, meta_str(pod, "namespace"), jstr(ref, "name"), annotation(pod, SBX_ANN_OWNER),
					   POOL_COALESCE_MS);
	}
}

static void on_pool_pod_add(void *ctx, const cJSON *pod)
{
	struct sbx_controller *c = ctx;
	sbx_netkeep_pod(c, pod, 0);
	sbx_pool_seen(c, jstr(jobj(jobj(pod, "metadata"), "labels"), SBX_LABEL_POOL));
	sbx_quota_on_warm(c, pod, 1);
	sbx_pool_warm_pod(c->pool_state, meta_str(pod, "namespace"), 1);
	enqueue_pod_pool(c, pod);
}

static void on_pool_pod_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	if (!same_but_version(old_obj, new_obj))
		enqueue_pod_pool(ctx, new_obj);
}

static void on_pool_pod_delete(void *ctx, const cJSON *pod)
{
	struct sbx_controller *c = ctx;
	sbx_netkeep_pod(c, pod, 1);
	sbx_quota_on_warm(c, pod, -1);
	sbx_pool_warm_pod(c->pool_state, meta_str(pod, "namespace"), -1);
	enqueue_pod_pool(c, pod);
}

/* A workspace preparation pod changed: who waits for it looks again. */
static void on_prep_pod_add(void *ctx, const cJSON *pod)
{
	sbx_netkeep_pod(ctx, pod, 0);
	sbx_ws_on_prep_pod(ctx, pod, 0);
}

static void on_prep_pod_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	sbx_ws_on_prep_pod(ctx, new_obj, 0);
}

static void on_prep_pod_delete(void *ctx, const cJSON *pod)
{
	sbx_netkeep_pod(ctx, pod, 1);
	sbx_ws_on_prep_pod(ctx, pod, 1);
}

/* Quotas: a changed quota writes its status and wakes its waiters; a quota
 * slot taken or freed moves its owner's count (and a freed one wakes the
 * first waiters); a warm slot freed sends its owner's pools to look again. */
static void on_quota(void *ctx, const cJSON *obj)
{
	sbx_quota_on_quota(ctx, obj);
}

static void on_quota_update(void *ctx, const cJSON *old_obj, const cJSON *new_obj)
{
	const cJSON *os = jobj(old_obj, "spec"), *ns = jobj(new_obj, "spec");
	if (!cJSON_Compare(os, ns, 1) || !!meta_str(old_obj, "deletionTimestamp") != !!meta_str(new_obj, "deletionTimestamp"))
		sbx_quota_on_quota(ctx, new_obj);
}

static void on_slot_add(void *ctx, const cJSON *obj)
{
	if (sbx_warm_slot_is(obj)) {
		sbx_warm_slot_event(ctx, obj, 1);
		return;
	}
	sbx_quota_on_slot(ctx, obj, 1);
}

static void on_slot_delete(void *ctx, const cJSON *obj)
{
	if (sbx_warm_slot_is(obj)) {
		sbx_warm_slot_event(ctx, obj, -1);
		return;
	}
	sbx_quota_on_slot(ctx, obj, -1);
}

/* One queued item: a Sandbox's reconcile, a claim record's collection or a
 * pool's reconcile, its key "<ns>/<name>". */
static int work(struct sbx_controller *c, int kind, const char *key, struct sbx_reconcile_result *res)
{
	*res = (struct sbx_reconcile_result){ 0 };
	if (kind == SBX_WORK_SANDBOX)
		return sbx_reconcile_ex(c, key, res);
	const char *slash = strchr(key, '/');
	if (!slash)
		return 0;
	char *ns = xstrndup(key, (size_t)(slash - key));
	res->timer = kind == SBX_WORK_CLAIM; /* collections wait for a key's expiry: never before other work */
	int r = kind == SBX_WORK_CLAIM	      ? sbx_rec_collect(c, ns, slash + 1)
		: kind == SBX_WORK_QUOTA      ? sbx_quota_reconcile(c, ns, slash + 1)
		: kind == SBX_WORK_SLOT	      ? sbx_quota_collect_slot(c, ns, slash + 1)
		: kind == SBX_WORK_ORPHAN     ? sbx_pool_collect_orphan(c, ns, slash + 1)
		: kind == SBX_WORK_POD_ORPHAN ? sbx_lc_collect_orphan(c, ns, slash + 1)
					      : sbx_pool_reconcile(c, ns, slash + 1);
	free(ns);
	return r;
}

static void *worker_main(void *arg)
{
	struct sbx_controller *c = arg;
	char *key;
	int kind;
	while ((key = workqueue_get(c->queue, &kind))) {
		struct sbx_reconcile_result res;
		kube_retry_after_take_ms(); /* start clean: only this reconcile's answers count */
		int r = work(c, kind, key, &res);
		long retry_after_ms = res.retry_after_ms;
		if (r == 0) {
			workqueue_forget(c->queue, kind, key);
		} else if (r > 0) {
			workqueue_forget(c->queue, kind, key);
			/* A shutdownTime falls due in the low lane: many at once never
			 * delay other Sandboxes' binds, and go at the lane's pace. */
			(res.timer ? workqueue_add_after_low : workqueue_add_after)(c->queue, kind, key, r);
		} else {
			/* Per-Sandbox exponential backoff, never sooner than the API
			 * asked (a 429's Retry-After on any request of the reconcile),
			 * up to the backoff's cap (workqueue.h). */
			long ra = kube_retry_after_take_ms();
			workqueue_add_rate_limited_min(c->queue, kind, key, ra > retry_after_ms ? ra : retry_after_ms);
		}
		workqueue_done(c->queue, kind, key);
		free(key);
	}
	return NULL;
}

void sbx_controller_init(struct sbx_controller *c, struct kube_client *kc, const struct sbx_config *cfg,
			 const struct sbx_seal_keys *seal_keys, int workers)
{
	memset(c, 0, sizeof *c);
	pthread_mutex_init(&c->informers_mu, NULL);
	c->kc = kc;
	c->cfg = cfg;
	c->seal_keys = seal_keys;
	c->workers = workers > 0 ? workers : 4;
	c->cap_ns = c->cap_owner = -1;
	c->shared_ns = c->shared_owner = -1;
	c->warm_settle_s = 90;
	c->warm_refill_qps = 10;
	snprintf(c->webhook_config, sizeof c->webhook_config, "sandbox-controller");
}

void sbx_controller_set_warm(struct sbx_controller *c, long settle_s, double refill_qps)
{
	c->warm_settle_s = settle_s >= 0 ? settle_s : 90;
	c->warm_refill_qps = refill_qps > 0 ? refill_qps : 10;
}

void sbx_controller_set_fifo(struct sbx_controller *c, int fifo)
{
	c->fifo = fifo != 0;
}

void sbx_controller_set_caps(struct sbx_controller *c, int per_namespace, int per_owner)
{
	c->cap_ns = per_namespace;
	c->cap_owner = per_owner;
}

void sbx_controller_set_shared_caps(struct sbx_controller *c, int per_namespace, int per_owner)
{
	c->shared_ns = per_namespace;
	c->shared_owner = per_owner;
}

void sbx_controller_set_shared_rate(struct sbx_controller *c, double per_second)
{
	c->shared_rate = per_second;
}

/* A cap from the flags, or (< 0) workers / div, at least 1. */
static int cap_or_default(int flag, int workers, int div)
{
	if (flag >= 0)
		return flag;
	return workers / div > 1 ? workers / div : 1;
}

void sbx_controller_set_webhook_config(struct sbx_controller *c, const char *name)
{
	snprintf(c->webhook_config, sizeof c->webhook_config, "%s", name ? name : "");
}

int sbx_controller_start_caches(struct sbx_controller *c, long timeout_ms, char *err, size_t errlen)
{
	static const struct informer_handlers sh = { on_sandbox_add, on_sandbox_update, on_sandbox_delete };
	static const struct informer_handlers ph = { on_pod_add, on_pod_update, on_pod_delete };
	static const struct informer_handlers wh = { NULL, on_webhooks_update, NULL };
	static const struct informer_handlers ch = { on_claim, on_claim_update, NULL };
	static const struct informer_handlers plh = { on_pool, on_pool_update, on_pool_delete };
	static const struct informer_handlers pph = { on_pool_pod_add, on_pool_pod_update, on_pool_pod_delete };
	static const struct informer_handlers wph = { on_prep_pod_add, on_prep_pod_update, on_prep_pod_delete };
	static const struct informer_handlers qh = { on_quota, on_quota_update, on_quota };
	static const struct informer_handlers sth = { on_slot_add, NULL, on_slot_delete };
	static const struct informer_handlers nph = { on_profile, on_profile_update, on_profile };
	sbx_ctl_metrics_register();
	c->queue = workqueue_new();
	static const struct workqueue_metrics wm = { NULL, wq_depth, wq_adds, wq_retries, wq_queued,
						     wq_worked, wq_ns_depth, wq_ns_queued, wq_tenants };
	workqueue_set_metrics(c->queue, &wm);
	workqueue_set_fifo(c->queue, c->fifo);
	workqueue_set_caps(c->queue, cap_or_default(c->cap_ns, c->workers, 8),
			   cap_or_default(c->cap_owner, c->workers, 16));
	workqueue_set_shared_caps(c->queue, cap_or_default(c->shared_ns, c->workers, 32),
				  cap_or_default(c->shared_owner, c->workers, 64), SBX_SHARED_LINGER_MS);
	workqueue_set_shared_rate(c->queue, c->shared_rate);
	obs_metric_set(sbx_m.wq_fair, NULL, c->fifo ? 0 : 1);
	workqueue_set_low_limit(c->queue, c->workers / 8 > 1 ? c->workers / 8 : 1);
	c->inflight = sbx_strset_new();
	c->announced = sbx_strset_new();
	c->pods_gone = sbx_strset_new();
	c->pods_made = sbx_strset_new();
	c->released = sbx_strset_new();
	c->written = sbx_written_new();
	c->created_pods = sbx_written_new();
	c->prepared = sbx_strset_new();
	c->prep_looked = sbx_strset_new();
	c->prep_waiters = sbx_ws_waiters_new();
	c->resume_starts = strmap_new(sizeof(double)); /* the times resumes were seen (lifecycle.c) */
	c->pool_state = sbx_pool_state_new(c->warm_refill_qps);
	c->quota_state = sbx_quota_state_new();
	c->reauthz = sbx_reauthz_new();
	struct informer *sandboxes =
	    informer_new(c->kc, "/apis/" SBX_API "/sandboxes", NULL, sbx_trim_sandbox, SBX_LABEL_DIGEST, &sh, c);
	/* The selector only narrows the watch; every pod is re-verified before use.
	 * It is the digest label, reserved to the controller by admission, not
	 * managed-by, which anyone may put on any pod (and fill the cache). */
	struct informer *pods = informer_new(c->kc, "/api/v1/pods", SBX_LABEL_DIGEST, sbx_trim_pod, SBX_LABEL_DIGEST, &ph, c);
	informer_set_dictionary(sandboxes, sbx_sandbox_dictionary); /* not started: cannot fail */
	informer_set_dictionary(pods, sbx_pod_dictionary);
	struct informer *webhooks = NULL;
	if (c->cfg->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW) {
		/* One object by name: RBAC grants it by resourceNames. */
		char sel[300];
		snprintf(sel, sizeof sel, "metadata.name=%s", c->webhook_config[0] ? c->webhook_config : "-");
		c->inforce = sbx_inforce_new();
		webhooks = informer_new(c->kc, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
					NULL, sbx_inforce_trim, NULL, &wh, c);
		informer_set_field_selector(webhooks, sel);
	}
	struct informer *claims = informer_new(c->kc, "/apis/" SBX_API "/" SBX_CLAIM_PLURAL, NULL, sbx_claimrec_trim,
					       SBX_LABEL_DIGEST, &ch, c);
	struct informer *pools = informer_new(c->kc, "/apis/" SBX_API "/" SBX_POOL_PLURAL, NULL, sbx_pool_trim,
					      SBX_POOL_NS_INDEX, &plh, c);
	/* Warm pods by their pool label, reserved to the controller like the
	 * digest; every one is re-verified (sealed) before it is used. */
	struct informer *pool_pods =
	    informer_new(c->kc, "/api/v1/pods", SBX_LABEL_POOL, sbx_trim_pod, SBX_LABEL_POOL, &pph, c);
	informer_set_dictionary(pool_pods, sbx_pod_dictionary);
	/* The owners' folder preparations (sandbox/wsprep.h), by their label,
	 * reserved to the controller like the others. */
	struct informer *prep_pods =
	    informer_new(c->kc, "/api/v1/pods", SBX_LABEL_WS_INIT, sbx_wsprep_trim, NULL, &wph, c);
	/* The operator's allow profiles (sandbox/netprofile.h): cluster-scoped,
	 * few, each kept only when it passes the controller's own check. */
	struct informer *profiles = informer_new(c->kc, "/apis/" SBX_API "/" SBX_PROFILE_PLURAL, NULL,
						 sbx_netprofile_trim, NULL, &nph, c);
	pthread_mutex_lock(&c->informers_mu);
	c->profiles = profiles;
	pthread_mutex_unlock(&c->informers_mu);
	if (sbx_netkeep_start(c) < 0) {
		snprintf(err, errlen, "cannot start the network floor's keeper");
		return -1;
	}
	struct informer *quotas = informer_new(c->kc, "/apis/" SBX_API "/" SBX_QUOTA_PLURAL, NULL, sbx_quota_trim,
					       SBX_QUOTA_NS_INDEX, &qh, c);
	/* The quota slots: SandboxClaims labelled with an owner key, by it. */
	struct informer *slots = informer_new(c->kc, "/apis/" SBX_API "/" SBX_CLAIM_PLURAL, SBX_LABEL_QUOTA_OWNER,
					      sbx_claimrec_trim, SBX_LABEL_QUOTA_OWNER, &sth, c);
	pthread_mutex_lock(&c->informers_mu); /* sbx_controller_synced may be reading them */
	c->sandboxes = sandboxes;
	c->pods = pods;
	c->webhooks = webhooks;
	c->claims = claims;
	c->pools = pools;
	c->pool_pods = pool_pods;
	c->prep_pods = prep_pods;
	c->quotas = quotas;
	c->slots = slots;
	pthread_mutex_unlock(&c->informers_mu);
	if (informer_start(c->pods) < 0 || informer_start(c->claims) < 0 || informer_start(c->pool_pods) < 0 ||
	    informer_start(c->prep_pods) < 0 || informer_start(c->pools) < 0 || informer_start(c->quotas) < 0 ||
	    informer_start(c->slots) < 0 || informer_start(c->sandboxes) < 0 || informer_start(c->profiles) < 0 ||
	    (c->webhooks && informer_start(c->webhooks) < 0)) {
		snprintf(err, errlen, "cannot start the informers");
		return -1;
	}
	if (timeout_ms == 0)
		return 0;
	if (!informer_wait_synced(c->pods, timeout_ms) || !informer_wait_synced(c->sandboxes, timeout_ms) ||
	    !informer_wait_synced(c->claims, timeout_ms) || !informer_wait_synced(c->pools, timeout_ms) ||
	    !informer_wait_synced(c->pool_pods, timeout_ms) || !informer_wait_synced(c->prep_pods, timeout_ms) ||
	    !informer_wait_synced(c->quotas, timeout_ms) || !informer_wait_synced(c->slots, timeout_ms) ||
	    !informer_wait_synced(c->profiles, timeout_ms) || !sbx_netkeep_synced(c, timeout_ms) ||
	    (c->webhooks && !informer_wait_synced(c->webhooks, timeout_ms))) {
		snprintf(err, errlen,
			 "caches did not sync within %ld ms (are the Sandbox, SandboxClaim, SandboxWarmPool, "
			 "SandboxQuota and SandboxNetworkProfile CRDs installed?)",
			 timeout_ms);
		return -1;
	}
	return 0;
}

int sbx_controller_start_workers(struct sbx_controller *c, char *err, size_t errlen)
{
	if (!c->queue || c->threads) {
		snprintf(err, errlen, "workers need started caches and start once");
		return -1;
	}
	c->events = event_recorder_new(c->kc, "sandbox-controller");
	sbx_netkeep_activate(c);
	if (sbx_netverify_start(c, sbx_controller_prep_image(c)) < 0) {
		snprintf(err, errlen, "cannot start the NetworkPolicy probe");
		return -1;
	}
	c->threads = xcalloc((size_t)c->workers, sizeof *c->threads);
	for (int i = 0; i < c->workers; i++) {
		if (pthread_create(&c->threads[i], NULL, worker_main, c) != 0) {
			snprintf(err, errlen, "cannot start worker threads");
			c->workers = i;
			return -1;
		}
	}
	return 0;
}

int sbx_controller_start(struct sbx_controller *c, long timeout_ms, char *err, size_t errlen)
{
	if (sbx_controller_start_caches(c, timeout_ms, err, errlen) < 0)
		return -1;
	return sbx_controller_start_workers(c, err, errlen);
}

int sbx_controller_synced(struct sbx_controller *c)
{
	pthread_mutex_lock(&c->informers_mu);
	int synced = c->sandboxes && c->pods && informer_wait_synced(c->sandboxes, 0) &&
		     informer_wait_synced(c->pods, 0) && c->claims && informer_wait_synced(c->claims, 0) && c->pools &&
		     informer_wait_synced(c->pools, 0) && c->pool_pods && informer_wait_synced(c->pool_pods, 0) &&
		     c->prep_pods && informer_wait_synced(c->prep_pods, 0) && c->quotas &&
		     informer_wait_synced(c->quotas, 0) && c->slots && informer_wait_synced(c->slots, 0) && c->profiles &&
		     informer_wait_synced(c->profiles, 0) &&
		     sbx_netkeep_synced(c, 0) &&
		     (!c->webhooks || informer_wait_synced(c->webhooks, 0));
	pthread_mutex_unlock(&c->informers_mu);
	return synced;
}

void sbx_controller_release(struct sbx_controller *c)
{
	/* Every watch asked to stop first (the network keeper's too), then each
	 * joined: an idle watch notices within about a second, so the joins wait
	 * that second once (one after another, eleven informers took 4 to 6 s). */
	struct informer *all[] = { c->sandboxes, c->pods, c->webhooks, c->claims, c->pools,
				   c->pool_pods, c->prep_pods, c->quotas, c->slots, c->profiles };
	size_t n_all = sizeof all / sizeof all[0];
	for (size_t i = 0; i < n_all; i++)
		if (all[i])
			informer_request_stop(all[i]);
	sbx_netkeep_request_stop(c);
	for (size_t i = 0; i < n_all; i++)
		if (all[i])
			informer_stop(all[i]);
	if (c->queue)
		workqueue_shutdown(c->queue);
	for (int i = 0; c->threads && i < c->workers; i++)
		pthread_join(c->threads[i], NULL);
	free(c->threads);
	c->threads = NULL;
	/* Only now: a worker reads both (a status write, a network floor). */
	sbx_netverify_stop(c);
	sbx_netkeep_stop(c);
	if (c->events)
		event_recorder_free(c->events);
	pthread_mutex_lock(&c->informers_mu);
	struct informer *sandboxes = c->sandboxes, *pods = c->pods, *webhooks = c->webhooks, *claims = c->claims;
	struct informer *pools = c->pools, *pool_pods = c->pool_pods, *prep_pods = c->prep_pods;
	struct informer *quotas = c->quotas, *slots = c->slots, *profiles = c->profiles;
	c->sandboxes = c->pods = c->webhooks = c->claims = c->pools = c->pool_pods = c->prep_pods = NULL;
	c->quotas = c->slots = c->profiles = NULL;
	pthread_mutex_unlock(&c->informers_mu);
	if (profiles)
		informer_free(profiles);
	if (prep_pods)
		informer_free(prep_pods);
	if (quotas)
		informer_free(quotas);
	if (slots)
		informer_free(slots);
	sbx_quota_state_free(c->quota_state);
	c->quota_state = NULL;
	if (pools)
		informer_free(pools);
	if (pool_pods)
		informer_free(pool_pods);
	sbx_pool_state_free(c->pool_state);
	c->pool_state = NULL;
	sbx_reauthz_free(c->reauthz);
	c->reauthz = NULL;
	if (sandboxes)
		informer_free(sandboxes);
	if (pods)
		informer_free(pods);
	if (webhooks)
		informer_free(webhooks);
	if (claims)
		informer_free(claims);
	sbx_inforce_free(c->inforce);
	c->inforce = NULL;
	if (c->queue)
		workqueue_free(c->queue);
	sbx_strset_free(c->inflight);
	sbx_strset_free(c->announced);
	c->announced = NULL;
	sbx_strset_free(c->pods_gone);
	c->pods_gone = NULL;
	sbx_strset_free(c->pods_made);
	c->pods_made = NULL;
	sbx_strset_free(c->released);
	c->released = NULL;
	sbx_written_free(c->written);
	c->written = NULL;
	sbx_written_free(c->created_pods);
	c->created_pods = NULL;
	sbx_strset_free(c->prepared);
	sbx_strset_free(c->prep_looked);
	c->prepared = c->prep_looked = NULL;
	sbx_ws_waiters_free(c->prep_waiters);
	c->prep_waiters = NULL;
	strmap_free(c->resume_starts);
	c->resume_starts = NULL;
	c->events = NULL;
	c->queue = NULL;
	c->inflight = NULL;
}
