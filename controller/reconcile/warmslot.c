/* Warm slots (warmslot.h; docs/api.md "Quota slots"). */
#include "reconcile/warmslot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/ktime.h"
#include "base/xmalloc.h"
#include "kube/informer.h"
#include "obs/log.h"
#include "reconcile/records.h"
#include "reconcile/state.h"
#include "reconcile/writes.h"
#include "sandbox/claimrec.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/podstate.h"
#include "sandbox/quota.h"

/* A slot younger than this may be a create in flight: its pod is not in
 * the cache yet, nor perhaps in the API server (the create's in-flight
 * window, pool.c). */
#define WARM_SLOT_GRACE_S 30
/* Names found taken (AlreadyExists) in one take before it gives up for now:
 * the cache was behind; the pool looks again. */
#define TAKE_TRIES 8

/* ---- what the cache shows ---- */

/* A verified warm slot of the cache. */
struct wslot {
	const cJSON *obj;
	long n;
	struct sbx_claimrec rec;
};

/* The verified warm slots of key in ns from all (the cache's objects of
 * key): a new array (caller frees) of *count; used (max bytes, NULL ok)
 * marks the numbers taken below max, unverified names included (their
 * names are taken all the same). */
static struct wslot *warm_slots(struct sbx_controller *c, const cJSON *all, const char *ns, const char *key,
				size_t *count, unsigned char *used, long max)
{
	struct wslot *out = xcalloc((size_t)cJSON_GetArraySize(all) + 1, sizeof *out);
	size_t k = 0;
	const cJSON *o;
	cJSON_ArrayForEach(o, all)
	{
		const char *ons = meta_str(o, "namespace");
		long n = sbx_quota_warm_slot_index(meta_str(o, "name"), key);
		if (!ons || strcmp(ons, ns) || n < 0 || meta_str(o, "deletionTimestamp"))
			continue;
		if (used && n < max)
			used[n] = 1;
		char why[128];
		struct wslot *w = &out[k];
		if (sbx_claimrec_parse(o, ns, c->seal_keys, &w->rec, why, sizeof why) == 0 &&
		    w->rec.state == SBX_CLAIM_WARM_SLOT) {
			w->obj = o;
			w->n = n;
			k++;
		}
	}
	*count = k;
	return out;
}

/* The uid of the pool that owns the cached slot, or NULL. */
static const char *pool_ref_uid(const cJSON *slot)
{
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(jobj(slot, "metadata"), "ownerReferences"))
	{
		const char *k = jstr(ref, "kind");
		if (k && !strcmp(k, SBX_POOL_KIND))
			return jstr(ref, "uid");
	}
	return NULL;
}

/* 1 when pod (a cached or live object) is a warm member of the pool uid:
 * labelled with it, not going, not finished. */
static int warm_in(const cJSON *pod, const char *pool_uid)
{
	const char *l = label(pod, SBX_LABEL_POOL);
	return l && !strcmp(l, pool_uid) && !meta_str(pod, "deletionTimestamp") && !sbx_pod_finished(pod);
}

/* 1 when pod (a cached or live object) is a sandbox pod now, not going
 * nor finished: a Sandbox took it, and its warm slot may be taken over
 * for another warm pod (sbx_warm_slot_take). */
static int taken_live(const cJSON *pod)
{
	return label(pod, SBX_LABEL_DIGEST) && !label(pod, SBX_LABEL_POOL) && !meta_str(pod, "deletionTimestamp") &&
	       !sbx_pod_finished(pod);
}

/* The warm member of members named name, or NULL. */
static const cJSON *member_named(const cJSON *members, const char *name)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, members)
	{
		const char *n = meta_str(m, "name");
		if (n && !strcmp(n, name))
			return m;
	}
	return NULL;
}

/* ---- taking one ---- */

/* Writes warm slot name for pod of p: creates it (rv NULL), or takes over
 * the one of resourceVersion rv (a guarded update); the API's answer, with
 * the object's uid into uid. */
