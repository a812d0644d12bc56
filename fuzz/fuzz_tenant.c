/* libFuzzer target: the objects besides Sandboxes that a tenant can write
 * and the controller reads: a SandboxWarmPool (sandbox/poolspec.h), a
 * SandboxQuota (sandbox/quota.h) and a SandboxClaim record forged in its
 * namespace (sandbox/claimrec.h). The input is one JSON document, read as
 * each of the three. Invariants asserted:
 *  - every cache copy is bounded, and a pool's copy trimmed again is itself;
 *  - a pool's template, when valid, builds warm pods that mount nothing
 *    outside its owner's folders, that the controller takes for members of
 *    that pool (from the pod and from its cache copy) and of no other pool,
 *    template or owner; a pool's network-profile record written by anyone
 *    but the controller never verifies for a template naming profiles;
 *  - a quota whose spec has an owner member governs that owner alone (never
 *    the namespace by mistake); the limits that hold are in range and the
 *    lowest of a tier; the early refusal and its words are bounded; a quota
 *    slot's name parses back to the name it was made from;
 *  - no claim record the input holds verifies; one the controller builds
 *    from the input's fields verifies after a trip through JSON text and the
 *    cache, with every field as built, and in no other namespace. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonget.h"
#include "sandbox/authz.h"
#include "sandbox/claimrec.h"
#include "sandbox/poolspec.h"
#include "sandbox/quota.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"
#include "sandbox/trim.h"
#include "support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define POOL_UID "6f1c2a8e-0000-4000-8000-0000000000aa"
#define CLAIMED "2026-01-01T00:00:00Z"
#define WARM_NAME "sbx-w-abcdefghij"

static void check_warm_pod(const cJSON *spec, const char *fp, const struct sbx_config *cfg)
{
	const struct sbx_seal_keys *keys = fuzz_seal_keys();
	const char *owner = sbx_spec_owner(spec);
	cJSON *pod = sbx_pool_pod_build(cfg, keys, FUZZ_NS, "pool", POOL_UID, WARM_NAME, spec, fp, CLAIMED);
	if (!pod)
		return;
	fuzz_check_mounts(pod, cfg, owner);
	assert(sbx_pool_member(pod, keys, POOL_UID, fp, owner) == 1);
	assert(!sbx_pool_member(pod, keys, "6f1c2a8e-0000-4000-8000-0000000000bb", fp, owner));
	assert(!sbx_pool_member(pod, keys, POOL_UID, "0000000000000000000000000000000000000000000000000000000000000000",
				owner));
	assert(!sbx_pool_member(pod, keys, POOL_UID, fp, owner ? NULL : "mallory"));
	if (owner) {
		char other[80];
		snprintf(other, sizeof other, "%s-x", owner);
		assert(!sbx_pool_member(pod, keys, POOL_UID, fp, other));
	}
	cJSON *t = sbx_trim_pod(pod);
	assert(fuzz_printed_size(t) <= FUZZ_TRIM_BOUND);
	assert(sbx_pool_member(t, keys, POOL_UID, fp, owner) == 1);
	cJSON_Delete(t);
	cJSON_Delete(pod);
}

static void check_pool(const cJSON *obj)
{
	cJSON *t = sbx_pool_trim(obj);
	assert(fuzz_printed_size(t) <= SBX_SPEC_POOL_KEEP_MAX + 16384 + 3 * SBX_AUTHZ_MAX_FIELD +
					   SBX_AUTHZ_IDENTITY_MAX + 4096);
	/* Compared as text: cJSON_Compare looks up duplicate keys by name. */
	cJSON *again = sbx_pool_trim(t);
	char *a = cJSON_PrintUnformatted(t), *b = cJSON_PrintUnformatted(again);
	assert(a && b && !strcmp(a, b));
	free(a);
	free(b);
	cJSON_Delete(again);
	char fp[65] = "1111111111111111111111111111111111111111111111111111111111111111", msg[512];
	cJSON *spec = sbx_pool_spec(t);
	int valid = spec && sbx_spec_validate(spec, msg, sizeof msg) == 0 && sbx_template_fingerprint(spec, fp) == 0;
	/* The record of the template's profiles: nobody but the controller's
	 * webhook holds the key, so none the input carries verifies. */
	const unsigned char *keys[1] = { fuzz_seal_key };
	const size_t lens[1] = { sizeof fuzz_seal_key };
	char joined[SBX_PROFILES_JOINED_MAX];
	size_t n = 0;
	struct sbx_authz_info info;
	enum sbx_authz_check ck = sbx_pool_profiles_verify(keys, lens, 1, t, fp, joined, &n, &info);
	assert(ck != SBX_AUTHZ_OK || n == 0);
	assert(memchr(joined, '\0', sizeof joined));
	if (valid) {
		const struct sbx_config *pvc, *host;
		fuzz_configs(&pvc, &host);
		check_warm_pod(spec, fp, pvc);
		check_warm_pod(spec, fp, host);
	}
	cJSON_Delete(spec);
	cJSON_Delete(t);
}

