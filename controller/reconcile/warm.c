/* The warm bind (warm.h; docs/api.md "The atomic warm claim"). */
#define _GNU_SOURCE
#include "reconcile/warm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/ktime.h"
#include "kube/informer.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "reconcile/ctlmetrics.h"
#include "reconcile/examine.h"
#include "reconcile/pool.h"
#include "reconcile/quota.h"
#include "reconcile/records.h"
#include "reconcile/state.h"
#include "reconcile/strset.h"
#include "reconcile/writes.h"
#include "sandbox/claimrec.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/seal.h"
#include "sandbox/verify.h"

/* Warm pods one bind tries before it goes cold (each lost to another take). */
#define WARM_TRIES 3
/* A bind picks among at most this many Ready warm pods of the namespace's
 * pools, copied from the cache from a random member on (a pool of hundreds
 * is not copied whole for each bind). */
#define WARM_CANDIDATES_MAX 16

static const char *const hit[] = { "hit" }, *const miss[] = { "miss" };

int sbx_warm_record_namespace(struct sbx_controller *c, const char *ns)
{
	if (!c->pools)
		return 0; /* no pools in this process (tests that drive the reconcile alone) */
	if (!informer_wait_synced(c->pools, 0))
		return 1; /* it cannot say: claim through the record */
	cJSON *pools = informer_list_by_index(c->pools, ns);
	int any = cJSON_GetArraySize(pools) > 0;
	cJSON_Delete(pools);
	/* A replica that has not seen the pool's deletion yet may still bind
	 * its pods: records for a settle time after it left this cache too. */
	return any || sbx_pool_gone_within(c->pool_state, ns, time(NULL), c->warm_settle_s);
}

static void pod_path(char *out, size_t n, const char *ns, const char *name)
{
	snprintf(out, n, "/api/v1/namespaces/%s/pods/%s", ns, name);
}

/* ---- the take ---- */

enum take { TAKEN,
	    LOST,
	    TAKE_ERROR };

/* A merge patch turning pod (a pool member) into want's metadata: want's
 * labels and annotations, the member's own removed, want's owners. */
static cJSON *take_patch(const cJSON *pod, const cJSON *want)
{
	const cJSON *wm = jobj(want, "metadata"), *e;
	cJSON *patch = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(patch, "metadata");
	cJSON_AddStringToObject(m, "uid", meta_str(pod, "uid") ? meta_str(pod, "uid") : "");
	cJSON_AddStringToObject(m, "resourceVersion", meta_str(pod, "resourceVersion") ? meta_str(pod, "resourceVersion") : "");
	cJSON *l = cJSON_AddObjectToObject(m, "labels"), *a = cJSON_AddObjectToObject(m, "annotations");
	cJSON_AddNullToObject(l, SBX_LABEL_POOL);
	cJSON_AddNullToObject(a, SBX_ANN_TEMPLATE_FP);
	cJSON_ArrayForEach(e, jobj(wm, "labels")) cJSON_AddItemToObject(l, e->string, cJSON_Duplicate(e, 1));
	cJSON_ArrayForEach(e, jobj(wm, "annotations")) cJSON_AddItemToObject(a, e->string, cJSON_Duplicate(e, 1));
	cJSON_AddItemToObject(m, "ownerReferences", cJSON_Duplicate(jobj(wm, "ownerReferences"), 1));
	return patch;
}

/* 1 when pod is already v's generation claim (a take of ours or of another
 * Sandbox of the scope went through): the scope's digest and this claim. */
static int taken_for(const struct sbx_view *v, const cJSON *pod, const char *claim)
{
	const char *d = label(pod, SBX_LABEL_DIGEST), *cl = annotation(pod, SBX_ANN_CLAIM);
	return d && !strcmp(d, v->scope.digest) && cl && !strcmp(cl, claim);
}

/* Reports v bound to pod, a scope pod read live: examined as any (verified,
 * certified, adopted when another Sandbox of the scope took it). */
static enum take bind_taken(struct sbx_controller *c, struct sbx_view *v, const cJSON *pod, int *r)
{
	int delay = 0;
	enum sbx_examine x = sbx_rc_examine(c, v, pod, &delay);
	*r = x == EX_DONE ? delay : x == EX_RETRY_SOON ? REQUEUE_BUSY_MS
						       : -1;
	return x == EX_DONE || x == EX_RETRY_SOON ? TAKEN : TAKE_ERROR;
}

