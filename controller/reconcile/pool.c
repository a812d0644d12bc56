#include "reconcile/pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "base/fnv.h"
#include "base/jsonget.h"
#include "base/ktime.h"
#include "base/strmap.h"
#include "base/xmalloc.h"
#include "kube/informer.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "reconcile/ctlmetrics.h"
#include "reconcile/inforce.h"
#include "reconcile/netkeep.h"
#include "reconcile/netverify.h"
#include "reconcile/quota.h"
#include "reconcile/reauthz.h"
#include "reconcile/refill.h"
#include "reconcile/state.h"
#include "reconcile/strset.h"
#include "reconcile/warmslot.h"
#include "reconcile/writes.h"
#include "reconcile/wsgate.h"
#include "sandbox/authz.h"
#include "sandbox/netprofile.h"
#include "sandbox/podbuild.h"
#include "sandbox/podstate.h"
#include "sandbox/poolspec.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"
#include "sandbox/status.h"
#include "sandbox/wsprep.h"

/* How long a create we sent counts as in flight without the cache showing
 * its pod (a lost response, a pod refused after all). */
#define EXPECT_TTL_MS 30000
/* The creates of a pool whose answer was lost, kept by name to be sent
 * again; more wait out the in-flight window. */
#define LOST_MAX 16
#define POOL_RECHECK_MS 1000

/* ---- bookkeeping ---- */

/* Failures (members that exited, creates the API refused) count against a
 * pool for this long: a pool without one for that long starts its backoff
 * over (as the kubelet's CrashLoopBackOff). */
#define FAILURE_MEMORY_MS (10 * 60 * 1000)
/* The backoff after the n-th failure in a row: 1 s doubling, at most 5 min. */
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS (5 * 60 * 1000)
/* A pool whose turn of the refill budget has not come looks again then. */
#define REFILL_WAIT_MS 200

/* Pools of one namespace and owner take room under its quota of warm pods
 * one at a time; owners are spread over this many locks. */
#define QUOTA_STRIPES 16

/* What the controller keeps of a pool between its reconciles (by pool uid):
 * its creates in flight, and its failures lately. */
struct book {
	int pending;
	int64_t until_ms; /* pending counts until then */
	int failures;	  /* each within FAILURE_MEMORY_MS of the next */
	int64_t last_failure_ms;
	int64_t next_create_ms; /* no create before then */
	int refused;		/* its last create was refused */
	char why[320];		/* the last failure */
	int nlost;
	char lost[LOST_MAX][32]; /* names of its creates whose answer was lost */
};

/* Since when this process has seen a pool with its present template. */
struct seen {
	int64_t at_ms; /* monotonic */
	char fp[27];   /* the template's fingerprint, cut (104 bits: never alike by chance) */
};

struct sbx_pool_state {
	struct strmap *warm;			 /* int by namespace: its warm pods (pool members) in the cache */
	struct strmap *seen;			 /* struct seen by pool uid */
	struct strmap *book;			 /* struct book by pool uid */
	struct strmap *gone;			 /* time_t by namespace: when its last pool left the cache */
	struct sbx_strset *exited;		 /* uids of members counted as exited */
	struct sbx_refill *refill;		 /* the creates budget, in fair turns */
	pthread_mutex_t quota_mu[QUOTA_STRIPES]; /* by namespace and owner: taking room (reserve_creates) */
};

struct sbx_pool_state *sbx_pool_state_new(double refill_qps)
{
	struct sbx_pool_state *s = xcalloc(1, sizeof *s);
	s->warm = strmap_new(sizeof(int));
	s->seen = strmap_new(sizeof(struct seen));
	s->book = strmap_new(sizeof(struct book));
	s->gone = strmap_new(sizeof(time_t));
	s->exited = sbx_strset_new();
	s->refill = sbx_refill_new(refill_qps, refill_qps >= 1 ? (int)refill_qps : 1, ktime_mono_ms());
	for (int i = 0; i < QUOTA_STRIPES; i++)
		pthread_mutex_init(&s->quota_mu[i], NULL);
	return s;
}

void sbx_pool_state_free(struct sbx_pool_state *s)
{
	if (!s)
		return;
	strmap_free(s->warm);
	strmap_free(s->seen);
	strmap_free(s->book);
	strmap_free(s->gone);
	sbx_strset_free(s->exited);
	sbx_refill_free(s->refill);
	for (int i = 0; i < QUOTA_STRIPES; i++)
		pthread_mutex_destroy(&s->quota_mu[i]);
	free(s);
}

/* The creates of pool uid still in flight. */
static int pending(struct sbx_pool_state *s, const char *uid)
{
	strmap_lock(s->book);
	struct book *e = strmap_get(s->book, uid);
	int n = e && e->until_ms > ktime_mono_ms() ? e->pending : 0;
	strmap_unlock(s->book);
	return n;
}

static void expect_add(struct sbx_pool_state *s, const char *uid, int d)
{
	strmap_lock(s->book);
	struct book *e = strmap_put(s->book, uid, NULL);
	if (e) {
		if (e->until_ms <= ktime_mono_ms())
			e->pending = 0;
		e->pending += d;
		if (e->pending < 0)
			e->pending = 0;
		if (d > 0)
			e->until_ms = ktime_mono_ms() + EXPECT_TTL_MS;
	}
	strmap_unlock(s->book);
}

/* Pool uid's create was refused (1) or made a pod (0). */
static void set_refused(struct sbx_pool_state *s, const char *uid, int refused)
{
	strmap_lock(s->book);
	struct book *e = refused ? strmap_put(s->book, uid, NULL) : strmap_get(s->book, uid);
	if (e)
		e->refused = refused;
	strmap_unlock(s->book);
}