static enum kube_err write_slot(struct sbx_controller *c, const struct sbx_warm_for *p, const char *key,
				const char *name, const char *pod, const char *rv, char uid[64], struct kube_error *err)
{
	struct sbx_claimrec r = { .state = SBX_CLAIM_WARM_SLOT, .has_owner = p->owner != NULL };
	char now[32];
	ktime_format_rfc3339(time(NULL), now);
	snprintf(r.name, sizeof r.name, "%s", name);
	snprintf(r.digest, sizeof r.digest, "%s", key);
	snprintf(r.pod_name, sizeof r.pod_name, "%s", pod);
	snprintf(r.claimed_at, sizeof r.claimed_at, "%s", now);
	snprintf(r.key_expires_at, sizeof r.key_expires_at, "%s", now);
	snprintf(r.since, sizeof r.since, "%s", now);
	snprintf(r.fingerprint, sizeof r.fingerprint, "%s", p->fp);
	snprintf(r.owner, sizeof r.owner, "%s", p->owner ? p->owner : "");
	/* The pool's: it goes with the pool. */
	cJSON *refs = cJSON_CreateArray(), *ref = cJSON_CreateObject();
	cJSON_AddStringToObject(ref, "apiVersion", SBX_API);
	cJSON_AddStringToObject(ref, "kind", SBX_POOL_KIND);
	cJSON_AddStringToObject(ref, "name", p->pool);
	cJSON_AddStringToObject(ref, "uid", p->pool_uid);
	cJSON_AddItemToArray(refs, ref);
	cJSON *obj = sbx_claimrec_build(&r, p->ns, c->seal_keys, refs);
	cJSON_Delete(refs);
	uid[0] = '\0';
	if (!obj) {
		kube_error_set(err, KUBE_ERR_OTHER, "%s", "cannot build the warm slot");
		return KUBE_ERR_OTHER;
	}
	if (rv)
		cJSON_AddStringToObject(cJSON_GetObjectItem(obj, "metadata"), "resourceVersion", rv);
	char path[600], *body = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	sbx_rec_path(path, sizeof path, p->ns, rv ? name : NULL);
	cJSON *resp = NULL;
	enum kube_err e = kube_request(c->kc, rv ? "PUT" : "POST", path, NULL, body, NULL, &resp, err);
	free(body);
	snprintf(uid, 64, "%s", meta_str(resp, "uid") ? meta_str(resp, "uid") : "");
	cJSON_Delete(resp);
	return e;
}

/* Warm slot name, read live: WARM_MINE when it names pod of pool p (an
 * earlier send of ours made it, its answer lost; its uid into uid),
 * WARM_OTHERS when it names another, WARM_ABSENT, or WARM_UNREAD. */
enum live { WARM_MINE,
	    WARM_OTHERS,
	    WARM_ABSENT,
	    WARM_UNREAD };

static enum live live_slot(struct sbx_controller *c, const struct sbx_warm_for *p, const char *name, const char *pod,
			   char uid[64])
{
	char path[600], why[128];
	cJSON *o = NULL;
	struct kube_error err;
	struct sbx_claimrec rec;
	sbx_rec_path(path, sizeof path, p->ns, name);
	enum kube_err e = kube_request(c->kc, "GET", path, NULL, NULL, NULL, &o, &err);
	int mine = e == KUBE_OK && sbx_claimrec_parse(o, p->ns, c->seal_keys, &rec, why, sizeof why) == 0 &&
		   rec.state == SBX_CLAIM_WARM_SLOT && !strcmp(rec.pod_name, pod) && pool_ref_uid(o) &&
		   !strcmp(pool_ref_uid(o), p->pool_uid);
	snprintf(uid, 64, "%s", mine && meta_str(o, "uid") ? meta_str(o, "uid") : "");
	cJSON_Delete(o);
	return mine ? WARM_MINE : e == KUBE_OK		? WARM_OTHERS
			      : e == KUBE_ERR_NOT_FOUND ? WARM_ABSENT
							: WARM_UNREAD;
}

