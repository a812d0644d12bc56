/* Tests of sandbox/quota.h: which quota holds for an owner, the owner key
 * and slot names, the trim of a hostile SandboxQuota, the config's default,
 * and admission's early answer. */
#include <string.h>

#include "sandbox/config.h"
#include "sandbox/quota.h"
#include "test_suites.h"

void register_sandbox_quota_tests(void);

#define Y(s) s, sizeof s - 1

/* A trimmed quota from its JSON text. */
static cJSON *q(const char *json)
{
	cJSON *raw = cJSON_Parse(json);
	CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
	cJSON *t = sbx_quota_trim(raw);
	cJSON_Delete(raw);
	return t;
}

static cJSON *quotas(const char *const *json, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(a, q(json[i]));
	return a;
}

static void test_resolve_tiers(void)
{
	static const char *const js[] = {
		"{\"metadata\":{\"name\":\"alice\",\"namespace\":\"ns\"},\"spec\":{\"owner\":\"alice\",\"maxActive\":5,"
		"\"mode\":\"Queue\"}}",
		"{\"metadata\":{\"name\":\"alice-strict\",\"namespace\":\"ns\"},\"spec\":{\"owner\":\"alice\",\"maxActive\":3,"
		"\"maxWarm\":7,\"mode\":\"Reject\"}}",
		"{\"metadata\":{\"name\":\"all\",\"namespace\":\"ns\"},\"spec\":{\"maxActive\":2,\"maxWarm\":1}}",
	};
	cJSON *a = quotas(js, 3);
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	struct sbx_quota_limits l;
	/* the owner's own quotas: the lowest limit of each kind, Reject if any says so */
	CU_ASSERT_EQUAL(sbx_quota_resolve(a, "ns", "alice", &cfg, &l), 1);
	CU_ASSERT_EQUAL(l.max_active, 3);
	CU_ASSERT_TRUE(l.has_warm);
	CU_ASSERT_EQUAL(l.max_warm, 7);
	CU_ASSERT_TRUE(l.reject);
	CU_ASSERT_STRING_EQUAL(l.source, "SandboxQuota ns/alice");
	/* another owner, and the ownerless: the namespace-wide quota */
	CU_ASSERT_EQUAL(sbx_quota_resolve(a, "ns", "bob", &cfg, &l), 1);
	CU_ASSERT_EQUAL(l.max_active, 2);
	CU_ASSERT_EQUAL(l.max_warm, 1);
	CU_ASSERT_FALSE(l.reject);
	CU_ASSERT_EQUAL(sbx_quota_resolve(a, "ns", NULL, &cfg, &l), 1);
	CU_ASSERT_STRING_EQUAL(l.source, "SandboxQuota ns/all");
	CU_ASSERT_TRUE(sbx_quota_governs(a, cJSON_GetArrayItem(a, 2), "bob"));
	CU_ASSERT_FALSE(sbx_quota_governs(a, cJSON_GetArrayItem(a, 2), "alice"));
	CU_ASSERT_FALSE(sbx_quota_governs(a, cJSON_GetArrayItem(a, 0), "bob"));
	/* none in the namespace: the controller's default, else no limit */
	CU_ASSERT_EQUAL(sbx_quota_resolve(NULL, "ns", "bob", &cfg, &l), 0);
	CU_ASSERT_FALSE(l.has_active);
	cfg.quota = (struct sbx_quota_default){ .has_active = 1, .max_active = 4, .reject = 1 };
	CU_ASSERT_EQUAL(sbx_quota_resolve(NULL, "ns", "bob", &cfg, &l), 1);
	CU_ASSERT_EQUAL(l.max_active, 4);
	CU_ASSERT_TRUE(l.reject);
	CU_ASSERT_STRING_EQUAL(l.source, "the controller's default quota");
	/* a quota being deleted no longer governs; its owner falls back */
	cJSON *del = q("{\"metadata\":{\"name\":\"carol\",\"namespace\":\"ns\",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},"
		       "\"spec\":{\"owner\":\"carol\",\"maxActive\":0}}");
	cJSON_AddItemToArray(a, del);
	CU_ASSERT_EQUAL(sbx_quota_resolve(a, "ns", "carol", &cfg, &l), 1);
	CU_ASSERT_EQUAL(l.max_active, 2);
	sbx_config_release(&cfg);
	cJSON_Delete(a);
}

