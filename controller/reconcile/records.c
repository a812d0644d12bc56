/* Claim records on the API server (records.h). */
#include "reconcile/records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/jsonget.h"
#include "base/ktime.h"
#include "kube/informer.h"
#include "obs/log.h"
#include "reconcile/examine.h"
#include "reconcile/state.h"
#include "reconcile/writes.h"
#include "sandbox/podbuild.h"

void sbx_rec_path(char *out, size_t n, const char *ns, const char *name)
{
	snprintf(out, n, "/apis/" SBX_API "/namespaces/%s/" SBX_CLAIM_PLURAL "%s%s", ns, name ? "/" : "",
		 name ? name : "");
}

cJSON *sbx_rec_cached(struct sbx_controller *c, const struct sbx_view *v)
{
	cJSON *out = cJSON_CreateArray();
	if (!c->claims)
		return out;
	cJSON *all = informer_list_by_index(c->claims, v->scope.digest);
	cJSON *o;
	cJSON_ArrayForEach(o, all)
	{
		struct sbx_claimrec rec;
		char why[128];
		const char *ns = meta_str(o, "namespace");
		if (ns && !strcmp(ns, v->ns) && sbx_claimrec_parse(o, v->ns, c->seal_keys, &rec, why, sizeof why) == 0 &&
		    !strcmp(rec.digest, v->scope.digest) && rec.state != SBX_CLAIM_SLOT)
			cJSON_AddItemToArray(out, cJSON_Duplicate(o, 1));
	}
	cJSON_Delete(all);
	return out;
}

/* The live claim record name of v's digest into *out (caller frees; NULL:
 * none, or one that does not verify, which counts for nothing). 0, 1 when
 * one stands that does not verify, or -1 when it cannot be read. */
int sbx_rec_live(struct sbx_controller *c, const struct sbx_view *v, const char *name, cJSON **out)
{
	char path[600], why[128];
	struct kube_error err;
	struct sbx_claimrec rec;
	*out = NULL;
	sbx_rec_path(path, sizeof path, v->ns, name);
	enum kube_err e = kube_request(c->kc, "GET", path, NULL, NULL, NULL, out, &err);
	if (e == KUBE_ERR_NOT_FOUND)
		return 0;
	if (e != KUBE_OK)
		return -1; /* never claim on a guess */
	if (sbx_claimrec_parse(*out, v->ns, c->seal_keys, &rec, why, sizeof why) < 0 ||
	    strcmp(rec.digest, v->scope.digest)) {
		cJSON_Delete(*out);
		*out = NULL;
		return 1;
	}
	return 0;
}

/* Writes rec, owned by owners (ownerReferences; NULL: none): created, or
 * the stored one replaced when it says otherwise (or is not ours). Returns
 * 0, a delay (someone wrote it meanwhile), or -1. */
