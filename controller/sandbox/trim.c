/* The informer caches' trimmers and their deflate dictionaries (trim.h). */
#include "sandbox/trim.h"

#include <string.h>

#include "base/jsonget.h"
#include "sandbox/authz.h"
#include "sandbox/netprofile.h"
#include "sandbox/podbuild.h"
#include "sandbox/podstate.h"

static void copy_fields(cJSON *dst, const cJSON *src, const char *const *names)
{
	for (; *names; names++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, *names);
		if (v)
			cJSON_AddItemToObject(dst, *names, cJSON_Duplicate(v, 1));
	}
}

/* What the caches keep, whatever a tenant wrote (README, "Memory"): a spec is
 * schema-checked but its lists are not capped, and pods anyone labels may
 * carry 256 KiB of annotations or a huge spec. */
#define STATUS_KEEP_MAX (16 * 1024) /* our own status; larger = not ours, dropped */
#define POD_ANNOTATION_KEEP_MAX 512 /* per reserved annotation value */
#define POD_OWNER_REFS_MAX 256

/* Adds v's approximate printed size (strings, keys and a few bytes per node)
 * to *acc, stopping early once it exceeds limit (a huge object is never
 * printed). Returns 1 when it did. Depth is bounded by cJSON's nesting limit. */
static int json_larger_than(const cJSON *v, size_t limit, size_t *acc)
{
	*acc += 4 + (v->string ? strlen(v->string) : 0) +
		(cJSON_IsString(v) && v->valuestring ? strlen(v->valuestring) : 0) + (cJSON_IsNumber(v) ? 24 : 0);
	if (*acc > limit)
		return 1;
	for (const cJSON *c = v->child; c; c = c->next)
		if (json_larger_than(c, limit, acc))
			return 1;
	return 0;
}

/* 1 when v (NULL ok) is larger than limit; *size gets the size counted. */
static int json_size_over(const cJSON *v, size_t limit, size_t *size)
{
	*size = 0;
	return v && json_larger_than(v, limit, size);
}

/* 1 when d is 32 lowercase hex digits. */
static int is_digest(const char *d)
{
	return d && strlen(d) == 32 && strspn(d, "0123456789abcdef") == 32;
}

cJSON *sbx_trim_sandbox(const cJSON *obj)
{
	static const char *const meta[] = { "name", "namespace", "uid", "generation",
					    "resourceVersion", "creationTimestamp", "deletionTimestamp", "generateName",
					    NULL };
	/* Of the annotations, only the owner authorization record, its
	 * requester and identity are read (a tenant may write 256 KiB of
	 * others; reserved ones only the webhook writes). */
	static const char *const ann[] = { SBX_ANN_REQUESTED_BY, SBX_ANN_OWNER_AUTHZ, SBX_ANN_RESUMED_BY,
					   SBX_ANN_NET_AUTHZ, SBX_ANN_AUTHZ_IDENTITY, SBX_ANN_RESUMED_IDENTITY, NULL };
	cJSON *t = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(t, "metadata");
	copy_fields(m, jobj(obj, "metadata"), meta);
	size_t n;
	if (json_size_over(jobj(obj, "spec"), SBX_SPEC_KEEP_MAX, &n))
		cJSON_AddNumberToObject(t, SBX_TRIM_OVERSIZED, (double)n);
	else
		copy_fields(t, obj, (const char *const[]){ "spec", NULL });
	if (!json_size_over(jobj(obj, "status"), STATUS_KEEP_MAX, &n))
		copy_fields(t, obj, (const char *const[]){ "status", NULL });
	const cJSON *a = jobj(jobj(obj, "metadata"), "annotations");
	cJSON *kept = NULL;
	for (const char *const *k = ann; *k; k++) {
		const char *val = jstr(a, *k);
		int identity = !strcmp(*k, SBX_ANN_AUTHZ_IDENTITY) || !strcmp(*k, SBX_ANN_RESUMED_IDENTITY);
		if (val && strlen(val) <= (identity ? SBX_AUTHZ_IDENTITY_MAX : SBX_AUTHZ_MAX_FIELD)) {
			if (!kept)
				kept = cJSON_AddObjectToObject(m, "annotations");
			cJSON_AddStringToObject(kept, *k, val);
		}
	}
	/* The cache is indexed by scope digest: the one the controller bound
	 * the Sandbox under (status), else the webhook's label (in flight). */
	const char *d = jstr(jobj(t, "status"), "scopeDigest");
	if (!is_digest(d))
		d = jstr(jobj(jobj(obj, "metadata"), "labels"), SBX_LABEL_DIGEST);
	if (is_digest(d))
		cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "labels"), SBX_LABEL_DIGEST, d);
	return t;
}