/* Create name of pool uid got no answer: it is sent again (lost_take). */
static void lost_add(struct sbx_pool_state *s, const char *uid, const char *name)
{
	strmap_lock(s->book);
	struct book *e = strmap_put(s->book, uid, NULL);
	if (e && e->nlost < LOST_MAX)
		snprintf(e->lost[e->nlost++], sizeof e->lost[0], "%s", name);
	strmap_unlock(s->book);
}

/* Takes the names of pool uid's creates whose answer was lost into out. */
static int lost_take(struct sbx_pool_state *s, const char *uid, char out[LOST_MAX][32])
{
	strmap_lock(s->book);
	struct book *e = strmap_get(s->book, uid);
	int n = e ? e->nlost : 0;
	if (n)
		memcpy(out, e->lost, (size_t)n * sizeof e->lost[0]);
	if (e)
		e->nlost = 0;
	strmap_unlock(s->book);
	return n;
}

/* Pool uid failed (why): its next create waits a backoff that doubles with
 * each failure in a row. */
static void pool_failed(struct sbx_pool_state *s, const char *uid, const char *why)
{
	int64_t now = ktime_mono_ms();
	strmap_lock(s->book);
	struct book *e = strmap_put(s->book, uid, NULL);
	if (e) {
		if (now - e->last_failure_ms > FAILURE_MEMORY_MS)
			e->failures = 0;
		e->failures++;
		e->last_failure_ms = now;
		int64_t wait = BACKOFF_MIN_MS;
		for (int i = 1; i < e->failures && wait < BACKOFF_MAX_MS; i++)
			wait *= 2;
		e->next_create_ms = now + (wait < BACKOFF_MAX_MS ? wait : BACKOFF_MAX_MS);
		snprintf(e->why, sizeof e->why, "%s", why);
	}
	strmap_unlock(s->book);
}

/* Member pod_uid (pod_name) of pool uid exited: a failure, counted once per
 * pod. */
static void member_exited(struct sbx_pool_state *s, const char *uid, const char *pod_uid, const char *pod_name)
{
	if (!pod_uid || sbx_strset_has(s->exited, pod_uid))
		return;
	sbx_strset_add_for(s->exited, pod_uid, FAILURE_MEMORY_MS);
	char why[128];
	snprintf(why, sizeof why, "warm pod %s exited", pod_name ? pod_name : "?");
	pool_failed(s, uid, why);
}

/* How long pool uid must still wait before its next create (0: now), its
 * failures in a row into *failures (0 when it is not backing off: no wait
 * left and its last create was not refused) and the last one into why. */
static int64_t backoff_left(struct sbx_pool_state *s, const char *uid, int *failures, char *why, size_t whylen)
{
	strmap_lock(s->book);
	struct book *e = strmap_get(s->book, uid);
	int64_t left = e ? e->next_create_ms - ktime_mono_ms() : 0;
	*failures = e && (left > 0 || e->refused) ? e->failures : 0;
	snprintf(why, whylen, "%s", e ? e->why : "");
	strmap_unlock(s->book);
	return left > 0 ? left : 0;
}

void sbx_pool_warm_pod(struct sbx_pool_state *s, const char *ns, int d)
{
	if (!s || !ns)
		return;
	strmap_lock(s->warm);
	int *n = strmap_put(s->warm, ns, NULL);
	if (n) {
		*n += d;
		if (*n <= 0)
			strmap_del(s->warm, ns);
	}
	strmap_unlock(s->warm);
}

void sbx_pool_forget(struct sbx_pool_state *s, const char *uid)
{
	if (!s || !uid)
		return;
	strmap_lock(s->book);
	strmap_del(s->book, uid);
	strmap_unlock(s->book);
	strmap_lock(s->seen);
	strmap_del(s->seen, uid);
	strmap_unlock(s->seen);
}

int sbx_pool_settled(struct sbx_pool_state *s, const char *uid, const char *fp, long settle_ms)
{
	if (!s || !uid || !fp || strlen(uid) > STRMAP_KEY_MAX)
		return 0;
	int64_t now = ktime_mono_ms();
	strmap_lock(s->seen);
	int created = 0;
	struct seen *e = strmap_put(s->seen, uid, &created);
	/* A template other than the one held (a new one, or one the pool had
	 * before) is in place from now: one clock per pool. */
	if (e && (created || strncmp(e->fp, fp, sizeof e->fp - 1))) {
		e->at_ms = now;
		snprintf(e->fp, sizeof e->fp, "%.26s", fp);
	}
	int ok = e && now - e->at_ms >= settle_ms;
	strmap_unlock(s->seen);
	return ok;
}

size_t sbx_pool_seen_held(struct sbx_pool_state *s)
{
	strmap_lock(s->seen);
	size_t n = strmap_count(s->seen);
	strmap_unlock(s->seen);
	return n;
}

/* An entry of the gone map that left before *(time_t *)before. */
static int gone_before(const void *value, void *before)
{
	return *(const time_t *)value < *(time_t *)before;
}

void sbx_pool_gone(struct sbx_pool_state *s, const char *ns, time_t now, long keep_s)
{
	if (!s || !ns)
		return;
	/* What left keep_s ago or earlier is no longer within anyone's
	 * within_s: the same as never seen. The map holds only what left in
	 * the last keep_s, so this walk is short. */
	time_t before = now - keep_s + 1;
	strmap_lock(s->gone);
	strmap_sweep(s->gone, gone_before, &before);
	time_t *at = strmap_put(s->gone, ns, NULL);
	if (at)
		*at = now;
	strmap_unlock(s->gone);
}

