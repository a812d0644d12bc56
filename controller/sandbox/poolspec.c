/* The warm pool's pure part (poolspec.h): its spec, its pods, who is a
 * member. The pool's reconcile is reconcile/pool.c. */
#include "sandbox/poolspec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "base/jsonget.h"
#include "base/xmalloc.h"
#include "base/ktime.h"
#include "sandbox/authz.h"
#include "sandbox/netprofile.h"
#include "sandbox/podbuild.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"

cJSON *sbx_pool_spec(const cJSON *pool)
{
	const cJSON *s = jobj(pool, "spec"), *t = jobj(s, "template");
	if (!cJSON_IsObject(t))
		return NULL;
	cJSON *out = cJSON_Duplicate(t, 1);
	if (!out)
		abort(); /* out of memory */
	const cJSON *owner = jobj(s, "workspaceOwner");
	if (owner)
		cJSON_AddItemToObject(out, "workspaceOwner", cJSON_Duplicate(owner, 1));
	return out;
}

static char *pool_digest(const char *uid)
{
	return xasprintf("pool/%s", uid);
}

cJSON *sbx_pool_pod_build(const struct sbx_config *cfg, const struct sbx_seal_keys *keys, const char *ns,
			  const char *pool_name, const char *pool_uid, const char *pod_name, const cJSON *spec,
			  const char *fp, const char *created_at)
{
	char seal[65];
	char *d = pool_digest(pool_uid);
	const char *owner = sbx_spec_owner(spec);
	int ok = sbx_seal_sign(keys, ns, pod_name, d, owner, fp, created_at, seal) == 0;
	free(d);
	if (!ok)
		return NULL;
	struct sbx_scope sc = { 0 };
	snprintf(sc.fingerprint, sizeof sc.fingerprint, "%s", fp);
	struct sbx_pod_params p = { .ns = ns,
				    .pod_name = pod_name,
				    .sandbox_name = pool_name,
				    .sandbox_uid = pool_uid,
				    .spec = spec,
				    .scope = &sc,
				    .claimed_at = created_at,
				    .seal = seal,
				    .cfg = cfg };
	cJSON *pod = sbx_pod_build(&p);
	if (!pod)
		return NULL;
	/* The same pod a Sandbox of this spec gets, but a member of the pool:
	 * the pool's label instead of a scope's, the template's fingerprint,
	 * owned by the pool. */
	cJSON *m = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	cJSON *l = cJSON_GetObjectItemCaseSensitive(m, "labels"), *a = cJSON_GetObjectItemCaseSensitive(m, "annotations");
	cJSON_DeleteItemFromObjectCaseSensitive(l, SBX_LABEL_DIGEST);
	cJSON_AddStringToObject(l, SBX_LABEL_POOL, pool_uid);
	cJSON_DeleteItemFromObjectCaseSensitive(a, SBX_ANN_FINGERPRINT);
	cJSON_AddStringToObject(a, SBX_ANN_TEMPLATE_FP, fp);
	cJSON *ref = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "ownerReferences"), 0);
	cJSON_ReplaceItemInObjectCaseSensitive(ref, "kind", cJSON_CreateString(SBX_POOL_KIND));
	return pod;
}

int sbx_pool_member(const cJSON *pod, const struct sbx_seal_keys *keys, const char *pool_uid, const char *fp,
		    const char *owner)
{
	const cJSON *m = jobj(pod, "metadata");
	const char *ns = jstr(m, "namespace"), *name = jstr(m, "name");
	const char *o = annotation(pod, SBX_ANN_OWNER), *tf = annotation(pod, SBX_ANN_TEMPLATE_FP);
	const char *claimed = annotation(pod, SBX_ANN_CLAIMED_AT), *seal = annotation(pod, SBX_ANN_SEAL);
	const char *lp = label(pod, SBX_LABEL_POOL), *mb = label(pod, SBX_LABEL_MANAGED_BY);
	if (!ns || !name || strncmp(name, SBX_WARM_PREFIX, sizeof SBX_WARM_PREFIX - 1) || !lp || strcmp(lp, pool_uid) ||
	    !mb || strcmp(mb, SBX_MANAGED_BY) || label(pod, SBX_LABEL_DIGEST) || !tf || strcmp(tf, fp) || !claimed ||
	    !seal || jstr(m, "deletionTimestamp") || (!o != !owner) || (o && strcmp(o, owner)))
		return 0;
	char *d = pool_digest(pool_uid);
	int ok = sbx_seal_check(keys, ns, name, d, owner, fp, claimed, seal) >= 0;
	free(d);
	return ok;
}