/* Preset dictionaries for the caches (informer_set_dictionary): the shape of
 * a trimmed Sandbox and of a trimmed pod as sbx_trim_* print them, values
 * that vary per object left empty, the commonest strings last. They only make
 * the cache smaller (test_sandbox_trim checks by how much); a stale one costs
 * memory, never correctness. */
const char sbx_sandbox_dictionary[] =
    "\"Adopted\",\"PodAdopted\",\"PodPending\",\"False\",\"Pending\",\"args\":[],\"env\":[{\"name\":\"\","
    "\"value\":\"\"}],\"runtimeClassName\":\"\",\"annotations\":{\"sandbox.dev/requested-by\":\"\","
    "\"sandbox.dev/owner-authorization\":\"\"},"
    "{\"metadata\":{\"name\":\"\",\"namespace\":\"\",\"uid\":\"\",\"generation\":1,\"resourceVersion\":\"\","
    "\"creationTimestamp\":\"\",\"labels\":{\"sandbox.dev/scope-digest\":\"\"}},\"spec\":{\"command\":[],\"idempotencyKey\":\"\",\"image\":\"\",\"resources\":"
    "{\"limits\":{\"cpu\":\"\",\"memory\":\"\"},\"requests\":{\"cpu\":\"\",\"memory\":\"\"}},\"workspaceOwner\":\"\"},"
    "\"status\":{\"binding\":\"Created\",\"claimedAt\":\"\",\"conditions\":[{\"lastTransitionTime\":\"\","
    "\"message\":\"created pod sbx-\",\"observedGeneration\":1,\"reason\":\"PodCreated\",\"status\":\"True\","
    "\"type\":\"Bound\"},{\"lastTransitionTime\":\"\",\"message\":\"the pod is running and ready\","
    "\"observedGeneration\":1,\"reason\":\"PodReady\",\"status\":\"True\",\"type\":\"Ready\"}],"
    "\"keyExpiresAt\":\"\",\"observedGeneration\":1,\"phase\":\"Running\",\"podName\":\"sbx-\",\"podUID\":\"\","
    "\"scopeDigest\":\"\",\"specFingerprint\":\"\"}}";
const char sbx_pod_dictionary[] =
    "\"Pending\",\"False\",\"initContainers\":[],\"truncated\":true,"
    "{\"metadata\":{\"name\":\"sbx-\",\"namespace\":\"\",\"uid\":\"\",\"resourceVersion\":\"\","
    "\"creationTimestamp\":\"\",\"labels\":{\"app.kubernetes.io/managed-by\":\"sandbox-controller\","
    "\"app.kubernetes.io/name\":\"sandbox\",\"sandbox.dev/scope-digest\":\"\"},\"annotations\":"
    "{\"sandbox.dev/claimed-at\":\"\",\"sandbox.dev/seal\":\"\",\"sandbox.dev/spec-fingerprint\":\"\","
    "\"sandbox.dev/workspace-owner\":\"\"},\"ownerReferences\":[{\"apiVersion\":\"sandbox.dev/v1alpha1\","
    "\"kind\":\"Sandbox\",\"name\":\"\",\"uid\":\"\",\"controller\":true}]},\"spec\":{\"containers\":"
    "[{\"name\":\"sandbox\",\"image\":\"\"}]},\"status\":{\"phase\":\"Running\",\"conditions\":"
    "[{\"type\":\"Ready\",\"status\":\"True\"}]}}";

/* Name and image of each container in list k of pod spec ps, for the tamper
 * check of bound pods (sbx_pod_tamper_check). At most TRIM_CONTAINERS per
 * list and TRIM_IMAGE bytes per image: beyond that the trimmed spec says
 * "truncated" and follow_bound reads the live pod instead. Worst case added
 * per cached pod: 2 lists x 4 x (63 + 512 bytes + cJSON nodes), under 5 KiB;
 * a sandbox pod adds about 150 bytes. */
#define TRIM_CONTAINERS 4
#define TRIM_IMAGE 512
static void trim_containers(cJSON *ts, const cJSON *ps, const char *k)
{
	const cJSON *list = jobj(ps, k), *x;
	if (!cJSON_IsArray(list))
		return;
	int n = 0;
	cJSON *out = cJSON_AddArrayToObject(ts, k);
	cJSON_ArrayForEach(x, list)
	{
		const char *name = jstr(x, "name"), *image = jstr(x, "image");
		if (++n > TRIM_CONTAINERS || !name || strlen(name) > 63 || !image || strlen(image) > TRIM_IMAGE) {
			cJSON_AddTrueToObject(ts, "truncated");
			return;
		}
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", name);
		cJSON_AddStringToObject(o, "image", image);
		cJSON_AddItemToArray(out, o);
	}
}