int sbx_warm_slot_take(struct sbx_controller *c, const struct sbx_warm_for *p, const char *pod, char *slot,
		       size_t slotlen, char uid[64], char *why, size_t whylen)
{
	slot[0] = uid[0] = '\0';
	if (!c->quotas || !c->slots)
		return 1;
	cJSON *qs = informer_list_by_index(c->quotas, p->ns);
	struct sbx_quota_limits q;
	int applies = sbx_quota_resolve(qs, p->ns, p->owner, c->cfg, &q);
	cJSON_Delete(qs);
	char key[33];
	if (!applies || !q.has_warm)
		return 1;
	if (sbx_quota_owner_key(p->ns, p->owner, key) < 0)
		return -1;
	long max = q.max_warm > 0 ? q.max_warm : 0;
	unsigned char *used = xcalloc((size_t)max + 1, 1);
	cJSON *all = informer_list_by_index(c->slots, key);
	size_t n = 0;
	struct wslot *ws = warm_slots(c, all, p->ns, key, &n, used, max);
	int r = 0;
	for (size_t i = 0; i < n && !r; i++) {
		if (!strcmp(ws[i].rec.pod_name, pod)) { /* a create sent again */
			snprintf(slot, slotlen, "%s", meta_str(ws[i].obj, "name"));
			snprintf(uid, 64, "%s", meta_str(ws[i].obj, "uid") ? meta_str(ws[i].obj, "uid") : "");
			r = 1;
		}
	}
	/* A slot whose pod a Sandbox took is taken over (one write, guarded by
	 * its resourceVersion: one replica wins it), before a new name. */
	long tries = 0;
	for (size_t i = 0; i < n && !r && tries < TAKE_TRIES; i++) {
		cJSON *was = ws[i].n < max && c->pods ? informer_get(c->pods, p->ns, ws[i].rec.pod_name) : NULL;
		const char *rv = meta_str(ws[i].obj, "resourceVersion"), *name = meta_str(ws[i].obj, "name");
		if (was && taken_live(was) && rv && name) {
			struct kube_error err;
			tries++;
			enum kube_err e = write_slot(c, p, key, name, pod, rv, uid, &err);
			if (e == KUBE_OK) {
				snprintf(slot, slotlen, "%s", name);
				r = 1;
			} else if (kube_err_retriable(e) && live_slot(c, p, name, pod, uid) == WARM_MINE) {
				snprintf(slot, slotlen, "%s", name); /* ours, its answer lost */
				r = 1;
			}
		}
		cJSON_Delete(was);
	}
	free(ws);
	cJSON_Delete(all);
	long held = 0;
	for (long i = 0; i < max; i++)
		held += used[i];
	for (long i = 0; !r && i < max && tries < TAKE_TRIES; i++) {
		if (used[i])
			continue;
		tries++;
		char name[80];
		struct kube_error err;
		sbx_quota_warm_slot_name(key, i, name, sizeof name);
		enum kube_err e = write_slot(c, p, key, name, pod, NULL, uid, &err);
		if (e == KUBE_ERR_ALREADY_EXISTS || kube_err_retriable(e)) {
			/* Another replica's (the cache is behind), or ours whose
			 * answer was lost: read it. */
			enum live l = live_slot(c, p, name, pod, uid);
			if (l == WARM_OTHERS || (l == WARM_ABSENT && e == KUBE_ERR_ALREADY_EXISTS)) {
				held += l == WARM_OTHERS;
				continue; /* taken, or freed meanwhile: the next number */
			}
			if (l != WARM_MINE) {
				r = -1; /* no answer, and none read: looked at again */
				break;
			}
		} else if (e != KUBE_OK) {
			log_kv(LOG_WARN, "taking a warm slot failed", "pool", p->pool, "namespace", p->ns, "slot", name,
			       "error", err.message);
			r = -1;
			break;
		}
		fault_point("after-warm-slot");
		snprintf(slot, slotlen, "%s", name);
		r = 1;
	}
	free(used);
	if (!r)
		snprintf(why, whylen, "%s%s holds %ld of %ld warm slots (%s)", p->owner ? "workspace owner " : "ownerless pools",
			 p->owner ? p->owner : "", held < max ? max : held, q.max_warm, q.source);
	return r;
}

/* ---- giving them back ---- */

void sbx_warm_slot_drop(struct sbx_controller *c, const char *ns, const char *name, const char *uid)
{
	char path[600];
	sbx_rec_path(path, sizeof path, ns, name);
	if (sbx_rc_delete(c, path, uid && uid[0] ? uid : NULL, NULL) < 0)
		log_kv(LOG_WARN, "deleting a warm slot failed", "namespace", ns, "slot", name);
}

void sbx_warm_slot_free(struct sbx_controller *c, const char *ns, const char *owner, const char *pod)
{
	char key[33];
	if (!c->slots || !pod || sbx_quota_owner_key(ns, owner, key) < 0)
		return;
	cJSON *all = informer_list_by_index(c->slots, key);
	size_t n = 0;
	struct wslot *ws = warm_slots(c, all, ns, key, &n, NULL, 0);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(ws[i].rec.pod_name, pod))
			sbx_warm_slot_drop(c, ns, meta_str(ws[i].obj, "name"), meta_str(ws[i].obj, "uid"));
	free(ws);
	cJSON_Delete(all);
}

/* Deletes w (of pool_uid in ns) when its pod is neither a warm member of
 * the pool (members: the cache's pods of the pool) nor a live sandbox pod (a
 * Sandbox took it: its slot waits to be taken over), once w is older than a
 * create in flight, its pod read live. Returns 0, -1, or the milliseconds
 * until w may go. */