static void check_limits(const struct sbx_quota_limits *q, int any)
{
	assert(q->max_active >= 0 && q->max_active <= SBX_QUOTA_MAX);
	assert(q->max_warm >= 0 && q->max_warm <= SBX_QUOTA_MAX);
	assert(memchr(q->source, '\0', sizeof q->source));
	assert(any == (q->has_active || q->has_warm));
}

static void check_quota(const cJSON *obj, const char *owner)
{
	cJSON *t = sbx_quota_trim(obj);
	assert(fuzz_printed_size(t) <= 16384 + 4096);
	const cJSON *raw_owner = jobj(jobj(obj, "spec"), "owner");
	cJSON *one = cJSON_CreateArray();
	cJSON_AddItemReferenceToArray(one, t);
	const char *who[] = { owner, "alice", NULL };
	for (size_t i = 0; i < sizeof who / sizeof who[0]; i++) {
		/* Never the namespace's quota by mistake. */
		if (raw_owner && sbx_quota_governs(one, t, who[i]))
			assert(who[i] && cJSON_IsString(raw_owner) && !strcmp(raw_owner->valuestring, who[i]));
		struct sbx_quota_limits q;
		check_limits(&q, sbx_quota_resolve(one, FUZZ_NS, who[i], NULL, &q));
	}
	/* Beside a namespace-wide quota of 5: the lowest of a tier holds. */
	cJSON *five = cJSON_Parse("{\"metadata\":{\"name\":\"five\",\"namespace\":\"" FUZZ_NS "\"},"
				  "\"spec\":{\"maxActive\":5,\"mode\":\"Reject\"}}");
	cJSON *two = cJSON_CreateArray();
	cJSON_AddItemReferenceToArray(two, t);
	cJSON_AddItemReferenceToArray(two, five);
	struct sbx_quota_limits q;
	int any = sbx_quota_resolve(two, FUZZ_NS, owner, NULL, &q);
	check_limits(&q, any);
	if (sbx_quota_governs(two, five, owner))
		assert(any && q.has_active && q.max_active <= 5 && q.reject);
	/* The early refusal, with the input's claim (as the cache keeps it) for a slot. */
	cJSON *slots = cJSON_CreateArray();
	cJSON_AddItemToArray(slots, sbx_claimrec_trim(obj));
	char words[1024];
	if (sbx_quota_refuses(two, slots, FUZZ_NS, owner, "0123456789abcdef0123456789abcdef", NULL, words,
			      sizeof words))
		assert(words[0]);
	assert(memchr(words, '\0', sizeof words));
	/* A slot name parses back to itself. */
	char key[33], name[80];
	assert(sbx_quota_owner_key(FUZZ_NS, owner, key) == 0 && strlen(key) == 32);
	long slot = sbx_quota_slot_index(meta_str(obj, "name"), key);
	assert(slot >= -1 && slot < SBX_QUOTA_MAX);
	if (slot >= 0) {
		sbx_quota_slot_name(key, slot, name, sizeof name);
		assert(!strcmp(name, meta_str(obj, "name")));
	}
	cJSON_Delete(slots);
	cJSON_Delete(two);
	cJSON_Delete(five);
	cJSON_Delete(one);
	cJSON_Delete(t);
}