/* Copies the string members of src whose key passes keep() and whose value
 * is at most maxlen bytes into a new object dst[name]. */
static void copy_strings(cJSON *dst, const char *name, const cJSON *src, int (*keep)(const char *key),
			 size_t maxlen)
{
	cJSON *o = NULL;
	const cJSON *it;
	cJSON_ArrayForEach(it, src)
	{
		if (!it->string || !cJSON_IsString(it) || !keep(it->string) || strlen(it->valuestring) > maxlen)
			continue;
		if (!o)
			o = cJSON_AddObjectToObject(dst, name);
		cJSON_AddStringToObject(o, it->string, it->valuestring);
	}
}

static int reserved_key(const char *k)
{
	return !strncmp(k, "sandbox.dev/", 12);
}

static int pod_label_kept(const char *k)
{
	return reserved_key(k) || !strcmp(k, "app.kubernetes.io/managed-by") || !strcmp(k, "app.kubernetes.io/name");
}

cJSON *sbx_trim_pod(const cJSON *obj)
{
	static const char *const meta[] = { "name", "namespace", "uid", "resourceVersion", "deletionTimestamp",
					    "creationTimestamp", NULL };
	static const char *const ref_fields[] = { "apiVersion", "kind", "name", "uid", "controller", NULL };
	const cJSON *om = jobj(obj, "metadata");
	cJSON *t = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(t, "metadata");
	copy_fields(m, om, meta);
	copy_strings(m, "labels", jobj(om, "labels"), pod_label_kept, 63);
	copy_strings(m, "annotations", jobj(om, "annotations"), reserved_key, POD_ANNOTATION_KEEP_MAX);
	/* Only Sandbox owners matter (they are queued when the pod changes), and a
	 * warm pod's pool (its pool is queued). */
	cJSON *refs = NULL;
	int nrefs = 0;
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(om, "ownerReferences"))
	{
		const char *api = jstr(ref, "apiVersion"), *kind = jstr(ref, "kind"), *name = jstr(ref, "name"),
			   *uid = jstr(ref, "uid");
		if (!api || !kind || !name || !uid || strncmp(api, "sandbox.dev/", 12) ||
		    (strcmp(kind, "Sandbox") && strcmp(kind, "SandboxWarmPool")) ||
		    strlen(name) > 253 || strlen(uid) > 64 || strlen(api) > 64)
			continue;
		if (nrefs >= POD_OWNER_REFS_MAX) {
			if (!cJSON_GetObjectItemCaseSensitive(m, SBX_TRIM_REFS_TRUNCATED))
				cJSON_AddTrueToObject(m, SBX_TRIM_REFS_TRUNCATED);
			continue;
		}
		if (!refs)
			refs = cJSON_AddArrayToObject(m, "ownerReferences");
		cJSON *r = cJSON_CreateObject();
		copy_fields(r, ref, ref_fields);
		cJSON_AddItemToArray(refs, r);
		nrefs++;
	}
	/* Of the spec, only what the tamper check reads (bounded, see trim_containers). */
	const cJSON *ps = jobj(obj, "spec");
	cJSON *ts = cJSON_AddObjectToObject(t, "spec");
	trim_containers(ts, ps, "containers");
	trim_containers(ts, ps, "initContainers");
	if (cJSON_GetArraySize(jobj(ps, "ephemeralContainers")) > 0)
		cJSON_AddTrueToObject(ts, "truncated");
	const cJSON *st = jobj(obj, "status");
	cJSON *s = cJSON_AddObjectToObject(t, "status");
	const char *ip = jstr(st, "podIP");
	if (ip && strlen(ip) <= 64)
		cJSON_AddStringToObject(s, "podIP", ip);
	const char *phase = jstr(st, "phase");
	if (phase && strlen(phase) <= 32)
		cJSON_AddStringToObject(s, "phase", phase);
	const cJSON *cond;
	cJSON *conds = cJSON_AddArrayToObject(s, "conditions");
	cJSON_ArrayForEach(cond, jobj(st, "conditions"))
	{
		const char *ty = jstr(cond, "type"), *cs = jstr(cond, "status");
		if (ty && cs && !strcmp(ty, "Ready") && strlen(cs) <= 16) {
			cJSON *c = cJSON_CreateObject();
			cJSON_AddStringToObject(c, "type", ty);
			cJSON_AddStringToObject(c, "status", cs);
			cJSON_AddItemToArray(conds, c);
			break;
		}
	}
	/* Why it does not run, for Ready's message (sandbox/podstate.h):
	 * nothing for a running pod, under 1.5 KiB for one in trouble. */
	sbx_pod_why_keep(s, st, SBX_CONTAINER);
	return t;
}
