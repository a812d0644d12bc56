#include "sandbox/verify.h"

#include <string.h>

#include "sandbox/podbuild.h"
#include "sandbox/seal.h"

/* Returns the string member k of obj, or NULL when absent or not a string. */
static const char *str_member(const cJSON *obj, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Returns 1 iff a and b are both non-NULL and byte-for-byte equal. */
static int same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

enum sbx_verify sbx_pod_verify(const cJSON *pod, const struct sbx_verify_expect *e)
{
	if (!e || !e->ns || !e->scope)
		return SBX_VERIFY_MALFORMED;
	if (!cJSON_IsObject(pod))
		return SBX_VERIFY_MALFORMED;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	if (!cJSON_IsObject(md))
		return SBX_VERIFY_MALFORMED;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(md, "annotations");
	if ((labels && !cJSON_IsObject(labels)) || (ann && !cJSON_IsObject(ann)))
		return SBX_VERIFY_MALFORMED;
	const char *name = str_member(md, "name");
	const char *claimed = str_member(ann, SBX_ANN_CLAIMED_AT);
	const char *fp = str_member(ann, SBX_ANN_FINGERPRINT);
	if (!name || !claimed || !fp)
		return SBX_VERIFY_MALFORMED;

	const char *ns = str_member(md, "namespace");
	if (!same(ns, e->ns))
		return SBX_VERIFY_NAMESPACE_MISMATCH;

	if (!same(str_member(labels, SBX_LABEL_MANAGED_BY), SBX_MANAGED_BY) ||
	    !same(str_member(labels, SBX_LABEL_NAME), SBX_NAME))
		return SBX_VERIFY_NOT_MANAGED;

	const char *digest = str_member(labels, SBX_LABEL_DIGEST);
	if (!same(digest, e->scope->digest))
		return SBX_VERIFY_DIGEST_MISMATCH;

	/* Absent matches only absent: a pod of an owner-less claim must never
	 * be handed to an owner, nor the reverse, and "" is not "none". */
	const cJSON *ow = cJSON_GetObjectItemCaseSensitive(ann, SBX_ANN_OWNER);
	const char *owner = NULL;
	if (ow) {
		if (!cJSON_IsString(ow) || !e->owner || strcmp(ow->valuestring, e->owner) != 0)
			return SBX_VERIFY_OWNER_MISMATCH;
		owner = ow->valuestring;
	} else if (e->owner) {
		return SBX_VERIFY_OWNER_MISMATCH;
	}

	char want[65];
	if (!e->seal_key ||
	    sbx_seal_compute(e->seal_key, e->seal_keylen, ns, name, digest, owner, fp, claimed,
			     want) < 0 ||
	    !sbx_seal_equal(str_member(ann, SBX_ANN_SEAL), want))
		return SBX_VERIFY_BAD_SEAL;

	const cJSON *del = cJSON_GetObjectItemCaseSensitive(md, "deletionTimestamp");
	if (del && !cJSON_IsNull(del))
		return SBX_VERIFY_TERMINATING;

	if (e->check_fingerprint && !same(fp, e->scope->fingerprint))
		return SBX_VERIFY_FINGERPRINT_MISMATCH;
	return SBX_VERIFY_OK;
}

const char *sbx_verify_str(enum sbx_verify v)
{
	switch (v) {
	case SBX_VERIFY_OK:
		return "verified";
	case SBX_VERIFY_NOT_MANAGED:
		return "pod is not managed by sandbox-controller (labels missing or wrong)";
	case SBX_VERIFY_DIGEST_MISMATCH:
		return "pod's scope-digest label does not match the Sandbox's scope";
	case SBX_VERIFY_OWNER_MISMATCH:
		return "pod's workspace owner does not match the Sandbox's";
	case SBX_VERIFY_FINGERPRINT_MISMATCH:
		return "pod was created for a different spec with the same idempotency key";
	case SBX_VERIFY_NAMESPACE_MISMATCH:
		return "pod is in another namespace";
	case SBX_VERIFY_TERMINATING:
		return "pod is terminating";
	case SBX_VERIFY_BAD_SEAL:
		return "pod's seal is missing or was not produced by this controller";
	case SBX_VERIFY_MALFORMED:
		return "pod object is malformed or lacks the controller's annotations";
	case SBX_VERIFY_PAYLOAD_MISMATCH:
		return "pod's containers or volumes differ from what the controller builds for this Sandbox";
	}
	return "unknown verification result";
}

/* Absent and JSON null count as equal; everything else must be identical. */
static int same_opt(const cJSON *a, const cJSON *b)
{
	int na = !a || cJSON_IsNull(a), nb = !b || cJSON_IsNull(b);
	if (na || nb)
		return na && nb;
	return cJSON_Compare(a, b, 1);
}

static const cJSON *field(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* Compares the listed members of every element of two arrays, in order. */
static int same_list(const cJSON *a, const cJSON *b, const char *const *members)
{
	int na = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
	int nb = cJSON_IsArray(b) ? cJSON_GetArraySize(b) : 0;
	if (na != nb)
		return 0;
	for (int i = 0; i < na; i++) {
		const cJSON *x = cJSON_GetArrayItem(a, i), *y = cJSON_GetArrayItem(b, i);
		for (const char *const *m = members; *m; m++)
			if (!same_opt(field(x, *m), field(y, *m)))
				return 0;
	}
	return 1;
}

/* A volume's source: the members the builder sets. Defaults the apiserver may
 * add inside a source (readOnly: false, a hostPath type) are not compared
 * except where the builder sets them. */
static int same_volume(const cJSON *live, const cJSON *want)
{
	static const char *const sources[] = { "persistentVolumeClaim", "hostPath", "emptyDir", NULL };
	for (const char *const *s = sources; *s; s++) {
		const cJSON *w = field(want, *s), *l = field(live, *s);
		if (!w != !l)
			return 0;
	}
	if (field(want, "persistentVolumeClaim") &&
	    !same_opt(field(field(live, "persistentVolumeClaim"), "claimName"),
		      field(field(want, "persistentVolumeClaim"), "claimName")))
		return 0;
	if (field(want, "hostPath") &&
	    !same_opt(field(field(live, "hostPath"), "path"), field(field(want, "hostPath"), "path")))
		return 0;
	/* Any other source (a projected token, a secret) is not something we build. */
	const cJSON *m;
	cJSON_ArrayForEach(m, live)
	{
		if (strcmp(m->string, "name") && strcmp(m->string, "persistentVolumeClaim") &&
		    strcmp(m->string, "hostPath") && strcmp(m->string, "emptyDir"))
			return 0;
	}
	return 1;
}

enum sbx_verify sbx_pod_payload_verify(const cJSON *live, const cJSON *expected)
{
	static const char *const env_members[] = { "name", "value", "valueFrom", NULL };
	static const char *const mount_members[] = { "name", "mountPath", "subPath", "readOnly", NULL };
	if (!cJSON_IsObject(live) || !cJSON_IsObject(expected))
		return SBX_VERIFY_MALFORMED;
	const cJSON *ls = field(live, "spec"), *ws = field(expected, "spec");
	const cJSON *lc = field(ls, "containers"), *wc = field(ws, "containers");
	if (!cJSON_IsArray(lc) || cJSON_GetArraySize(lc) != cJSON_GetArraySize(wc))
		return SBX_VERIFY_PAYLOAD_MISMATCH;
	const cJSON *lic = field(ls, "initContainers"), *lec = field(ls, "ephemeralContainers");
	if ((cJSON_IsArray(lic) && cJSON_GetArraySize(lic) > 0) || (cJSON_IsArray(lec) && cJSON_GetArraySize(lec) > 0))
		return SBX_VERIFY_PAYLOAD_MISMATCH;
	for (int i = 0; i < cJSON_GetArraySize(wc); i++) {
		const cJSON *l = cJSON_GetArrayItem(lc, i), *w = cJSON_GetArrayItem(wc, i);
		if (!same_opt(field(l, "name"), field(w, "name")) || !same_opt(field(l, "image"), field(w, "image")) ||
		    !same_opt(field(l, "command"), field(w, "command")) || !same_opt(field(l, "args"), field(w, "args")) ||
		    !same_list(field(l, "env"), field(w, "env"), env_members) ||
		    !same_list(field(l, "volumeMounts"), field(w, "volumeMounts"), mount_members) ||
		    field(l, "envFrom") || field(l, "volumeDevices"))
			return SBX_VERIFY_PAYLOAD_MISMATCH;
	}
	const cJSON *lv = field(ls, "volumes"), *wv = field(ws, "volumes");
	int nl = cJSON_IsArray(lv) ? cJSON_GetArraySize(lv) : 0, nw = cJSON_IsArray(wv) ? cJSON_GetArraySize(wv) : 0;
	if (nl != nw)
		return SBX_VERIFY_PAYLOAD_MISMATCH;
	for (int i = 0; i < nw; i++) {
		const cJSON *w = cJSON_GetArrayItem(wv, i), *l = cJSON_GetArrayItem(lv, i);
		if (!same_opt(field(l, "name"), field(w, "name")) || !same_volume(l, w))
			return SBX_VERIFY_PAYLOAD_MISMATCH;
	}
	if (!same_opt(field(ls, "runtimeClassName"), field(ws, "runtimeClassName")))
		return SBX_VERIFY_PAYLOAD_MISMATCH;
	return SBX_VERIFY_OK;
}
