#include "reconcile/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/ktime.h"
#include "base/strmap.h"
#include "base/xmalloc.h"
#include "kube/informer.h"
#include "kube/ratelimit.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "reconcile/ctlmetrics.h"
#include "reconcile/inforce.h"
#include "reconcile/netkeep.h"
#include "reconcile/netverify.h"
#include "reconcile/state.h"
#include "reconcile/writes.h"
#include "reconcile/wsgate.h"
#include "sandbox/authz.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"
#include "sandbox/status.h"
#include "sandbox/wsprep.h"

/* How long a create we sent counts as in flight without the cache showing
 * its pod (a lost response, a pod refused after all). */
#define EXPECT_TTL_MS 30000
#define POOL_RECHECK_MS 1000

/* ---- bookkeeping ---- */

/* A pool's creates in flight (by pool uid). */
struct expect {
	int pending;
	int64_t until_ms; /* pending counts until then */
};

struct sbx_pool_state {
	struct strmap *expect; /* struct expect by pool uid */
	struct strmap *gone;   /* time_t by namespace: when its last pool left the cache */
	struct token_bucket refill;
};

struct sbx_pool_state *sbx_pool_state_new(double refill_qps)
{
	struct sbx_pool_state *s = xcalloc(1, sizeof *s);
	s->expect = strmap_new(sizeof(struct expect));
	s->gone = strmap_new(sizeof(time_t));
	token_bucket_init(&s->refill, refill_qps, refill_qps >= 1 ? (int)refill_qps : 1);
	return s;
}

void sbx_pool_state_free(struct sbx_pool_state *s)
{
	if (!s)
		return;
	strmap_free(s->expect);
	strmap_free(s->gone);
	token_bucket_release(&s->refill);
	free(s);
}

/* The creates of pool uid still in flight. */
static int pending(struct sbx_pool_state *s, const char *uid)
{
	strmap_lock(s->expect);
	struct expect *e = strmap_get(s->expect, uid);
	int n = e && e->until_ms > ktime_mono_ms() ? e->pending : 0;
	strmap_unlock(s->expect);
	return n;
}

static void expect_add(struct sbx_pool_state *s, const char *uid, int d)
{
	strmap_lock(s->expect);
	struct expect *e = strmap_put(s->expect, uid, NULL);
	if (e) {
		if (e->until_ms <= ktime_mono_ms())
			e->pending = 0;
		e->pending += d;
		if (e->pending < 0)
			e->pending = 0;
		if (d > 0)
			e->until_ms = ktime_mono_ms() + EXPECT_TTL_MS;
	}
	strmap_unlock(s->expect);
}

void sbx_pool_gone(struct sbx_pool_state *s, const char *ns, time_t now)
{
	if (!s || !ns)
		return;
	strmap_lock(s->gone);
	time_t *at = strmap_put(s->gone, ns, NULL);
	if (at)
		*at = now;
	strmap_unlock(s->gone);
}

int sbx_pool_gone_within(struct sbx_pool_state *s, const char *ns, time_t now, long within_s)
{
	if (!s || !ns)
		return 0;
	strmap_lock(s->gone);
	time_t *at = strmap_get(s->gone, ns);
	int r = at && now - *at < within_s;
	strmap_unlock(s->gone);
	return r;
}

void sbx_pool_seen(struct sbx_controller *c, const char *pool_uid)
{
	if (c->pool_state && pool_uid)
		expect_add(c->pool_state, pool_uid, -1);
}

/* ---- the pool's reconcile ---- */

struct pool_view {
	const cJSON *obj;
	const char *ns, *name, *uid, *owner;
	long long generation;
	long replicas;
	cJSON *spec; /* sbx_pool_spec (owned) */
	char fp[65];
};