static int settle_slot(struct sbx_controller *c, const char *ns, const struct wslot *w, const char *pool_uid,
		       const cJSON *members, time_t now)
{
	const char *pod_name = w->rec.pod_name;
	const cJSON *m = member_named(members, pod_name);
	if (m && warm_in(m, pool_uid))
		return 0;
	cJSON *pod = c->pods ? informer_get(c->pods, ns, pod_name) : NULL;
	int taken = pod && taken_live(pod);
	cJSON_Delete(pod);
	if (taken)
		return 0; /* its slot waits to be taken over */
	time_t at = 0;
	if (ktime_parse_rfc3339(w->rec.claimed_at, &at) < 0)
		at = 0;
	if (now - at < WARM_SLOT_GRACE_S) /* perhaps a create in flight */
		return (int)(WARM_SLOT_GRACE_S - (now - at)) * 1000 + 100;
	pod = NULL;
	if (sbx_rc_get_pod(c, ns, pod_name, &pod) < 0)
		return -1;
	int keep = pod && (warm_in(pod, pool_uid) || taken_live(pod));
	cJSON_Delete(pod);
	if (keep)
		return 0;
	const char *name = meta_str(w->obj, "name");
	log_kv(LOG_INFO, "warm slot freed", "namespace", ns, "slot", name, "pod", pod_name);
	char path[600];
	sbx_rec_path(path, sizeof path, ns, name);
	return sbx_rc_delete(c, path, meta_str(w->obj, "uid"), meta_str(w->obj, "resourceVersion")) < 0 ? -1 : 0;
}

/* The result of two steps: an error wins, then the sooner look again. */
static int sooner(int a, int b)
{
	return a < 0 || b < 0 ? -1 : !a	 ? b
				 : !b	 ? a
				 : a < b ? a
					 : b;
}

int sbx_warm_slot_collect(struct sbx_controller *c, const struct sbx_warm_for *p, const cJSON *members)
{
	char key[33];
	if (!c->slots || sbx_quota_owner_key(p->ns, p->owner, key) < 0)
		return 0;
	cJSON *all = informer_list_by_index(c->slots, key);
	size_t n = 0;
	struct wslot *ws = warm_slots(c, all, p->ns, key, &n, NULL, 0);
	time_t now = time(NULL);
	int r = 0;
	/* Every pool of the owner collects the owner's slots, its own and the
	 * others': a pool that needs a name does not wait for a full, idle
	 * pool to look again. */
	for (size_t i = 0; i < n; i++) {
		const char *pool_uid = pool_ref_uid(ws[i].obj);
		if (!pool_uid)
			continue;
		int second = 0;
		for (size_t j = 0; j < n && !second; j++)
			second = j != i && ws[j].n < ws[i].n && !strcmp(ws[j].rec.pod_name, ws[i].rec.pod_name);
		if (second) { /* the pod keeps its lower one */
			sbx_warm_slot_drop(c, p->ns, meta_str(ws[i].obj, "name"), meta_str(ws[i].obj, "uid"));
			continue;
		}
		int own = !strcmp(pool_uid, p->pool_uid);
		cJSON *theirs = own || !c->pool_pods ? NULL : informer_list_by_index(c->pool_pods, pool_uid);
		r = sooner(r, settle_slot(c, p->ns, &ws[i], pool_uid, own ? members : theirs, now));
		cJSON_Delete(theirs);
	}
	free(ws);
	cJSON_Delete(all);
	return r;
}

/* ---- events ---- */

int sbx_warm_slot_is(const cJSON *obj)
{
	const char *key = label(obj, SBX_LABEL_QUOTA_OWNER);
	return key && sbx_quota_warm_slot_index(meta_str(obj, "name"), key) >= 0;
}

void sbx_warm_slot_event(struct sbx_controller *c, const cJSON *obj, int d)
{
	const char *ns = meta_str(obj, "namespace"), *owner = jstr(jobj(obj, "spec"), "workspaceOwner");
	if (d > 0 || !ns || !c->pools)
		return;
	cJSON *pools = informer_list_by_index(c->pools, ns);
	const cJSON *p;
	cJSON_ArrayForEach(p, pools)
	{
		const char *o = jstr(jobj(p, "spec"), "workspaceOwner");
		if (!o == !owner && (!o || !strcmp(o, owner)))
			sbx_controller_enqueue(c, SBX_WORK_POOL, ns, meta_str(p, "name"), o, 0);
	}
	cJSON_Delete(pools);
}
