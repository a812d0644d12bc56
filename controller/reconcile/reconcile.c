/* The decision for one Sandbox: claim, adopt, follow its pod, and the
 * generations of a key (reconcile.h). The wiring that feeds it - informers,
 * queue, workers - is controller.c. */
#define _GNU_SOURCE
#include "reconcile/reconcile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/ktime.h"
#include "base/xmalloc.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "reconcile/ctlmetrics.h"
#include "reconcile/examine.h"
#include "reconcile/inforce.h"
#include "reconcile/lifecycle.h"
#include "reconcile/quota.h"
#include "reconcile/records.h"
#include "reconcile/state.h"
#include "reconcile/strset.h"
#include "reconcile/warm.h"
#include "reconcile/writes.h"
#include "reconcile/written.h"
#include "reconcile/wsgate.h"
#include "sandbox/authz.h"
#include "sandbox/claimrec.h"
#include "sandbox/podbuild.h"
#include "sandbox/scope.h"
#include "sandbox/seal.h"
#include "sandbox/spec.h"
#include "sandbox/status.h"
#include "sandbox/trim.h"
#include "sandbox/verify.h"

/* A bound to the -<n> names tried in one reconcile; far beyond any real
 * key reuse, it only stops a pathological namespace from spinning. */
#define MAX_GENERATIONS 10000

/* 1 when the bound pod was changed out of band (contract section 5): its
 * sealed identity no longer verifies, or an image or container changed
 * (sbx_pod_tamper_check); the reason goes to why. A terminating pod is not
 * tampered. */
static int pod_tampered(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, char *why,
			size_t whylen)
{
	struct sbx_verify_expect ex = {
		.ns = v->ns, .owner = v->owner, .scope = &v->scope, .keys = c->seal_keys, .check_fingerprint = 1
	};
	enum sbx_verify vr = sbx_pod_verify(pod, &ex);
	if (vr == SBX_VERIFY_TERMINATING)
		return 0;
	if (vr != SBX_VERIFY_OK) {
		snprintf(why, whylen, "%s", sbx_verify_str(vr));
		return 1;
	}
	cJSON *want = sbx_rc_build_pod(c, v, meta_str(pod, "name"), annotation(pod, SBX_ANN_CLAIM),
				       annotation(pod, SBX_ANN_CLAIMED_AT), annotation(pod, SBX_ANN_SEAL));
	struct sbx_certify cert = { .expected = want, .spec = v->spec, .cfg = c->cfg };
	int t = want && sbx_pod_tamper_check(pod, &cert, why, whylen) != SBX_VERIFY_OK;
	cJSON_Delete(want);
	return t;
}