static int put_record(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_claimrec *rec,
		      const cJSON *owners)
{
	cJSON *obj = sbx_claimrec_build(rec, v->ns, c->seal_keys, owners);
	if (!obj)
		return -1;
	char path[600], *body = cJSON_PrintUnformatted(obj);
	sbx_rec_path(path, sizeof path, v->ns, NULL);
	struct kube_error err;
	enum kube_err e = kube_request(c->kc, "POST", path, NULL, body, NULL, NULL, &err);
	free(body);
	int r = 0;
	if (e == KUBE_ERR_ALREADY_EXISTS) {
		cJSON *cur = NULL;
		sbx_rec_path(path, sizeof path, v->ns, rec->name);
		e = kube_request(c->kc, "GET", path, NULL, NULL, NULL, &cur, &err);
		struct sbx_claimrec old;
		char why[128];
		if (e == KUBE_ERR_NOT_FOUND) {
			r = REQUEUE_BUSY_MS; /* just deleted: write it again soon */
		} else if (e != KUBE_OK) {
			r = -1;
		} else if (sbx_claimrec_parse(cur, v->ns, c->seal_keys, &old, why, sizeof why) == 0 && old.state == rec->state &&
			   !strcmp(old.pod_name, rec->pod_name) && !strcmp(old.claimed_at, rec->claimed_at) &&
			   !strcmp(old.pod_uid, rec->pod_uid) &&
			   cJSON_GetArraySize(jobj(jobj(cur, "metadata"), "ownerReferences")) ==
			       cJSON_GetArraySize(owners)) {
			r = 0; /* it says so already */
		} else {
			cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion",
						meta_str(cur, "resourceVersion") ? meta_str(cur, "resourceVersion") : "");
			body = cJSON_PrintUnformatted(obj);
			e = kube_request(c->kc, "PUT", path, NULL, body, NULL, NULL, &err);
			free(body);
			r = e == KUBE_OK ? 0 : e == KUBE_ERR_CONFLICT || e == KUBE_ERR_NOT_FOUND ? REQUEUE_BUSY_MS
												 : -1;
		}
		cJSON_Delete(cur);
	} else if (e != KUBE_OK) {
		r = -1;
	}
	if (r < 0)
		log_kv(LOG_WARN, "claim record write failed", "sandbox", v->name, "namespace", v->ns, "record", rec->name,
		       "error", err.message);
	cJSON_Delete(obj);
	return r;
}

int sbx_rec_fill(struct sbx_controller *c, const struct sbx_view *v, struct sbx_claimrec *rec, const char *name,
		 const char *claim, const char *pod_name, time_t claimed, const char *sandbox)
{
	snprintf(rec->name, sizeof rec->name, "%s", name);
	snprintf(rec->digest, sizeof rec->digest, "%s", v->scope.digest);
	rec->generation = sbx_claim_generation(claim, v->scope.digest);
	snprintf(rec->pod_name, sizeof rec->pod_name, "%s", pod_name);
	ktime_format_rfc3339(claimed, rec->claimed_at);
	ktime_format_rfc3339(claimed + sbx_rc_key_lifetime(c), rec->key_expires_at);
	snprintf(rec->fingerprint, sizeof rec->fingerprint, "%s", v->scope.fingerprint);
	rec->has_owner = v->owner != NULL;
	snprintf(rec->owner, sizeof rec->owner, "%s", v->owner ? v->owner : "");
	snprintf(rec->sandbox, sizeof rec->sandbox, "%s", sandbox);
	ktime_format_rfc3339(v->now, rec->since);
	return rec->generation < 0 ? -1 : 0;
}

int sbx_rec_put_released(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, enum sbx_claim_state state,
			 const char *sandbox, const cJSON *owner_refs)
{
	struct sbx_claimrec rec = { .state = state };
	const char *pod_name = meta_str(pod, "name"), *claimed = annotation(pod, SBX_ANN_CLAIMED_AT);
	const char *claim = sbx_rc_claim_of(pod); /* the record is the generation's, named like its claim */
	time_t t;
	if (!pod_name || !claim || ktime_parse_rfc3339(claimed, &t) < 0 ||
	    sbx_rec_fill(c, v, &rec, claim, claim, pod_name, t, sandbox) < 0)
		return -1;
	snprintf(rec.pod_uid, sizeof rec.pod_uid, "%s", meta_str(pod, "uid") ? meta_str(pod, "uid") : "");
	return put_record(c, v, &rec, state == SBX_CLAIM_EXPIRED ? NULL : owner_refs);
}

int sbx_rec_put_expired(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_claimrec *from,
			const char *sandbox)
{
	struct sbx_claimrec rec = *from;
	rec.state = SBX_CLAIM_EXPIRED;
	snprintf(rec.sandbox, sizeof rec.sandbox, "%s", sandbox);
	ktime_format_rfc3339(v->now, rec.since);
	rec.uid[0] = rec.resource_version[0] = '\0';
	return put_record(c, v, &rec, NULL);
}