/* Takes the warm pod (its cached or live object) for v's generation claim:
 * patches it, guarded by its resourceVersion, from pool member to the scope's
 * pod, certifies what the API returned, and reports. TAKEN (*r the result),
 * LOST (another take won, the pool deleted it, or it cannot serve v: the pod
 * is no more a candidate), or TAKE_ERROR (*r -1: look again later). */
static enum take take(struct sbx_controller *c, struct sbx_view *v, const cJSON *warm, const char *claim, int *r)
{
	const char *name = meta_str(warm, "name");
	char claimed[32], seal[65], sealed[600], path[600], why[256] = "";
	ktime_format_rfc3339(time(NULL), claimed);
	sbx_seal_pod_name(name, claim, sealed, sizeof sealed);
	*r = -1;
	if (sbx_seal_sign(c->seal_keys, v->ns, sealed, v->scope.digest, v->owner, v->scope.fingerprint, claimed,
			  seal) < 0)
		return TAKE_ERROR;
	cJSON *want = sbx_rc_build_pod(c, v, name, claim, claimed, seal);
	if (!want)
		return TAKE_ERROR;
	pod_path(path, sizeof path, v->ns, name);
	cJSON *cur = cJSON_Duplicate(warm, 1);
	enum take t = TAKE_ERROR;
	for (int attempt = 0; attempt < 2; attempt++) {
		cJSON *patch = take_patch(cur, want);
		char *body = cJSON_PrintUnformatted(patch);
		cJSON_Delete(patch);
		cJSON *resp = NULL;
		struct kube_error err;
		enum kube_err e =
		    kube_request(c->kc, "PATCH", path, NULL, body, "application/merge-patch+json", &resp, &err);
		free(body);
		if (e == KUBE_OK) {
			fault_point("after-warm-patch");
			struct sbx_verify_expect ex = { .ns = v->ns, .owner = v->owner, .scope = &v->scope, .keys = c->seal_keys, .check_fingerprint = 1 };
			if (sbx_pod_verify(resp, &ex) == SBX_VERIFY_OK && sbx_rc_payload_matches(c, v, resp, why, sizeof why)) {
				t = sbx_rc_report_bound(c, v, resp, SBX_BIND_WARM) < 0 ? TAKE_ERROR : TAKEN;
				*r = t == TAKEN ? 0 : -1;
			} else {
				/* Not the pod v would get (the controller's config changed
				 * since the pool built it): it serves no one. */
				log_kv(LOG_WARN, "warm pod does not certify; deleted", "sandbox", v->name, "namespace",
				       v->ns, "pod", name, "reason", why);
				char del[256];
				snprintf(del, sizeof del,
					 "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"preconditions\":{\"uid\":\"%s\"}}",
					 meta_str(resp, "uid") ? meta_str(resp, "uid") : "");
				enum kube_err de = kube_request(c->kc, "DELETE", path, NULL, del, NULL, NULL, &err);
				t = de == KUBE_OK || de == KUBE_ERR_NOT_FOUND ? LOST : TAKE_ERROR;
			}
			cJSON_Delete(resp);
			break;
		}
		cJSON_Delete(resp);
		if (e == KUBE_ERR_NOT_FOUND) {
			t = LOST;
			break;
		}
		if (e != KUBE_ERR_CONFLICT && !kube_err_retriable(e)) {
			log_kv(LOG_WARN, "warm pod take failed", "sandbox", v->name, "namespace", v->ns, "pod", name,
			       "error", err.message);
			break;
		}
		/* Changed meanwhile, or the outcome is unknown: read it live. */
		cJSON *live = NULL;
		if (sbx_rc_get_pod(c, v->ns, name, &live) < 0)
			break;
		if (!live) {
			t = LOST;
			break;
		}
		if (taken_for(v, live, claim)) {
			t = bind_taken(c, v, live, r);
			cJSON_Delete(live);
			break;
		}
		const char *pool = label(live, SBX_LABEL_POOL), *wpool = label(cur, SBX_LABEL_POOL);
		if (!pool || !wpool || strcmp(pool, wpool) || meta_str(live, "deletionTimestamp") ||
		    !sbx_pool_pod_ready(live)) {
			cJSON_Delete(live);
			t = LOST; /* taken by another scope, going, or no more Ready (its container ended) */
			break;
		}
		cJSON_Delete(cur); /* still a Ready member (its status changed): once more */
		cur = live;
		t = LOST;
	}
	cJSON_Delete(cur);
	cJSON_Delete(want);
	return t;
}

