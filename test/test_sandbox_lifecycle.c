/* Tests of sandbox/spec.h's lifecycle: spec.lifecycle parsed and validated, and
 * kept out of the fingerprint and the digest (contract section 3). */
#include <string.h>

#include "base/ktime.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"
#include "test_suites.h"

void register_sandbox_lifecycle_tests(void);

static void test_parse(void)
{
	char msg[256];
	struct sbx_lifecycle l;
	cJSON *s = cJSON_Parse("{\"image\":\"i\"}");
	CU_ASSERT_EQUAL(sbx_lifecycle_parse(s, &l, msg, sizeof msg), 0);
	CU_ASSERT_FALSE(l.has_shutdown || l.suspend || l.delete_policy);
	cJSON_Delete(s);
	s = cJSON_Parse("{\"image\":\"i\",\"lifecycle\":{\"shutdownTime\":\"2026-12-01T10:00:00Z\",\"shutdownPolicy\":\"Delete\","
			"\"suspend\":true}}");
	CU_ASSERT_EQUAL(sbx_lifecycle_parse(s, &l, msg, sizeof msg), 0);
	time_t t;
	ktime_parse_rfc3339("2026-12-01T10:00:00Z", &t);
	CU_ASSERT_TRUE(l.has_shutdown && l.shutdown == t && l.delete_policy && l.suspend);
	CU_ASSERT_TRUE(sbx_lifecycle_expired(&l, t));
	CU_ASSERT_FALSE(sbx_lifecycle_expired(&l, t - 1));
	CU_ASSERT_EQUAL(sbx_spec_validate(s, msg, sizeof msg), 0);
	cJSON_Delete(s);
	static const struct {
		const char *lc, *field;
	} bad[] = {
		{ "[]", "spec.lifecycle" },
		{ "{\"shutdownTime\":\"tomorrow\"}", "shutdownTime" },
		{ "{\"shutdownTime\":5}", "shutdownTime" },
		{ "{\"shutdownPolicy\":\"Sometimes\"}", "shutdownPolicy" },
		{ "{\"suspend\":\"yes\"}", "suspend" },
		{ "{\"pause\":true}", "pause" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char text[256];
		snprintf(text, sizeof text, "{\"image\":\"i\",\"lifecycle\":%s}", bad[i].lc);
		s = cJSON_Parse(text);
		CU_ASSERT_EQUAL(sbx_lifecycle_parse(s, &l, msg, sizeof msg), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad[i].field));
		CU_ASSERT_EQUAL(sbx_spec_validate(s, msg, sizeof msg), -1);
		cJSON_Delete(s);
	}
}

/* Changing lifecycle never changes the fingerprint or the digest, with and
 * without an owner and a key; and the intent comparison sees only the rest. */
static void test_lifecycle_out_of_scope(void)
{
	static const char *const specs[] = {
		"{\"image\":\"registry.local/agent:1.0\",\"idempotencyKey\":\"task-42\",\"workspaceOwner\":\"alice\","
		"\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"4Gi\"},\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}}}",
		"{\"image\":\"registry.local/agent:1.0\",\"idempotencyKey\":\"task-42\","
		"\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"4Gi\"},\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}}}",
		"{\"image\":\"registry.local/agent:1.0\"}",
	};
	for (size_t i = 0; i < 3; i++) {
		cJSON *a = cJSON_Parse(specs[i]), *b = cJSON_Parse(specs[i]);
		cJSON_AddItemToObject(b, "lifecycle",
				      cJSON_Parse("{\"shutdownTime\":\"2026-12-01T10:00:00Z\",\"suspend\":true}"));
		struct sbx_scope sa, sb;
		char err[128];
		CU_ASSERT_EQUAL_FATAL(sbx_scope_compute("team-a", "uid-1", a, &sa, err, sizeof err), 0);
		CU_ASSERT_EQUAL_FATAL(sbx_scope_compute("team-a", "uid-1", b, &sb, err, sizeof err), 0);
		CU_ASSERT_STRING_EQUAL(sa.fingerprint, sb.fingerprint);
		CU_ASSERT_STRING_EQUAL(sa.digest, sb.digest);
		CU_ASSERT_TRUE(sbx_spec_same_intent(a, b));
		/* the member is still there: the intent is a view, not a copy */
		CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(b, "lifecycle"));
		cJSON_ReplaceItemInObject(b, "image", cJSON_CreateString("other"));
		CU_ASSERT_FALSE(sbx_spec_same_intent(a, b));
		cJSON_Delete(a);
		cJSON_Delete(b);
	}
	/* the first vector's digest, with a lifecycle added */
	cJSON *v = cJSON_Parse(specs[0]);
	cJSON_AddItemToObject(v, "lifecycle", cJSON_Parse("{\"shutdownPolicy\":\"Delete\"}"));
	struct sbx_scope sc;
	char err[128];
	CU_ASSERT_EQUAL(sbx_scope_compute("team-a", "x", v, &sc, err, sizeof err), 0);
	CU_ASSERT_STRING_EQUAL(sc.digest, "a2c8db0f290b9f479603660ab6f7894e");
	cJSON_Delete(v);
}

void register_sandbox_lifecycle_tests(void)
{
	SBX_SUITE("sandbox/lifecycle", { "spec.lifecycle parsed and validated", test_parse },
		  { "lifecycle is out of the fingerprint and the digest", test_lifecycle_out_of_scope });
}