/* The Bound record of v's generation `claim` naming pod_name, owned by v. */
static cJSON *bound_record(struct sbx_controller *c, const struct sbx_view *v, const char *claim,
			   const char *pod_name, const char *claimed_at, const cJSON *owner_refs)
{
	struct sbx_claimrec rec = { .state = SBX_CLAIM_BOUND };
	time_t t;
	if (ktime_parse_rfc3339(claimed_at, &t) < 0 || sbx_rec_fill(c, v, &rec, claim, claim, pod_name, t, v->name) < 0)
		return NULL;
	cJSON *refs = NULL;
	if (!owner_refs) {
		refs = cJSON_CreateArray();
		cJSON_AddItemToArray(refs, sbx_rc_sandbox_ref(v->name, v->uid));
	}
	cJSON *obj = sbx_claimrec_build(&rec, v->ns, c->seal_keys, owner_refs ? owner_refs : refs);
	cJSON_Delete(refs);
	return obj;
}

/* The ownerReferences of a stored (or trimmed) record, whole again (a new
 * array; caller frees). */
cJSON *sbx_rec_refs(const cJSON *obj)
{
	cJSON *refs = cJSON_CreateArray();
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(jobj(obj, "metadata"), "ownerReferences"))
	{
		const char *name = jstr(ref, "name"), *uid = jstr(ref, "uid"), *kind = jstr(ref, "kind");
		if (!name || !uid || (kind && strcmp(kind, "Sandbox")))
			continue;
		cJSON_AddItemToArray(refs, sbx_rc_sandbox_ref(name, uid));
	}
	return refs;
}

/* Creates v's Bound record of claim naming pod_name, claimed at claimed:
 * KUBE_OK with *rv (32 bytes) its resourceVersion, or what the API said. A
 * lost response is read back: the record that names pod_name and is owned by
 * v is this create. */
enum kube_err sbx_rec_create_bound(struct sbx_controller *c, const struct sbx_view *v, const char *claim,
				   const char *pod_name, const char *claimed, char rv[32])
{
	char path[600];
	cJSON *obj = bound_record(c, v, claim, pod_name, claimed, NULL);
	if (!obj)
		return KUBE_ERR_OTHER;
	char *body = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	sbx_rec_path(path, sizeof path, v->ns, NULL);
	cJSON *resp = NULL;
	struct kube_error err;
	enum kube_err e = kube_request(c->kc, "POST", path, NULL, body, NULL, &resp, &err);
	free(body);
	if (kube_err_retriable(e)) {
		cJSON_Delete(resp);
		resp = NULL;
		sbx_rec_path(path, sizeof path, v->ns, claim);
		if (kube_request(c->kc, "GET", path, NULL, NULL, NULL, &resp, &err) != KUBE_OK) {
			cJSON_Delete(resp);
			return e;
		}
		struct sbx_claimrec rec;
		char why[128];
		const cJSON *ref = cJSON_GetArrayItem(jobj(jobj(resp, "metadata"), "ownerReferences"), 0);
		int mine = sbx_claimrec_parse(resp, v->ns, c->seal_keys, &rec, why, sizeof why) == 0 &&
			   rec.state == SBX_CLAIM_BOUND && !strcmp(rec.pod_name, pod_name) && jstr(ref, "uid") &&
			   !strcmp(jstr(ref, "uid"), v->uid);
		e = mine ? KUBE_OK : KUBE_ERR_ALREADY_EXISTS;
	}
	if (e == KUBE_OK)
		snprintf(rv, 32, "%s", meta_str(resp, "resourceVersion") ? meta_str(resp, "resourceVersion") : "");
	else if (e != KUBE_ERR_ALREADY_EXISTS)
		log_kv(LOG_WARN, "claim record create failed", "sandbox", v->name, "namespace", v->ns, "record", claim,
		       "error", err.message);
	cJSON_Delete(resp);
	return e;
}

/* Points the Bound record of claim (claimed at claimed, owned by refs; NULL:
 * v) at pod_name: a PUT guarded by *rv, which gets the new version. KUBE_OK,
 * KUBE_ERR_CONFLICT / NOT_FOUND when someone else changed it, or an error. */