/* ---- choosing warm pods ---- */

struct usable {
	const struct sbx_seal_keys *keys;
	const char *pool_uid, *fp, *owner;
};

/* A Ready sealed member of the pool, template and owner of ctx. */
static int usable_member(const cJSON *pod, void *ctx)
{
	const struct usable *u = ctx;
	return sbx_pool_pod_ready(pod) && sbx_pool_member(pod, u->keys, u->pool_uid, u->fp, u->owner);
}

/* The Ready sealed members of v's template (fp) in settled pools of v's
 * namespace, in a random order; *pools_matched the number of pools of that
 * template (0: v is not a pool's Sandbox at all). */
static cJSON *candidates(struct sbx_controller *c, const struct sbx_view *v, const char *fp, int *pools_matched)
{
	cJSON *out = cJSON_CreateArray();
	*pools_matched = 0;
	if (!c->pools || !c->pool_pods || !informer_wait_synced(c->pools, 0) || !informer_wait_synced(c->pool_pods, 0))
		return out;
	cJSON *pools = informer_list_by_index(c->pools, v->ns);
	const cJSON *p;
	cJSON_ArrayForEach(p, pools)
	{
		const char *uid = meta_str(p, "uid"), *sfp = jstr(jobj(p, "status"), "templateFingerprint");
		cJSON *spec = sbx_pool_spec(p);
		char pfp[65] = "";
		int same = spec && sbx_template_fingerprint(spec, pfp) == 0 && !strcmp(pfp, fp);
		cJSON_Delete(spec);
		if (!uid || !same || meta_str(p, "deletionTimestamp"))
			continue;
		(*pools_matched)++;
		/* A warm pod is bound only while its pool's author may still use
		 * the owner (a pool it may not keeps no pods: the pool deletes
		 * them; its bind would hand over one in between). */
		char why[512];
		if (sbx_pool_authorized(c, p, fp, v->owner, 0, why, sizeof why, NULL, NULL) != 1)
			continue;
		/* Handed out only once every replica's cache has surely seen the
		 * pool with this template (docs/api.md): this process has seen it
		 * for the settle time, on its own clock (the status's templateSince
		 * was written by another replica's). */
		if (!sfp || strcmp(sfp, fp) || !sbx_pool_settled(c->pool_state, uid, fp, c->warm_settle_s * 1000))
			continue;
		int room = WARM_CANDIDATES_MAX - cJSON_GetArraySize(out);
		unsigned int start = 0;
		if (room <= 0 || RAND_bytes((unsigned char *)&start, sizeof start) != 1)
			continue;
		struct usable u = { c->seal_keys, uid, fp, v->owner };
		cJSON *pods = informer_list_by_index_from(c->pool_pods, uid, start, (size_t)room, usable_member, &u);
		cJSON *m;
		while ((m = cJSON_DetachItemFromArray(pods, 0)))
			cJSON_AddItemToArray(out, m);
		cJSON_Delete(pods);
	}
	cJSON_Delete(pools);
	/* Fisher-Yates: replicas and workers binding at once start apart. */
	int n = cJSON_GetArraySize(out);
	if (n < 2)
		return out;
	cJSON *items[WARM_CANDIDATES_MAX];
	for (int i = 0; i < n; i++)
		items[i] = cJSON_DetachItemFromArray(out, 0);
	for (int i = n - 1; i > 0; i--) {
		unsigned int rnd = 0;
		if (RAND_bytes((unsigned char *)&rnd, sizeof rnd) != 1)
			break;
		int j = (int)(rnd % (unsigned)(i + 1));
		cJSON *t = items[i];
		items[i] = items[j];
		items[j] = t;
	}
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(out, items[i]);
	return out;
}

/* Reserves warm pod uid in this process (another worker binding at the same
 * moment takes another): 1 when it was free. */
static int reserve(struct sbx_controller *c, const cJSON *pod)
{
	char key[80];
	snprintf(key, sizeof key, "warm/%s", meta_str(pod, "uid") ? meta_str(pod, "uid") : "");
	return sbx_strset_add(c->inflight, key);
}

