/* Tests of sandbox/claimrec.h: the claim record is sealed over every field
 * and survives the informer's trim. */
#include <string.h>

#include "sandbox/claimrec.h"
#include "sandbox/podbuild.h"
#include "sandbox/quota.h"
#include "test_suites.h"

void register_sandbox_claimrec_tests(void);

static struct sbx_claimrec sample(void)
{
	struct sbx_claimrec r = { .generation = 1, .has_owner = 1, .state = SBX_CLAIM_EXPIRED };
	snprintf(r.name, sizeof r.name, "sbx-a2c8db0f290b9f479603660ab6f7894e-1");
	snprintf(r.digest, sizeof r.digest, "a2c8db0f290b9f479603660ab6f7894e");
	snprintf(r.pod_name, sizeof r.pod_name, "%s", r.name);
	snprintf(r.claimed_at, sizeof r.claimed_at, "2026-12-01T10:00:00Z");
	snprintf(r.key_expires_at, sizeof r.key_expires_at, "2026-12-02T10:00:00Z");
	memset(r.fingerprint, 'f', 64);
	snprintf(r.owner, sizeof r.owner, "alice");
	snprintf(r.sandbox, sizeof r.sandbox, "late-1");
	snprintf(r.since, sizeof r.since, "2026-12-01T11:00:00Z");
	return r;
}

static void load(struct sbx_seal_keys *k, const char *key)
{
	char err[128];
	sbx_seal_keys_init(k);
	CU_ASSERT_EQUAL_FATAL(sbx_seal_keys_add(k, (const unsigned char *)key, strlen(key), 16, err, sizeof err), 0);
}

static void test_roundtrip_and_seal(void)
{
	struct sbx_seal_keys k1, k2, both;
	load(&k1, "0123456789abcdef0123456789abcdef-one");
	load(&k2, "fedcba9876543210fedcba9876543210-two");
	load(&both, "fedcba9876543210fedcba9876543210-two");
	char err[128];
	CU_ASSERT_EQUAL(sbx_seal_keys_add(&both, (const unsigned char *)"0123456789abcdef0123456789abcdef-one", 36, 16,
					  err, sizeof err),
			0);
	struct sbx_claimrec r = sample(), out;
	cJSON *refs = cJSON_Parse("[{\"apiVersion\":\"sandbox.dev/v1alpha1\",\"kind\":\"Sandbox\",\"name\":\"s\",\"uid\":\"u\"}]");
	cJSON *o = sbx_claimrec_build(&r, "team-a", &k1, refs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	char why[128];
	CU_ASSERT_EQUAL(sbx_claimrec_parse(o, "team-a", &k1, &out, why, sizeof why), 0);
	CU_ASSERT_STRING_EQUAL(out.pod_name, r.pod_name);
	CU_ASSERT_EQUAL(out.state, SBX_CLAIM_EXPIRED);
	CU_ASSERT_EQUAL(out.generation, 1);
	CU_ASSERT_STRING_EQUAL(out.owner, "alice");
	/* through the trim, and with a rotated key list */
	cJSON *t = sbx_claimrec_trim(o);
	CU_ASSERT_EQUAL(sbx_claimrec_parse(t, "team-a", &both, &out, why, sizeof why), 0);
	CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "metadata"), "ownerReferences")), 1);
	cJSON_Delete(t);
	/* another key, another namespace, any field changed: not believed */
	CU_ASSERT_EQUAL(sbx_claimrec_parse(o, "team-a", &k2, &out, why, sizeof why), -1);
	CU_ASSERT_EQUAL(sbx_claimrec_parse(o, "team-b", &k1, &out, why, sizeof why), -1);
	static const char *const fields[] = { "podName", "claimedAt", "keyExpiresAt", "state", "sandbox", "workspaceOwner" };
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		cJSON *x = cJSON_Duplicate(o, 1);
		cJSON *s = cJSON_GetObjectItem(x, "spec");
		cJSON_ReplaceItemInObject(s, fields[i], cJSON_CreateString(!strcmp(fields[i], "state") ? "Suspended" : "x"));
		CU_ASSERT_EQUAL(sbx_claimrec_parse(x, "team-a", &k1, &out, why, sizeof why), -1);
		cJSON_Delete(x);
	}
	cJSON *x = cJSON_Duplicate(o, 1);
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(x, "spec"), "workspaceOwner"); /* owner -> none */
	CU_ASSERT_EQUAL(sbx_claimrec_parse(x, "team-a", &k1, &out, why, sizeof why), -1);
	cJSON_Delete(x);
	x = cJSON_Duplicate(o, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(x, "spec"), "generation", cJSON_CreateNumber(2));
	CU_ASSERT_EQUAL(sbx_claimrec_parse(x, "team-a", &k1, &out, why, sizeof why), -1);
	cJSON_Delete(x);
	cJSON_Delete(o);
	cJSON_Delete(refs);
	sbx_seal_keys_release(&k1);
	sbx_seal_keys_release(&k2);
	sbx_seal_keys_release(&both);
}

/* A slot record of state (Slot or WarmSlot) of alice in team-a, owned by
 * refs (JSON): labelled by the owner key, not the digest; trimmed, it
 * verifies and keeps one owner reference, of kind; its state is sealed. */