size_t sbx_pool_gone_held(struct sbx_pool_state *s)
{
	strmap_lock(s->gone);
	size_t n = strmap_count(s->gone);
	strmap_unlock(s->gone);
	return n;
}

int sbx_pool_gone_within(struct sbx_pool_state *s, const char *ns, time_t now, long within_s)
{
	if (!s || !ns)
		return 0;
	/* Warm pods of a pool remain: the pool may have left before this
	 * process watched pools (a restart), and a replica that still sees it
	 * may bind them. */
	strmap_lock(s->warm);
	int *n = strmap_get(s->warm, ns);
	int warm = n && *n > 0;
	strmap_unlock(s->warm);
	if (warm)
		return 1;
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
	char attest[65]; /* status.ownerAuthorizationVerified to keep ("": none) */
};

/* Writes the pool's status when it changed. */
static int write_pool_status(struct sbx_controller *c, const struct pool_view *p, long replicas, long ready,
			     const char *since, int ok, const char *reason, const char *msg)
{
	const char *attest = p->attest[0] ? p->attest : NULL;
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
	if (attest)
		cJSON_AddStringToObject(st, SBX_POOL_ATTESTED, attest);
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
	/* Why a pool makes no pods is told once as it starts to hold. */
	const char *oreason = jstr(oc, "reason");
	if (e == KUBE_OK && c->events && !ok &&
	    (!strcmp(reason, "OwnerNotAuthorized") || !strcmp(reason, "BackOff") ||
	     !strncmp(reason, "NetworkProfileNot", 17)) &&
	    (!oreason || strcmp(oreason, reason)))
		event_record(c->events, SBX_API, SBX_POOL_KIND, p->ns, p->name, p->uid, "Warning", reason, msg);
	return 0;
}

/* Deletes a warm pod as the pool saw it: its uid and resourceVersion are
 * preconditions, so a pod that changed since the cache showed it (a warm
 * bind took it: it is no member any more) is never deleted from a stale
 * member list. 0 (deleted or gone), POOL_RECHECK_MS (it changed: look again
 * once the cache shows it), or -1. */
static int delete_member(struct sbx_controller *c, const char *ns, const cJSON *pod)
{
	char path[600];
	const char *uid = meta_str(pod, "uid"), *rv = meta_str(pod, "resourceVersion");
	if (!uid || !rv)
		return POOL_RECHECK_MS; /* the cache always keeps both */
	sbx_rc_pod_path(path, sizeof path, ns, meta_str(pod, "name"));
	int r = sbx_rc_delete(c, path, uid, rv);
	if (r == 0) /* its warm slot, if it took one, is free for another */
		sbx_warm_slot_free(c, ns, annotation(pod, SBX_ANN_OWNER), meta_str(pod, "name"));
	return r > 0 ? POOL_RECHECK_MS : r; /* its event brings the pool back sooner */
}

/* The result of two steps of a reconcile: an error wins, then the sooner
 * look again. */
static int merge_result(int a, int b)
{
	if (a < 0 || b < 0)
		return -1;
	if (!a || !b)
		return a ? a : b;
	return a < b ? a : b;
}

/* The pool's author may still use each profile its template names
 * (joined, n of them) and each exists: 1, or 0 / -1 as sbx_pool_authorized
 * says, with why and *reason. */
static int profiles_still_allowed(struct sbx_controller *c, const cJSON *pool, const char *joined, int fresh,
				  int has_identity, char *why, size_t whylen, const char **reason)
{
	char buf[SBX_PROFILES_JOINED_MAX], r[256];
	const char *names[SBX_PROFILES_MAX];
	int n = sbx_profiles_split(joined, buf, names);
	const char *author = annotation(pool, SBX_ANN_REQUESTED_BY), *identity = annotation(pool, SBX_ANN_AUTHZ_IDENTITY);
	if (!c->profiles || !informer_wait_synced(c->profiles, 0)) {
		snprintf(why, whylen, "network profiles %s: waiting to read the SandboxNetworkProfiles", joined);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		cJSON *prof = informer_get(c->profiles, NULL, names[i]);
		cJSON_Delete(prof);
		if (!prof) {
			*reason = "NetworkProfileNotFound";
			snprintf(why, whylen,
				 "network profile %s does not exist (deleted after the pool was admitted); no warm pod is "
				 "made until it is defined again",
				 names[i]);
			return 0;
		}
		int may = sbx_reauthz_check_profile(c->reauthz, c->kc, has_identity ? identity : NULL, author, names[i],
						    fresh, r, sizeof r);
		if (may == 0) {
			*reason = "NetworkProfileNotAuthorized";
			snprintf(why, whylen,
				 "network profiles %s: the pool's author %.128s may no longer use network profile %s "
				 "(missing permission \"use\" on sandboxnetworkprofiles.sandbox.dev \"%s\"%s%.200s); its "
				 "warm pods are deleted and none is made until the author may again, or an identity that "
				 "may sets the pool's template",
				 joined, author ? author : "", names[i], names[i], r[0] ? ": " : "", r);
			return 0;
		}
		if (may < 0) {
			snprintf(why, whylen,
				 "network profiles %s: cannot check whether the pool's author %.128s may still use "
				 "network profile %s (%.200s); no warm pod is made meanwhile",
				 joined, author ? author : "", names[i], r);
			return -1;
		}
	}
	return 1;
}