static void unreserve(struct sbx_controller *c, const cJSON *pod)
{
	char key[80];
	snprintf(key, sizeof key, "warm/%s", meta_str(pod, "uid") ? meta_str(pod, "uid") : "");
	sbx_strset_del(c->inflight, key);
}

/* The first candidate from w on that this process does not bind already
 * (reserved for the caller), or NULL. */
static cJSON *next_free(struct sbx_controller *c, cJSON *w)
{
	for (; w; w = w->next)
		if (reserve(c, w))
			return w;
	return NULL;
}

enum sbx_warm sbx_warm_claim(struct sbx_controller *c, struct sbx_view *v, const char *claim, int *r)
{
	char fp[65], rv[32] = "", claimed[32];
	int pools = 0;
	*r = -1;
	if (sbx_template_fingerprint(v->spec, fp) < 0)
		return SBX_WARM_DONE;
	ktime_format_rfc3339(v->now, claimed);
	cJSON *cands = candidates(c, v, fp, &pools);
	cJSON *w = next_free(c, cands->child);
	/* 1: the claim. The record names the warm pod chosen, or the cold pod. */
	enum kube_err e = sbx_rec_create_bound(c, v, claim, w ? meta_str(w, "name") : claim, claimed, rv);
	if (e != KUBE_OK) {
		if (w)
			unreserve(c, w);
		cJSON_Delete(cands);
		return e == KUBE_ERR_ALREADY_EXISTS ? SBX_WARM_RECORD : SBX_WARM_DONE;
	}
	if (!w) {
		if (pools)
			obs_metric_add(sbx_m.warm_binds, miss, 1);
		cJSON_Delete(cands);
		return SBX_WARM_COLD; /* a miss: the cold pod, under the record */
	}
	fault_point("after-warm-claim");
	/* 2: the take; a lost one points the record at the next warm pod, or
	 * after WARM_TRIES at the cold name. */
	enum sbx_warm res = SBX_WARM_DONE;
	for (int tries = 1;; tries++) {
		enum take t = take(c, v, w, claim, r);
		unreserve(c, w);
		if (t == TAKEN) {
			obs_metric_add(sbx_m.warm_binds, hit, 1);
			break;
		}
		if (t == TAKE_ERROR) {
			*r = -1; /* the record names it: the next reconcile completes or repoints */
			break;
		}
		cJSON *next = tries < WARM_TRIES ? next_free(c, w->next) : NULL;
		e = sbx_rec_repoint(c, v, claim, next ? meta_str(next, "name") : claim, claimed, NULL, rv);
		if (e != KUBE_OK) {
			if (next)
				unreserve(c, next);
			*r = -1;
			res = e == KUBE_ERR_CONFLICT || e == KUBE_ERR_NOT_FOUND ? SBX_WARM_RECORD : SBX_WARM_DONE;
			break;
		}
		if (!next) {
			obs_metric_add(sbx_m.warm_binds, miss, 1);
			res = SBX_WARM_COLD; /* every warm pod tried went to others: cold */
			break;
		}
		w = next;
	}
	cJSON_Delete(cands);
	return res;
}

/* Whether the pool that made warm pod `pod` (its pool label pool_uid) may
 * still hand it to v's owner, asked as a bind's candidates are
 * (sbx_pool_authorized) of the pool read live: 1 yes; 0 no (its author may
 * no longer use the owner, or the pool is gone, going, or another); -1 when
 * it cannot be told now. */
static int pool_still_hands_out(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod,
				const char *pool_uid, const char *fp)
{
	const char *name = NULL;
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(jobj(pod, "metadata"), "ownerReferences"))
	{
		const char *kind = jstr(ref, "kind"), *uid = jstr(ref, "uid");
		if (kind && uid && !strcmp(kind, SBX_POOL_KIND) && !strcmp(uid, pool_uid))
			name = jstr(ref, "name");
	}
	if (!name)
		return 0;
	char path[600], why[512];
	snprintf(path, sizeof path, "/apis/" SBX_API "/namespaces/%s/" SBX_POOL_PLURAL "/%s", v->ns, name);
	cJSON *pool = NULL;
	struct kube_error err;
	enum kube_err e = kube_request(c->kc, "GET", path, NULL, NULL, NULL, &pool, &err);
	int may = e == KUBE_ERR_NOT_FOUND ? 0 : -1;
	if (e == KUBE_OK) {
		const char *uid = meta_str(pool, "uid");
		may = !uid || strcmp(uid, pool_uid) || meta_str(pool, "deletionTimestamp")
			  ? 0
			  : sbx_pool_authorized(c, pool, fp, v->owner, 0, why, sizeof why, NULL, NULL);
	}
	cJSON_Delete(pool);
	return may;
}

