/* Per-owner quotas in the controller (quota.h; docs/api.md "Quota slots"). */
#define _GNU_SOURCE
#include "reconcile/quota.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

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
#include "sandbox/podstate.h"
#include "sandbox/quota.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"
#include "sandbox/status.h"
#include "sandbox/verify.h"

/* Waiters woken when a slot frees or the order moves. */
#define WAKE_FIRST 8
/* A quota's status is written at most about this often. */
#define STATUS_COALESCE_MS 1000
/* The most owners a namespace-wide quota's status lists. */
#define STATUS_OWNERS_MAX 100

/* ---- bookkeeping: what the caches show per owner key ---- */

struct waiter {
	time_t created;
	char name[254];
	char uid[64];
	char digest[33];
};

/* An active sandbox pod of the owner (its intent's digest): counted even
 * when no slot holds it (made before the quota applied, or by a controller
 * without quotas). */
struct pod_ref {
	char uid[64];
	char digest[33];
};

struct owner_stat {
	char key[33];
	char ns[64];
	char owner[64];
	int has_owner;
	long active, warm, suspended;
	struct waiter *w; /* wanting a slot, in arrival order */
	size_t nw, capw;
	struct pod_ref *p; /* active sandbox pods */
	size_t np, capp;
	UT_hash_handle hh;
};

/* A Sandbox counted in an owner_stat (waiting or suspended), by uid. */
struct member {
	char uid[64];
	char key[33];
	int waiting, suspended;
	UT_hash_handle hh;
};

/* A pod counted in an owner_stat's p, by uid. */
struct pod_member {
	char uid[64];
	char key[33];
	UT_hash_handle hh;
};

struct sbx_quota_state {
	pthread_mutex_t mu;
	struct owner_stat *owners; /* by key */
	struct member *members;	   /* by uid */
	struct pod_member *pods;   /* by uid */
};