/* Writes the pool's status when it changed. */
static int write_pool_status(struct sbx_controller *c, const struct pool_view *p, long replicas, long ready,
			     const char *since, int ok, const char *reason, const char *msg)
{
	const cJSON *old = jobj(p->obj, "status");
	char now[32], sel[128];
	ktime_format_rfc3339(time(NULL), now);
	snprintf(sel, sizeof sel, SBX_LABEL_POOL "=%s", p->uid);
	cJSON *st = cJSON_CreateObject();
	cJSON_AddNumberToObject(st, "replicas", (double)replicas);
	cJSON_AddNumberToObject(st, "readyReplicas", (double)ready);
	cJSON_AddStringToObject(st, "selector", sel);
	cJSON_AddStringToObject(st, "templateFingerprint", p->fp);
	cJSON_AddStringToObject(st, "templateSince", since);
	cJSON_AddNumberToObject(st, "observedGeneration", (double)p->generation);
	const cJSON *oc = sbx_status_condition(old, "Ready");
	const char *ost = jstr(oc, "status"), *oltt = jstr(oc, "lastTransitionTime");
	cJSON *cond = cJSON_CreateObject();
	cJSON_AddStringToObject(cond, "type", "Ready");
	cJSON_AddStringToObject(cond, "status", ok ? "True" : "False");
	cJSON_AddStringToObject(cond, "reason", reason);
	cJSON_AddStringToObject(cond, "message", msg);
	cJSON_AddStringToObject(cond, "lastTransitionTime",
				ost && oltt && !strcmp(ost, ok ? "True" : "False") ? oltt : now);
	cJSON_AddNumberToObject(cond, "observedGeneration", (double)p->generation);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(st, "conditions"), cond);
	if (old && sbx_status_same(st, old)) {
		cJSON_Delete(st);
		return 0;
	}
	cJSON *patch = cJSON_CreateObject();
	cJSON_AddItemToObject(patch, "status", st);
	char *body = cJSON_PrintUnformatted(patch), path[600];
	cJSON_Delete(patch);
	snprintf(path, sizeof path, "/apis/" SBX_API "/namespaces/%s/" SBX_POOL_PLURAL "/%s/status", p->ns, p->name);
	struct kube_error err;
	enum kube_err e = kube_request(c->kc, "PATCH", path, NULL, body, "application/merge-patch+json", NULL, &err);
	free(body);
	if (e != KUBE_OK && e != KUBE_ERR_NOT_FOUND) {
		log_kv(LOG_WARN, "pool status write failed", "pool", p->name, "namespace", p->ns, "error", err.message);
		return -1;
	}
	return 0;
}

/* Whether the pool's owner may be mounted: its record verifies (a record of
 * the template and owner as they are now, by the identity that set them)
 * and the webhook was in force for it. 1, or 0 with why. */
static int pool_authorized(struct sbx_controller *c, const struct pool_view *p, char *why, size_t whylen)
{
	if (!p->owner || c->cfg->owner_authz != SBX_OWNER_AUTHZ_ACCESS_REVIEW)
		return 1;
	char subject[300];
	snprintf(subject, sizeof subject, SBX_POOL_AUTHZ_PREFIX "%s", p->name);
	time_t created = 0;
	ktime_parse_rfc3339(meta_str(p->obj, "creationTimestamp"), &created);
	struct sbx_authz_subject s = { .ns = p->ns, .name = subject, .owner = p->owner, .fingerprint = p->fp, .username = annotation(p->obj, SBX_ANN_REQUESTED_BY) };
	struct sbx_authz_info info = { 0 };
	enum sbx_authz_check ac = sbx_authz_verify((const unsigned char *const *)c->seal_keys->key, c->seal_keys->len,
						   c->seal_keys->n, &s, created, annotation(p->obj, SBX_ANN_OWNER_AUTHZ),
						   &info);
	if (ac != SBX_AUTHZ_OK) {
		snprintf(why, whylen, "workspace owner %s: %s", p->owner, sbx_authz_str(ac));
		return 0;
	}
	char w[384];
	if (!c->webhooks || !informer_wait_synced(c->webhooks, 0)) {
		snprintf(why, whylen, "waiting to read the MutatingWebhookConfiguration %s", c->webhook_config);
		return 0;
	}
	cJSON *mwc = c->webhook_config[0] ? informer_get(c->webhooks, NULL, c->webhook_config) : NULL;
	int ok = sbx_inforce_check(c->inforce, mwc, SBX_MUTATING_WEBHOOK, SBX_POOL_PLURAL,
				   info.run == 1 ? "CREATE" : "UPDATE", p->ns, info.run == 1 ? created : info.issued, w,
				   sizeof w);
	cJSON_Delete(mwc);
	if (!ok)
		snprintf(why, whylen, "workspace owner %s: the admission webhook was not in force for the pool (%s)",
			 p->owner, w);
	return ok;
}

