#include "sandbox/claimrec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/buf.h"
#include "base/jsonget.h"
#include "sandbox/mac.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/quota.h"

#define CLAIM_MSG_CAP 4096
#define CLAIM_OWNER_REFS_MAX 256

/* The generation of a claim name (sbx-<digest>, -<n>), or -1. */
long sbx_claim_generation(const char *name, const char *digest)
{
	size_t n = 4 + strlen(digest);
	if (!name || strncmp(name, "sbx-", 4) || strncmp(name + 4, digest, strlen(digest)))
		return -1;
	if (!name[n])
		return 0;
	if (name[n] != '-' || !name[n + 1] || strlen(name + n + 1) > 4 || strspn(name + n + 1, "0123456789") != strlen(name + n + 1))
		return -1;
	return strtol(name + n + 1, NULL, 10);
}

static const char *const STATES[] = { [SBX_CLAIM_SUSPENDED] = "Suspended",
				      [SBX_CLAIM_EXPIRED] = "Expired",
				      [SBX_CLAIM_BOUND] = "Bound",
				      [SBX_CLAIM_REJECTED] = "Rejected",
				      [SBX_CLAIM_SLOT] = "Slot",
				      [SBX_CLAIM_WARM_SLOT] = "WarmSlot" };

const char *sbx_claim_state_str(enum sbx_claim_state s)
{
	return (size_t)s < sizeof STATES / sizeof STATES[0] ? STATES[s] : "Suspended";
}

/* The state named st: 0 with *out, or -1. */
static int state_of(const char *st, enum sbx_claim_state *out)
{
	for (size_t i = 0; st && i < sizeof STATES / sizeof STATES[0]; i++) {
		if (!strcmp(STATES[i], st)) {
			*out = (enum sbx_claim_state)i;
			return 0;
		}
	}
	return -1;
}

/* The seal of r in ns under key into out (65 bytes); -1 on failure. */
static int claim_mac(const unsigned char *key, size_t keylen, const struct sbx_claimrec *r, const char *ns, char out[65])
{
	char gen[24];
	struct buf m;
	int rc = -1;
	out[0] = '\0';
	if (!key || keylen < SBX_SEAL_KEY_MIN)
		return -1;
	snprintf(gen, sizeof gen, "%ld", r->generation);
	static const unsigned char absent = 0x00, present = 0x01;
	buf_init(&m, CLAIM_MSG_CAP);
	int e = sbx_lp_str(&m, "sandbox.dev/claim/v1") | sbx_lp_str(&m, ns) | sbx_lp_str(&m, r->name) |
		sbx_lp_str(&m, r->digest) | sbx_lp_str(&m, gen) | sbx_lp_str(&m, r->pod_name) |
		sbx_lp_str(&m, r->claimed_at) | sbx_lp_str(&m, r->key_expires_at) | sbx_lp_str(&m, r->fingerprint) |
		buf_append(&m, r->has_owner ? &present : &absent, 1) | (r->has_owner ? sbx_lp_str(&m, r->owner) : 0) |
		sbx_lp_str(&m, sbx_claim_state_str(r->state)) | sbx_lp_str(&m, r->sandbox) | sbx_lp_str(&m, r->since) |
		(r->pod_uid[0] ? sbx_lp_str(&m, r->pod_uid) : 0);
	if (!e)
		rc = sbx_mac_hex(key, keylen, &m, out);
	buf_release(&m);
	return rc;
}