struct sbx_quota_state *sbx_quota_state_new(void)
{
	struct sbx_quota_state *s = xcalloc(1, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	return s;
}

void sbx_quota_state_free(struct sbx_quota_state *s)
{
	if (!s)
		return;
	struct owner_stat *o, *ot;
	HASH_ITER(hh, s->owners, o, ot)
	{
		HASH_DEL(s->owners, o);
		free(o->w);
		free(o->p);
		free(o);
	}
	struct member *m, *mt;
	HASH_ITER(hh, s->members, m, mt)
	{
		HASH_DEL(s->members, m);
		free(m);
	}
	struct pod_member *pm, *pt;
	HASH_ITER(hh, s->pods, pm, pt)
	{
		HASH_DEL(s->pods, pm);
		free(pm);
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* The stat of key, made when absent (caller holds mu). */
static struct owner_stat *stat_get(struct sbx_quota_state *s, const char *key, const char *ns, const char *owner)
{
	struct owner_stat *o;
	HASH_FIND_STR(s->owners, key, o);
	if (!o) {
		o = xcalloc(1, sizeof *o);
		snprintf(o->key, sizeof o->key, "%s", key);
		snprintf(o->ns, sizeof o->ns, "%s", ns ? ns : "");
		snprintf(o->owner, sizeof o->owner, "%s", owner ? owner : "");
		o->has_owner = owner != NULL;
		HASH_ADD_STR(s->owners, key, o);
	}
	return o;
}

/* Drops the stat when it counts nothing (caller holds mu). */
static void stat_trim(struct sbx_quota_state *s, struct owner_stat *o)
{
	if (o && !o->active && !o->warm && !o->suspended && !o->nw && !o->np) {
		HASH_DEL(s->owners, o);
		free(o->w);
		free(o->p);
		free(o);
	}
}

static int waiter_before(const struct waiter *a, time_t created, const char *name)
{
	return a->created < created || (a->created == created && strcmp(a->name, name) < 0);
}

static void waiter_insert(struct owner_stat *o, const struct waiter *w)
{
	if (o->nw == o->capw) {
		o->capw = o->capw ? o->capw * 2 : 8;
		o->w = xrealloc(o->w, o->capw * sizeof *o->w);
	}
	size_t i = o->nw;
	while (i > 0 && !waiter_before(&o->w[i - 1], w->created, w->name))
		i--;
	memmove(&o->w[i + 1], &o->w[i], (o->nw - i) * sizeof *o->w);
	o->w[i] = *w;
	o->nw++;
}

/* Removes the waiter uid; 1 when it was the first. */
static int waiter_remove(struct owner_stat *o, const char *uid)
{
	for (size_t i = 0; i < o->nw; i++) {
		if (!strcmp(o->w[i].uid, uid)) {
			memmove(&o->w[i], &o->w[i + 1], (o->nw - i - 1) * sizeof *o->w);
			o->nw--;
			return i == 0;
		}
	}
	return 0;
}

/* Moves the waiter w->uid to its place for w->created, when it arrived at
 * another time; 1 when it moved. */
static int waiter_move(struct owner_stat *o, const struct waiter *w)
{
	for (size_t i = 0; i < o->nw; i++) {
		if (!strcmp(o->w[i].uid, w->uid)) {
			if (o->w[i].created == w->created)
				return 0;
			waiter_remove(o, w->uid);
			waiter_insert(o, w);
			return 1;
		}
	}
	return 0;
}

/* When a resume (a Sandbox of status st, is_resume and wanting a slot)
 * arrived in its owner's line: the time a controller first wrote that it
 * waits, which every replica reads alike and a restart keeps (its Bound
 * condition turned False then, from True: QuotaWaiting, or first another
 * reason that held it up; it keeps that lastTransitionTime while it waits);
 * until one has, now, when this process sees it wanting one. */
static time_t resume_arrival(const cJSON *st, time_t now)
{
	const cJSON *b = sbx_status_condition(st, "Bound");
	const char *cs = jstr(b, "status"), *reason = jstr(b, "reason");
	time_t at;
	if (cs && !strcmp(cs, "False") && reason && !strcmp(reason, "QuotaWaiting") &&
	    ktime_parse_rfc3339(jstr(b, "lastTransitionTime"), &at) == 0)
		return at;
	return now;
}

/* 1 when a Sandbox of status st that wants a slot is a resume: phase
 * Suspended, or suspended in an earlier generation (status.
 * suspendedGeneration) and claimed again since (a resume held up first by
 * something else than the quota, a missing network profile, is unbound and
 * claimed as a new Sandbox is, phase Pending). */
static int is_resume(const cJSON *st)
{
	const char *phase = jstr(st, "phase");
	const cJSON *sg = jobj(st, "suspendedGeneration");
	return (phase && !strcmp(phase, "Suspended")) || (cJSON_IsNumber(sg) && sg->valuedouble > 0);
}

/* The owner key of (ns, owner) into key; 0 or -1. */
static int key_of(const char *ns, const char *owner, char key[33])
{
	return ns ? sbx_quota_owner_key(ns, owner, key) : -1;
}

/* A set of intents' digests. */
struct digest_set {
	char d[33];
	UT_hash_handle hh;
};

/* Adds d; 1 when it was not in the set yet. */
static int digest_add(struct digest_set **set, const char *d)
{
	struct digest_set *e;
	HASH_FIND_STR(*set, d, e);
	if (e)
		return 0;
	e = xcalloc(1, sizeof *e);
	snprintf(e->d, sizeof e->d, "%s", d);
	HASH_ADD_STR(*set, d, e);
	return 1;
}

static void digests_free(struct digest_set **set)
{
	struct digest_set *e, *t;
	HASH_ITER(hh, *set, e, t)
	{
		HASH_DEL(*set, e);
		free(e);
	}
}

/* Queues the first n waiters of key (their reconciles look again). */
static void wake(struct sbx_controller *c, const char *key, size_t n)
{
	if (!c->queue || !c->quota_state)
		return;
	char names[WAKE_FIRST][600];
	char owner[64] = "";
	size_t k = 0;
	struct sbx_quota_state *s = c->quota_state;
	pthread_mutex_lock(&s->mu);
	struct owner_stat *o;
	HASH_FIND_STR(s->owners, key, o);
	for (size_t i = 0; o && i < o->nw && k < n && k < WAKE_FIRST; i++)
		snprintf(names[k++], sizeof names[0], "%s/%s", o->ns, o->w[i].name);
	if (o)
		snprintf(owner, sizeof owner, "%s", o->owner);
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < k; i++)
		workqueue_add_flow(c->queue, SBX_WORK_SANDBOX, names[i], owner);
}

/* Queues the status of every SandboxQuota of ns, soon (coalesced). */
static void touch_quotas(struct sbx_controller *c, const char *ns)
{
	if (!c->quotas || !c->queue || !ns)
		return;
	cJSON *qs = informer_list_by_index(c->quotas, ns);
	const cJSON *q;
	cJSON_ArrayForEach(q, qs)
	{
		char key[600];
		snprintf(key, sizeof key, "%s/%s", ns, meta_str(q, "name") ? meta_str(q, "name") : "");
		workqueue_add_flow_after(c->queue, SBX_WORK_QUOTA, key, "", STATUS_COALESCE_MS);
	}
	cJSON_Delete(qs);
}

/* 1 when the Sandbox obj wants a slot now: not going, not suspended, not
 * expired or refused, and not holding a pod: new, waiting for a slot
 * (QuotaWaiting), or a resume. */
static int wants_slot(const cJSON *obj, const struct sbx_lifecycle *lc, time_t now)
{
	const cJSON *st = jobj(obj, "status");
	const char *phase = jstr(st, "phase");
	if (meta_str(obj, "deletionTimestamp") || lc->suspend || sbx_lifecycle_expired(lc, now))
		return 0;
	if (phase && (!strcmp(phase, "Rejected") || !strcmp(phase, "Expired")))
		return 0;
	int bound = jstr(st, "podName") && jstr(st, "podUID") && jstr(st, "binding");
	const char *reason = jstr(sbx_status_condition(st, "Bound"), "reason");
	/* A resume, unless its resumer may no longer use the owner or a profile. */
	if (phase && !strcmp(phase, "Suspended"))
		return !reason || (strcmp(reason, "OwnerNotAuthorized") && strcmp(reason, "NetworkProfileNotAuthorized"));
	/* Unbound for another reason (its owner not authorized, a foreign pod,
	 * the API refusing its pod while it holds a slot): not in the line, so
	 * it never holds back those behind it. */
	return !bound && (!reason || !strcmp(reason, "QuotaWaiting"));
}

void sbx_quota_on_sandbox(struct sbx_controller *c, const cJSON *obj, int gone)
{
	struct sbx_quota_state *s = c->quota_state;
	const char *uid = meta_str(obj, "uid"), *ns = meta_str(obj, "namespace"), *name = meta_str(obj, "name");
	if (!s || !uid || !ns || !name || strlen(uid) >= 64 || strlen(ns) >= 64)
		return;
	const cJSON *spec = jobj(obj, "spec");
	struct sbx_lifecycle lc;
	char msg[256];
	int waiting = 0, suspended = 0;
	if (!gone && cJSON_IsObject(spec) && sbx_lifecycle_parse(spec, &lc, msg, sizeof msg) == 0) {
		const char *phase = jstr(jobj(obj, "status"), "phase");
		suspended = lc.suspend && phase && !strcmp(phase, "Suspended") && !meta_str(obj, "deletionTimestamp");
		waiting = wants_slot(obj, &lc, time(NULL));
	}
	char key[33] = "";
	const char *owner = jstr(spec, "workspaceOwner");
	struct waiter w = { 0 };
	if (waiting || suspended) {
		if (key_of(ns, owner, key) < 0)
			return;
		if (waiting) {
			/* Its arrival: a new Sandbox's creation; a resume's when it
			 * was resumed (resume_arrival). */
			w.created = 0;
			if (is_resume(jobj(obj, "status")))
				w.created = resume_arrival(jobj(obj, "status"), time(NULL));
			else
				ktime_parse_rfc3339(meta_str(obj, "creationTimestamp"), &w.created);
			snprintf(w.name, sizeof w.name, "%s", name);
			snprintf(w.uid, sizeof w.uid, "%s", uid);
			/* Its intent: Sandboxes of one scope wait as one. */
			const char *d = jstr(jobj(jobj(obj, "metadata"), "labels"), SBX_LABEL_DIGEST);
			struct sbx_scope sc;
			if (!d && sbx_scope_compute(ns, uid, spec, &sc, msg, sizeof msg) == 0)
				d = sc.digest;
			snprintf(w.digest, sizeof w.digest, "%s", d ? d : uid);
		}
	}
	char left[33] = "";
	int changed = 0;
	pthread_mutex_lock(&s->mu);
	struct member *m;
	HASH_FIND_STR(s->members, uid, m);
	if (m && (m->waiting != waiting || m->suspended != suspended || strcmp(m->key, key))) {
		struct owner_stat *o;
		HASH_FIND_STR(s->owners, m->key, o);
		if (o && m->waiting) {
			waiter_remove(o, uid);
			snprintf(left, sizeof left, "%s", m->key);
		}
		if (o && m->suspended)
			o->suspended--;
		stat_trim(s, o);
		HASH_DEL(s->members, m);
		free(m);
		m = NULL;
		changed = 1;
	}
	if (m && waiting) {
		/* An unchanged member keeps its place, unless its arrival is now
		 * told otherwise (a resume's wait written, by this replica or
		 * another, after it saw the resume first). */
		struct owner_stat *o;
		HASH_FIND_STR(s->owners, m->key, o);
		if (o && waiter_move(o, &w))
			snprintf(left, sizeof left, "%s", m->key); /* the first may be another now */
	}
	if (!m && (waiting || suspended)) {
		m = xcalloc(1, sizeof *m);
		snprintf(m->uid, sizeof m->uid, "%s", uid);
		snprintf(m->key, sizeof m->key, "%s", key);
		m->waiting = waiting;
		m->suspended = suspended;
		HASH_ADD_STR(s->members, uid, m);
		struct owner_stat *o = stat_get(s, key, ns, owner);
		if (waiting)
			waiter_insert(o, &w);
		o->suspended += suspended;
		changed = 1;
	}
	pthread_mutex_unlock(&s->mu);
	/* One left the order without (perhaps) taking a slot, or moved in it:
	 * the next may go. */
	if (left[0])
		wake(c, left, 2);
	if (changed)
		touch_quotas(c, ns);
}

/* The owner reference of kind (NULL: a Sandbox, as the cache keeps it) in
 * the cached slot, or NULL; ref_uid: its uid. */
static const cJSON *ref_of(const cJSON *slot, const char *kind)
{
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(jobj(slot, "metadata"), "ownerReferences"))
	{
		const char *k = jstr(ref, "kind");
		if ((!kind && (!k || !strcmp(k, "Sandbox"))) || (kind && k && !strcmp(k, kind)))
			return ref;
	}
	return NULL;
}

static const char *ref_uid(const cJSON *slot, const char *kind)
{
	return jstr(ref_of(slot, kind), "uid");
}

/* The namespace and owner of a slot (its record's fields). */
static void slot_owner(const cJSON *slot, const char **ns, const char **owner)
{
	*ns = meta_str(slot, "namespace");
	*owner = jstr(jobj(slot, "spec"), "workspaceOwner");
}

void sbx_quota_on_slot(struct sbx_controller *c, const cJSON *slot, int d)
{
	struct sbx_quota_state *s = c->quota_state;
	const char *key = jstr(jobj(jobj(slot, "metadata"), "labels"), SBX_LABEL_QUOTA_OWNER), *ns, *owner;
	slot_owner(slot, &ns, &owner);
	if (!s || !key || strlen(key) != 32 || !ns || strlen(ns) >= 64)
		return;
	pthread_mutex_lock(&s->mu);
	struct owner_stat *o = stat_get(s, key, ns, owner);
	o->active += d;
	if (o->active < 0)
		o->active = 0;
	stat_trim(s, o);
	pthread_mutex_unlock(&s->mu);
	if (d < 0)
		wake(c, key, WAKE_FIRST); /* a slot freed: the first waiters try */
	/* A slot no pod owns yet, seen after its pod was made: its Sandbox
	 * hands it to the pod (sbx_quota_bound), which found it missing from
	 * the cache at the bind, and may get no other event to look again. */
	const cJSON *sb = d > 0 && !ref_uid(slot, "Pod") ? ref_of(slot, NULL) : NULL;
	if (sb && jstr(sb, "name"))
		sbx_controller_enqueue(c, SBX_WORK_SANDBOX, ns, jstr(sb, "name"), owner, 0);
	touch_quotas(c, ns);
}

void sbx_quota_on_warm(struct sbx_controller *c, const cJSON *pod, int d)
{
	struct sbx_quota_state *s = c->quota_state;
	const char *ns = meta_str(pod, "namespace"), *owner = annotation(pod, SBX_ANN_OWNER);
	char key[33];
	if (!s || !ns || strlen(ns) >= 64 || key_of(ns, owner, key) < 0)
		return;
	pthread_mutex_lock(&s->mu);
	struct owner_stat *o = stat_get(s, key, ns, owner);
	o->warm += d;
	if (o->warm < 0)
		o->warm = 0;
	stat_trim(s, o);
	pthread_mutex_unlock(&s->mu);
	touch_quotas(c, ns);
}

/* 1 when pod is an active sandbox pod this controller made: its seal
 * verifies for its own digest and owner, it is not going nor finished. */
static int active_sandbox_pod(const struct sbx_controller *c, const cJSON *pod)
{
	const char *d = jstr(jobj(jobj(pod, "metadata"), "labels"), SBX_LABEL_DIGEST);
	struct sbx_scope sc = { 0 };
	if (!c->seal_keys || !d || strlen(d) >= sizeof sc.digest || sbx_pod_finished(pod))
		return 0;
	snprintf(sc.digest, sizeof sc.digest, "%s", d);
	struct sbx_verify_expect ex = {
		.ns = meta_str(pod, "namespace"), .owner = annotation(pod, SBX_ANN_OWNER), .scope = &sc, .keys = c->seal_keys
	};
	return sbx_pod_verify(pod, &ex) == SBX_VERIFY_OK;
}

/* Removes the pod uid from o's pods (caller holds mu). */
static void pod_ref_remove(struct owner_stat *o, const char *uid)
{
	for (size_t i = 0; i < o->np; i++) {
		if (!strcmp(o->p[i].uid, uid)) {
			o->p[i] = o->p[--o->np];
			return;
		}
	}
}

void sbx_quota_on_pod(struct sbx_controller *c, const cJSON *pod, int gone)
{
	struct sbx_quota_state *s = c->quota_state;
	/* Finished (restartPolicy Never: it never runs again), a pod counts no
	 * more: its slot goes as a deleted pod's does. */
	if (!gone && sbx_pod_finished(pod))
		sbx_quota_on_pod_gone(c, pod);
	const char *uid = meta_str(pod, "uid"), *ns = meta_str(pod, "namespace"), *owner = annotation(pod, SBX_ANN_OWNER);
	char key[33] = "", left[33] = "";
	if (!s || !uid || strlen(uid) >= 64 || !ns || strlen(ns) >= 64)
		return;
	int active = !gone && key_of(ns, owner, key) == 0 && active_sandbox_pod(c, pod), changed = 0;
	pthread_mutex_lock(&s->mu);
	struct pod_member *pm;
	HASH_FIND_STR(s->pods, uid, pm);
	if (pm && (!active || strcmp(pm->key, key))) {
		struct owner_stat *o;
		HASH_FIND_STR(s->owners, pm->key, o);
		if (o) {
			pod_ref_remove(o, uid);
			stat_trim(s, o);
		}
		snprintf(left, sizeof left, "%s", pm->key);
		HASH_DEL(s->pods, pm);
		free(pm);
		pm = NULL;
		changed = 1;
	}
	if (active && !pm) {
		struct owner_stat *o = stat_get(s, key, ns, owner);
		if (o->np == o->capp) {
			o->capp = o->capp ? o->capp * 2 : 8;
			o->p = xrealloc(o->p, o->capp * sizeof *o->p);
		}
		struct pod_ref *r = &o->p[o->np++];
		snprintf(r->uid, sizeof r->uid, "%s", uid);
		snprintf(r->digest, sizeof r->digest, "%s", jstr(jobj(jobj(pod, "metadata"), "labels"), SBX_LABEL_DIGEST));
		pm = xcalloc(1, sizeof *pm);
		snprintf(pm->uid, sizeof pm->uid, "%s", uid);
		snprintf(pm->key, sizeof pm->key, "%s", key);
		HASH_ADD_STR(s->pods, uid, pm);
		changed = 1;
	}
	pthread_mutex_unlock(&s->mu);
	if (left[0])
		wake(c, left, WAKE_FIRST); /* a pod went: if no slot held it, a waiter may go */
	if (changed)
		touch_quotas(c, ns);
}

void sbx_quota_on_quota(struct sbx_controller *c, const cJSON *quota)
{
	const char *ns = meta_str(quota, "namespace"), *name = meta_str(quota, "name");
	if (!ns || !name || !c->queue)
		return;
	char item[600];
	snprintf(item, sizeof item, "%s/%s", ns, name);
	workqueue_add_flow(c->queue, SBX_WORK_QUOTA, item, "");
	/* A limit raised (or a quota gone): the first waiters of every owner
	 * of the namespace look again. */
	char keys[64][33];
	size_t n = 0;
	struct sbx_quota_state *s = c->quota_state;
	pthread_mutex_lock(&s->mu);
	struct owner_stat *o, *t;
	HASH_ITER(hh, s->owners, o, t)
	{
		if (o->nw && !strcmp(o->ns, ns) && n < 64)
			snprintf(keys[n++], sizeof keys[0], "%s", o->key);
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < n; i++)
		wake(c, keys[i], WAKE_FIRST);
	/* maxWarm changed, or who it governs: the namespace's pools look
	 * again (a full pool has nothing else that would make it look: its
	 * extras would stay, or it would not fill to a raised limit). */
	cJSON *pools = c->pools ? informer_list_by_index(c->pools, ns) : NULL;
	const cJSON *p;
	cJSON_ArrayForEach(p, pools)
	{
		sbx_controller_enqueue(c, SBX_WORK_POOL, ns, meta_str(p, "name"), jstr(jobj(p, "spec"), "workspaceOwner"),
				       0);
	}
	cJSON_Delete(pools);
}

/* ---- the slots of an owner, from the cache ---- */

/* 1 when obj (a SandboxClaim, its MAC verified) is a quota slot of ns, read
 * into rec. */
static int slot_rec(const struct sbx_controller *c, const cJSON *obj, const char *ns, struct sbx_claimrec *rec)
{
	char why[128];
	return sbx_claimrec_parse(obj, ns, c->seal_keys, rec, why, sizeof why) == 0 && rec->state == SBX_CLAIM_SLOT;
}

/* The verified slots of key in ns from the cache: a new array of the cached
 * objects (caller frees); *held gets how many slot names are taken (those
 * that do not verify included: their names are taken all the same), used
 * (max bytes, NULL ok) marks the numbers taken below max. */
static cJSON *slots_of(struct sbx_controller *c, const char *ns, const char *key, long *held, unsigned char *used,
		       long max)
{
	cJSON *out = cJSON_CreateArray();
	*held = 0;
	if (!c->slots)
		return out;
	cJSON *all = informer_list_by_index(c->slots, key);
	cJSON *o;
	cJSON_ArrayForEach(o, all)
	{
		const char *n = meta_str(o, "name"), *ons = meta_str(o, "namespace");
		long i = sbx_quota_slot_index(n, key);
		if (!ons || strcmp(ons, ns) || i < 0 || meta_str(o, "deletionTimestamp"))
			continue;
		(*held)++;
		if (used && i < max)
			used[i] = 1;
		struct sbx_claimrec rec;
		if (slot_rec(c, o, ns, &rec))
			cJSON_AddItemToArray(out, cJSON_Duplicate(o, 1));
	}
	cJSON_Delete(all);
	return out;
}

/* 1 when the slot rec is held by v's generation of claim name claim. */
static int rec_held_by(const struct sbx_claimrec *rec, const struct sbx_view *v, const char *claim)
{
	return !strcmp(rec->digest, v->scope.digest) && !strcmp(rec->pod_name, claim);
}

/* 1 when the slot (a cached object, verified) is held by v's generation of
 * claim name claim. */
static int held_by(const struct sbx_controller *c, const cJSON *slot, const struct sbx_view *v, const char *claim)
{
	struct sbx_claimrec rec;
	return slot_rec(c, slot, v->ns, &rec) && rec_held_by(&rec, v, claim);
}

/* 1 when a slot of slots (verified) is held by the intent digest. */
static int holds_slot(const cJSON *slots, const char *digest)
{
	const cJSON *sl;
	cJSON_ArrayForEach(sl, slots)
	{
		const char *d = jstr(jobj(sl, "spec"), "scopeDigest");
		if (d && !strcmp(d, digest))
			return 1;
	}
	return 0;
}

/* How many active sandbox pods of key no slot of slots holds (their intent
 * holds none: made before the quota applied, or by a controller without
 * quotas; or its slot is not in the cache yet): they count as held all the
 * same. Their intents are added to *counted (NULL: not wanted). */
static long unslotted(struct sbx_controller *c, const char *key, const cJSON *slots, struct digest_set **counted)
{
	struct sbx_quota_state *s = c->quota_state;
	struct digest_set *held = NULL;
	const cJSON *sl;
	cJSON_ArrayForEach(sl, slots)
	{
		const char *d = jstr(jobj(sl, "spec"), "scopeDigest");
		if (d && strlen(d) < sizeof held->d)
			digest_add(&held, d);
	}
	long n = 0;
	pthread_mutex_lock(&s->mu);
	struct owner_stat *o;
	HASH_FIND_STR(s->owners, key, o);
	for (size_t i = 0; o && i < o->np; i++) {
		struct digest_set *e;
		HASH_FIND_STR(held, o->p[i].digest, e);
		if (!e) {
			n++;
			if (counted)
				digest_add(counted, o->p[i].digest);
		}
	}
	pthread_mutex_unlock(&s->mu);
	digests_free(&held);
	return n;
}

/* The number of distinct intents (digests) waiting ahead of v among its
 * owner's waiters, v's own intent and those holding one of slots aside. v
 * arrived as its own waiter says (a resume: when it was resumed); until the
 * cache shows it waiting, at its creation, or a resume's (resume_arrival). */
static long rank_of(struct sbx_controller *c, const char *key, const struct sbx_view *v, int resume,
		    const cJSON *slots)
{
	struct sbx_quota_state *s = c->quota_state;
	struct digest_set *seen = NULL;
	long ahead = 0;
	time_t at = resume || is_resume(v->status) ? resume_arrival(v->status, time(NULL)) : v->created;
	pthread_mutex_lock(&s->mu);
	struct owner_stat *o;
	HASH_FIND_STR(s->owners, key, o);
	for (size_t i = 0; o && i < o->nw; i++) {
		if (!strcmp(o->w[i].uid, v->uid)) {
			at = o->w[i].created;
			break;
		}
	}
	for (size_t i = 0; o && i < o->nw && waiter_before(&o->w[i], at, v->name); i++) {
		if (!strcmp(o->w[i].digest, v->scope.digest) || holds_slot(slots, o->w[i].digest))
			continue; /* v's own intent, or one that holds a slot already (counted in held) */
		ahead += digest_add(&seen, o->w[i].digest);
	}
	pthread_mutex_unlock(&s->mu);
	digests_free(&seen);
	return ahead;
}

/* ---- the admission at bind ---- */

/* The namespace's cached quotas (a new array; caller frees). */
static cJSON *quotas_of(struct sbx_controller *c, const char *ns)
{
	return c->quotas ? informer_list_by_index(c->quotas, ns) : cJSON_CreateArray();
}

/* Creates the record r of v's generation claim, named name (a slot's, or
 * the claim itself), with owner_refs (NULL: none). */
static enum kube_err post_record(struct sbx_controller *c, const struct sbx_view *v, enum sbx_claim_state state,
				 const char *name, const char *claim, const cJSON *owner_refs, struct kube_error *err)
{
	struct sbx_claimrec r = { .state = state };
	time_t now = time(NULL);
	if (sbx_rec_fill(c, v, &r, name, claim, claim, now, v->name) < 0)
		r.generation = 0;
	ktime_format_rfc3339(now, r.since);
	cJSON *obj = sbx_claimrec_build(&r, v->ns, c->seal_keys, owner_refs);
	if (!obj) {
		kube_error_set(err, KUBE_ERR_OTHER, "%s", "cannot build the record");
		return KUBE_ERR_OTHER;
	}
	char path[600], *body = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	sbx_rec_path(path, sizeof path, v->ns, NULL);
	enum kube_err e = kube_request(c->kc, "POST", path, NULL, body, NULL, NULL, err);
	free(body);
	return e;
}

/* Creates slot n of key for v's generation claim. */
static enum kube_err create_slot(struct sbx_controller *c, const struct sbx_view *v, const char *key, long n,
				 const char *claim, struct kube_error *err)
{
	char name[80];
	sbx_quota_slot_name(key, n, name, sizeof name);
	/* Until its pod exists the slot is the Sandbox's: it goes with it. */
	cJSON *refs = cJSON_CreateArray();
	cJSON_AddItemToArray(refs, sbx_rc_sandbox_ref(v->name, v->uid));
	enum kube_err e = post_record(c, v, SBX_CLAIM_SLOT, name, claim, refs, err);
	cJSON_Delete(refs);
	return e;
}

/* The live slot name: 1 when it is held by v's generation claim, 0 when it
 * is not (or is gone), -1 when it cannot be read. holder (33 bytes): the
 * intent that holds it, or "". */
static int live_held(struct sbx_controller *c, const struct sbx_view *v, const char *name, const char *claim,
		     char *holder)
{
	char path[600];
	cJSON *o = NULL;
	struct kube_error err;
	struct sbx_claimrec rec;
	sbx_rec_path(path, sizeof path, v->ns, name);
	enum kube_err e = kube_request(c->kc, "GET", path, NULL, NULL, NULL, &o, &err);
	int slot = e == KUBE_OK && slot_rec(c, o, v->ns, &rec);
	cJSON_Delete(o);
	snprintf(holder, 33, "%s", slot ? rec.digest : "");
	return e == KUBE_OK ? slot && rec_held_by(&rec, v, claim) : e == KUBE_ERR_NOT_FOUND ? 0
											    : -1;
}

/* Whether the pod that owns the cached slot (none yet: the Sandbox's) is
 * there, read live: 1 (or no pod owns it), 0 when that very pod is gone or
 * going, -1 when it cannot be read. */
static int slot_pod_live(struct sbx_controller *c, const char *ns, const cJSON *slot)
{
	const char *uid = ref_uid(slot, "Pod"), *name = jstr(ref_of(slot, "Pod"), "name");
	if (!uid)
		return 1;
	cJSON *pod = NULL;
	if (!name || sbx_rc_get_pod(c, ns, name, &pod) < 0)
		return -1;
	int live = pod && meta_str(pod, "uid") && !strcmp(meta_str(pod, "uid"), uid) && !meta_str(pod, "deletionTimestamp");
	cJSON_Delete(pod);
	return live;
}

enum sbx_quota_verdict sbx_quota_admit(struct sbx_controller *c, struct sbx_view *v, const char *claim, int resume,
				       char *msg, size_t msglen)
{
	msg[0] = '\0';
	if (!c->quotas || !c->slots)
		return SBX_QUOTA_ADMIT; /* no quotas in this process (tests that drive the reconcile alone) */
	if (!informer_wait_synced(c->quotas, 0) || !informer_wait_synced(c->slots, 0)) {
		snprintf(msg, msglen, "waiting to read the namespace's quotas");
		return SBX_QUOTA_WAIT;
	}
	cJSON *qs = quotas_of(c, v->ns);
	struct sbx_quota_limits q;
	int applies = sbx_quota_resolve(qs, v->ns, v->owner, c->cfg, &q);
	cJSON_Delete(qs);
	if (!applies || !q.has_active)
		return SBX_QUOTA_ADMIT;
	char key[33];
	if (key_of(v->ns, v->owner, key) < 0)
		return SBX_QUOTA_ERROR;
	long held;
	unsigned char *used = xcalloc((size_t)q.max_active + 1, 1);
	cJSON *slots = slots_of(c, v->ns, key, &held, used, q.max_active);
	struct digest_set *counted = NULL; /* intents held by a pod no cached slot holds */
	held += c->quota_state ? unslotted(c, key, slots, &counted) : 0;
	const cJSON *sl;
	enum sbx_quota_verdict verdict = SBX_QUOTA_WAIT;
	cJSON_ArrayForEach(sl, slots)
	{
		if (!held_by(c, sl, v, claim))
			continue;
		/* Another Sandbox of the intent, or an earlier try, took it; but a
		 * slot of a pod gone before this one (a resume's, the cache
		 * behind) goes with that pod: its number stays taken until then. */
		int live = slot_pod_live(c, v->ns, sl);
		if (live < 0)
			verdict = SBX_QUOTA_ERROR;
		else if (live && verdict == SBX_QUOTA_WAIT)
			verdict = SBX_QUOTA_ADMIT;
	}
	if (verdict == SBX_QUOTA_ERROR) {
		cJSON_Delete(slots);
		free(used);
		digests_free(&counted);
		return verdict;
	}
	long ahead = q.reject ? 0 : rank_of(c, key, v, resume, slots);
	for (long n = 0; verdict == SBX_QUOTA_WAIT && held < q.max_active && ahead < q.max_active - held &&
			 n < q.max_active;
	     n++) {
		if (used[n])
			continue;
		struct kube_error err;
		enum kube_err e = create_slot(c, v, key, n, claim, &err);
		if (e == KUBE_OK) {
			fault_point("after-quota-slot");
			verdict = SBX_QUOTA_ADMIT;
			break;
		}
		if (e != KUBE_ERR_ALREADY_EXISTS && !kube_err_retriable(e)) {
			log_kv(LOG_WARN, "creating a quota slot failed", "sandbox", v->name, "namespace", v->ns, "error",
			       err.message);
			v->retry_after_ms = (long)err.retry_after_s * 1000;
			verdict = SBX_QUOTA_ERROR;
			break;
		}
		/* Taken by someone (another replica, a lost answer of ours): ours
		 * only if it holds this very intent. */
		char name[80];
		sbx_quota_slot_name(key, n, name, sizeof name);
		char holder[33];
		int lh = live_held(c, v, name, claim, holder);
		if (lh > 0) {
			verdict = SBX_QUOTA_ADMIT;
		} else if (lh < 0 || (e != KUBE_ERR_ALREADY_EXISTS)) {
			verdict = SBX_QUOTA_ERROR; /* cannot tell: look again, never guess */
		} else {
			used[n] = 1;
			/* A slot the cache did not show yet, of an intent whose pod
			 * was counted above as holding none: counted once. */
			struct digest_set *d = NULL;
			if (holder[0])
				HASH_FIND_STR(counted, holder, d);
			if (d) {
				HASH_DEL(counted, d);
				free(d);
			} else {
				held++;
			}
		}
	}
	cJSON_Delete(slots);
	free(used);
	digests_free(&counted);
	if (verdict != SBX_QUOTA_WAIT)
		return verdict;
	int reject = q.reject && !resume;
	sbx_quota_full_message(&q, v->ns, v->owner, held, reject, msg, msglen);
	if (reject)
		return SBX_QUOTA_REJECT;
	return SBX_QUOTA_WAIT;
}

int sbx_quota_wait_for_slot(struct sbx_controller *c, struct sbx_view *v, const char *claim, int *r)
{
	char msg[700];
	enum sbx_quota_verdict qv = sbx_quota_admit(c, v, claim, 1, msg, sizeof msg);
	if (qv == SBX_QUOTA_ADMIT)
		return 1;
	if (qv == SBX_QUOTA_ERROR)
		*r = -1;
	else
		*r = sbx_rc_report_unbound(c, v, "Pending", "QuotaWaiting", msg, "QuotaWaiting") < 0 ? -1 : REQUEUE_QUOTA_MS;
	return 0;
}

int sbx_quota_claims_through_record(struct sbx_controller *c, const struct sbx_view *v)
{
	if (!c->quotas)
		return 0;
	cJSON *qs = quotas_of(c, v->ns);
	struct sbx_quota_limits q;
	int applies = sbx_quota_resolve(qs, v->ns, v->owner, c->cfg, &q);
	cJSON_Delete(qs);
	return applies && q.has_active && q.reject;
}

int sbx_quota_refusal_message(struct sbx_controller *c, const struct sbx_view *v, char *msg, size_t msglen)
{
	cJSON *qs = quotas_of(c, v->ns);
	struct sbx_quota_limits q;
	int applies = sbx_quota_resolve(qs, v->ns, v->owner, c->cfg, &q);
	cJSON_Delete(qs);
	char key[33];
	if (!applies || !q.has_active || key_of(v->ns, v->owner, key) < 0)
		return -1;
	long held;
	cJSON *slots = slots_of(c, v->ns, key, &held, NULL, 0);
	held += c->quota_state ? unslotted(c, key, slots, NULL) : 0;
	cJSON_Delete(slots);
	sbx_quota_full_message(&q, v->ns, v->owner, held, 1, msg, msglen);
	return 0;
}

int sbx_quota_reject(struct sbx_controller *c, struct sbx_view *v, const char *claim, const char *msg)
{
	if (v->key) {
		/* The stored outcome: a record of the generation, so a retry of the
		 * intent is refused too, as long as the key lives. */
		struct kube_error err;
		enum kube_err e = post_record(c, v, SBX_CLAIM_REJECTED, claim, claim, NULL, &err);
		if (e == KUBE_ERR_ALREADY_EXISTS)
			return REQUEUE_BUSY_MS; /* the generation has a record: the claim examines it */
		if (e != KUBE_OK) {
			v->retry_after_ms = (long)err.retry_after_s * 1000;
			return -1; /* a lost answer too: the next look finds the record */
		}
		fault_point("after-quota-reject-record");
	}
	sbx_quota_release_pending(c, v);
	return sbx_rc_report_unbound(c, v, "Rejected", "QuotaExceeded", msg, "QuotaExceeded") < 0 ? -1 : 0;
}

/* ---- a slot's owner: the Sandbox until the pod exists, then the pod ---- */

static void delete_slot(struct sbx_controller *c, const char *ns, const cJSON *slot)
{
	char path[600];
	sbx_rec_path(path, sizeof path, ns, meta_str(slot, "name"));
	if (sbx_rc_delete(c, path, meta_str(slot, "uid"), NULL) < 0)
		log_kv(LOG_WARN, "deleting a quota slot failed", "namespace", ns, "slot", meta_str(slot, "name"));
}

/* Which of a generation's slots its pod pod_uid keeps: its own (0), else one
 * no pod holds yet (1), else one of a pod gone before it (2: that slot is
 * going with that pod; kept only when there is no other). */
static int slot_rank(const cJSON *slot, const char *pod_uid)
{
	const char *p = ref_uid(slot, "Pod");
	if (!p)
		return 1;
	return strcmp(p, pod_uid) ? 2 : 0;
}

void sbx_quota_bound(struct sbx_controller *c, const struct sbx_view *v, const char *claim, const cJSON *pod)
{
	char key[33];
	const char *pod_uid = meta_str(pod, "uid"), *pod_name = meta_str(pod, "name");
	if (!c->slots || !pod_uid || !pod_name || key_of(v->ns, v->owner, key) < 0)
		return;
	long held;
	cJSON *slots = slots_of(c, v->ns, key, &held, NULL, 0);
	const cJSON *sl, *keep = NULL;
	cJSON_ArrayForEach(sl, slots)
	{
		if (held_by(c, sl, v, claim) &&
		    (!keep || slot_rank(sl, pod_uid) < slot_rank(keep, pod_uid) ||
		     (slot_rank(sl, pod_uid) == slot_rank(keep, pod_uid) &&
		      sbx_quota_slot_index(meta_str(sl, "name"), key) < sbx_quota_slot_index(meta_str(keep, "name"), key))))
			keep = sl;
	}
	cJSON_ArrayForEach(sl, slots)
	{
		if (sl != keep && held_by(c, sl, v, claim))
			delete_slot(c, v->ns, sl); /* two replicas took one each for the intent */
	}
	const char *owner_pod = keep ? ref_uid(keep, "Pod") : NULL;
	if (keep && (!owner_pod || strcmp(owner_pod, pod_uid) || ref_uid(keep, NULL))) {
		cJSON *patch = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(patch, "metadata");
		cJSON_AddStringToObject(m, "resourceVersion", meta_str(keep, "resourceVersion") ? meta_str(keep, "resourceVersion") : "");
		cJSON *refs = cJSON_AddArrayToObject(m, "ownerReferences"), *ref = cJSON_CreateObject();
		cJSON_AddStringToObject(ref, "apiVersion", "v1");
		cJSON_AddStringToObject(ref, "kind", "Pod");
		cJSON_AddStringToObject(ref, "name", pod_name);
		cJSON_AddStringToObject(ref, "uid", pod_uid);
		cJSON_AddItemToArray(refs, ref);
		char path[600], *body = cJSON_PrintUnformatted(patch);
		cJSON_Delete(patch);
		sbx_rec_path(path, sizeof path, v->ns, meta_str(keep, "name"));
		struct kube_error err;
		enum kube_err e = kube_request(c->kc, "PATCH", path, NULL, body, "application/merge-patch+json", NULL, &err);
		free(body);
		if (e != KUBE_OK && e != KUBE_ERR_CONFLICT && e != KUBE_ERR_NOT_FOUND)
			log_kv(LOG_WARN, "handing a quota slot to its pod failed", "sandbox", v->name, "namespace", v->ns,
			       "error", err.message);
	}
	cJSON_Delete(slots);
}

/* 1 when the cached slot was taken by v and no pod owns it yet. */
static int taken_unowned(const cJSON *slot, const struct sbx_view *v)
{
	const char *sb = ref_uid(slot, NULL);
	return !ref_uid(slot, "Pod") && sb && !strcmp(sb, v->uid);
}

void sbx_quota_release_pending(struct sbx_controller *c, const struct sbx_view *v)
{
	char key[33];
	if (!c->slots || key_of(v->ns, v->owner, key) < 0)
		return;
	long held;
	cJSON *slots = slots_of(c, v->ns, key, &held, NULL, 0);
	const cJSON *sl;
	cJSON_ArrayForEach(sl, slots)
	{
		struct sbx_claimrec rec;
		char why[128];
		if (taken_unowned(sl, v) && sbx_claimrec_parse(sl, v->ns, c->seal_keys, &rec, why, sizeof why) == 0 &&
		    !strcmp(rec.digest, v->scope.digest))
			delete_slot(c, v->ns, sl);
	}
	cJSON_Delete(slots);
}

/* 1 when the Sandbox v, read live, is still the one v saw and suspended or
 * expired (then no resume of it is under way); 0 otherwise or unread. */
static int live_at_rest(struct sbx_controller *c, const struct sbx_view *v)
{
	char path[600];
	sbx_rc_path(path, sizeof path, v);
	cJSON *o = NULL;
	struct kube_error err;
	if (kube_request(c->kc, "GET", path, NULL, NULL, NULL, &o, &err) != KUBE_OK)
		return 0;
	struct sbx_lifecycle lc;
	char msg[256];
	const char *uid = meta_str(o, "uid"), *phase = jstr(jobj(o, "status"), "phase");
	int r = uid && !strcmp(uid, v->uid) && sbx_lifecycle_parse(jobj(o, "spec"), &lc, msg, sizeof msg) == 0 &&
		(lc.suspend || sbx_lifecycle_expired(&lc, time(NULL)) || (phase && !strcmp(phase, "Expired")));
	cJSON_Delete(o);
	return r;
}

void sbx_quota_release_unused(struct sbx_controller *c, const struct sbx_view *v)
{
	char key[33];
	const char *pod_name = jstr(v->status, "podName");
	if (!c->slots || !pod_name || key_of(v->ns, v->owner, key) < 0)
		return;
	long held;
	int pending = 0;
	cJSON *slots = slots_of(c, v->ns, key, &held, NULL, 0);
	const cJSON *sl;
	cJSON_ArrayForEach(sl, slots)
	{
		pending |= taken_unowned(sl, v);
	}
	cJSON_Delete(slots);
	if (!pending)
		return; /* the usual case: nothing is read */
	cJSON *pod = NULL;
	if (sbx_rc_get_pod(c, v->ns, pod_name, &pod) < 0 || pod) {
		cJSON_Delete(pod); /* its pod stands: the slot goes with it */
		return;
	}
	if (live_at_rest(c, v)) {
		log_kv(LOG_INFO, "giving back a quota slot taken for a pod never made", "sandbox", v->name, "namespace",
		       v->ns, "pod", pod_name);
		sbx_quota_release_pending(c, v);
	}
}

void sbx_quota_on_pod_gone(struct sbx_controller *c, const cJSON *pod)
{
	char key[33];
	const char *ns = meta_str(pod, "namespace"), *uid = meta_str(pod, "uid");
	if (!c->slots || !c->queue || !uid || key_of(ns, annotation(pod, SBX_ANN_OWNER), key) < 0)
		return;
	long held;
	cJSON *slots = slots_of(c, ns, key, &held, NULL, 0);
	const cJSON *sl;
	cJSON_ArrayForEach(sl, slots)
	{
		const char *p = ref_uid(sl, "Pod");
		if (p && !strcmp(p, uid)) {
			char item[600];
			snprintf(item, sizeof item, "%s/%s", ns, meta_str(sl, "name"));
			workqueue_add_flow(c->queue, SBX_WORK_SLOT, item, "");
		}
	}
	cJSON_Delete(slots);
}

int sbx_quota_collect_slot(struct sbx_controller *c, const char *ns, const char *name)
{
	cJSON *sl = c->slots ? informer_get(c->slots, ns, name) : NULL;
	const char *p = sl ? ref_uid(sl, "Pod") : NULL;
	int r = 0;
	if (p) {
		/* The pod named in the reference, read live: the slot goes only
		 * when that very pod is gone or finished (Succeeded or Failed: it
		 * never runs again, and holds its owner's quota no more). */
		const char *pod_name = jstr(ref_of(sl, "Pod"), "name");
		cJSON *pod = NULL;
		if (!pod_name || sbx_rc_get_pod(c, ns, pod_name, &pod) < 0) {
			r = -1;
		} else if (!pod || !meta_str(pod, "uid") || strcmp(meta_str(pod, "uid"), p) || sbx_pod_finished(pod)) {
			char path[600];
			sbx_rec_path(path, sizeof path, ns, name);
			/* As cached: one handed to a pod since is not this one to free. */
			r = sbx_rc_delete(c, path, meta_str(sl, "uid"), meta_str(sl, "resourceVersion"));
			if (r == 0)
				log_kv(LOG_INFO, "quota slot freed", "namespace", ns, "slot", name, "pod", pod_name);
		}
		cJSON_Delete(pod);
	}
	cJSON_Delete(sl);
	return r;
}

/* The warm pods of owner (NULL: none) in ns, from the caches: pods of the
 * namespace's pools carrying that owner, not being deleted, not finished. */
static long owner_warm(struct sbx_controller *c, const char *ns, const char *owner)
{
	if (!c->pools || !c->pool_pods)
		return 0;
	long n = 0;
	cJSON *pools = informer_list_by_index(c->pools, ns);
	const cJSON *p, *m;
	cJSON_ArrayForEach(p, pools)
	{
		const char *uid = meta_str(p, "uid");
		cJSON *pods = uid ? informer_list_by_index(c->pool_pods, uid) : NULL;
		cJSON_ArrayForEach(m, pods)
		{
			const char *o = annotation(m, SBX_ANN_OWNER);
			if (!meta_str(m, "deletionTimestamp") && !o == !owner && (!o || !strcmp(o, owner)) &&
			    !sbx_pod_finished(m))
				n++;
		}
		cJSON_Delete(pods);
	}
	cJSON_Delete(pools);
	return n;
}

int sbx_quota_warm_room(struct sbx_controller *c, const char *ns, const char *owner, long (*in_flight)(void *ctx),
			void *ctx, long *room, char *why, size_t whylen)
{
	if (!c->quotas)
		return 0;
	cJSON *qs = quotas_of(c, ns);
	struct sbx_quota_limits q;
	int applies = sbx_quota_resolve(qs, ns, owner, c->cfg, &q);
	cJSON_Delete(qs);
	if (!applies || !q.has_warm)
		return 0;
	long flying = in_flight ? in_flight(ctx) : 0;
	long have = flying + owner_warm(c, ns, owner);
	snprintf(why, whylen, "%s%s holds %ld of %ld warm pods (%s)", owner ? "workspace owner " : "ownerless pools",
		 owner ? owner : "", have, q.max_warm, q.source);
	*room = q.max_warm - have;
	return 1;
}

/* ---- a SandboxQuota's status ---- */

struct tally {
	char key[33];
	char owner[64];
	int has_owner;
	long active, warm, suspended, waiting;
};

static int by_holding(const void *a, const void *b)
{
	const struct tally *x = a, *y = b;
	long hx = x->active + x->warm + x->waiting, hy = y->active + y->warm + y->waiting;
	return hx != hy ? (hx > hy ? -1 : 1) : strcmp(x->owner, y->owner);
}

int sbx_quota_reconcile(struct sbx_controller *c, const char *ns, const char *name)
{
	cJSON *q = c->quotas ? informer_get(c->quotas, ns, name) : NULL;
	if (!q || meta_str(q, "deletionTimestamp")) {
		cJSON_Delete(q);
		return 0;
	}
	cJSON *qs = quotas_of(c, ns);
	/* What the cache counts for each owner the quota governs. */
	struct tally *t = NULL;
	size_t n = 0, cap = 0;
	struct sbx_quota_state *s = c->quota_state;
	pthread_mutex_lock(&s->mu);
	struct owner_stat *o, *ot;
	HASH_ITER(hh, s->owners, o, ot)
	{
		if (strcmp(o->ns, ns) || !sbx_quota_governs(qs, q, o->has_owner ? o->owner : NULL))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			t = xrealloc(t, cap * sizeof *t);
		}
		t[n] = (struct tally){ .active = o->active, .has_owner = o->has_owner, .suspended = o->suspended, .waiting = (long)o->nw };
		snprintf(t[n].owner, sizeof t[n].owner, "%s", o->owner);
		snprintf(t[n].key, sizeof t[n].key, "%s", o->key);
		n++;
	}
	pthread_mutex_unlock(&s->mu);
	cJSON_Delete(qs);
	for (size_t i = 0; i < n; i++) {
		t[i].warm = owner_warm(c, ns, t[i].has_owner ? t[i].owner : NULL);
		long held;
		cJSON *slots = slots_of(c, ns, t[i].key, &held, NULL, 0);
		t[i].active += unslotted(c, t[i].key, slots, NULL);
		cJSON_Delete(slots);
	}
	if (n)
		qsort(t, n, sizeof *t, by_holding);
	long active = 0, warm = 0, suspended = 0, waiting = 0;
	cJSON *st = cJSON_CreateObject(), *owners = NULL;
	for (size_t i = 0; i < n; i++) {
		active += t[i].active;
		warm += t[i].warm;
		suspended += t[i].suspended;
		waiting += t[i].waiting;
	}
	cJSON_AddNumberToObject(st, "active", (double)active);
	cJSON_AddNumberToObject(st, "warm", (double)warm);
	cJSON_AddNumberToObject(st, "suspended", (double)suspended);
	cJSON_AddNumberToObject(st, "waiting", (double)waiting);
	if (!jstr(jobj(q, "spec"), "owner")) {
		owners = cJSON_AddArrayToObject(st, "owners");
		for (size_t i = 0; i < n && i < STATUS_OWNERS_MAX; i++) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "owner", t[i].owner);
			cJSON_AddNumberToObject(e, "active", (double)t[i].active);
			cJSON_AddNumberToObject(e, "warm", (double)t[i].warm);
			cJSON_AddNumberToObject(e, "suspended", (double)t[i].suspended);
			cJSON_AddNumberToObject(e, "waiting", (double)t[i].waiting);
			cJSON_AddItemToArray(owners, e);
		}
	}
	free(t);
	const cJSON *g = jobj(jobj(q, "metadata"), "generation");
	cJSON_AddNumberToObject(st, "observedGeneration", cJSON_IsNumber(g) ? g->valuedouble : 0);
	int r = 0;
	if (!cJSON_Compare(st, jobj(q, "status"), 1)) {
		cJSON *patch = cJSON_CreateObject();
		if (!owners)
			cJSON_AddNullToObject(st, "owners");
		cJSON_AddItemToObject(patch, "status", st);
		st = NULL;
		char path[600], *body = cJSON_PrintUnformatted(patch);
		cJSON_Delete(patch);
		snprintf(path, sizeof path, "/apis/" SBX_API "/namespaces/%s/" SBX_QUOTA_PLURAL "/%s/status", ns, name);
		struct kube_error err;
		enum kube_err e = kube_request(c->kc, "PATCH", path, NULL, body, "application/merge-patch+json", NULL, &err);
		free(body);
		if (e != KUBE_OK && e != KUBE_ERR_NOT_FOUND) {
			log_kv(LOG_WARN, "quota status write failed", "quota", name, "namespace", ns, "error", err.message);
			r = -1;
		}
	}
	cJSON_Delete(st);
	cJSON_Delete(q);
	return r;
}