/* Creates one warm pod of p. 0, or -1. */
static int create_member(struct sbx_controller *c, const struct pool_view *p)
{
	char name[32], now[32], path[512];
	if (sbx_pool_pod_name(name) < 0)
		return -1;
	ktime_format_rfc3339(time(NULL), now);
	struct kube_error err;
	char why[512];
	if (sbx_netverify_gate(c, why, sizeof why) < 0) /* network.requireEnforced */
		return -1;
	if (sbx_netkeep_ensure(c, p->ns, &err) != KUBE_OK) { /* never a pod without its floor */
		log_kv(LOG_WARN, "the network floor cannot be made", "pool", p->name, "namespace", p->ns, "error",
		       err.message);
		return -1;
	}
	cJSON *pod = sbx_pool_pod_build(c->cfg, c->seal_keys, p->ns, p->name, p->uid, name, p->spec, p->fp, now);
	if (!pod)
		return -1;
	char *body = cJSON_PrintUnformatted(pod);
	cJSON_Delete(pod);
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", p->ns);
	/* In flight before it is sent: the pod's watch event (which takes it
	 * back out) may arrive before the response does. */
	expect_add(c->pool_state, p->uid, 1);
	enum kube_err e = kube_request(c->kc, "POST", path, NULL, body, NULL, NULL, &err);
	free(body);
	fault_delay("warm-create-response");	     /* tests: the pod's event comes first */
	if (e == KUBE_OK || kube_err_retriable(e)) { /* a lost response may have made it */
		if (e == KUBE_OK)
			obs_metric_add(sbx_m.warm_pods_created, NULL, 1);
		return e == KUBE_OK ? 0 : -1;
	}
	expect_add(c->pool_state, p->uid, -1); /* refused: no pod of it will come */
	log_kv(LOG_WARN, "creating a warm pod failed", "pool", p->name, "namespace", p->ns, "error", err.message);
	return -1;
}

/* Members not ready go first when there are too many, then the newest. */
static int extra_first(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	int rx = sbx_pool_pod_ready(x), ry = sbx_pool_pod_ready(y);
	if (rx != ry)
		return rx - ry;
	const char *cx = meta_str(x, "creationTimestamp"), *cy = meta_str(y, "creationTimestamp");
	return cx && cy ? strcmp(cy, cx) : 0;
}

