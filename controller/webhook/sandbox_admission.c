#include "webhook/sandbox_admission.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "base/ktime.h"
#include "sandbox/authz.h"
#include "sandbox/claimrec.h"
#include "sandbox/netprofile.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"

#define RESERVED_PREFIX "sandbox.dev/"
/* The subject a pool's records name: SBX_POOL_AUTHZ_PREFIX and the pool's
 * whole name (up to 253 characters, the API's limit), as the controller
 * verifies it (reconcile/pool.c, sandbox/poolspec.c, which allow 300). */
#define POOL_SUBJECT_MAX (sizeof SBX_POOL_AUTHZ_PREFIX + 253)

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *jobj(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

int wh_reserved_key(const char *key)
{
	return key && !strncmp(key, RESERVED_PREFIX, sizeof RESERVED_PREFIX - 1);
}

/* The first reserved key among the object's labels and annotations, or NULL;
 * *where says which map it is in. */
static const char *first_reserved(const cJSON *obj, const char **where)
{
	static const char *const maps[] = { "labels", "annotations" };
	for (size_t i = 0; i < 2; i++) {
		const cJSON *kv;
		cJSON_ArrayForEach(kv, jobj(jobj(obj, "metadata"), maps[i]))
		{
			if (wh_reserved_key(kv->string)) {
				*where = maps[i];
				return kv->string;
			}
		}
	}
	return NULL;
}

/* Counts reserved entries in a map other than the allowed ones. */
static const char *unexpected_reserved(const cJSON *map, const char *const *allowed)
{
	const cJSON *kv;
	cJSON_ArrayForEach(kv, map)
	{
		if (!wh_reserved_key(kv->string))
			continue;
		const char *const *a = allowed;
		while (*a && strcmp(*a, kv->string))
			a++;
		if (!*a)
			return kv->string;
	}
	return NULL;
}

/* 1 when the reserved entries of map m in a and b are the same, the keys in
 * skip (NULL-terminated, NULL ok) aside. */
static int reserved_same(const cJSON *a, const cJSON *b, const char *m, const char *const *skip)
{
	const cJSON *ma = jobj(jobj(a, "metadata"), m), *mb = jobj(jobj(b, "metadata"), m);
	for (int pass = 0; pass < 2; pass++) {
		const cJSON *kv;
		cJSON_ArrayForEach(kv, (pass ? mb : ma))
		{
			if (!wh_reserved_key(kv->string))
				continue;
			const char *const *k = skip;
			while (k && *k && strcmp(*k, kv->string))
				k++;
			if (k && *k)
				continue;
			const char *x = jstr(pass ? ma : mb, kv->string);
			if (!cJSON_IsString(kv) || !x || strcmp(x, kv->valuestring))
				return 0;
		}
	}
	return 1;
}

/* What the record of a creation names: its namespace, name (name, when the
 * webhook picked it), owner, spec fingerprint, requester, run 1. */
static struct sbx_authz_subject request_subject(const struct wh_review *r, const char *name, const char *owner,
						const char *fingerprint)
{
	struct sbx_authz_subject s = {
		.ns = r->ns,
		.name = name ? name : jstr(jobj(r->object, "metadata"), "name"),
		.owner = owner,
		.fingerprint = fingerprint,
		.username = r->username,
		.run = 1,
	};
	return s;
}

/* The name the API server would give a generateName create: the prefix cut
 * to 58 characters and five of its random characters (consonants and digits
 * that spell no words), into out (64 bytes). Returns 0, or -1 when there is
 * no randomness. */
static int generated_name(const char *prefix, char out[64])
{
	static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
	unsigned char rnd[5];
	if (RAND_bytes(rnd, sizeof rnd) != 1)
		return -1;
	size_t n = strlen(prefix) > 58 ? 58 : strlen(prefix);
	memcpy(out, prefix, n);
	for (size_t i = 0; i < sizeof rnd; i++)
		out[n + i] = alphabet[rnd[i] % (sizeof alphabet - 1)];
	out[n + sizeof rnd] = '\0';
	return 0;
}

static int is_sandbox_create(const struct wh_review *r)
{
	return r->object && r->kind && !strcmp(r->kind, "Sandbox") && !strcmp(r->operation, "CREATE");
}

/* The scope of the request's spec (fingerprint always; the digest only
 * means something when the key is present: without one the uid, not known
 * yet, takes its place). Returns 0 or -1 with a message. */
static int request_scope(const struct wh_review *r, const cJSON *spec, struct sbx_scope *sc, char *msg,
			 size_t msglen)
{
	if (!cJSON_IsObject(spec)) {
		snprintf(msg, msglen, "spec is required");
		return -1;
	}
	if (sbx_spec_validate(spec, msg, msglen) < 0)
		return -1;
	const char *uid = jstr(jobj(r->object, "metadata"), "uid");
	return sbx_scope_compute(r->ns, uid && *uid ? uid : "uid-not-assigned-yet", spec, sc, msg, msglen);
}

/* Adds JSON Patch ops setting map[key] = value, creating the map if absent. */
static void patch_set(cJSON *patch, const cJSON *obj, const char *map, const char *key, const char *value,
		      cJSON **created_map)
{
	if (!jobj(jobj(obj, "metadata"), map)) {
		if (!*created_map) {
			cJSON *op = cJSON_CreateObject();
			cJSON_AddStringToObject(op, "op", "add");
			char path[64];
			snprintf(path, sizeof path, "/metadata/%s", map);
			cJSON_AddStringToObject(op, "path", path);
			*created_map = cJSON_AddObjectToObject(op, "value");
			cJSON_AddItemToArray(patch, op);
		}
		cJSON_AddStringToObject(*created_map, key, value);
		return;
	}
	char esc[128], path[192];
	wh_json_pointer_escape(key, esc, sizeof esc);
	snprintf(path, sizeof path, "/metadata/%s/%s", map, esc);
	cJSON *op = cJSON_CreateObject();
	cJSON_AddStringToObject(op, "op", "add");
	cJSON_AddStringToObject(op, "path", path);
	cJSON_AddStringToObject(op, "value", value);
	cJSON_AddItemToArray(patch, op);
}

/* Adds the JSON Patch op naming the object (a generateName create). */
static void patch_name(cJSON *patch, const char *name)
{
	cJSON *op = cJSON_CreateObject();
	cJSON_AddStringToObject(op, "op", "add");
	cJSON_AddStringToObject(op, "path", "/metadata/name");
	cJSON_AddStringToObject(op, "value", name);
	cJSON_AddItemToArray(patch, op);
}

/* The reserved annotations a resume stamps anew: the owner's record, or for
 * a Sandbox without one (no owner, or owners not asked about) that names
 * allow profiles, the profiles' record (mutate_resume). */
static const char *const RESUME_KEYS[] = { SBX_ANN_OWNER_AUTHZ, SBX_ANN_RESUMED_BY, SBX_ANN_RESUMED_IDENTITY, NULL };
static const char *const NET_RESUME_KEYS[] = { SBX_ANN_NET_AUTHZ, SBX_ANN_RESUMED_BY, SBX_ANN_RESUMED_IDENTITY, NULL };

/* 1 when an UPDATE resumes the Sandbox: spec.lifecycle.suspend was true and
 * is not any more. */
static int is_resume(const struct wh_review *r)
{
	struct sbx_lifecycle was, now;
	char msg[256];
	return sbx_lifecycle_parse(jobj(r->old_object, "spec"), &was, msg, sizeof msg) == 0 && was.suspend &&
	       sbx_lifecycle_parse(jobj(r->object, "spec"), &now, msg, sizeof msg) == 0 && !now.suspend;
}

/* The map an op already in patch adds whole ("/metadata/<map>", the
 * request having none), or NULL. Borrowed from patch. */
static cJSON *patch_created_map(cJSON *patch, const char *map)
{
	char path[64];
	snprintf(path, sizeof path, "/metadata/%s", map);
	cJSON *op;
	cJSON_ArrayForEach(op, patch)
	{
		const char *at = jstr(op, "path");
		if (at && !strcmp(at, path))
			return cJSON_GetObjectItemCaseSensitive(op, "value");
	}
	return NULL;
}

/* On UPDATE, puts back reserved entries the request dropped (but those in
 * skip). Server-side apply attributes the webhook's stamps to the creating
 * field manager, so a second apply of the same manifest omits them; that is
 * no attempt to change them. Changed or added reserved entries are left for
 * validation to refuse. Entries go into a map an earlier op of v->patch
 * creates (a resume's stamps, a pool's new record on a request without
 * annotations): a second add of the whole map would replace the first. */
static void restore_reserved(const struct wh_review *r, struct wh_verdict *v, const char *const *skip)
{
	static const char *const maps[] = { "labels", "annotations" };
	for (size_t i = 0; i < 2; i++) {
		cJSON *created = v->patch ? patch_created_map(v->patch, maps[i]) : NULL;
		const cJSON *now_map = jobj(jobj(r->object, "metadata"), maps[i]);
		const cJSON *kv;
		cJSON_ArrayForEach(kv, jobj(jobj(r->old_object, "metadata"), maps[i]))
		{
			if (!wh_reserved_key(kv->string) || !cJSON_IsString(kv) || jobj(now_map, kv->string))
				continue;
			const char *const *k = skip;
			while (k && *k && strcmp(*k, kv->string))
				k++;
			if (k && *k)
				continue;
			if (!v->patch)
				v->patch = cJSON_CreateArray();
			patch_set(v->patch, r->object, maps[i], kv->string, kv->valuestring, &created);
		}
	}
	if (v->patch)
		v->outcome = "mutated";
}

int wh_may_use_owner(const struct wh_sandbox_policy *p, const cJSON *user_info, const char *ns, const char *owner,
		     char *why, size_t whylen)
{
	if (p->ask_every_name_first && p->may_use_owner(p->ctx, user_info, ns, NULL, why, whylen) == 1)
		return 1;
	return p->may_use_owner(p->ctx, user_info, ns, owner, why, whylen);
}

/* As wh_may_use_owner, for the cluster-scoped allow profile: 0 when the
 * policy has no way to ask. */
static int may_use_profile(const struct wh_sandbox_policy *p, const cJSON *user_info, const char *profile, char *why,
			   size_t whylen)
{
	if (!p->may_use_profile)
		return 0;
	if (p->ask_every_name_first && p->may_use_profile(p->ctx, user_info, NULL, why, whylen) == 1)
		return 1;
	return p->may_use_profile(p->ctx, user_info, profile, why, whylen);
}

/* Checks that the requester may use the owner (SubjectAccessReview, the
 * identity capped first). Returns 1, or 0 with v filled as the refusal; what
 * ("" or " to resume this Sandbox") says for what in the message. */
static int owner_allowed(const struct wh_sandbox_policy *p, const struct wh_review *r, const char *owner,
			 const char *what, struct wh_verdict *v)
{
	char why[256] = "", uq[200];
	if (wh_identity_check(r->user_info, why, sizeof why) < 0) {
		wh_verdict_deny(v, 403, "Forbidden", "cannot check whether this identity may use workspace owner \"%s\": %s",
				owner, why);
		return 0;
	}
	int ok = wh_may_use_owner(p, r->user_info, r->ns, owner, why, sizeof why);
	wh_quote(r->username, uq, sizeof uq);
	if (ok < 0) {
		wh_verdict_deny(v, 500, "InternalError", "cannot check whether %s may use workspace owner \"%s\": %s", uq,
				owner, why);
		return 0;
	}
	if (!ok) {
		wh_verdict_deny(v, 403, "Forbidden",
				"%s may not use workspace owner \"%s\" in namespace %s%s: missing permission \"use\" on "
				"workspaces.sandbox.dev \"%s\" (RBAC: apiGroups [sandbox.dev], resources [workspaces], "
				"resourceNames [%s], verbs [use])%s%s",
				uq, owner, r->ns, what, owner, owner, why[0] ? "; " : "", why);
		return 0;
	}
	return 1;
}

/* The requester's whole identity, recorded with a Sandbox's owner or
 * profiles' authorization: its pod may be made long after admission (a
 * quota wait, a resume's), and the controller then asks again whether this
 * identity may still use them (reconcile/lifecycle.h). Returns a new string
 * (caller frees), or NULL with v filled as the refusal. */
static char *record_identity(const struct wh_review *r, const char *what, struct wh_verdict *v)
{
	char *identity = sbx_authz_identity(r->user_info);
	if (!identity)
		wh_verdict_deny(v, 403, "Forbidden",
				"the identity %s is too large to record for the authorization's later checks "
				"(at most %d bytes of username, uid, groups and extra)",
				what, SBX_AUTHZ_IDENTITY_MAX);
	return identity;
}

/* Checks that the requester may use every profile the spec names (contract
 * section 9) and, with must_exist, that each exists, and writes the owner
 * part of its record, SBX_NETPROFILE_AUTHZ_PREFIX and the sorted names, into
 * subject (size SBX_PROFILES_JOINED_MAX + 32). field names the list in
 * messages ("spec.network.profiles"), what ("" or " for a warm pool") says
 * for what. Returns 1 (also when it names none: then subject is ""), or 0
 * with v filled as the refusal. */
static int profiles_allowed(const struct wh_sandbox_policy *p, const struct wh_review *r, const cJSON *spec,
			    const char *field, const char *what, int must_exist, char *subject, size_t subjectlen,
			    struct wh_verdict *v)
{
	const char *names[SBX_PROFILES_MAX];
	size_t n = 0;
	char msg[256], joined[SBX_PROFILES_JOINED_MAX], hash[17], why[256] = "", uq[200];
	subject[0] = '\0';
	if (sbx_spec_profiles(spec, names, &n, msg, sizeof msg) < 0 || !n)
		return 1; /* none, or left to validation */
	if (sbx_profiles_set(names, n, joined, hash) < 0) {
		wh_verdict_deny(v, 422, "Invalid", "%s: Invalid value", field);
		return 0;
	}
	if (wh_identity_check(r->user_info, why, sizeof why) < 0) {
		wh_verdict_deny(v, 403, "Forbidden", "cannot check whether this identity may use network profile \"%s\": %s",
				names[0], why);
		return 0;
	}
	wh_quote(r->username, uq, sizeof uq);
	/* Whether it may be used first: who may not learns nothing of which
	 * profiles exist. */
	for (size_t i = 0; i < n; i++) {
		int ok = may_use_profile(p, r->user_info, names[i], why, sizeof why);
		if (ok < 0) {
			wh_verdict_deny(v, 500, "InternalError", "cannot check whether %s may use network profile \"%s\": %s",
					uq, names[i], why);
			return 0;
		}
		if (!ok) {
			wh_verdict_deny(v, 403, "Forbidden",
					"%s may not use network profile \"%s\"%s: missing permission \"use\" on "
					"sandboxnetworkprofiles.sandbox.dev \"%s\" (RBAC: apiGroups [sandbox.dev], resources "
					"[sandboxnetworkprofiles], resourceNames [%s], verbs [use])%s%s",
					uq, names[i], what, names[i], names[i], why[0] ? "; " : "", why);
			return 0;
		}
	}
	for (size_t i = 0; must_exist && i < n; i++) {
		int exists = p->profile_exists ? p->profile_exists(p->ctx, names[i]) : -1;
		if (exists < 0) {
			wh_verdict_deny(v, 500, "InternalError",
					"cannot tell whether network profile \"%s\" exists yet; retry", names[i]);
			return 0;
		}
		if (!exists) {
			wh_verdict_deny(v, 403, "Forbidden",
					"%s: network profile \"%s\" does not exist (no SandboxNetworkProfile of that "
					"name; the cluster's operator defines them)",
					field, names[i]);
			return 0;
		}
	}
	snprintf(subject, subjectlen, SBX_NETPROFILE_AUTHZ_PREFIX "%s", joined);
	return 1;
}

/* Whether a resume of spec is recorded in the owner's record (1) or, the
 * owner not being asked about, in the profiles' (0); the controller holds
 * it to the same rule (sandbox/config.h). */
static int resume_owner_recorded(const struct wh_sandbox_policy *p, const cJSON *spec)
{
	return sbx_owner_recorded(sbx_spec_owner(spec), p->owner_authz);
}

/* A resume (contract section 5a) is authorized anew: the resumer must be
 * allowed to use each of the Sandbox's network profiles (whatever the owner
 * mode, as at creation; one deleted since is the controller's to wait for,
 * NetworkProfileNotFound) and the owner. It gets a record for this run, the
 * generation the update makes (the old one + 1, the spec changing), issued
 * to the resumer (sandbox.dev/resumed-by, resumed-identity): the owner's,
 * or for a Sandbox whose owner is not asked about, the profiles' in place
 * of the creation's (so that the controller can tell the webhook saw this
 * run, and ask about the resumer when its pod comes late). */
static void mutate_resume(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now,
			  struct wh_verdict *v)
{
	const cJSON *spec = jobj(r->object, "spec");
	const char *owner = sbx_spec_owner(spec);
	const cJSON *g = jobj(jobj(r->old_object, "metadata"), "generation");
	struct sbx_scope sc;
	char msg[512], netsubject[SBX_PROFILES_JOINED_MAX + 32];
	if (!profiles_allowed(p, r, spec, "spec.network.profiles", " to resume this Sandbox", 0, netsubject,
			      sizeof netsubject, v))
		return;
	int by_owner = resume_owner_recorded(p, spec);
	if ((!by_owner && !netsubject[0]) || !cJSON_IsNumber(g) || request_scope(r, spec, &sc, msg, sizeof msg) < 0)
		return; /* nothing to authorize, or left to validation */
	if (by_owner && !owner_allowed(p, r, owner, " to resume this Sandbox", v))
		return;
	char record[SBX_AUTHZ_MAX], *identity = record_identity(r, "resuming this Sandbox", v);
	if (!identity)
		return;
	struct sbx_authz_subject s = request_subject(r, NULL, by_owner ? owner : netsubject, sc.fingerprint);
	s.run = (long long)g->valuedouble + 1;
	s.identity = identity;
	if (!p->nkeys || sbx_authz_issue(p->keys[0], p->keylens[0], &s, now, record, sizeof record) < 0) {
		free(identity);
		wh_verdict_deny(v, 500, "InternalError", "cannot record the %s authorization of the resume",
				by_owner ? "owner" : "network profiles'");
		return;
	}
	v->patch = cJSON_CreateArray();
	cJSON *ann = NULL;
	patch_set(v->patch, r->object, "annotations", by_owner ? SBX_ANN_OWNER_AUTHZ : SBX_ANN_NET_AUTHZ, record, &ann);
	patch_set(v->patch, r->object, "annotations", SBX_ANN_RESUMED_BY, r->username, &ann);
	patch_set(v->patch, r->object, "annotations", SBX_ANN_RESUMED_IDENTITY, identity, &ann);
	free(identity);
	v->outcome = "mutated";
}

/* ---- SandboxWarmPool (contract section 8): its owner is authorized like
 * a Sandbox's, by whoever creates the pool or changes its template or
 * owner; the record names "pool:<name>" and the template's fingerprint. ---- */

static int same_opt(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static int is_pool(const struct wh_review *r)
{
	return r->object && r->kind && !strcmp(r->kind, SBX_POOL_KIND) && r->ns;
}

/* The template fingerprint and owner of a pool object: 0, or -1 with msg
 * when the template is missing or invalid. */
static int pool_intent(const cJSON *pool, char fp[65], const char **owner, char *msg, size_t msglen)
{
	cJSON *spec = sbx_pool_spec(pool);
	int rc = -1;
	*owner = jstr(jobj(pool, "spec"), "workspaceOwner");
	if (!spec)
		snprintf(msg, msglen, "spec.template is required");
	else if (sbx_spec_validate(spec, msg, msglen) == 0 && sbx_template_fingerprint(spec, fp) == 0)
		rc = 0;
	cJSON_Delete(spec);
	return rc;
}

/* 1 when an UPDATE changes what the pool's pods mount or run: its template
 * or owner (replicas alone need no authorization). */
static int pool_intent_changed(const struct wh_review *r)
{
	char a[65] = "", b[65] = "", msg[256];
	const char *oa, *ob;
	int ra = pool_intent(r->object, a, &oa, msg, sizeof msg), rb = pool_intent(r->old_object, b, &ob, msg, sizeof msg);
	return ra != rb || strcmp(a, b) || !same_opt(oa, ob);
}

/* The reserved annotations a pool's creation or new template carries: the
 * requester, the records (owner, profiles) and the identity they name. */
static const char *const POOL_AUTHZ_KEYS[] = { SBX_ANN_OWNER_AUTHZ, SBX_ANN_REQUESTED_BY, SBX_ANN_AUTHZ_IDENTITY,
					       SBX_ANN_NET_AUTHZ, NULL };

/* The template of a pool: the spec-shaped object whose network the pool's
 * pods get (borrowed; NULL when absent). */
static const cJSON *pool_template(const cJSON *pool)
{
	return jobj(jobj(pool, "spec"), "template");
}

/* Writes the subject of pool's records (sandbox/authz.h) into s: the
 * namespace, "pool:<name>" (into name, POOL_SUBJECT_MAX bytes), who (the owner, or the
 * profiles' SBX_NETPROFILE_AUTHZ_PREFIX subject), the template fingerprint,
 * the requester and identity. */
static void pool_subject(const struct wh_review *r, const char *pool_name, const char *who, const char *fp,
			 const char *identity, char name[POOL_SUBJECT_MAX], struct sbx_authz_subject *s)
{
	snprintf(name, POOL_SUBJECT_MAX, SBX_POOL_AUTHZ_PREFIX "%s", pool_name ? pool_name : "");
	*s = request_subject(r, name, who, fp);
	s->identity = identity;
}

static void pool_mutate(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now,
			struct wh_verdict *v)
{
	int update = !strcmp(r->operation, "UPDATE");
	if (update && (!r->old_object || !pool_intent_changed(r))) {
		if (r->old_object)
			restore_reserved(r, v, NULL);
		return;
	}
	if (!update && strcmp(r->operation, "CREATE"))
		return;
	char q[200], msg[512], fp[65];
	const char *where = NULL, *res = update ? NULL : first_reserved(r->object, &where), *owner;
	if (res) {
		wh_quote(res, q, sizeof q);
		wh_verdict_deny(v, 403, "Forbidden",
				"metadata.%s[\"%s\"]: labels and annotations under sandbox.dev/ are reserved for "
				"sandbox-controller; remove it",
				where, q);
		return;
	}
	if (pool_intent(r->object, fp, &owner, msg, sizeof msg) < 0)
		return; /* left to validation, which names the field */
	const cJSON *g = jobj(jobj(r->old_object, "metadata"), "generation");
	if (update && !cJSON_IsNumber(g))
		return;
	const char *what = update ? " for this pool's warm pods" : " for a warm pool";
	int authz = owner && p->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW;
	if (authz && !owner_allowed(p, r, owner, what, v))
		return;
	/* The profiles its template names: `use` on each, as for a Sandbox,
	 * whatever the owner mode (contract section 9). */
	char netsubject[SBX_PROFILES_JOINED_MAX + 32];
	if (!profiles_allowed(p, r, pool_template(r->object), "spec.template.network.profiles", what, 1, netsubject,
			      sizeof netsubject, v))
		return;
	int net = netsubject[0] != '\0';
	const cJSON *meta = jobj(r->object, "metadata");
	const char *name = jstr(meta, "name"), *gen = jstr(meta, "generateName");
	char picked[64] = "", subject[POOL_SUBJECT_MAX], record[SBX_AUTHZ_MAX] = "", netrecord[SBX_AUTHZ_MAX] = "";
	if ((authz || net) && !update && (!name || !*name)) {
		if (!gen || !*gen || generated_name(gen, picked) < 0) {
			wh_verdict_deny(v, 500, "InternalError", "cannot name the pool its authorization is for");
			return;
		}
		name = picked;
	}
	/* The pool's warm pods are made and bound for as long as it stands,
	 * each only while this identity may still use the owner: the whole
	 * identity is recorded for the controller to ask about (issue 23). */
	char *identity = NULL;
	if (authz || net) {
		identity = sbx_authz_identity(r->user_info);
		if (!identity) {
			wh_verdict_deny(v, 403, "Forbidden",
					"the identity creating or changing this pool is too large to record for its warm "
					"pods' later checks (at most %d bytes of username, uid, groups and extra)",
					SBX_AUTHZ_IDENTITY_MAX);
			return;
		}
	}
	struct sbx_authz_subject s;
	long long run = update ? (long long)g->valuedouble + 1 : 1;
	if (authz) {
		pool_subject(r, name, owner, fp, identity, subject, &s);
		s.run = run;
		if (!p->nkeys || sbx_authz_issue(p->keys[0], p->keylens[0], &s, now, record, sizeof record) < 0) {
			free(identity);
			wh_verdict_deny(v, 500, "InternalError", "cannot record the pool's owner authorization");
			return;
		}
	}
	if (net) {
		pool_subject(r, name, netsubject, fp, identity, subject, &s);
		s.run = run;
		if (!p->nkeys || sbx_authz_issue(p->keys[0], p->keylens[0], &s, now, netrecord, sizeof netrecord) < 0) {
			free(identity);
			wh_verdict_deny(v, 500, "InternalError",
					"cannot record the pool's authorization to use its network profiles");
			return;
		}
	}
	v->patch = cJSON_CreateArray();
	if (picked[0])
		patch_name(v->patch, picked);
	cJSON *ann = NULL;
	patch_set(v->patch, r->object, "annotations", SBX_ANN_REQUESTED_BY, r->username, &ann);
	if (authz)
		patch_set(v->patch, r->object, "annotations", SBX_ANN_OWNER_AUTHZ, record, &ann);
	if (net)
		patch_set(v->patch, r->object, "annotations", SBX_ANN_NET_AUTHZ, netrecord, &ann);
	if (authz || net)
		patch_set(v->patch, r->object, "annotations", SBX_ANN_AUTHZ_IDENTITY, identity, &ann);
	free(identity);
	v->outcome = "mutated";
	if (update)
		restore_reserved(r, v, POOL_AUTHZ_KEYS);
}

/* 1 when the identity a record covers (has_identity: a v3 record's,
 * recorded) is this request's, whole; a record of an earlier version names
 * none (a rolling upgrade). */
static int same_identity(const struct wh_review *r, const char *recorded, int has_identity)
{
	if (!has_identity)
		return 1;
	char *mine = sbx_authz_identity(r->user_info);
	int same = mine && recorded && !strcmp(mine, recorded);
	free(mine);
	return same;
}

/* The check of pool record `key` (issued to who) on a creation or a new
 * template: made by the mutating webhook for this request (run 1, or the
 * generation the update makes). */
static enum sbx_authz_check pool_record_check(const struct wh_sandbox_policy *p, const struct wh_review *r,
					      const char *who, const char *fp, const char *key, int update, time_t now)
{
	const cJSON *meta = jobj(r->object, "metadata");
	char subject[POOL_SUBJECT_MAX];
	struct sbx_authz_subject s;
	pool_subject(r, jstr(meta, "name"), who, fp, jstr(jobj(meta, "annotations"), SBX_ANN_AUTHZ_IDENTITY), subject,
		     &s);
	time_t created = now;
	ktime_parse_rfc3339(jstr(meta, "creationTimestamp"), &created);
	struct sbx_authz_info info = { 0 };
	enum sbx_authz_check ac = sbx_authz_verify(p->keys, p->keylens, p->nkeys, &s, update ? 0 : created,
						   jstr(jobj(meta, "annotations"), key), &info);
	const cJSON *g = jobj(meta, "generation");
	if (ac == SBX_AUTHZ_OK && (update ? !cJSON_IsNumber(g) || info.run != (long long)g->valuedouble : info.run != 1))
		ac = SBX_AUTHZ_MISMATCH;
	return ac;
}

static void pool_validate(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now,
			  struct wh_verdict *v)
{
	int update = !strcmp(r->operation, "UPDATE");
	if ((update && !r->old_object) || (!update && strcmp(r->operation, "CREATE")))
		return;
	char msg[512], fp[65], q[200];
	const char *owner;
	if (pool_intent(r->object, fp, &owner, msg, sizeof msg) < 0) {
		wh_verdict_deny(v, 422, "Invalid", "spec.template: Invalid value: %s", msg);
		return;
	}
	int changed = !update || pool_intent_changed(r);
	const cJSON *meta = jobj(r->object, "metadata");
	if (!changed) {
		if (!reserved_same(r->object, r->old_object, "labels", NULL) ||
		    !reserved_same(r->object, r->old_object, "annotations", NULL))
			wh_verdict_deny(v, 403, "Forbidden",
					"labels and annotations under sandbox.dev/ are reserved for sandbox-controller "
					"and cannot be changed");
		return;
	}
	/* A creation or a new template: only the webhook's own stamps, for
	 * this request. */
	const char *bad = unexpected_reserved(jobj(meta, "annotations"), POOL_AUTHZ_KEYS);
	if (!bad)
		bad = unexpected_reserved(jobj(meta, "labels"), (const char *const[]){ NULL });
	const char *by = jstr(jobj(meta, "annotations"), SBX_ANN_REQUESTED_BY);
	if (!bad && by && strcmp(by, r->username))
		bad = SBX_ANN_REQUESTED_BY;
	if (bad) {
		wh_quote(bad, q, sizeof q);
		wh_verdict_deny(v, 403, "Forbidden",
				"\"%s\": labels and annotations under sandbox.dev/ are reserved for sandbox-controller",
				q);
		return;
	}
	int authz = owner && p->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW;
	const char *names[SBX_PROFILES_MAX];
	size_t n = 0;
	char joined[SBX_PROFILES_JOINED_MAX] = "", hash[17], netsubject[SBX_PROFILES_JOINED_MAX + 32];
	if (sbx_spec_profiles(pool_template(r->object), names, &n, msg, sizeof msg) < 0 ||
	    (n && sbx_profiles_set(names, n, joined, hash) < 0)) {
		wh_verdict_deny(v, 422, "Invalid", "spec.template.network.profiles: Invalid value");
		return;
	}
	if (!authz && !n)
		return;
	char what[SBX_PROFILES_JOINED_MAX + 64];
	if (authz)
		snprintf(what, sizeof what, "workspace owner \"%s\"", owner);
	else
		snprintf(what, sizeof what, "network profiles %s", joined);
	/* The identity recorded must be this request's, whole. */
	const char *recorded = jstr(jobj(meta, "annotations"), SBX_ANN_AUTHZ_IDENTITY);
	if (!same_identity(r, recorded, 1)) {
		wh_verdict_deny(v, 403, "Forbidden",
				"%s: the pool does not carry the identity of this request as the mutating webhook "
				"sandbox-controller records it (is it installed, and did a later mutating webhook change "
				"the pool?)",
				what);
		return;
	}
	enum sbx_authz_check ac = authz ? pool_record_check(p, r, owner, fp, SBX_ANN_OWNER_AUTHZ, update, now)
					: SBX_AUTHZ_OK;
	if (ac == SBX_AUTHZ_OK && n) {
		snprintf(netsubject, sizeof netsubject, SBX_NETPROFILE_AUTHZ_PREFIX "%s", joined);
		ac = pool_record_check(p, r, netsubject, fp, SBX_ANN_NET_AUTHZ, update, now);
		if (ac != SBX_AUTHZ_OK)
			snprintf(what, sizeof what, "spec.template.network.profiles: network profiles %s", joined);
	}
	if (ac != SBX_AUTHZ_OK)
		wh_verdict_deny(v, 403, "Forbidden",
				"%s: %s (is the mutating webhook sandbox-controller installed, and did a later mutating "
				"webhook change the pool?)",
				what, sbx_authz_str(ac));
}

void wh_sandbox_mutate(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now,
		       struct wh_verdict *v)
{
	wh_verdict_allow(v);
	if (is_pool(r)) {
		pool_mutate(p, r, now, v);
		return;
	}
	if (r->object && r->old_object && r->kind && !strcmp(r->kind, "Sandbox") && !strcmp(r->operation, "UPDATE")) {
		if (is_resume(r)) {
			mutate_resume(p, r, now, v);
			if (!v->allowed)
				return;
			restore_reserved(r, v,
					 resume_owner_recorded(p, jobj(r->object, "spec")) ? RESUME_KEYS : NET_RESUME_KEYS);
		} else {
			restore_reserved(r, v, NULL);
		}
		return;
	}
	if (!is_sandbox_create(r) || !r->ns)
		return;
	const char *where = NULL, *res = first_reserved(r->object, &where);
	char q[200], msg[512];
	if (res) {
		wh_quote(res, q, sizeof q);
		wh_verdict_deny(v, 403, "Forbidden",
				"metadata.%s[\"%s\"]: labels and annotations under sandbox.dev/ are reserved for "
				"sandbox-controller; remove it",
				where, q);
		return;
	}
	const cJSON *spec = jobj(r->object, "spec");
	struct sbx_scope sc;
	/* Mutating admission runs before the schema: leave a spec the schema
	 * refuses to the schema, whose message names the field (validation
	 * here refuses it too, and the controller never mounts it). */
	if (request_scope(r, spec, &sc, msg, sizeof msg) < 0)
		return;
	const char *owner = sbx_spec_owner(spec), *key = sbx_spec_key(spec);
	/* The identity is the caller's to size: capped before it is forwarded. */
	if (owner && p->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW && !owner_allowed(p, r, owner, "", v))
		return;
	char netsubject[SBX_PROFILES_JOINED_MAX + 32], netrecord[SBX_AUTHZ_MAX] = "";
	if (!profiles_allowed(p, r, spec, "spec.network.profiles", "", 1, netsubject, sizeof netsubject, v))
		return;
	char record[SBX_AUTHZ_MAX] = "", picked[64] = "";
	const cJSON *meta = jobj(r->object, "metadata");
	const char *name = jstr(meta, "name"), *gen = jstr(meta, "generateName");
	if ((owner || netsubject[0]) && (!name || !*name)) {
		/* The server would pick the name after this webhook: pick it here,
		 * so the record names this Sandbox and no other of the prefix. */
		if (!gen || !*gen || generated_name(gen, picked) < 0) {
			wh_verdict_deny(v, 500, "InternalError", "cannot name the Sandbox its owner authorization is for");
			return;
		}
	}
	char *identity = NULL;
	if (((owner && p->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW) || netsubject[0]) &&
	    !(identity = record_identity(r, "creating this Sandbox", v)))
		return;
	if (owner) {
		struct sbx_authz_subject s = request_subject(r, picked[0] ? picked : NULL, owner, sc.fingerprint);
		if (p->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW)
			s.identity = identity;
		if (!p->nkeys || sbx_authz_issue(p->keys[0], p->keylens[0], &s, now, record, sizeof record) < 0) {
			free(identity);
			wh_verdict_deny(v, 500, "InternalError", "cannot record the owner authorization");
			return;
		}
	}
	if (netsubject[0]) {
		struct sbx_authz_subject s = request_subject(r, picked[0] ? picked : NULL, netsubject, sc.fingerprint);
		s.identity = identity;
		if (!p->nkeys || sbx_authz_issue(p->keys[0], p->keylens[0], &s, now, netrecord, sizeof netrecord) < 0) {
			free(identity);
			wh_verdict_deny(v, 500, "InternalError", "cannot record the network profiles' authorization");
			return;
		}
	}
	v->patch = cJSON_CreateArray();
	if (picked[0])
		patch_name(v->patch, picked);
	cJSON *ann = NULL, *lab = NULL;
	patch_set(v->patch, r->object, "annotations", SBX_ANN_REQUESTED_BY, r->username, &ann);
	if (owner)
		patch_set(v->patch, r->object, "annotations", SBX_ANN_OWNER_AUTHZ, record, &ann);
	if (identity)
		patch_set(v->patch, r->object, "annotations", SBX_ANN_AUTHZ_IDENTITY, identity, &ann);
	free(identity);
	if (netsubject[0])
		patch_set(v->patch, r->object, "annotations", SBX_ANN_NET_AUTHZ, netrecord, &ann);
	if (key)
		patch_set(v->patch, r->object, "labels", SBX_LABEL_DIGEST, sc.digest, &lab);
	v->outcome = "mutated";
}

/* 1 when the candidate holds the key against a new Sandbox at `now`: not
 * deleting, not rejected, and either not bound yet (in flight) or bound with
 * a claim younger than the key lifetime. */
static int holds_key(const cJSON *cand, long lifetime, time_t now)
{
	const cJSON *st = jobj(cand, "status");
	const char *phase = jstr(st, "phase");
	if (jstr(jobj(cand, "metadata"), "deletionTimestamp") || (phase && !strcmp(phase, "Rejected")))
		return 0;
	time_t t;
	if (ktime_parse_rfc3339(jstr(st, "claimedAt"), &t) == 0)
		return t + lifetime > now;
	if (ktime_parse_rfc3339(jstr(jobj(cand, "metadata"), "creationTimestamp"), &t) == 0)
		return t + lifetime > now;
	return 1;
}

/* What the controller's claim would find for a new Sandbox's intent (its
 * scope digest and key) in the caches: */
enum intent_found {
	INTENT_NEW,	 /* no generation yet, or only one whose key has ended */
	INTENT_JOINS,	 /* a generation of this spec: the Sandbox joins it */
	INTENT_CONFLICT, /* the key is held with another spec */
};

struct intent {
	enum intent_found found;
	char holder[600]; /* CONFLICT: what holds the key, for the API server */
	char until[32];	  /* CONFLICT: the end of the key's lifetime, or "" */
};

/* The seal keys of p as the claim records' parser takes them: borrowed
 * pointers, never written or freed (the list is never released). */
static void policy_seal_keys(const struct wh_sandbox_policy *p, struct sbx_seal_keys *k)
{
	memset(k, 0, sizeof *k);
	for (size_t i = 0; i < p->nkeys && i < SBX_SEAL_MAX_KEYS; i++) {
		k->key[i] = (unsigned char *)p->keys[i];
		k->len[i] = p->keylens[i];
		k->n = i + 1;
	}
}

/* The newest generation's record of digest in ns among recs (cached claim
 * records of the digest): verified as the controller verifies them (sealed
 * by one of p's keys, of this namespace and digest, not a quota slot), into
 * out. 1 when there is one, else 0. */
static int newest_record(const struct wh_sandbox_policy *p, const cJSON *recs, const char *ns, const char *digest,
			 struct sbx_claimrec *out)
{
	struct sbx_seal_keys keys;
	policy_seal_keys(p, &keys);
	long newest = -1;
	const cJSON *o;
	cJSON_ArrayForEach(o, recs)
	{
		struct sbx_claimrec rec;
		char why[128];
		const char *rns = jstr(jobj(o, "metadata"), "namespace");
		long n = sbx_claim_generation(jstr(jobj(o, "metadata"), "name"), digest);
		if (!rns || strcmp(rns, ns) || n <= newest ||
		    sbx_claimrec_parse(o, ns, &keys, &rec, why, sizeof why) < 0 || strcmp(rec.digest, digest) ||
		    rec.state == SBX_CLAIM_SLOT)
			continue;
		newest = n;
		*out = rec;
	}
	return newest >= 0;
}

/* Finds what holds the request's key in its scope (contract section 5):
 * a live Sandbox that holds it (holds_key), and the record of the key's
 * newest generation (sandbox/claimrec.h), which outlives its Sandboxes
 * (Expired, Rejected) until the key's lifetime ends. The controller's rule
 * (reconcile/lifecycle.c, sbx_lc_claim_record): a record whose claim is
 * older than the key lifetime is a new intent's; one of another spec
 * fingerprint, whatever its state, is a conflict; one of this spec is the
 * generation the Sandbox joins, but a Rejected one (the quota's stored
 * refusal, no generation to join). Without a key every Sandbox is an
 * intent of its own. */
static void find_intent(const struct wh_sandbox_policy *p, const struct wh_review *r, const struct sbx_scope *sc,
			time_t now, struct intent *out)
{
	const cJSON *spec = jobj(r->object, "spec");
	const char *key = sbx_spec_key(spec), *owner = sbx_spec_owner(spec);
	memset(out, 0, sizeof *out);
	out->found = INTENT_NEW;
	if (!key)
		return;
	cJSON *cands = p->by_digest ? p->by_digest(p->ctx, sc->digest) : NULL;
	const cJSON *c;
	const char *name = jstr(jobj(r->object, "metadata"), "name");
	cJSON_ArrayForEach(c, cands)
	{
		const cJSON *cm = jobj(c, "metadata"), *cs = jobj(c, "spec");
		const char *cns = jstr(cm, "namespace"), *cname = jstr(cm, "name");
		/* The label only narrowed the search: re-check every field. */
		if (!cns || strcmp(cns, r->ns) || !cname || (name && !strcmp(cname, name)) ||
		    !same_opt(sbx_spec_owner(cs), owner) || !same_opt(sbx_spec_key(cs), key))
			continue;
		struct sbx_scope other;
		char msg[256];
		if (!cJSON_IsObject(cs) || sbx_scope_compute(cns, "x", cs, &other, msg, sizeof msg) < 0 ||
		    !holds_key(c, p->key_lifetime_s, now))
			continue;
		if (!strcmp(other.fingerprint, sc->fingerprint)) {
			out->found = INTENT_JOINS;
			continue;
		}
		out->found = INTENT_CONFLICT;
		snprintf(out->holder, sizeof out->holder, "Sandbox %s/%s%s%s", cns, cname,
			 owner ? " of workspace owner " : "", owner ? owner : "");
		time_t t;
		if (ktime_parse_rfc3339(jstr(jobj(c, "status"), "keyExpiresAt"), &t) == 0)
			ktime_format_rfc3339(t, out->until);
		cJSON_Delete(cands);
		return;
	}
	cJSON_Delete(cands);
	cJSON *recs = p->records_by_digest ? p->records_by_digest(p->ctx, sc->digest) : NULL;
	struct sbx_claimrec rec;
	time_t claimed;
	if (newest_record(p, recs, r->ns, sc->digest, &rec) && ktime_parse_rfc3339(rec.claimed_at, &claimed) == 0 &&
	    claimed + p->key_lifetime_s > now) {
		if (strcmp(rec.fingerprint, sc->fingerprint)) {
			out->found = INTENT_CONFLICT;
			snprintf(out->holder, sizeof out->holder, "the generation of pod %s (%s, with Sandbox %s)",
				 rec.pod_name, sbx_claim_state_str(rec.state), rec.sandbox[0] ? rec.sandbox : "(none)");
			snprintf(out->until, sizeof out->until, "%s", rec.key_expires_at);
		} else if (rec.state != SBX_CLAIM_REJECTED) {
			out->found = INTENT_JOINS;
		}
	}
	cJSON_Delete(recs);
}

/* Refuses a key held in the same scope with another spec (find_intent's
 * CONFLICT), naming the holder and until when to the API server alone.
 * Returns 1 when it refused. */
static int refuse_key_conflict(const struct wh_review *r, const struct intent *in, struct wh_verdict *v)
{
	if (in->found != INTENT_CONFLICT)
		return 0;
	char kq[300];
	wh_quote(sbx_spec_key(jobj(r->object, "spec")), kq, sizeof kq);
	if (!r->authenticated) {
		/* Whoever reaches the port could ask: tell the holder and its
		 * expiry only to the API server (it tells its caller). */
		wh_verdict_deny(v, 422, "Invalid",
				"spec.idempotencyKey: Invalid value: \"%s\": the key is held by another Sandbox "
				"of this scope with a different spec; use another key, or the same spec to share "
				"its sandbox",
				kq);
		return 1;
	}
	wh_verdict_deny(v, 422, "Invalid",
			"spec.idempotencyKey: Invalid value: \"%s\": the key is held by %s with a different spec%s%s; "
			"use another key, or the same spec to share its sandbox",
			kq, in->holder, in->until[0] ? " until " : "", in->until);
	return 1;
}

/* 1 when a Sandbox of spec takes no pod (and no quota slot) when it is
 * created: suspended, or past its shutdownTime (contract section 5a). */
static int created_idle(const cJSON *spec, time_t now)
{
	struct sbx_lifecycle lc;
	char msg[256];
	return sbx_lifecycle_parse(spec, &lc, msg, sizeof msg) == 0 && (lc.suspend || sbx_lifecycle_expired(&lc, now));
}

/* A resume's stamps: a record of this run (the generation the update made)
 * of subject (the owner, or the profiles' SBX_NETPROFILE_AUTHZ_PREFIX form)
 * in annotation key, issued to the resumer, with resumed-by naming the
 * resumer. 1 when they verify. */
static int resume_record_valid(const struct wh_sandbox_policy *p, const struct wh_review *r, const char *subject,
			       const char *key)
{
	const cJSON *spec = jobj(r->object, "spec"), *meta = jobj(r->object, "metadata");
	const char *by = jstr(jobj(meta, "annotations"), SBX_ANN_RESUMED_BY);
	const cJSON *g = jobj(meta, "generation");
	struct sbx_scope sc;
	char msg[512];
	if (!subject || !by || strcmp(by, r->username) || !cJSON_IsNumber(g) ||
	    request_scope(r, spec, &sc, msg, sizeof msg) < 0)
		return 0;
	struct sbx_authz_subject s = request_subject(r, NULL, subject, sc.fingerprint);
	s.identity = jstr(jobj(meta, "annotations"), SBX_ANN_RESUMED_IDENTITY);
	struct sbx_authz_info info = { 0 };
	return sbx_authz_verify(p->keys, p->keylens, p->nkeys, &s, 0, jstr(jobj(meta, "annotations"), key), &info) ==
		   SBX_AUTHZ_OK &&
	       info.run == (long long)g->valuedouble && same_identity(r, s.identity, info.has_identity);
}

/* The profiles' record subject of spec into subject (size
 * SBX_PROFILES_JOINED_MAX + 32): SBX_NETPROFILE_AUTHZ_PREFIX and the sorted
 * names. Returns 1; 0 when it names none (or the list does not parse: left
 * to validation); -1 when the names make no set. */
static int net_subject(const cJSON *spec, char *subject, size_t subjectlen)
{
	const char *names[SBX_PROFILES_MAX];
	size_t n = 0;
	char msg[256], joined[SBX_PROFILES_JOINED_MAX], hash[17];
	if (sbx_spec_profiles(spec, names, &n, msg, sizeof msg) < 0 || !n)
		return 0;
	if (sbx_profiles_set(names, n, joined, hash) < 0)
		return -1;
	snprintf(subject, subjectlen, SBX_NETPROFILE_AUTHZ_PREFIX "%s", joined);
	return 1;
}

/* CREATE of a Sandbox naming profiles: the mutating webhook's record of
 * their authorization, for this request, this spec and this requester.
 * Returns 1, or 0 with v filled as the refusal. */
static int net_record_valid(const struct wh_sandbox_policy *p, const struct wh_review *r, const cJSON *spec, time_t now,
			    struct wh_verdict *v)
{
	char msg[256], subject[SBX_PROFILES_JOINED_MAX + 32];
	struct sbx_scope sc;
	int named = net_subject(spec, subject, sizeof subject);
	if (!named)
		return 1;
	const cJSON *meta = jobj(r->object, "metadata");
	struct sbx_authz_info info = { 0 };
	enum sbx_authz_check ac = SBX_AUTHZ_MISMATCH;
	if (named > 0 && request_scope(r, spec, &sc, msg, sizeof msg) == 0) {
		struct sbx_authz_subject s = request_subject(r, NULL, subject, sc.fingerprint);
		s.identity = jstr(jobj(meta, "annotations"), SBX_ANN_AUTHZ_IDENTITY);
		time_t created = now;
		ktime_parse_rfc3339(jstr(meta, "creationTimestamp"), &created);
		ac = sbx_authz_verify(p->keys, p->keylens, p->nkeys, &s, created,
				      jstr(jobj(meta, "annotations"), SBX_ANN_NET_AUTHZ), &info);
		if (ac == SBX_AUTHZ_OK && (info.run != 1 || !same_identity(r, s.identity, info.has_identity)))
			ac = SBX_AUTHZ_MISMATCH;
	}
	if (ac == SBX_AUTHZ_OK)
		return 1;
	wh_verdict_deny(v, 403, "Forbidden",
			"spec.network.profiles: %s (is the mutating webhook sandbox-controller installed, and did a "
			"later mutating webhook change the spec?)",
			ac == SBX_AUTHZ_MISSING ? "no record of the authorization to use these network profiles"
						: "the record of the authorization to use these network profiles was not "
						  "issued for this Sandbox");
	return 0;
}

/* UPDATE: reserved metadata unchanged (a resume's own stamps aside), the
 * spec unchanged but for a valid lifecycle, and an expired Sandbox's
 * lifecycle unchanged (Expired is final). */
static void validate_update(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now,
			    struct wh_verdict *v)
{
	const char *const *skip = NULL;
	const cJSON *spec = jobj(r->object, "spec");
	char netsubject[SBX_PROFILES_JOINED_MAX + 32];
	int resume = is_resume(r);
	if (resume && resume_owner_recorded(p, spec)) {
		if (!resume_record_valid(p, r, sbx_spec_owner(spec), SBX_ANN_OWNER_AUTHZ)) {
			wh_verdict_deny(v, 403, "Forbidden",
					"the resume of a Sandbox with a workspace owner needs the owner authorization the "
					"mutating webhook sandbox-controller records for it (is it installed?)");
			return;
		}
		skip = RESUME_KEYS;
	} else if (resume && net_subject(spec, netsubject, sizeof netsubject) > 0) {
		if (!resume_record_valid(p, r, netsubject, SBX_ANN_NET_AUTHZ)) {
			wh_verdict_deny(v, 403, "Forbidden",
					"the resume of a Sandbox naming network profiles needs the authorization to use "
					"them the mutating webhook sandbox-controller records for it (is it installed?)");
			return;
		}
		skip = NET_RESUME_KEYS;
	}
	if (!reserved_same(r->object, r->old_object, "labels", NULL) ||
	    !reserved_same(r->object, r->old_object, "annotations", skip)) {
		wh_verdict_deny(v, 403, "Forbidden",
				"labels and annotations under sandbox.dev/ are reserved for sandbox-controller "
				"and cannot be changed");
		return;
	}
	const cJSON *a = spec, *b = jobj(r->old_object, "spec");
	if (!sbx_spec_same_intent(a, b)) {
		wh_verdict_deny(v, 422, "Invalid",
				"spec: Forbidden: spec is immutable after creation except spec.lifecycle; create a new "
				"Sandbox for a new intent");
		return;
	}
	char msg[256];
	struct sbx_lifecycle now_lc, was;
	if (sbx_lifecycle_parse(a, &now_lc, msg, sizeof msg) < 0) {
		wh_verdict_deny(v, 422, "Invalid", "%s", msg);
		return;
	}
	if (cJSON_Compare(jobj(a, "lifecycle"), jobj(b, "lifecycle"), 1))
		return;
	int was_ok = sbx_lifecycle_parse(b, &was, msg, sizeof msg) == 0;
	const char *phase = jstr(jobj(r->old_object, "status"), "phase");
	if ((phase && !strcmp(phase, "Expired")) || (was_ok && sbx_lifecycle_expired(&was, now))) {
		char at[32] = "";
		if (was_ok && was.has_shutdown)
			ktime_format_rfc3339(was.shutdown, at);
		wh_verdict_deny(v, 422, "Invalid",
				"spec.lifecycle: Forbidden: the Sandbox expired%s%s and Expired is final; create a new "
				"Sandbox for a new intent",
				at[0] ? " at " : "", at);
	}
}

void wh_sandbox_validate(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now,
			 struct wh_verdict *v)
{
	wh_verdict_allow(v);
	if (is_pool(r)) {
		pool_validate(p, r, now, v);
		return;
	}
	if (!r->object || !r->kind || strcmp(r->kind, "Sandbox") || !r->ns)
		return;
	char q[200], msg[512];
	if (!strcmp(r->operation, "UPDATE")) {
		if (!r->old_object)
			return;
		validate_update(p, r, now, v);
		return;
	}
	if (strcmp(r->operation, "CREATE"))
		return;
	const cJSON *spec = jobj(r->object, "spec"), *meta = jobj(r->object, "metadata");
	struct sbx_scope sc;
	if (request_scope(r, spec, &sc, msg, sizeof msg) < 0) {
		wh_verdict_deny(v, 422, "Invalid", "%s", msg);
		return;
	}
	const char *owner = sbx_spec_owner(spec), *key = sbx_spec_key(spec);
	static const char *const ann_ok[] = { SBX_ANN_REQUESTED_BY, SBX_ANN_OWNER_AUTHZ, SBX_ANN_AUTHZ_IDENTITY,
					      SBX_ANN_NET_AUTHZ, NULL };
	static const char *const lab_ok[] = { SBX_LABEL_DIGEST, NULL };
	const char *bad = unexpected_reserved(jobj(meta, "annotations"), ann_ok);
	if (!bad)
		bad = unexpected_reserved(jobj(meta, "labels"), lab_ok);
	const char *by = jstr(jobj(meta, "annotations"), SBX_ANN_REQUESTED_BY);
	const char *dl = jstr(jobj(meta, "labels"), SBX_LABEL_DIGEST);
	if (!bad && by && strcmp(by, r->username))
		bad = SBX_ANN_REQUESTED_BY;
	if (!bad && dl && (!key || strcmp(dl, sc.digest)))
		bad = SBX_LABEL_DIGEST;
	if (bad) {
		wh_quote(bad, q, sizeof q);
		wh_verdict_deny(v, 403, "Forbidden",
				"\"%s\": labels and annotations under sandbox.dev/ are reserved for sandbox-controller",
				q);
		return;
	}
	if (owner && p->owner_authz == SBX_OWNER_AUTHZ_ACCESS_REVIEW) {
		struct sbx_authz_subject s = request_subject(r, NULL, owner, sc.fingerprint);
		s.identity = jstr(jobj(meta, "annotations"), SBX_ANN_AUTHZ_IDENTITY);
		time_t created = now;
		ktime_parse_rfc3339(jstr(meta, "creationTimestamp"), &created);
		struct sbx_authz_info info = { 0 };
		enum sbx_authz_check ac = sbx_authz_verify(p->keys, p->keylens, p->nkeys, &s, created,
							   jstr(jobj(meta, "annotations"), SBX_ANN_OWNER_AUTHZ), &info);
		if (ac == SBX_AUTHZ_OK && (info.run != 1 || !same_identity(r, s.identity, info.has_identity)))
			ac = SBX_AUTHZ_MISMATCH; /* a resume's record on a creation, or another's identity */
		if (ac != SBX_AUTHZ_OK) {
			wh_verdict_deny(v, 403, "Forbidden",
					"workspace owner \"%s\": %s (is the mutating webhook sandbox-controller "
					"installed, and did a later mutating webhook change the spec?)",
					owner, sbx_authz_str(ac));
			return;
		}
	}
	if (!net_record_valid(p, r, spec, now, v))
		return;
	struct intent in;
	find_intent(p, r, &sc, now, &in);
	if (refuse_key_conflict(r, &in, v))
		return;
	/* The early quota answer is for a new intent that takes a slot now: a
	 * Sandbox created suspended takes none, and one that joins its intent's
	 * generation waits for a slot (a resume) or shares it, in either mode. */
	if (in.found == INTENT_NEW && !created_idle(spec, now) && p->quota_refuses &&
	    p->quota_refuses(p->ctx, r->ns, owner, sc.digest, msg, sizeof msg) == 1)
		wh_verdict_deny(v, 403, "Forbidden", "exceeded quota: %s",
				r->authenticated ? msg : "the workspace owner's quota of active sandboxes is full");
}
