/* Unit tests for sandbox/status: conditions, transitions, comparison, time. */
#include <string.h>

#include <CUnit/CUnit.h>

#include "sandbox/status.h"
#include "test_suites.h"

void register_sandbox_status_tests(void); /* called from test_sandbox_all.c */

static struct sbx_status_in bound_in(void)
{
	struct sbx_status_in in = {
		.phase = "Running",
		.pod_name = "sbx-a",
		.pod_uid = "u1",
		.scope_digest = "d",
		.fingerprint = "f",
		.binding = "Created",
		.claimed_at = "2026-01-01T00:00:00Z",
		.key_expires_at = "2026-01-02T00:00:00Z",
		.generation = 1,
		.bound = 1,
		.bound_reason = "PodCreated",
		.bound_message = "created pod sbx-a",
		.ready = 1,
		.ready_reason = "PodReady",
		.ready_message = "ok",
	};
	return in;
}

static const char *cond_field(const cJSON *st, const char *type, const char *field)
{
	const cJSON *c = sbx_status_condition(st, type);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, field);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_build_fields(void)
{
	struct sbx_status_in in = bound_in();
	cJSON *st = sbx_status_build(&in, NULL, "2026-01-01T00:00:05Z");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(st, "phase")->valuestring, "Running");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(st, "binding")->valuestring, "Created");
	CU_ASSERT_EQUAL((int)cJSON_GetObjectItem(st, "observedGeneration")->valuedouble, 1);
	CU_ASSERT_STRING_EQUAL(cond_field(st, "Bound", "status"), "True");
	CU_ASSERT_STRING_EQUAL(cond_field(st, "Bound", "reason"), "PodCreated");
	CU_ASSERT_STRING_EQUAL(cond_field(st, "Ready", "reason"), "PodReady");
	CU_ASSERT_STRING_EQUAL(cond_field(st, "Ready", "lastTransitionTime"), "2026-01-01T00:00:05Z");
	cJSON_Delete(st);
}

static void test_unbound_clears_fields(void)
{
	struct sbx_status_in in = { .phase = "Rejected", .generation = 2, .bound = 0, .bound_reason = "IdempotencyKeyConflict", .ready_reason = "NotBound" };
	cJSON *st = sbx_status_build(&in, NULL, "2026-01-01T00:00:05Z");
	CU_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(st, "podName")));
	CU_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(st, "binding")));
	CU_ASSERT_STRING_EQUAL(cond_field(st, "Bound", "status"), "False");
	CU_ASSERT_STRING_EQUAL(cond_field(st, "Bound", "message"), "");
	cJSON_Delete(st);
}

static void test_transition_time_kept(void)
{
	struct sbx_status_in in = bound_in();
	cJSON *old = sbx_status_build(&in, NULL, "2026-01-01T00:00:05Z");
	in.ready = 0;
	in.ready_reason = "PodPending";
	cJSON *now = sbx_status_build(&in, old, "2026-01-01T00:09:00Z");
	CU_ASSERT_STRING_EQUAL(cond_field(now, "Bound", "lastTransitionTime"), "2026-01-01T00:00:05Z");
	CU_ASSERT_STRING_EQUAL(cond_field(now, "Ready", "lastTransitionTime"), "2026-01-01T00:09:00Z");
	CU_ASSERT_FALSE(sbx_status_same(old, now));
	cJSON_Delete(old);
	cJSON_Delete(now);
}

static void test_same_ignores_time_and_nulls(void)
{
	struct sbx_status_in in = bound_in();
	cJSON *a = sbx_status_build(&in, NULL, "2026-01-01T00:00:05Z");
	cJSON *b = sbx_status_build(&in, NULL, "2027-01-01T00:00:05Z");
	CU_ASSERT_TRUE(sbx_status_same(a, b));
	/* The apiserver drops nulls from a merge patch: absent equals null. */
	cJSON *c = sbx_status_build(&(struct sbx_status_in){ .phase = "Pending", .bound_reason = "Waiting", .ready_reason = "NotBound" },
				    NULL, "t");
	cJSON *d = cJSON_Duplicate(c, 1);
	cJSON_DeleteItemFromObject(d, "podName");
	CU_ASSERT_TRUE(sbx_status_same(c, d));
	CU_ASSERT_FALSE(sbx_status_same(a, c));
	cJSON_Delete(a);
	cJSON_Delete(b);
	cJSON_Delete(c);
	cJSON_Delete(d);
}

void register_sandbox_status_tests(void)
{
	SBX_SUITE("sandbox status", { "build fields", test_build_fields },
		  { "unbound clears fields", test_unbound_clears_fields },
		  { "transition time kept", test_transition_time_kept },
		  { "same ignores time and nulls", test_same_ignores_time_and_nulls });
}