int sbx_pool_authorized(struct sbx_controller *c, const cJSON *pool, const char *fp, const char *owner, int fresh,
			char *why, size_t whylen, char attest[65], const char **reason)
{
	const char *unused;
	if (!reason)
		reason = &unused;
	*reason = "OwnerNotAuthorized";
	if (attest)
		attest[0] = '\0';
	const unsigned char *const *keys = (const unsigned char *const *)c->seal_keys->key;
	/* The profiles the template names: their record, whatever the owner
	 * mode (as a Sandbox's). */
	char joined[SBX_PROFILES_JOINED_MAX];
	size_t nprof = 0;
	struct sbx_authz_info ninfo = { 0 };
	enum sbx_authz_check nac =
	    sbx_pool_profiles_verify(keys, c->seal_keys->len, c->seal_keys->n, pool, fp, joined, &nprof, &ninfo);
	int owner_authz = owner && c->cfg->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW;
	if (!owner_authz && !nprof)
		return 1;
	const char *ns = meta_str(pool, "namespace"), *name = meta_str(pool, "name");
	const char *author = annotation(pool, SBX_ANN_REQUESTED_BY), *identity = annotation(pool, SBX_ANN_AUTHZ_IDENTITY);
	struct sbx_authz_info info = { 0 };
	if (owner_authz) {
		char subject[300];
		snprintf(subject, sizeof subject, SBX_POOL_AUTHZ_PREFIX "%s", name ? name : "");
		time_t created = 0;
		ktime_parse_rfc3339(meta_str(pool, "creationTimestamp"), &created);
		struct sbx_authz_subject s = { .ns = ns, .name = subject, .owner = owner, .fingerprint = fp, .username = author, .identity = identity };
		enum sbx_authz_check ac = sbx_authz_verify(keys, c->seal_keys->len, c->seal_keys->n, &s, created,
							   annotation(pool, SBX_ANN_OWNER_AUTHZ), &info);
		if (ac != SBX_AUTHZ_OK) {
			snprintf(why, whylen, "workspace owner %s: %s", owner, sbx_authz_str(ac));
			return 0;
		}
	} else {
		info = ninfo;
	}
	if (nprof && nac != SBX_AUTHZ_OK) {
		*reason = "NetworkProfileNotAuthorized";
		snprintf(why, whylen,
			 "network profiles %s: %s; no warm pod is made (create the pool, or set its template, with the "
			 "admission webhook installed, as an identity allowed to use these profiles)",
			 joined, sbx_authz_str(nac));
		return 0;
	}
	/* A record counts only when the API server's admission call made it:
	 * the webhook was in force for it. Judged once, when first looked at,
	 * and noted in the status under the seal key: a later change of the
	 * webhook configuration (or a restart) takes nothing back. The note
	 * covers the owner's record, the profiles' after it (both made by the
	 * same admission call). With ownerAuthorization namespace the
	 * configuration is not watched (c->webhooks NULL): as for a Sandbox's
	 * profiles, the record alone is judged (docs/operations.md). */
	char record[2 * SBX_AUTHZ_MAX_FIELD + 2];
	const char *orec = owner_authz ? annotation(pool, SBX_ANN_OWNER_AUTHZ) : NULL;
	const char *nrec = nprof ? annotation(pool, SBX_ANN_NET_AUTHZ) : NULL;
	snprintf(record, sizeof record, "%s%s%s", orec ? orec : "", orec && nrec ? " " : "", nrec ? nrec : "");
	const char *uid = meta_str(pool, "uid");
	const char *what = owner_authz ? "workspace owner " : "network profiles ";
	const char *whom = owner_authz ? owner : joined;
	if ((owner_authz || c->webhooks) &&
	    !sbx_authz_attest_check(keys, c->seal_keys->len, c->seal_keys->n, ns, name, uid, record,
				    jstr(jobj(pool, "status"), SBX_POOL_ATTESTED))) {
		char w[384];
		if (!c->webhooks || !informer_wait_synced(c->webhooks, 0)) {
			snprintf(why, whylen, "waiting to read the MutatingWebhookConfiguration %s", c->webhook_config);
			return -1;
		}
		time_t created = 0;
		ktime_parse_rfc3339(meta_str(pool, "creationTimestamp"), &created);
		cJSON *mwc = c->webhook_config[0] ? informer_get(c->webhooks, NULL, c->webhook_config) : NULL;
		int ok = sbx_inforce_check(c->inforce, mwc, SBX_MUTATING_WEBHOOK, SBX_POOL_PLURAL,
					   info.run == 1 ? "CREATE" : "UPDATE", ns, info.run == 1 ? created : info.issued, w,
					   sizeof w);
		cJSON_Delete(mwc);
		if (!ok) {
			if (!owner_authz)
				*reason = "NetworkProfileNotAuthorized";
			snprintf(why, whylen, "%s%s: the admission webhook was not in force for the pool (%s)", what, whom,
				 w);
			return 0;
		}
	}
	if (attest && sbx_authz_attest(keys[0], c->seal_keys->len[0], ns, name, uid, record, attest) < 0)
		attest[0] = '\0';
	/* The records are genuine; their author must still be allowed now. A
	 * record of the previous version names the username alone. */
	int may = 1;
	if (owner_authz) {
		char r[256];
		may = sbx_reauthz_check(c->reauthz, c->kc, info.has_identity ? identity : NULL, author, ns, owner, fresh, r,
					sizeof r);
		if (may == 0)
			snprintf(why, whylen,
				 "workspace owner %s: the pool's author %.128s may no longer use it in namespace %s "
				 "(missing permission \"use\" on workspaces.sandbox.dev \"%s\"%s%.200s); its warm pods are "
				 "deleted and none is made until the author may again, or an identity that may sets the "
				 "pool's template or owner",
				 owner, author, ns, owner, r[0] ? ": " : "", r);
		else if (may < 0)
			snprintf(why, whylen,
				 "workspace owner %s: cannot check whether the pool's author %.128s may still use it "
				 "(%.200s); no warm pod is made meanwhile",
				 owner, author, r);
	}
	if (may == 1 && nprof)
		may = profiles_still_allowed(c, pool, joined, fresh, ninfo.has_identity, why, whylen, reason);
	return may;
}