enum kube_err sbx_rec_repoint(struct sbx_controller *c, const struct sbx_view *v, const char *claim,
			      const char *pod_name, const char *claimed, const cJSON *refs, char rv[32])
{
	char path[600];
	cJSON *rec = bound_record(c, v, claim, pod_name, claimed, refs);
	if (!rec)
		return KUBE_ERR_OTHER;
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(rec, "metadata"), "resourceVersion", rv);
	char *body = cJSON_PrintUnformatted(rec);
	cJSON_Delete(rec);
	sbx_rec_path(path, sizeof path, v->ns, claim);
	cJSON *resp = NULL;
	struct kube_error err;
	enum kube_err e = kube_request(c->kc, "PUT", path, NULL, body, NULL, &resp, &err);
	free(body);
	if (e == KUBE_OK)
		snprintf(rv, 32, "%s", meta_str(resp, "resourceVersion") ? meta_str(resp, "resourceVersion") : "");
	else if (e != KUBE_ERR_CONFLICT && e != KUBE_ERR_NOT_FOUND)
		log_kv(LOG_WARN, "claim record update failed", "sandbox", v->name, "namespace", v->ns, "record", claim,
		       "error", err.message);
	cJSON_Delete(resp);
	return e;
}

/* 1 when the Sandbox cache holds a Sandbox of namespace ns and scope digest
 * that was created before until and has not been judged yet (no phase, or
 * Pending): the record may still be its stored outcome. -1 when the cache
 * cannot tell now. */
static int unjudged_before(struct sbx_controller *c, const char *ns, const char *digest, time_t until)
{
	if (!c->sandboxes || !informer_wait_synced(c->sandboxes, 0))
		return -1;
	cJSON *list = informer_list_by_index(c->sandboxes, digest);
	const cJSON *o;
	int found = 0;
	cJSON_ArrayForEach(o, list)
	{
		const char *phase = jstr(jobj(o, "status"), "phase"), *sns = meta_str(o, "namespace");
		time_t created;
		if (sns && !strcmp(sns, ns) && ktime_parse_rfc3339(meta_str(o, "creationTimestamp"), &created) == 0 &&
		    created < until && (!phase || !strcmp(phase, "Pending")))
			found = 1;
	}
	cJSON_Delete(list);
	return found;
}

int sbx_rec_collect(struct sbx_controller *c, const char *ns, const char *name)
{
	cJSON *o = c->claims ? informer_get(c->claims, ns, name) : NULL;
	struct sbx_claimrec rec;
	char why[128];
	int r = 0;
	time_t until;
	if (o && sbx_claimrec_parse(o, ns, c->seal_keys, &rec, why, sizeof why) == 0 &&
	    (rec.state == SBX_CLAIM_EXPIRED || rec.state == SBX_CLAIM_REJECTED) &&
	    ktime_parse_rfc3339(rec.key_expires_at, &until) == 0) {
		/* The outcome stands for every Sandbox created before the key's
		 * end (by the API server's clock), whenever it is reconciled:
		 * kept for as long as a cache may lag behind, and while one such
		 * Sandbox has not been judged. */
		time_t now = time(NULL), keep = until + SBX_REC_COLLECT_GRACE_S;
		int waiting = keep > now ? 0 : unjudged_before(c, ns, rec.digest, until);
		if (keep > now) {
			r = keep - now > 86400 * 7 ? 86400 * 7 * 1000 : (int)(keep - now) * 1000 + 100;
		} else if (waiting) {
			r = REQUEUE_WAIT_MS * 5; /* it is judged, or the cache catches up */
		} else {
			char path[600];
			sbx_rec_path(path, sizeof path, ns, name);
			r = sbx_rc_delete(c, path, rec.uid, NULL);
			if (r == 0)
				log_kv(LOG_INFO, "claim record collected", "namespace", ns, "record", name);
		}
	}
	cJSON_Delete(o);
	return r;
}