enum sbx_authz_check sbx_pool_profiles_verify(const unsigned char *const *keys, const size_t *keylens, size_t nkeys,
					      const cJSON *pool, const char *fp, char joined[SBX_PROFILES_JOINED_MAX],
					      size_t *n, struct sbx_authz_info *info)
{
	const char *names[SBX_PROFILES_MAX];
	char hash[17], msg[256], subject[300], who[SBX_PROFILES_JOINED_MAX + 32];
	joined[0] = '\0';
	*n = 0;
	if (sbx_spec_profiles(jobj(jobj(pool, "spec"), "template"), names, n, msg, sizeof msg) < 0 ||
	    (*n && sbx_profiles_set(names, *n, joined, hash) < 0)) {
		*n = 0;
		return SBX_AUTHZ_MALFORMED;
	}
	if (!*n)
		return SBX_AUTHZ_OK;
	const cJSON *m = jobj(pool, "metadata");
	snprintf(subject, sizeof subject, SBX_POOL_AUTHZ_PREFIX "%s", jstr(m, "name") ? jstr(m, "name") : "");
	snprintf(who, sizeof who, SBX_NETPROFILE_AUTHZ_PREFIX "%s", joined);
	time_t created = 0;
	ktime_parse_rfc3339(jstr(m, "creationTimestamp"), &created);
	struct sbx_authz_subject s = { .ns = jstr(m, "namespace"),
				       .name = subject,
				       .owner = who,
				       .fingerprint = fp,
				       .username = annotation(pool, SBX_ANN_REQUESTED_BY),
				       .identity = annotation(pool, SBX_ANN_AUTHZ_IDENTITY) };
	return sbx_authz_verify(keys, keylens, nkeys, &s, created, annotation(pool, SBX_ANN_NET_AUTHZ), info);
}

int sbx_pool_pod_name(char out[32])
{
	static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
	unsigned char rnd[10];
	if (RAND_bytes(rnd, sizeof rnd) != 1)
		return -1;
	memcpy(out, SBX_WARM_PREFIX, sizeof SBX_WARM_PREFIX - 1);
	size_t n = sizeof SBX_WARM_PREFIX - 1;
	for (size_t i = 0; i < sizeof rnd; i++)
		out[n++] = alphabet[rnd[i] % (sizeof alphabet - 1)];
	out[n] = '\0';
	return 0;
}

cJSON *sbx_pool_trim(const cJSON *obj)
{
	static const char *const meta[] = { "name", "namespace", "uid", "resourceVersion", "creationTimestamp",
					    "deletionTimestamp", NULL };
	static const char *const ann[] = { SBX_ANN_REQUESTED_BY, SBX_ANN_OWNER_AUTHZ, SBX_ANN_AUTHZ_IDENTITY,
					   SBX_ANN_NET_AUTHZ, NULL };
	const cJSON *om = jobj(obj, "metadata");
	cJSON *t = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(t, "metadata");
	for (const char *const *k = meta; *k; k++)
		if (jstr(om, *k) && strlen(jstr(om, *k)) <= 253)
			cJSON_AddStringToObject(m, *k, jstr(om, *k));
	const cJSON *g = jobj(om, "generation");
	if (cJSON_IsNumber(g))
		cJSON_AddNumberToObject(m, "generation", g->valuedouble);
	if (jstr(om, "namespace") && strlen(jstr(om, "namespace")) <= 63)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "labels"), SBX_POOL_NS_INDEX, jstr(om, "namespace"));
	cJSON *kept = NULL;
	for (const char *const *k = ann; *k; k++) {
		const char *v = annotation(obj, *k);
		size_t cap = strcmp(*k, SBX_ANN_AUTHZ_IDENTITY) ? SBX_AUTHZ_MAX_FIELD : SBX_AUTHZ_IDENTITY_MAX;
		if (v && strlen(v) <= cap) {
			if (!kept)
				kept = cJSON_AddObjectToObject(m, "annotations");
			cJSON_AddStringToObject(kept, *k, v);
		}
	}
	/* The schema bounds the spec (the template's limits); the status is ours. */
	char *s = cJSON_PrintUnformatted(jobj(obj, "spec"));
	if (s && strlen(s) <= SBX_SPEC_POOL_KEEP_MAX)
		cJSON_AddItemToObject(t, "spec", cJSON_Duplicate(jobj(obj, "spec"), 1));
	free(s);
	s = cJSON_PrintUnformatted(jobj(obj, "status"));
	if (s && strlen(s) <= 16384)
		cJSON_AddItemToObject(t, "status", cJSON_Duplicate(jobj(obj, "status"), 1));
	free(s);
	return t;
}

int sbx_pool_pod_ready(const cJSON *pod)
{
	const char *phase = jstr(jobj(pod, "status"), "phase");
	const cJSON *cond;
	cJSON_ArrayForEach(cond, jobj(jobj(pod, "status"), "conditions"))
	{
		const char *t = jstr(cond, "type"), *st = jstr(cond, "status");
		if (t && st && !strcmp(t, "Ready") && !strcmp(st, "True"))
			return phase && !strcmp(phase, "Running");
	}
	return 0;
}

int sbx_pool_orphaned(const cJSON *pod)
{
	const cJSON *md = jobj(pod, "metadata"), *ref;
	const char *name = jstr(md, "name");
	if (!name || strncmp(name, SBX_WARM_PREFIX, strlen(SBX_WARM_PREFIX)) || !jstr(jobj(md, "labels"), SBX_LABEL_POOL) ||
	    jstr(md, "deletionTimestamp"))
		return 0;
	cJSON_ArrayForEach(ref, jobj(md, "ownerReferences"))
	{
		const char *kind = jstr(ref, "kind"), *api = jstr(ref, "apiVersion");
		if (kind && api && !strcmp(kind, SBX_POOL_KIND) && !strncmp(api, "sandbox.dev/", 12))
			return 0;
	}
	return 1;
}