int sbx_pool_reconcile(struct sbx_controller *c, const char *ns, const char *name)
{
	cJSON *obj = c->pools ? informer_get(c->pools, ns, name) : NULL;
	if (!obj || meta_str(obj, "deletionTimestamp")) {
		cJSON_Delete(obj);
		return 0; /* gone: the garbage collector takes its pods */
	}
	struct pool_view p = { .obj = obj, .ns = ns, .name = name, .uid = meta_str(obj, "uid") };
	const cJSON *g = jobj(jobj(obj, "metadata"), "generation"), *rep = jobj(jobj(obj, "spec"), "replicas");
	p.generation = cJSON_IsNumber(g) ? (long long)g->valuedouble : 0;
	p.replicas = cJSON_IsNumber(rep) ? (long)rep->valuedouble : 0;
	p.spec = sbx_pool_spec(obj);
	p.owner = p.spec ? sbx_spec_owner(p.spec) : NULL;
	char msg[1024] = "";
	int r = 0;
	struct sbx_ws_wait ws = { .report = 0 };
	const char *since_old = jstr(jobj(obj, "status"), "templateSince"), *fp_old = jstr(jobj(obj, "status"), "templateFingerprint");
	char since[32];
	cJSON *members = NULL;
	if (!p.uid || !p.spec || p.replicas < 0 || p.replicas > 1000 || sbx_spec_validate(p.spec, msg, sizeof msg) < 0 ||
	    sbx_template_fingerprint(p.spec, p.fp) < 0) {
		if (!msg[0])
			snprintf(msg, sizeof msg, "spec.template or spec.replicas is invalid");
		r = write_pool_status(c, &p, 0, 0, since_old ? since_old : "1970-01-01T00:00:00Z", 0, "InvalidSpec", msg);
		goto out;
	}
	/* The present template's time: kept while it holds, now when it changed. */
	if (fp_old && !strcmp(fp_old, p.fp) && since_old)
		snprintf(since, sizeof since, "%s", since_old);
	else
		ktime_format_rfc3339(time(NULL), since);
	members = informer_list_by_index(c->pool_pods, p.uid);
	int authorized = pool_authorized(c, &p, msg, sizeof msg);
	cJSON *current = cJSON_CreateArray();
	const cJSON *m;
	cJSON_ArrayForEach(m, members)
	{
		if (meta_str(m, "deletionTimestamp"))
			continue;
		/* Outdated (another template or owner), not sealed, of a pool
		 * whose owner cannot be verified, or finished (a warm pod that
		 * exited or failed never serves): not a member to keep. */
		const char *phase = jstr(jobj(m, "status"), "phase");
		if (!authorized || !sbx_pool_member(m, c->seal_keys, p.uid, p.fp, p.owner) ||
		    (phase && (!strcmp(phase, "Failed") || !strcmp(phase, "Succeeded"))))
			r |= sbx_rc_delete_pod(c, ns, m);
		else
			cJSON_AddItemToArray(current, cJSON_Duplicate(m, 1));
	}
	long have = cJSON_GetArraySize(current), ready = 0;
	cJSON_ArrayForEach(m, current) ready += sbx_pool_pod_ready(m);
	if (!authorized) {
		r = write_pool_status(c, &p, 0, 0, since, 0, "OwnerNotAuthorized", msg) < 0 ? -1 : r;
		cJSON_Delete(current);
		goto out;
	}
	long inflight = pending(c->pool_state, p.uid);
	if (have > p.replicas) {
		/* Too many: the extras go, not-ready and newest first. */
		size_t n = (size_t)have;
		const cJSON **v = xcalloc(n, sizeof *v);
		size_t i = 0;
		cJSON_ArrayForEach(m, current) v[i++] = m;
		qsort(v, n, sizeof *v, extra_first);
		for (i = 0; i < (size_t)(have - p.replicas); i++)
			r |= sbx_rc_delete_pod(c, ns, v[i]);
		free(v);
	} else {
		/* Never more than replicas, creates in flight included; none
		 * before the owner's folders are prepared (sandbox/wsprep.h). */
		long want = p.replicas - have - inflight;
		const struct sbx_wsprep_for me = { SBX_API, SBX_POOL_KIND, p.name, p.uid };
		char qkey[600];
		snprintf(qkey, sizeof qkey, "%s/%s", ns, name); /* its work queue key (controller.c) */
		int prep = want > 0 ? sbx_ws_prepared(c, ns, p.owner, &me, SBX_WORK_POOL, qkey, &ws) : 1;
		if (prep != 1) {
			want = 0;
			r = prep < 0 ? -1 : (int)ws.delay_ms;
		}
		for (long i = 0; i < want; i++) {
			if (!token_bucket_try(&c->pool_state->refill)) {
				r = r < 0 ? r : 200; /* the refill rate: look again shortly */
				break;
			}
			if (create_member(c, &p) < 0)
				r = -1;
		}
	}
	snprintf(msg, sizeof msg, "%ld of %ld warm pods ready%s%s", ready, p.replicas, ws.report ? "; " : "",
		 ws.report ? ws.why : "");
	int full = ready >= p.replicas && have <= p.replicas;
	int w = write_pool_status(c, &p, have < p.replicas ? have : p.replicas, ready, since, full,
				  full ? "Full" : "Filling", msg);
	if (w < 0)
		r = -1;
	else if (r == 0 && (!full || inflight))
		r = POOL_RECHECK_MS; /* pod events bring it back sooner */
	cJSON_Delete(current);
out:
	cJSON_Delete(members);
	cJSON_Delete(p.spec);
	cJSON_Delete(obj);
	return r;
}