/* A bound Sandbox only follows its pod; it is never re-bound or re-created. */
static int follow_bound(struct sbx_controller *c, const struct sbx_view *v)
{
	const char *pod_name = jstr(v->status, "podName");
	const char *pod_uid = jstr(v->status, "podUID");
	cJSON *pod = informer_get(c->pods, v->ns, pod_name);
	/* The cache may lag behind our own create: a pod this process created
	 * moments ago brings the Sandbox back with its own event; otherwise ask
	 * the API before saying "missing". A trimmed pod with too many containers
	 * to keep is read live. */
	if (!pod && sbx_written_lagging(c->created_pods, pod_uid, ""))
		return WRITTEN_RECHECK_MS;
	if (!pod || cJSON_IsTrue(jobj(jobj(pod, "spec"), "truncated"))) {
		cJSON_Delete(pod);
		if (sbx_rc_get_pod(c, v->ns, pod_name, &pod) < 0)
			return -1;
	}
	if (pod && (!meta_str(pod, "uid") || strcmp(meta_str(pod, "uid"), pod_uid))) {
		cJSON_Delete(pod); /* same name, another pod: ours is gone */
		pod = NULL;
	}
	/* Gone because the controller released it (another holder's view of v
	 * was older than v's resume): v resumes it, nothing went out of band.
	 * The record must be of this pod: one of an earlier release (before a
	 * resume made this pod) says nothing of it. */
	struct sbx_claimrec rel;
	if (!pod && sbx_lc_released(c, v, pod_name, &rel) && (!rel.pod_uid[0] || !strcmp(rel.pod_uid, pod_uid)))
		return sbx_lc_resume(c, (struct sbx_view *)v);
	char why[256] = "", tmsg[400];
	int tampered = pod && pod_tampered(c, v, pod, why, sizeof why);
	const char *old_ready = jstr(sbx_status_condition(v->status, "Ready"), "reason");
	int reported = old_ready && !strcmp(old_ready, "PodTampered"); /* by this or an earlier process */
	int how = sbx_rc_binding_how(jstr(v->status, "binding"));
	const char *msg = jstr(sbx_status_condition(v->status, "Bound"), "message");
	struct sbx_status_in in = sbx_rc_bound_status(v, pod, pod_name, pod_uid, how, jstr(v->status, "claimedAt"),
						      jstr(v->status, "keyExpiresAt"), msg);
	if (tampered) {
		snprintf(tmsg, sizeof tmsg, "pod %s was changed out of band (%s); it is not re-created", pod_name,
			 why);
		in.ready = 0;
		in.ready_reason = "PodTampered";
		in.ready_message = tmsg;
		in.ready_detail[0] = '\0';
	}
	int r = sbx_rc_write_status(c, v, &in);
	if (pod && !tampered)
		sbx_quota_bound(c, v, sbx_rc_claim_of(pod), pod); /* the generation's slot is the pod's */
	cJSON_Delete(pod);
	if (r >= 0 && in.ready)
		sbx_lc_ready(c, v);
	if (r >= 0 && tampered && !reported) {
		char key[64];
		snprintf(key, sizeof key, "tampered/%s", v->uid);
		/* Once per Sandbox: the set covers a cache that has not seen our write yet. */
		if (sbx_strset_add(c->announced, key)) {
			sbx_rc_event(c, v, "Warning", "PodTampered", tmsg);
			log_kv(LOG_WARN, "bound pod tampered", "sandbox", v->name, "namespace", v->ns, "pod", pod_name,
			       "reason", why);
		}
	}
	return r < 0 ? -1 : 0;
}

/* Pod-field paths the Sandbox spec controls (the container built from it and
 * the runtime class): a validation failure there is the spec's own fault. */
static int spec_controlled_field(const char *f)
{
	static const char *const container[] = { "image", "command", "args", "env", "resources", NULL };
	if (!strcmp(f, "spec.runtimeClassName"))
		return 1;
	if (strncmp(f, "spec.containers[", 16))
		return 0;
	const char *close = strchr(f + 16, ']');
	if (!close || close[1] != '.')
		return 0;
	for (const char *const *k = container; *k; k++) {
		size_t n = strlen(*k);
		if (!strncmp(close + 2, *k, n) && (close[2 + n] == '\0' || close[2 + n] == '[' || close[2 + n] == '.'))
			return 1;
	}
	return 0;
}

int sbx_pod_refusal_is_final(const struct kube_error *e)
{
	if (e->code != KUBE_ERR_INVALID || strcmp(e->reason, "Invalid") || e->ncauses == 0 ||
	    e->ncauses != e->ncauses_total)
		return 0;
	/* Admission (policies, webhooks) may answer 422 too: that is a decision
	 * about this cluster now, not about the spec. */
	if (strstr(e->message, "admission webhook") || strstr(e->message, "ValidatingAdmissionPolicy") ||
	    strstr(e->message, "denied request") || strstr(e->message, "denied the request"))
		return 0;
	for (int i = 0; i < e->ncauses; i++) {
		const struct kube_error_cause *k = &e->causes[i];
		if (strncmp(k->reason, "FieldValue", 10) || !strcmp(k->reason, "FieldValueForbidden") ||
		    !spec_controlled_field(k->field))
			return 0;
	}
	return 1;
}

/* The API refused or lost the create of pod_name: say why on the Sandbox and
 * retry with the per-Sandbox backoff (never sooner than Retry-After). */
static int create_failed(struct sbx_controller *c, struct sbx_view *v, const char *pod_name, enum kube_err e,
			 const struct kube_error *err)
{
	sbx_rc_log_create_failure(v->ns, v->name, pod_name, e, err->message);
	char msg[700];
	snprintf(msg, sizeof msg, "creating pod %s failed (%s): %s; retrying", pod_name, kube_err_str(e),
		 err->message);
	sbx_rc_report_unbound(c, v, "Pending", "Waiting", msg, NULL);
	v->retry_after_ms = (long)err->retry_after_s * 1000;
	return -1;
}