/* A pool, for owner_inflight. */
struct flight {
	struct sbx_controller *c;
	const struct pool_view *p;
};

/* The creates in flight of every pool of the namespace and owner of pool
 * f (a struct flight): their pods are not in the cache yet. */
static long owner_inflight(void *f)
{
	struct sbx_controller *c = ((struct flight *)f)->c;
	const struct pool_view *p = ((struct flight *)f)->p;
	long n = pending(c->pool_state, p->uid);
	cJSON *pools = c->pools ? informer_list_by_index(c->pools, p->ns) : NULL;
	const cJSON *o;
	cJSON_ArrayForEach(o, pools)
	{
		const char *uid = meta_str(o, "uid"), *owner = sbx_spec_owner(jobj(o, "spec"));
		if (uid && strcmp(uid, p->uid) && !owner == !p->owner && (!owner || !strcmp(owner, p->owner)))
			n += pending(c->pool_state, uid);
	}
	cJSON_Delete(pools);
	return n;
}

static pthread_mutex_t *quota_lock(struct sbx_pool_state *s, const char *ns, const char *owner)
{
	return &s->quota_mu[fnv1a(fnv1a(FNV1A_START, ns), owner) % QUOTA_STRIPES];
}

/* Counts up to want new creates of p in flight before they are sent and
 * returns how many: under a quota of warm pods, no more than it leaves once
 * the pods of every pool of the owner in the cache and their creates in
 * flight are counted. The count and the taking are one step under the
 * owner's lock, so two pools of one owner never both take the last room.
 * The creates in flight are read before the cache: a pod's event puts it
 * in the cache before it leaves flight (sbx_pool_seen), so a pod is counted
 * once or twice, never missed. */
static long reserve_creates(struct sbx_controller *c, const struct pool_view *p, long want)
{
	if (want <= 0)
		return 0;
	struct sbx_pool_state *s = c->pool_state;
	pthread_mutex_t *mu = quota_lock(s, p->ns, p->owner);
	struct flight f = { c, p };
	char why[320];
	long room = 0;
	pthread_mutex_lock(mu);
	if (sbx_quota_warm_room(c, p->ns, p->owner, owner_inflight, &f, &room, why, sizeof why) && want > room)
		want = room > 0 ? room : 0;
	if (want > 0)
		expect_add(s, p->uid, (int)want);
	pthread_mutex_unlock(mu);
	return want;
}

enum create { CREATED,
	      CREATE_UNKNOWN, /* no answer: the pod may exist (counted in flight) */
	      CREATE_REFUSED, /* no pod: the API refused it (why says why) */
	      CREATE_NOT_NOW, /* nothing sent: no floor, not enforced, no warm slot read (why says why) */
	      CREATE_NO_SLOT  /* nothing sent: every warm slot of the owner is taken (why says whose) */
};

/* Creates warm pod name of p, counted in flight already (reserve_creates,
 * or a create whose answer was lost, sent again), once it holds a warm slot
 * (under a quota of warm pods: warmslot.h). A create that gets no answer is
 * kept to be sent again under its name (lost_add): the name makes one pod
 * of the two sends, and one whose request never arrived is made then, not
 * after the in-flight window. */