cJSON *sbx_claimrec_build(const struct sbx_claimrec *r, const char *ns, const struct sbx_seal_keys *keys,
			  const cJSON *owner_refs)
{
	char seal[65];
	if (!keys || !keys->n || !ns || !r->name[0] || !r->digest[0] || !r->pod_name[0] || !r->claimed_at[0] ||
	    !r->key_expires_at[0] || !r->fingerprint[0] || claim_mac(keys->key[0], keys->len[0], r, ns, seal) < 0)
		return NULL;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "apiVersion", SBX_API);
	cJSON_AddStringToObject(o, "kind", SBX_CLAIM_KIND);
	cJSON *m = cJSON_AddObjectToObject(o, "metadata");
	cJSON_AddStringToObject(m, "name", r->name);
	cJSON_AddStringToObject(m, "namespace", ns);
	cJSON *l = cJSON_AddObjectToObject(m, "labels");
	if (r->state == SBX_CLAIM_SLOT || r->state == SBX_CLAIM_WARM_SLOT) {
		char key[33];
		if (sbx_quota_owner_key(ns, r->has_owner ? r->owner : NULL, key) < 0) {
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddStringToObject(l, SBX_LABEL_QUOTA_OWNER, key);
	} else {
		cJSON_AddStringToObject(l, SBX_LABEL_DIGEST, r->digest);
	}
	cJSON_AddStringToObject(l, SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	cJSON_AddItemToObject(m, "ownerReferences", owner_refs ? cJSON_Duplicate(owner_refs, 1) : cJSON_CreateArray());
	cJSON *s = cJSON_AddObjectToObject(o, "spec");
	cJSON_AddStringToObject(s, "scopeDigest", r->digest);
	cJSON_AddNumberToObject(s, "generation", (double)r->generation);
	cJSON_AddStringToObject(s, "podName", r->pod_name);
	cJSON_AddStringToObject(s, "claimedAt", r->claimed_at);
	cJSON_AddStringToObject(s, "keyExpiresAt", r->key_expires_at);
	cJSON_AddStringToObject(s, "specFingerprint", r->fingerprint);
	if (r->has_owner)
		cJSON_AddStringToObject(s, "workspaceOwner", r->owner);
	cJSON_AddStringToObject(s, "state", sbx_claim_state_str(r->state));
	cJSON_AddStringToObject(s, "sandbox", r->sandbox);
	cJSON_AddStringToObject(s, "since", r->since);
	if (r->pod_uid[0])
		cJSON_AddStringToObject(s, "podUID", r->pod_uid);
	cJSON_AddStringToObject(s, "seal", seal);
	return o;
}

/* Copies string member k of o into out (size n); -1 when absent (and
 * required) or too long. */
static int take(const cJSON *o, const char *k, char *out, size_t n, int required)
{
	const char *v = jstr(o, k);
	out[0] = '\0';
	if (!v)
		return required ? -1 : 0;
	if (strlen(v) >= n)
		return -1;
	memcpy(out, v, strlen(v) + 1);
	return 0;
}

int sbx_claimrec_parse(const cJSON *obj, const char *ns, const struct sbx_seal_keys *keys, struct sbx_claimrec *out,
		       char *why, size_t whylen)
{
	memset(out, 0, sizeof *out);
	const cJSON *m = jobj(obj, "metadata"), *s = jobj(obj, "spec");
	const cJSON *gen = jobj(s, "generation");
	const char *state = jstr(s, "state"), *seal = jstr(s, "seal");
	if (take(m, "name", out->name, sizeof out->name, 1) || take(m, "uid", out->uid, sizeof out->uid, 0) ||
	    take(m, "resourceVersion", out->resource_version, sizeof out->resource_version, 0) ||
	    take(s, "scopeDigest", out->digest, sizeof out->digest, 1) ||
	    take(s, "podName", out->pod_name, sizeof out->pod_name, 1) ||
	    take(s, "claimedAt", out->claimed_at, sizeof out->claimed_at, 1) ||
	    take(s, "keyExpiresAt", out->key_expires_at, sizeof out->key_expires_at, 1) ||
	    take(s, "specFingerprint", out->fingerprint, sizeof out->fingerprint, 1) ||
	    take(s, "workspaceOwner", out->owner, sizeof out->owner, 0) ||
	    take(s, "sandbox", out->sandbox, sizeof out->sandbox, 0) || take(s, "since", out->since, sizeof out->since, 0) ||
	    take(s, "podUID", out->pod_uid, sizeof out->pod_uid, 0) ||
	    !cJSON_IsNumber(gen) || gen->valuedouble < 0 || gen->valuedouble > 9999 || state_of(state, &out->state) < 0 ||
	    !seal || !ns) {
		snprintf(why, whylen, "malformed SandboxClaim");
		return -1;
	}
	out->generation = (long)gen->valuedouble;
	out->has_owner = jstr(s, "workspaceOwner") != NULL;
	int ok = 0;
	for (size_t i = 0; keys && i < keys->n && !ok; i++) {
		char want[65];
		if (claim_mac(keys->key[i], keys->len[i], out, ns, want) == 0)
			ok = sbx_seal_equal(want, seal);
		OPENSSL_cleanse(want, sizeof want);
	}
	if (!ok) {
		snprintf(why, whylen, "SandboxClaim %.80s is not sealed by this controller", out->name);
		return -1;
	}
	return 0;
}

cJSON *sbx_claimrec_trim(const cJSON *obj)
{
	static const char *const meta[] = { "name", "namespace", "uid", "resourceVersion", "deletionTimestamp", NULL };
	static const char *const spec[] = { "scopeDigest", "podName", "claimedAt", "keyExpiresAt", "specFingerprint",
					    "workspaceOwner", "state", "sandbox", "since", "podUID", "seal", NULL };
	const cJSON *om = jobj(obj, "metadata"), *os = jobj(obj, "spec");
	cJSON *t = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(t, "metadata");
	for (const char *const *k = meta; *k; k++) {
		const char *v = jstr(om, *k);
		if (v && strlen(v) <= 253)
			cJSON_AddStringToObject(m, *k, v);
	}
	const char *d = jstr(jobj(om, "labels"), SBX_LABEL_DIGEST), *qk = jstr(jobj(om, "labels"), SBX_LABEL_QUOTA_OWNER);
	cJSON *l = (d && strlen(d) == 32) || (qk && strlen(qk) == 32) ? cJSON_AddObjectToObject(m, "labels") : NULL;
	if (d && strlen(d) == 32)
		cJSON_AddStringToObject(l, SBX_LABEL_DIGEST, d);
	if (qk && strlen(qk) == 32)
		cJSON_AddStringToObject(l, SBX_LABEL_QUOTA_OWNER, qk);
	cJSON *refs = cJSON_AddArrayToObject(m, "ownerReferences");
	const cJSON *ref;
	int n = 0;
	cJSON_ArrayForEach(ref, jobj(om, "ownerReferences"))
	{
		const char *name = jstr(ref, "name"), *uid = jstr(ref, "uid"), *kind = jstr(ref, "kind");
		if (!name || !uid || !kind || (strcmp(kind, "Sandbox") && strcmp(kind, "Pod") && strcmp(kind, SBX_POOL_KIND)) || strlen(name) > 253 ||
		    strlen(uid) > 64 || ++n > CLAIM_OWNER_REFS_MAX)
			continue;
		cJSON *r = cJSON_CreateObject();
		if (strcmp(kind, "Sandbox"))
			cJSON_AddStringToObject(r, "kind", kind); /* absent: a Sandbox, as the cache kept them before */
		cJSON_AddStringToObject(r, "name", name);
		cJSON_AddStringToObject(r, "uid", uid);
		cJSON_AddItemToArray(refs, r);
	}
	cJSON *s = cJSON_AddObjectToObject(t, "spec");
	for (const char *const *k = spec; *k; k++) {
		const char *v = jstr(os, *k);
		if (v && strlen(v) <= 253)
			cJSON_AddStringToObject(s, *k, v);
	}
	const cJSON *g = jobj(os, "generation");
	if (cJSON_IsNumber(g))
		cJSON_AddNumberToObject(s, "generation", g->valuedouble);
	return t;
}