/* The generation n of pod name for v's digest ("sbx-<d>" 0, "sbx-<d>-<n>"
 * n), or -1 when the name is not one of v's generations. */
static long generation_of(const struct sbx_view *v, const char *name)
{
	char base[80];
	sbx_pod_name(&v->scope, 0, base, sizeof base);
	size_t n = strlen(base);
	if (!name || strncmp(name, base, n))
		return -1;
	if (!name[n])
		return 0;
	const char *d = name + n + 1;
	if (name[n] != '-' || *d < '1' || *d > '9' || strlen(d) > 5)
		return -1;
	for (const char *p = d; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	long g = strtol(d, NULL, 10);
	return g < MAX_GENERATIONS ? g : -1;
}

struct generations {
	const struct sbx_view *v;
	cJSON *pods; /* v's generations, as listed */
	long newest; /* -1: none */
};

/* Keeps a listed pod of v's digest by its generation (its claim name: a warm
 * pod bound to the scope is not named after it). */
static void collect_generation(void *ctx, const cJSON *pod)
{
	struct generations *g = ctx;
	long n = generation_of(g->v, sbx_rc_claim_of(pod));
	if (n < 0)
		return;
	cJSON *d = cJSON_Duplicate(pod, 1);
	if (!d || !cJSON_AddItemToArray(g->pods, d))
		abort(); /* out of memory */
	if (n > g->newest)
		g->newest = n;
}

static void reset_generations(void *ctx)
{
	struct generations *g = ctx;
	cJSON_Delete(g->pods);
	g->pods = cJSON_CreateArray();
	g->newest = -1;
}

/* Removes and returns the listed pod of claim name `name` (caller frees), or
 * NULL. */
static cJSON *take_listed(struct generations *g, const char *name)
{
	cJSON *p;
	cJSON_ArrayForEach(p, g->pods)
	{
		const char *n = sbx_rc_claim_of(p);
		if (n && !strcmp(n, name))
			return cJSON_DetachItemViaPointer(g->pods, p);
	}
	return NULL;
}

/* 1 when the pod cache may stand in for the live LIST of v's generations:
 * it is current and holds no pod of v's digest, and the key lifetime is at
 * least CACHED_CLAIM_MIN_LIFETIME_S.
 *
 * Why that is enough. The live read exists so that a gap (generation n
 * deleted while a later one lives) is never refilled. A cache is a consistent
 * prefix of the pod history (one watch, delivered in order). If it shows no
 * pod of the digest while the API holds a later generation m > 0 and not
 * generation 0..m-1: generation m was created while an expired earlier one
 * existed, and that one was deleted after. Had the earlier one existed at
 * the cache's point in history, the cache would show it (or, having seen its
 * deletion, would show m, created before it). So it was created after that
 * point, and outlived its whole key lifetime before m was claimed: the cache
 * lags by more than a key lifetime. An informer that has had no watch for a
 * minute is not current, so with lifetimes of ten minutes and more (the
 * default is 24 h) that cannot happen; shorter lifetimes always read live.
 * With nothing in the way, the create itself is the check: AlreadyExists
 * (another replica, a lost response) is read back and verified as before. */
#define CACHED_CLAIM_MIN_LIFETIME_S 600

static int cache_has_no_generation(struct sbx_controller *c, const struct sbx_view *v)
{
	/* A pod of the digest left lately: released, its record may not have
	 * reached the record cache yet (live reads see it, see claim). One we
	 * made lately and the cache does not show yet: a reconcile whose status
	 * write failed after the create comes back at once, and must find its
	 * pod rather than create it again (answered 409). */
	if (c->cfg->key_lifetime_s < CACHED_CLAIM_MIN_LIFETIME_S || !informer_wait_synced(c->pods, 0) ||
	    (c->claims && !informer_wait_synced(c->claims, 0)) ||
	    (c->pods_gone && sbx_strset_has(c->pods_gone, v->scope.digest)) ||
	    (c->pods_made && sbx_strset_has(c->pods_made, v->scope.digest)))
		return 0;
	cJSON *pods = informer_list_by_index(c->pods, v->scope.digest);
	int none = cJSON_GetArraySize(pods) == 0;
	cJSON_Delete(pods);
	return none;
}

/* The generation's record speaks for its missing pod: released (Suspended,
 * Expired), or claimed (Bound) and not yet there (sbx_lc_claim_record).
 * Returns EX_NEXT_GENERATION, EX_CREATE (the record is the claim: the caller
 * creates its cold pod), or EX_DONE with *r the reconcile's result. */
static enum sbx_examine examine_record(struct sbx_controller *c, struct sbx_view *v, const cJSON *record, int *r)
{
	int delay = 0;
	enum sbx_examine x = sbx_lc_claim_record(c, v, record, &delay);
	if (x == EX_NEXT_GENERATION || x == EX_CREATE)
		return x;
	*r = x == EX_DONE ? delay : x == EX_RETRY_SOON ? REQUEUE_BUSY_MS
						       : -1;
	return EX_DONE;
}

/* Whether v's generation claim may get an active pod now (its owner's
 * quota, reconcile/quota.h): 1, or 0 with the outcome reported and *r the
 * reconcile's result (waiting, refused, or -1). */
static int quota_gate(struct sbx_controller *c, struct sbx_view *v, const char *claim, int *r)
{
	char msg[700];
	switch (sbx_quota_admit(c, v, claim, 0, msg, sizeof msg)) {
	case SBX_QUOTA_ADMIT:
		return 1;
	case SBX_QUOTA_WAIT:
		*r = sbx_rc_report_unbound(c, v, "Pending", "QuotaWaiting", msg, "QuotaWaiting") < 0 ? -1 : REQUEUE_QUOTA_MS;
		return 0;
	case SBX_QUOTA_REJECT:
		*r = sbx_quota_reject(c, v, claim, msg);
		return 0;
	case SBX_QUOTA_ERROR:
		break;
	}
	*r = -1;
	return 0;
}

/* Claims a pod for v. The newest generation of v's key decides, read live (a
 * LIST by the digest label) unless the cache shows none: an older generation,
 * or a gap a deleted one left, is never claimed while a later one exists.
 * When read live, a generation about to get its first pod has its record
 * read live too: the pods are read after the release deleted one, so the
 * record written before that delete is there, whatever the record cache
 * shows yet. */
static int claim(struct sbx_controller *c, struct sbx_view *v)
{
	struct generations g = { .v = v, .pods = cJSON_CreateArray(), .newest = -1 };
	struct kube_error err;
	enum kube_err e;
	/* The claim records of the key's generations whose pods were released
	 * (sandbox/claimrec.h): they count as generations too. */
	cJSON *recs = v->key ? sbx_rec_cached(c, v) : cJSON_CreateArray();
	long newest_rec = -1;
	const cJSON *rec;
	cJSON_ArrayForEach(rec, recs)
	{
		long n = generation_of(v, meta_str(rec, "name"));
		if (n > newest_rec)
			newest_rec = n;
	}
	int live = !cache_has_no_generation(c, v);
	cJSON *fetched = NULL; /* a record read live, for the generation looked at */
	if (live) {
		char sel[128], lpath[320];
		snprintf(sel, sizeof sel, SBX_LABEL_DIGEST "=%s", v->scope.digest);
		snprintf(lpath, sizeof lpath, "/api/v1/namespaces/%s/pods", v->ns);
		e = kube_list_ex(c->kc, lpath, sel, collect_generation, reset_generations, &g, NULL, NULL, &err);
		if (e != KUBE_OK) {
			cJSON_Delete(g.pods);
			v->retry_after_ms = (long)err.retry_after_s * 1000;
			return -1; /* never claim on a guess */
		}
	}
	int r = -1;
	long newest = g.newest > newest_rec ? g.newest : newest_rec;
	unsigned n = newest > 0 ? (unsigned)newest : 0;
	for (; n < MAX_GENERATIONS; n++) {
		char pod_name[80], path[512];
		sbx_pod_name(&v->scope, n, pod_name, sizeof pod_name); /* the claim name */
		cJSON *pod = take_listed(&g, pod_name);
		const cJSON *record = NULL;
		cJSON_ArrayForEach(rec, recs)
		{
			if (meta_str(rec, "name") && !strcmp(meta_str(rec, "name"), pod_name))
				record = rec;
		}
		cJSON_Delete(fetched);
		fetched = NULL;
		if (!pod && !record && live && v->key) {
			if (sbx_rec_live(c, v, pod_name, &fetched) < 0)
				goto out;
			record = fetched;
		}
		if (!pod && record) {
			enum sbx_examine x = examine_record(c, v, record, &r);
			if (x == EX_NEXT_GENERATION)
				continue;
			if (x != EX_CREATE)
				goto out;
			/* the record is the claim: its cold pod is created below */
		}
		char holder[254];
		if (pod && !sbx_rc_owned_by(pod, v->uid, NULL) && sbx_rc_key_expired(c, v, pod) == 0 &&
		    sbx_lc_pod_expired(c, v, pod, holder, sizeof holder)) {
			/* Every Sandbox of the generation expired, though the pod is
			 * not released yet (the controller was down, or is at it now):
			 * the stored outcome, never a share of an expired pod. */
			char until[32] = "";
			time_t t;
			if (ktime_parse_rfc3339(annotation(pod, SBX_ANN_CLAIMED_AT), &t) == 0)
				ktime_format_rfc3339(t + c->cfg->key_lifetime_s, until);
			r = sbx_lc_report_expired_key(c, v, holder, meta_str(pod, "name"), until[0] ? until : NULL);
			cJSON_Delete(pod);
			goto out;
		}
		/* A pod for the generation is about to be made or taken: only
		 * while its requester may still use the owner, and within the
		 * owner's quota. */
		if (!pod && (!sbx_lc_claim_allowed(c, v, &r) || !quota_gate(c, v, pod_name, &r)))
			goto out;
		/* A fresh generation where a warm pool may serve, or a Reject-mode
		 * quota applies: the claim goes through the generation's record
		 * (reconcile/warm.h), warm or cold. */
		if (!pod && !record && (sbx_warm_record_namespace(c, v->ns) || sbx_quota_claims_through_record(c, v))) {
			enum sbx_warm w = sbx_warm_claim(c, v, pod_name, &r);
			if (w == SBX_WARM_DONE)
				goto out;
			if (w == SBX_WARM_RECORD) {
				/* Another Sandbox of the scope, or another replica, wrote the
				 * generation's record first: it is examined as any record,
				 * read live. */
				int lr = sbx_rec_live(c, v, pod_name, &fetched);
				if (lr != 0 || !fetched) {
					if (lr > 0)
						log_kv(LOG_WARN, "claim record does not verify", "sandbox", v->name, "namespace",
						       v->ns, "record", pod_name);
					r = lr == 0 ? REQUEUE_BUSY_MS : -1; /* none: just collected, claim again */
					goto out;
				}
				enum sbx_examine x = examine_record(c, v, fetched, &r);
				if (x == EX_NEXT_GENERATION)
					continue;
				if (x != EX_CREATE)
					goto out;
				/* the record is the claim: its cold pod is created below */
			}
		}
		if (!pod) {
			if (!sbx_rc_workspace_ready(c, v, &r))
				goto out;
			e = sbx_rc_create_pod(c, v, pod_name, NULL, NULL, &pod, &err);
			if (e == KUBE_OK) {
				int delay = 0;
				enum sbx_examine x = sbx_rc_examine(c, v, pod, &delay);
				if (x == EX_DONE)
					sbx_quota_bound(c, v, pod_name, pod); /* its slot goes with the pod */
				cJSON_Delete(pod);
				r = x == EX_DONE ? delay : -1;
				goto out;
			}
			if ((e == KUBE_ERR_INVALID || e == KUBE_ERR_BAD_REQUEST) && sbx_pod_refusal_is_final(&err)) {
				char msg[600];
				snprintf(msg, sizeof msg, "the pod for this Sandbox was refused by the API: %s",
					 err.message);
				sbx_quota_release_pending(c, v);
				r = sbx_rc_report_unbound(c, v, "Rejected", "InvalidSpec", msg, "InvalidSpec") < 0 ? -1 : 0;
				goto out;
			}
			if (e != KUBE_ERR_ALREADY_EXISTS && !kube_err_retriable(e)) {
				/* Forbidden (quota, admission), a policy's 422, Unauthorized...:
				 * say why on the Sandbox while the work queue retries. */
				r = create_failed(c, v, pod_name, e, &err);
				goto out;
			}
			/* AlreadyExists, or the outcome is unknown (lost response): GET and verify. */
			struct kube_error gerr;
			sbx_rc_pod_path(path, sizeof path, v->ns, pod_name);
			enum kube_err ge = kube_request(c->kc, "GET", path, NULL, NULL, NULL, &pod, &gerr);
			if (ge == KUBE_ERR_NOT_FOUND) {
				/* AlreadyExists then gone: it was just deleted, claim again
				 * soon. Otherwise the create failed (5xx, 429, transport):
				 * back off, per Sandbox. */
				r = e == KUBE_ERR_ALREADY_EXISTS ? REQUEUE_BUSY_MS : create_failed(c, v, pod_name, e, &err);
				goto out;
			}
			if (ge != KUBE_OK) {
				v->retry_after_ms = (long)gerr.retry_after_s * 1000;
				goto out; /* never adopt on a guess */
			}
		}
		int delay = 0;
		enum sbx_examine x = sbx_rc_examine(c, v, pod, &delay);
		cJSON_Delete(pod);
		switch (x) {
		case EX_DONE:
			r = delay;
			goto out;
		case EX_NEXT_GENERATION:
			continue;
		case EX_RETRY_SOON:
			r = REQUEUE_BUSY_MS;
			goto out;
		case EX_RETRY:
		case EX_CREATE: /* not an outcome of examining a pod */
			goto out;
		}
	}
	log_kv(LOG_ERROR, "too many expired generations for one key", "sandbox", v->name, "namespace", v->ns);
out:
	cJSON_Delete(fetched);
	cJSON_Delete(g.pods);
	cJSON_Delete(recs);
	return r;
}

/* The reconcile's result r, brought forward to v's shutdownTime when that
 * comes first (a timer in the work queue's delay heap, not a poll). */
static int shutdown_timer(struct sbx_view *v, int r)
{
	if (r < 0 || !v->lc.has_shutdown || v->lc.shutdown <= v->now)
		return r;
	double ms = ((double)v->lc.shutdown - (double)v->now) * 1000 + 50;
	if (ms > 7 * 86400 * 1000.0)
		ms = 7 * 86400 * 1000.0; /* looked at again then */
	if (r != 0 && ms >= r)
		return r;
	v->timer = 1;
	return (int)ms;
}

static int view_init(struct sbx_view *v, const cJSON *obj)
{
	memset(v, 0, sizeof *v);
	v->obj = obj;
	const cJSON *m = jobj(obj, "metadata");
	v->ns = jstr(m, "namespace");
	v->name = jstr(m, "name");
	v->uid = jstr(m, "uid");
	const cJSON *g = jobj(m, "generation");
	v->generation = cJSON_IsNumber(g) ? (long long)g->valuedouble : 0;
	if (!v->ns || !v->name || !v->uid || ktime_parse_rfc3339(jstr(m, "creationTimestamp"), &v->created) < 0)
		return -1;
	v->spec = jobj(obj, "spec");
	v->status = jobj(obj, "status");
	v->owner = jstr(v->spec, "workspaceOwner");
	v->key = jstr(v->spec, "idempotencyKey");
	v->now = time(NULL);
	char msg[256];
	sbx_lifecycle_parse(v->spec, &v->lc, msg, sizeof msg); /* an invalid one is refused by validation */
	return 0;
}

static int terminal_rejection(const struct sbx_view *v)
{
	const char *phase = jstr(v->status, "phase");
	const cJSON *og = jobj(v->status, "observedGeneration");
	const char *reason = jstr(sbx_status_condition(v->status, "Bound"), "reason");
	return phase && !strcmp(phase, "Rejected") && cJSON_IsNumber(og) &&
	       (long long)og->valuedouble == v->generation && reason &&
	       (!strcmp(reason, "IdempotencyKeyConflict") || !strcmp(reason, "InvalidSpec") ||
		!strcmp(reason, "QuotaExceeded"));
}

int sbx_reconcile(struct sbx_controller *c, const char *key)
{
	return sbx_reconcile_ex(c, key, NULL);
}

int sbx_reconcile_ex(struct sbx_controller *c, const char *key, struct sbx_reconcile_result *res)
{
	if (res)
		*res = (struct sbx_reconcile_result){ 0 };
	const char *slash = strchr(key, '/');
	if (!slash)
		return 0;
	char *ns = xstrndup(key, (size_t)(slash - key));
	cJSON *obj = informer_get(c->sandboxes, ns, slash + 1);
	free(ns);
	if (!obj)
		return 0; /* deleted: the garbage collector takes its pod */
	obs_metric_add(sbx_m.reconciles, NULL, 1);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct sbx_view v;
	int r = 0;
	if (view_init(&v, obj) < 0)
		goto out;
	if (sbx_written_lagging(c->written, v.uid, meta_str(obj, "resourceVersion"))) {
		r = WRITTEN_RECHECK_MS; /* our own write's event requeues it sooner */
		goto out;
	}
	/* Being deleted is not active (contract section 5a): the garbage
	 * collector takes the pod only once v is gone, which a tenant's
	 * finalizer may put off for ever, so v lets go of it now. */
	if (meta_str(obj, "deletionTimestamp")) {
		r = sbx_lc_terminating(c, &v);
		goto out;
	}
	char msg[512];
	const cJSON *oversized = jobj(obj, SBX_TRIM_OVERSIZED);
	if (!cJSON_IsObject(v.spec) || sbx_spec_validate(v.spec, msg, sizeof msg) < 0) {
		if (cJSON_IsNumber(oversized))
			snprintf(msg, sizeof msg, "spec is about %.0f bytes; this controller accepts at most %d",
				 oversized->valuedouble, SBX_SPEC_KEEP_MAX);
		else if (!cJSON_IsObject(v.spec))
			snprintf(msg, sizeof msg, "spec is missing");
		r = sbx_rc_report_unbound(c, &v, "Rejected", "InvalidSpec", msg, "InvalidSpec");
		goto out;
	}
	if (sbx_scope_compute(v.ns, v.uid, v.spec, &v.scope, msg, sizeof msg) < 0) {
		r = sbx_rc_report_unbound(c, &v, "Rejected", "InvalidSpec", msg, "InvalidSpec");
		goto out;
	}
	const char *bound_digest = jstr(v.status, "scopeDigest"), *phase = jstr(v.status, "phase");
	int bound = jstr(v.status, "podName") && jstr(v.status, "podUID") && jstr(v.status, "binding") &&
		    bound_digest && !strcmp(bound_digest, v.scope.digest);
	/* Lifecycle first (contract section 5a): Expired is final, a suspended
	 * Sandbox holds no pod, a resumed one is authorized anew. */
	if ((phase && !strcmp(phase, "Expired")) || sbx_lifecycle_expired(&v.lc, v.now)) {
		r = sbx_lc_expire(c, &v);
		goto out;
	}
	if (v.lc.suspend) {
		r = sbx_lc_suspend(c, &v, bound);
		goto timer;
	}
	if (bound) {
		r = phase && !strcmp(phase, "Suspended") ? sbx_lc_resume(c, &v) : follow_bound(c, &v);
		goto timer;
	}
	if (terminal_rejection(&v))
		goto out;
	const char *rc_name;
	if (sbx_pod_runtime_class(v.spec, c->cfg, &rc_name, msg, sizeof msg) < 0) {
		r = sbx_rc_report_unbound(c, &v, "Rejected", "InvalidSpec", msg, "InvalidSpec");
		goto out;
	}
	/* Never mount a workspace whose authorization cannot be verified. */
	if (!sbx_lc_owner_authorized(c, &v, 1, &r) || !sbx_lc_network_authorized(c, &v, 1, &r))
		goto out;
	if (!sbx_strset_add(c->inflight, v.scope.digest)) {
		r = REQUEUE_BUSY_MS;
		goto out;
	}
	r = claim(c, &v);
	sbx_strset_del(c->inflight, v.scope.digest);
timer:
	r = shutdown_timer(&v, r);
	if (res) {
		res->retry_after_ms = v.retry_after_ms;
		res->timer = v.timer;
	}
out:
	if (r < 0) {
		obs_metric_add(sbx_m.errors, NULL, 1);
		obs_metric_add(sbx_m.cr_errors, sbx_ctl_label, 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	obs_metric_observe(sbx_m.cr_time, sbx_ctl_label,
			   (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	const char *result[] = { "sandbox", r < 0 ? "error" : r > 0 ? "requeue_after"
								    : "success" };
	obs_metric_add(sbx_m.cr_total, result, 1);
	cJSON_Delete(obj);
	return r;
}
