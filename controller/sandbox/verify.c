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
	}
	return "unknown verification result";
}