int sbx_warm_resume_claim(struct sbx_controller *c, struct sbx_view *v, const cJSON *rec_obj, const char *claim,
			  sbx_warm_allowed_fn allowed, int *r)
{
	struct sbx_claimrec rec;
	char why[128], fp[65], rv[32];
	*r = -1;
	if (sbx_claimrec_parse(rec_obj, v->ns, c->seal_keys, &rec, why, sizeof why) < 0 ||
	    sbx_template_fingerprint(v->spec, fp) < 0)
		return 1;
	cJSON *pod = NULL;
	if (sbx_rc_get_pod(c, v->ns, rec.pod_name, &pod) < 0)
		return 1;
	if (pod && taken_for(v, pod, claim)) {
		bind_taken(c, v, pod, r); /* the take went through (a crash after it) */
		cJSON_Delete(pod);
		return 1;
	}
	/* The take did not happen: the pod would be v's now, so v's requester
	 * is asked again as for a cold create (docs/api.md, "When the right to
	 * an owner is revoked": a warm pod taken late). */
	if (!allowed(c, v, r)) {
		cJSON_Delete(pod);
		return 1;
	}
	const char *pool = pod ? label(pod, SBX_LABEL_POOL) : NULL;
	int hands_out = 0;
	if (pod && pool && sbx_pool_member(pod, c->seal_keys, pool, fp, v->owner) && sbx_pool_pod_ready(pod) &&
	    reserve(c, pod)) {
		/* The claim stands, the take did not happen (a crash between
		 * them), and the pod is still a Ready member (one that ended
		 * meanwhile serves no one: v goes cold): complete it, whoever of
		 * the scope we are, while the
		 * pool's author may still use the owner (the pool deletes the
		 * pod otherwise: v goes cold) and once the owner's quota holds
		 * a slot for it (the one taken before the claim, or a new one:
		 * a suspend gave that back). */
		hands_out = pool_still_hands_out(c, v, pod, pool, fp);
		if (hands_out <= 0)
			unreserve(c, pod);
	}
	if (hands_out < 0) {
		cJSON_Delete(pod);
		return 1; /* *r -1: asked again with the error backoff */
	}
	if (hands_out) {
		if (!sbx_quota_wait_for_slot(c, v, claim, r)) {
			unreserve(c, pod);
			cJSON_Delete(pod);
			return 1;
		}
		enum take t = take(c, v, pod, claim, r);
		unreserve(c, pod);
		cJSON_Delete(pod);
		if (t == TAKEN)
			obs_metric_add(sbx_m.warm_binds, hit, 1);
		if (t != LOST)
			return 1;
	} else {
		cJSON_Delete(pod);
	}
	/* Gone, or taken by another scope: the generation goes cold, under the
	 * record as it is stored now (a PUT guarded by the version read). */
	cJSON *stored = NULL;
	char path[600];
	struct kube_error err;
	sbx_rec_path(path, sizeof path, v->ns, claim);
	if (kube_request(c->kc, "GET", path, NULL, NULL, NULL, &stored, &err) != KUBE_OK) {
		cJSON_Delete(stored);
		return 1;
	}
	struct sbx_claimrec now_rec;
	if (sbx_claimrec_parse(stored, v->ns, c->seal_keys, &now_rec, why, sizeof why) < 0 ||
	    now_rec.state != SBX_CLAIM_BOUND || strcmp(now_rec.pod_name, rec.pod_name)) {
		cJSON_Delete(stored);
		*r = REQUEUE_BUSY_MS; /* it changed meanwhile: look again */
		return 1;
	}
	snprintf(rv, sizeof rv, "%s", now_rec.resource_version);
	cJSON *refs = sbx_rec_refs(stored);
	enum kube_err e = sbx_rec_repoint(c, v, claim, claim, now_rec.claimed_at, refs, rv);
	cJSON_Delete(refs);
	cJSON_Delete(stored);
	if (e == KUBE_OK)
		return 0;
	*r = e == KUBE_ERR_CONFLICT || e == KUBE_ERR_NOT_FOUND ? REQUEUE_BUSY_MS : -1;
	return 1;
}