static enum create create_member(struct sbx_controller *c, const struct pool_view *p, const char *name, char *why,
				 size_t whylen)
{
	char now[32], path[512];
	snprintf(why, whylen, "the controller cannot build a warm pod of this template");
	ktime_format_rfc3339(time(NULL), now);
	struct kube_error err;
	/* Not yet (network.requireEnforced, or the floor cannot be made: never
	 * a pod without its floor): nothing sent, and the caller looks again
	 * later. */
	if (sbx_netverify_gate(c, why, whylen) < 0)
		return CREATE_NOT_NOW;
	enum kube_err fe = sbx_netkeep_ensure(c, p->ns, &err);
	if (fe == KUBE_OK) /* the policy of the profiles it names, as a Sandbox's pod */
		fe = sbx_netkeep_ensure_profiles(c, p->ns, p->spec, &err);
	if (fe != KUBE_OK) {
		log_kv(LOG_WARN, "the network floor cannot be made", "pool", p->name, "namespace", p->ns, "error",
		       err.message);
		snprintf(why, whylen, "the network floor cannot be made: %.240s", err.message);
		return CREATE_NOT_NOW;
	}
	const struct sbx_warm_for wf = { p->ns, p->name, p->uid, p->owner, p->fp };
	char slot[80], slot_uid[64];
	int took = sbx_warm_slot_take(c, &wf, name, slot, sizeof slot, slot_uid, why, whylen);
	if (took <= 0) {
		if (took < 0)
			snprintf(why, whylen, "the owner's warm slots cannot be read now");
		return took < 0 ? CREATE_NOT_NOW : CREATE_NO_SLOT;
	}
	cJSON *pod = sbx_pool_pod_build(c->cfg, c->seal_keys, p->ns, p->name, p->uid, name, p->spec, p->fp, now);
	if (!pod) {
		if (slot[0])
			sbx_warm_slot_drop(c, p->ns, slot, slot_uid);
		return CREATE_REFUSED;
	}
	char *body = cJSON_PrintUnformatted(pod);
	cJSON_Delete(pod);
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", p->ns);
	enum kube_err e = kube_request(c->kc, "POST", path, NULL, body, NULL, NULL, &err);
	free(body);
	fault_delay("warm-create-response"); /* tests: the pod's event comes first */
	if (e == KUBE_ERR_ALREADY_EXISTS) {
		/* Our own create: an earlier send made the pod and its answer
		 * was lost (a resend of ours, or libcurl's own: it sends a
		 * request again on a new connection when a kept-alive one dies
		 * before any answer). The name is ours, drawn at random. A
		 * refusal would back the pool off for it. */
		log_kv(LOG_INFO, "warm pod create answered already exists: an earlier send of it, whose answer was lost, made it",
		       "pool", p->name, "namespace", p->ns, "pod", name);
		e = KUBE_OK;
	}
	if (e == KUBE_OK || kube_err_retriable(e)) { /* a lost response may have made it */
		if (e == KUBE_OK)
			obs_metric_add(sbx_m.warm_pods_created, NULL, 1);
		else
			lost_add(c->pool_state, p->uid, name);
		return e == KUBE_OK ? CREATED : CREATE_UNKNOWN;
	}
	expect_add(c->pool_state, p->uid, -1); /* refused: no pod of it will come */
	if (slot[0])
		sbx_warm_slot_drop(c, p->ns, slot, slot_uid);
	log_kv(LOG_WARN, "creating a warm pod failed", "pool", p->name, "namespace", p->ns, "error", err.message);
	snprintf(why, whylen, "creating a warm pod was refused (%s): %.240s", kube_err_str(e), err.message);
	return CREATE_REFUSED;
}

/* 1 when a pod of list is named name. */
static int named_in(const cJSON *list, const char *name)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, list)
	{
		const char *n = meta_str(m, "name");
		if (n && !strcmp(n, name))
			return 1;
	}
	return 0;
}

/* Keeps lost[from..n) (creates whose answer was lost, not sent again now)
 * to be sent again. */