static void slot_record(enum sbx_claim_state state, const char *refs_json, const char *kind)
{
	struct sbx_seal_keys k;
	char why[128], key[33];
	load(&k, "0123456789abcdef0123456789abcdef-one");
	CU_ASSERT_EQUAL_FATAL(sbx_quota_owner_key("team-a", "alice", key), 0);
	struct sbx_claimrec r = sample(), out;
	r.state = state;
	if (state == SBX_CLAIM_WARM_SLOT) {
		sbx_quota_warm_slot_name(key, 1, r.name, sizeof r.name);
		snprintf(r.digest, sizeof r.digest, "%s", key);
	} else {
		sbx_quota_slot_name(key, 3, r.name, sizeof r.name);
	}
	cJSON *refs = cJSON_Parse(refs_json);
	cJSON *o = sbx_claimrec_build(&r, "team-a", &k, refs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	const cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "labels");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(l, SBX_LABEL_QUOTA_OWNER)->valuestring, key);
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(l, SBX_LABEL_DIGEST));
	cJSON *t = sbx_claimrec_trim(o);
	CU_ASSERT_EQUAL(sbx_claimrec_parse(t, "team-a", &k, &out, why, sizeof why), 0);
	CU_ASSERT_EQUAL(out.state, state);
	const cJSON *kept = cJSON_GetObjectItem(cJSON_GetObjectItem(t, "metadata"), "ownerReferences");
	CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(kept), 1);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(cJSON_GetArrayItem(kept, 0), "kind")->valuestring, kind);
	/* the other slot state is not believed (sealed), an unknown one is malformed */
	const char *other = state == SBX_CLAIM_SLOT ? "WarmSlot" : "Slot";
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(t, "spec"), "state", cJSON_CreateString(other));
	CU_ASSERT_EQUAL(sbx_claimrec_parse(t, "team-a", &k, &out, why, sizeof why), -1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(t, "spec"), "state", cJSON_CreateString("Slots"));
	CU_ASSERT_EQUAL(sbx_claimrec_parse(t, "team-a", &k, &out, why, sizeof why), -1);
	cJSON_Delete(t);
	cJSON_Delete(o);
	cJSON_Delete(refs);
	sbx_seal_keys_release(&k);
}

static void test_slot_record(void)
{
	/* a quota slot (sandbox/quota.h) held by a generation: the Pod
	 * reference kept, the foreign one dropped */
	slot_record(SBX_CLAIM_SLOT,
		    "[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"p\",\"uid\":\"pu\"},"
		    "{\"apiVersion\":\"x/v1\",\"kind\":\"Secret\",\"name\":\"s\",\"uid\":\"su\"}]",
		    "Pod");
	CU_ASSERT_STRING_EQUAL(sbx_claim_state_str(SBX_CLAIM_SLOT), "Slot");
}

static void test_warm_slot_record(void)
{
	/* a warm slot (maxWarm) held by a warm pod, owned by its pool */
	slot_record(SBX_CLAIM_WARM_SLOT,
		    "[{\"apiVersion\":\"sandbox.dev/v1alpha1\",\"kind\":\"SandboxWarmPool\",\"name\":\"pool\","
		    "\"uid\":\"wu\"}]",
		    "SandboxWarmPool");
	CU_ASSERT_STRING_EQUAL(sbx_claim_state_str(SBX_CLAIM_WARM_SLOT), "WarmSlot");
}

static void test_released_pod_uid(void)
{
	struct sbx_seal_keys k;
	char why[128];
	load(&k, "0123456789abcdef0123456789abcdef-one");
	/* a record of an earlier version (no podUID) still verifies, as before */
	struct sbx_claimrec r = sample(), out;
	r.state = SBX_CLAIM_SUSPENDED;
	cJSON *o = sbx_claimrec_build(&r, "team-a", &k, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "podUID"));
	CU_ASSERT_EQUAL(sbx_claimrec_parse(o, "team-a", &k, &out, why, sizeof why), 0);
	CU_ASSERT_STRING_EQUAL(out.pod_uid, "");
	/* the pod released is named, sealed and kept through the trim */
	snprintf(r.pod_uid, sizeof r.pod_uid, "0b1e5b8c-3f7a-4d2e-9c61-5a0f3e2d1c4b");
	cJSON *u = sbx_claimrec_build(&r, "team-a", &k, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	cJSON *t = sbx_claimrec_trim(u);
	CU_ASSERT_EQUAL(sbx_claimrec_parse(t, "team-a", &k, &out, why, sizeof why), 0);
	CU_ASSERT_STRING_EQUAL(out.pod_uid, r.pod_uid);
	/* changed, added to a record without one, or removed: not believed */
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(t, "spec"), "podUID", cJSON_CreateString("another"));
	CU_ASSERT_EQUAL(sbx_claimrec_parse(t, "team-a", &k, &out, why, sizeof why), -1);
	cJSON_AddStringToObject(cJSON_GetObjectItem(o, "spec"), "podUID", r.pod_uid);
	CU_ASSERT_EQUAL(sbx_claimrec_parse(o, "team-a", &k, &out, why, sizeof why), -1);
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(u, "spec"), "podUID");
	CU_ASSERT_EQUAL(sbx_claimrec_parse(u, "team-a", &k, &out, why, sizeof why), -1);
	cJSON_Delete(t);
	cJSON_Delete(u);
	cJSON_Delete(o);
	sbx_seal_keys_release(&k);
}

void register_sandbox_claimrec_tests(void)
{
	SBX_SUITE("sandbox/claimrec", { "built, sealed, trimmed, verified", test_roundtrip_and_seal },
		  { "a quota slot: labelled by its owner key, its Pod owner kept", test_slot_record },
		  { "a warm slot: labelled by its owner key, its pool owner kept, its state sealed", test_warm_slot_record },
		  { "the pod released: sealed when named, records without it as before", test_released_pod_uid });
}