/* Copies string member k of o (or dflt) into out, cut to n - 1 bytes. */
static void field(char *out, size_t n, const cJSON *o, const char *k, const char *dflt)
{
	const char *v = jstr(o, k);
	snprintf(out, n, "%s", v ? v : dflt);
}

static void check_claim(const cJSON *obj)
{
	const struct sbx_seal_keys *keys = fuzz_seal_keys();
	struct sbx_claimrec r, got;
	char why[256];
	cJSON *t = sbx_claimrec_trim(obj);
	assert(fuzz_printed_size(t) <= FUZZ_TRIM_BOUND);
	/* Forged: not sealed by this controller's keys. */
	assert(sbx_claimrec_parse(obj, FUZZ_NS, keys, &got, why, sizeof why) < 0 && memchr(why, '\0', sizeof why));
	assert(sbx_claimrec_parse(t, FUZZ_NS, keys, &got, why, sizeof why) < 0);
	cJSON_Delete(t);
	/* One the controller builds from the input's fields. */
	const cJSON *s = jobj(obj, "spec"), *gen = jobj(s, "generation");
	memset(&r, 0, sizeof r);
	field(r.name, sizeof r.name, jobj(obj, "metadata"), "name", "sbx-0123456789abcdef0123456789abcdef");
	field(r.digest, sizeof r.digest, s, "scopeDigest", "0123456789abcdef0123456789abcdef");
	field(r.pod_name, sizeof r.pod_name, s, "podName", r.name);
	field(r.claimed_at, sizeof r.claimed_at, s, "claimedAt", CLAIMED);
	field(r.key_expires_at, sizeof r.key_expires_at, s, "keyExpiresAt", CLAIMED);
	field(r.fingerprint, sizeof r.fingerprint, s, "specFingerprint", "f");
	r.has_owner = jstr(s, "workspaceOwner") != NULL;
	field(r.owner, sizeof r.owner, s, "workspaceOwner", "");
	field(r.sandbox, sizeof r.sandbox, s, "sandbox", "");
	field(r.since, sizeof r.since, s, "since", "");
	r.generation = cJSON_IsNumber(gen) && gen->valuedouble >= 0 && gen->valuedouble <= 9999 ? (long)gen->valuedouble : 0;
	r.state = (enum sbx_claim_state)((unsigned char)r.name[0] % (SBX_CLAIM_SLOT + 1));
	cJSON *b = sbx_claimrec_build(&r, FUZZ_NS, keys, NULL);
	if (!b)
		return;
	char *text = cJSON_PrintUnformatted(b);
	cJSON *back = cJSON_Parse(text);
	assert(back);
	cJSON *bt = sbx_claimrec_trim(back);
	if (sbx_claimrec_parse(bt, FUZZ_NS, keys, &got, why, sizeof why) != 0) {
		fprintf(stderr, "the controller's own claim record does not verify: %s\n", why);
		abort();
	}
	assert(!strcmp(got.name, r.name) && !strcmp(got.digest, r.digest) && got.generation == r.generation &&
	       !strcmp(got.pod_name, r.pod_name) && !strcmp(got.claimed_at, r.claimed_at) &&
	       !strcmp(got.key_expires_at, r.key_expires_at) && !strcmp(got.fingerprint, r.fingerprint) &&
	       got.has_owner == r.has_owner && (!r.has_owner || !strcmp(got.owner, r.owner)) && got.state == r.state &&
	       !strcmp(got.sandbox, r.sandbox) && !strcmp(got.since, r.since));
	assert(sbx_claimrec_parse(bt, "team-b", keys, &got, why, sizeof why) < 0);
	cJSON_Delete(bt);
	cJSON_Delete(back);
	free(text);
	cJSON_Delete(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *obj = cJSON_ParseWithLength((const char *)data, size);
	if (!obj)
		return 0;
	check_pool(obj);
	const char *owner = jstr(jobj(obj, "spec"), "owner");
	check_quota(obj, owner ? owner : jstr(jobj(obj, "spec"), "workspaceOwner"));
	check_claim(obj);
	cJSON_Delete(obj);
	return 0;
}