static void test_trim_hostile(void)
{
	/* an owner too long must never widen into a namespace-wide quota;
	 * out-of-range limits and unknown modes are dropped */
	char big[400];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	char js[700];
	snprintf(js, sizeof js,
		 "{\"metadata\":{\"name\":\"x\",\"namespace\":\"ns\"},\"spec\":{\"owner\":\"%s\",\"maxActive\":-1,"
		 "\"maxWarm\":1e300,\"mode\":\"Maybe\",\"extra\":[1,2,3]}}",
		 big);
	cJSON *t = q(js);
	const cJSON *s = cJSON_GetObjectItem(t, "spec");
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(s, "owner"));
	CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(s, "invalid")));
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(s, "maxActive"));
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(s, "maxWarm"));
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(s, "mode"));
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(s, "extra"));
	cJSON *a = cJSON_CreateArray();
	cJSON_AddItemToArray(a, t);
	struct sbx_quota_limits l;
	CU_ASSERT_EQUAL(sbx_quota_resolve(a, "ns", "bob", NULL, &l), 0);
	CU_ASSERT_FALSE(sbx_quota_governs(a, t, NULL));
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "metadata"), "labels"),
						   SBX_QUOTA_NS_INDEX)
				   ->valuestring,
			       "ns");
	cJSON_Delete(a);
}

static void test_keys_and_slot_names(void)
{
	char a[33], b[33], n[33], other[33];
	CU_ASSERT_EQUAL(sbx_quota_owner_key("ns", "alice", a), 0);
	CU_ASSERT_EQUAL(sbx_quota_owner_key("ns", "alice", b), 0);
	CU_ASSERT_EQUAL(sbx_quota_owner_key("ns", NULL, n), 0);
	CU_ASSERT_EQUAL(sbx_quota_owner_key("nsa", "lice", other), 0);
	CU_ASSERT_EQUAL(strlen(a), 32);
	CU_ASSERT_EQUAL(strspn(a, "0123456789abcdef"), 32);
	CU_ASSERT_STRING_EQUAL(a, b);
	CU_ASSERT_STRING_NOT_EQUAL(a, n);     /* no owner differs from every owner */
	CU_ASSERT_STRING_NOT_EQUAL(a, other); /* length prefixes */
	CU_ASSERT_EQUAL(sbx_quota_owner_key("ns", "", other), 0);
	CU_ASSERT_STRING_NOT_EQUAL(n, other);
	char name[80];
	sbx_quota_slot_name(a, 7, name, sizeof name);
	CU_ASSERT_EQUAL(strncmp(name, "sbxq-", 5), 0);
	CU_ASSERT_EQUAL(sbx_quota_slot_index(name, a), 7);
	CU_ASSERT_EQUAL(sbx_quota_slot_index(name, n), -1);
	char bad[100];
	snprintf(bad, sizeof bad, "sbxq-%s-07", a);
	CU_ASSERT_EQUAL(sbx_quota_slot_index(bad, a), -1);
	snprintf(bad, sizeof bad, "sbxq-%s-10000", a);
	CU_ASSERT_EQUAL(sbx_quota_slot_index(bad, a), -1);
	snprintf(bad, sizeof bad, "sbxq-%s-", a);
	CU_ASSERT_EQUAL(sbx_quota_slot_index(bad, a), -1);
	snprintf(bad, sizeof bad, "sbxq-%s-1x", a);
	CU_ASSERT_EQUAL(sbx_quota_slot_index(bad, a), -1);
	CU_ASSERT_EQUAL(sbx_quota_slot_index(NULL, a), -1);
	/* warm slots (maxWarm) are named apart: neither is the other */
	char warm[80];
	sbx_quota_warm_slot_name(a, 7, warm, sizeof warm);
	CU_ASSERT_EQUAL(strncmp(warm, "sbxw-", 5), 0);
	CU_ASSERT_EQUAL(sbx_quota_warm_slot_index(warm, a), 7);
	CU_ASSERT_EQUAL(sbx_quota_warm_slot_index(warm, n), -1);
	CU_ASSERT_EQUAL(sbx_quota_slot_index(warm, a), -1);
	CU_ASSERT_EQUAL(sbx_quota_warm_slot_index(name, a), -1);
	snprintf(bad, sizeof bad, "sbxw-%s-07", a);
	CU_ASSERT_EQUAL(sbx_quota_warm_slot_index(bad, a), -1);
}