static void keep_lost(struct sbx_pool_state *s, const char *uid, char lost[LOST_MAX][32], long from, int n)
{
	for (long i = from; i < n; i++)
		lost_add(s, uid, lost[i]);
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

/* The reconcile's result r for pool p, so that its author's right (and the
 * profiles') is asked about again within SBX_REAUTHZ_ALLOW_MS however long a
 * backoff, a wait or an error (r -1: retried with the queue's growing
 * backoff, so it is queued then too) would have it wait. */
static int recheck_author(struct sbx_controller *c, const struct pool_view *p, int r)
{
	if (!(p->owner && c->cfg->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW) && !jobj(jobj(p->spec, "network"), "profiles"))
		return r;
	if (r >= 0)
		return merge_result(r, SBX_REAUTHZ_ALLOW_MS);
	if (c->queue) {
		char qkey[600];
		snprintf(qkey, sizeof qkey, "%s/%s", p->ns, p->name);
		workqueue_add_after(c->queue, SBX_WORK_POOL, qkey, SBX_REAUTHZ_ALLOW_MS);
	}
	return r;
}

int sbx_pool_collect_orphan(struct sbx_controller *c, const char *ns, const char *name)
{
	cJSON *pod = NULL;
	if (sbx_rc_get_pod(c, ns, name, &pod) < 0)
		return -1;
	int r = 0;
	if (pod && sbx_pool_orphaned(pod)) {
		/* It runs its pool author's command over its owner's folders, and
		 * nothing else would ever delete it: not the garbage collector (no
		 * owner), not a pool (none counts it), not a revocation. */
		r = delete_member(c, ns, pod);
		if (r == 0)
			log_kv(LOG_INFO, "warm pod without its pool deleted", "namespace", ns, "pod", name, "pool",
			       jstr(jobj(jobj(pod, "metadata"), "labels"), SBX_LABEL_POOL));
	}
	cJSON_Delete(pod);
	return r;
}

/* Deletes the members of pool obj, which is being deleted: none of them
 * serves any more (warm binds skip such a pool), and a tenant's finalizer
 * may hold the pool, and so keep the garbage collector from its pods, for
 * ever, while they run its author's command over its owner's folders and
 * nothing would ask whether the author still may. A pod a warm bind took
 * is no member (its pool label went with the take), and delete_member's
 * preconditions spare one taken since the cache showed it. Returns the
 * reconcile's result. */
static int empty_pool_being_deleted(struct sbx_controller *c, const char *ns, const cJSON *obj)
{
	const char *uid = meta_str(obj, "uid");
	cJSON *members = uid && c->pool_pods ? informer_list_by_index(c->pool_pods, uid) : NULL;
	const cJSON *m;
	int r = 0;
	cJSON_ArrayForEach(m, members)
	{
		if (meta_str(m, "deletionTimestamp"))
			continue;
		int d = delete_member(c, ns, m);
		if (d == 0)
			log_kv(LOG_INFO, "warm pod deleted: its pool is being deleted", "namespace", ns, "pod",
			       meta_str(m, "name"), "pool", meta_str(obj, "name"));
		r = merge_result(r, d);
	}
	cJSON_Delete(members);
	return r;
}

int sbx_pool_reconcile(struct sbx_controller *c, const char *ns, const char *name)
{
	fault_delay("pool-reconcile"); /* tests: the pools look late */
	cJSON *obj = c->pools ? informer_get(c->pools, ns, name) : NULL;
	if (!obj)
		return 0; /* gone: the garbage collector takes its pods */
	if (meta_str(obj, "deletionTimestamp")) {
		int r = empty_pool_being_deleted(c, ns, obj);
		cJSON_Delete(obj);
		return r; /* nothing is made for it any more */
	}
	struct pool_view p = { .obj = obj, .ns = ns, .name = name, .uid = meta_str(obj, "uid") };
	const cJSON *g = jobj(jobj(obj, "metadata"), "generation"), *rep = jobj(jobj(obj, "spec"), "replicas");
	p.generation = cJSON_IsNumber(g) ? (long long)g->valuedouble : 0;
	p.replicas = cJSON_IsNumber(rep) ? (long)rep->valuedouble : 0;
	p.spec = sbx_pool_spec(obj);
	p.owner = p.spec ? sbx_spec_owner(p.spec) : NULL;
	char msg[1280] = ""; /* a preparation's words and a quota's together */
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
	/* This process's own clock of the template, for the warm binds
	 * (sbx_pool_settled): it starts the first time it is seen. */
	sbx_pool_settled(c->pool_state, p.uid, p.fp, 0);
	/* The present template's time: kept while it holds, now when it changed. */
	if (fp_old && !strcmp(fp_old, p.fp) && since_old)
		snprintf(since, sizeof since, "%s", since_old);
	else
		ktime_format_rfc3339(time(NULL), since);
	members = informer_list_by_index(c->pool_pods, p.uid);
	/* 1: may mount the owner now; 0: may not (the members go); -1: cannot
	 * tell now (the members stay, none is made). */
	/* A change of the pool (a scale, a new template) asks anew. */
	const cJSON *og = jobj(jobj(obj, "status"), "observedGeneration");
	int changed = !cJSON_IsNumber(og) || (long long)og->valuedouble != p.generation;
	const char *refusal = "OwnerNotAuthorized";
	int authorized = sbx_pool_authorized(c, obj, p.fp, p.owner, changed, msg, sizeof msg, p.attest, &refusal);
	cJSON *current = cJSON_CreateArray();
	const cJSON *m;
	cJSON_ArrayForEach(m, members)
	{
		if (meta_str(m, "deletionTimestamp"))
			continue;
		/* Outdated (another template or owner), not sealed, of a pool
		 * whose owner may not be mounted, or finished (a warm pod that
		 * exited or failed never serves, and its template backs off):
		 * not a member to keep. */
		int finished = sbx_pod_finished(m);
		if (finished)
			member_exited(c->pool_state, p.uid, meta_str(m, "uid"), meta_str(m, "name"));
		if (!authorized || !sbx_pool_member(m, c->seal_keys, p.uid, p.fp, p.owner) || finished)
			r = merge_result(r, delete_member(c, ns, m));
		else
			cJSON_AddItemToArray(current, cJSON_Duplicate(m, 1));
	}
	long have = cJSON_GetArraySize(current), ready = 0;
	cJSON_ArrayForEach(m, current) ready += sbx_pool_pod_ready(m);
	/* The warm slots of pods that are no members any more go. */
	const struct sbx_warm_for wf = { ns, name, p.uid, p.owner, p.fp };
	r = merge_result(r, sbx_warm_slot_collect(c, &wf, members));
	if (authorized <= 0) {
		int w = write_pool_status(c, &p, authorized ? have : 0, authorized ? ready : 0, since, 0,
					  authorized ? "Waiting" : refusal, msg);
		cJSON_Delete(current);
		/* Looked at again when the answers it was given expire: a pool
		 * whose author may use the owner again fills again. */
		r = recheck_author(c, &p, w < 0 || authorized < 0 ? -1 : merge_result(r, SBX_REAUTHZ_ALLOW_MS));
		goto out;
	}
	long inflight = pending(c->pool_state, p.uid);
	/* Never more than replicas, nor more than the owner's quota of warm
	 * pods allows (every pool of the owner's counted): over it (racing
	 * replicas both filled), the extras go. */
	char quota_why[320] = "";
	long room = 0, cap = p.replicas;
	if (sbx_quota_warm_room(c, ns, p.owner, NULL, NULL, &room, quota_why, sizeof quota_why) && have + room < cap)
		cap = have + room > 0 ? have + room : 0;
	else
		quota_why[0] = '\0';
	int64_t wait_ms = 0;
	int failures = 0, backing_off = 0;
	char why[320] = "";
	if (have > cap) {
		/* Too many: the extras go, not-ready and newest first. */
		size_t n = (size_t)have;
		const cJSON **v = xcalloc(n, sizeof *v);
		size_t i = 0;
		cJSON_ArrayForEach(m, current) v[i++] = m;
		qsort(v, n, sizeof *v, extra_first);
		for (i = 0; i < (size_t)(have - cap); i++)
			r = merge_result(r, delete_member(c, ns, v[i]));
		free(v);
	} else if ((wait_ms = backoff_left(c->pool_state, p.uid, &failures, why, sizeof why)) > 0 &&
		   have + inflight < cap) {
		/* Its pods exit, or its creates are refused: the next waits (it
		 * is looked at again then), leaving the budget to others. */
		r = merge_result(r, (int)wait_ms + 50);
	} else {
		/* Never more than replicas (or the quota's cap), creates in
		 * flight included, each create in its turn of the budget shared
		 * by every pool; none before the owner's folders are prepared
		 * (sandbox/wsprep.h). */
		long want = cap - have - inflight;
		const struct sbx_wsprep_for me = { SBX_API, SBX_POOL_KIND, p.name, p.uid };
		char qkey[600];
		snprintf(qkey, sizeof qkey, "%s/%s", ns, name); /* its work queue key (controller.c) */
		int prep = want > 0 ? sbx_ws_prepared(c, ns, p.owner, &me, SBX_WORK_POOL, qkey, &ws) : 1;
		if (prep != 1) {
			want = 0;
			r = prep < 0 ? -1 : merge_result(r, (int)ws.delay_ms);
		}
		/* The creates whose answer was lost go again first (they are in
		 * flight already), unless the cache shows their pod; then new
		 * ones. While the owner's folders are not prepared, or the
		 * creates in flight already fill the pool, they wait. */
		char lost[LOST_MAX][32], pod_name[32];
		int nlost = prep == 1 && want >= 0 ? lost_take(c->pool_state, p.uid, lost) : 0, k = 0;
		for (int i = 0; i < nlost; i++)
			if (!named_in(members, lost[i]))
				memmove(lost[k++], lost[i], sizeof lost[0]);
		nlost = k;
		/* New creates count in flight before they are sent (the pod's
		 * watch event, which takes one out, may arrive before the
		 * answer); those not sent leave flight after the loop. */
		long reserved = reserve_creates(c, &p, want), used = 0;
		for (long i = 0; i < nlost + reserved; i++) {
			const char *pod = i < nlost ? lost[i] : pod_name;
			if (i >= nlost && sbx_pool_pod_name(pod_name) < 0) {
				r = -1; /* no random bytes: looked at again */
				break;
			}
			if (!sbx_refill_take(c->pool_state->refill, ns, p.uid, ktime_mono_ms())) {
				r = merge_result(r, REFILL_WAIT_MS);
				keep_lost(c->pool_state, p.uid, lost, i, nlost);
				break;
			}
			enum create cr = create_member(c, &p, pod, why, sizeof why);
			used += i >= nlost && cr != CREATE_NOT_NOW && cr != CREATE_NO_SLOT;
			if (cr == CREATE_NO_SLOT) {
				/* The owner's maxWarm is held (by another replica's pods,
				 * perhaps not in the cache yet): nothing more for now; a
				 * freed slot brings the pool back. A create whose answer
				 * was lost is not sent again and leaves flight: its slot
				 * went (then it made no pod: warmslot.h), or the cache
				 * does not show its slot yet (then its pod holds that). */
				sbx_refill_refund(c->pool_state->refill, ns, p.uid);
				if (i < nlost)
					expect_add(c->pool_state, p.uid, -1);
				keep_lost(c->pool_state, p.uid, lost, i + 1, nlost);
				if (!quota_why[0])
					snprintf(quota_why, sizeof quota_why, "%s", why);
				break;
			}
			if (cr == CREATE_NOT_NOW) {
				/* Nothing sent, and the next member would meet the same
				 * floor: the turn goes back to the other pools, and the
				 * pool is looked at again after a backoff. */
				sbx_refill_refund(c->pool_state->refill, ns, p.uid);
				keep_lost(c->pool_state, p.uid, lost, i, nlost);
				r = -1;
				break;
			}
			if (cr == CREATE_REFUSED) {
				/* No pod: the token goes back to the others. */
				sbx_refill_refund(c->pool_state->refill, ns, p.uid);
				pool_failed(c->pool_state, p.uid, why);
				set_refused(c->pool_state, p.uid, 1);
				wait_ms = backoff_left(c->pool_state, p.uid, &failures, why, sizeof why);
				r = merge_result(r, (int)wait_ms + 50);
				keep_lost(c->pool_state, p.uid, lost, i + 1, nlost);
				break;
			}
			if (cr == CREATE_UNKNOWN)
				r = -1;
			else
				set_refused(c->pool_state, p.uid, 0);
		}
		if (reserved > used)
			expect_add(c->pool_state, p.uid, (int)(used - reserved));
	}
	/* Backing off until a create goes through (the pool says why). */
	backing_off = failures > 0 && have + inflight < cap;
	if (backing_off)
		snprintf(msg, sizeof msg,
			 "%ld of %ld warm pods ready; %d failures in a row, the last: %s; each doubles the wait before "
			 "the next warm pod is made (1 s to 5 min)",
			 ready, p.replicas, failures, why);
	else
		snprintf(msg, sizeof msg, "%ld of %ld warm pods ready%s%s%s%s", ready, p.replicas, ws.report ? "; " : "",
			 ws.report ? ws.why : "", quota_why[0] ? "; no more for now: its quota: " : "", quota_why);
	int full = ready >= p.replicas && have <= p.replicas;
	int w = write_pool_status(c, &p, have < p.replicas ? have : p.replicas, ready, since, full,
				  full ? "Full" : backing_off ? "BackOff"
							      : "Filling",
				  msg);
	if (w < 0)
		r = -1;
	else if (r == 0 && (!full || inflight))
		r = POOL_RECHECK_MS; /* pod events bring it back sooner */
	r = recheck_author(c, &p, r);
	cJSON_Delete(current);
out:
	cJSON_Delete(members);
	cJSON_Delete(p.spec);
	cJSON_Delete(obj);
	return r;
}