/* A slot object of key n holding digest, as the cache keeps it. */
static cJSON *slot(const char *ns, const char *key, long n, const char *digest)
{
	char name[80], js[400];
	sbx_quota_slot_name(key, n, name, sizeof name);
	snprintf(js, sizeof js, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{\"scopeDigest\":\"%s\",\"state\":\"Slot\"}}",
		 name, ns, digest);
	return cJSON_Parse(js);
}

static void test_admission_early_answer(void)
{
	static const char *const js[] = {
		"{\"metadata\":{\"name\":\"alice\",\"namespace\":\"ns\"},\"spec\":{\"owner\":\"alice\",\"maxActive\":2,"
		"\"mode\":\"Reject\"}}",
		"{\"metadata\":{\"name\":\"all\",\"namespace\":\"ns\"},\"spec\":{\"maxActive\":1}}",
	};
	cJSON *a = quotas(js, 2);
	char key[33], msg[600];
	CU_ASSERT_EQUAL_FATAL(sbx_quota_owner_key("ns", "alice", key), 0);
	cJSON *slots = cJSON_CreateArray();
	cJSON_AddItemToArray(slots, slot("ns", key, 0, "d0"));
	/* one of two: admitted */
	CU_ASSERT_EQUAL(sbx_quota_refuses(a, slots, "ns", "alice", "d9", NULL, msg, sizeof msg), 0);
	cJSON_AddItemToArray(slots, slot("ns", key, 1, "d1"));
	cJSON_AddItemToArray(slots, slot("other", key, 2, "d2")); /* another namespace's: not counted */
	/* full: refused, naming the owner, the count, the limit and the quota */
	CU_ASSERT_EQUAL(sbx_quota_refuses(a, slots, "ns", "alice", "d9", NULL, msg, sizeof msg), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "workspace owner alice holds 2 of 2 active sandboxes in namespace ns"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "SandboxQuota ns/alice, mode Reject"));
	/* a retry of an intent that holds a slot: admitted */
	CU_ASSERT_EQUAL(sbx_quota_refuses(a, slots, "ns", "alice", "d1", NULL, msg, sizeof msg), 0);
	/* a slot being deleted is free */
	cJSON *m = cJSON_GetObjectItem(cJSON_GetArrayItem(slots, 1), "metadata");
	cJSON_AddStringToObject(m, "deletionTimestamp", "2026-01-01T00:00:00Z");
	CU_ASSERT_EQUAL(sbx_quota_refuses(a, slots, "ns", "alice", "d9", NULL, msg, sizeof msg), 0);
	/* Queue mode never refuses at admission (the Sandbox waits) */
	char bkey[33];
	CU_ASSERT_EQUAL_FATAL(sbx_quota_owner_key("ns", "bob", bkey), 0);
	cJSON *bs = cJSON_CreateArray();
	cJSON_AddItemToArray(bs, slot("ns", bkey, 0, "b0"));
	cJSON_AddItemToArray(bs, slot("ns", bkey, 1, "b1"));
	CU_ASSERT_EQUAL(sbx_quota_refuses(a, bs, "ns", "bob", "b9", NULL, msg, sizeof msg), 0);
	/* no quota at all */
	CU_ASSERT_EQUAL(sbx_quota_refuses(NULL, bs, "ns", "bob", "b9", NULL, msg, sizeof msg), 0);
	cJSON_Delete(bs);
	cJSON_Delete(slots);
	cJSON_Delete(a);
}

static void test_config_default(void)
{
	struct sbx_config cfg;
	char err[256];
	sbx_config_init(&cfg);
	CU_ASSERT_EQUAL(sbx_config_parse(&cfg, Y("quota:\n  maxActive: 20\n  maxWarm: 3\n  mode: Reject\n"), err, sizeof err), 0);
	CU_ASSERT_TRUE(cfg.quota.has_active);
	CU_ASSERT_EQUAL(cfg.quota.max_active, 20);
	CU_ASSERT_EQUAL(cfg.quota.max_warm, 3);
	CU_ASSERT_TRUE(cfg.quota.reject);
	sbx_config_release(&cfg);
	static const char *const bad[] = { "quota:\n  maxActive: -1\n", "quota:\n  maxActive: 1.5\n",
					   "quota:\n  maxActive: 10001\n", "quota:\n  mode: Drop\n",
					   "quota:\n  maxActiv: 2\n", "quota:\n  maxWarm: ten\n" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sbx_config_init(&cfg);
		CU_ASSERT_EQUAL(sbx_config_parse(&cfg, bad[i], strlen(bad[i]), err, sizeof err), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "quota"));
		sbx_config_release(&cfg);
	}
}

void register_sandbox_quota_tests(void)
{
	SBX_SUITE("sandbox/quota", { "the owner's quota, then the namespace's, then the default", test_resolve_tiers },
		  { "a hostile SandboxQuota trimmed to what is valid", test_trim_hostile },
		  { "owner keys and slot names", test_keys_and_slot_names },
		  { "admission refuses a new intent past a full Reject quota", test_admission_early_answer },
		  { "the controller's default quota in its configuration", test_config_default });
}
