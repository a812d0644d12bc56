/* Tests of reconcile/written.h: which Sandbox updates are the controller's
 * own status write coming back, and so need no reconcile of their own. */
#include <cjson/cJSON.h>

#include "reconcile/written.h"
#include "test_suites.h"

void register_reconcile_written_tests(void);

static cJSON *sandbox(const char *rv, const char *suspend, const char *phase)
{
	char js[512];
	snprintf(js, sizeof js,
		 "{\"metadata\":{\"name\":\"s\",\"namespace\":\"n\",\"uid\":\"u1\",\"resourceVersion\":\"%s\"},"
		 "\"spec\":{\"image\":\"i\",\"lifecycle\":{\"suspend\":%s}},\"status\":{\"phase\":\"%s\"}}",
		 rv, suspend, phase);
	cJSON *o = cJSON_Parse(js);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	return o;
}

static void test_own_update(void)
{
	struct sbx_written *w = sbx_written_new();
	cJSON *old = sandbox("9", "false", "Pending");
	/* Our status write (rv 11) arriving over rv 9: ours, no reconcile. */
	cJSON *ours = sandbox("11", "false", "Running");
	sbx_written_put(w, "u1", "11");
	CU_ASSERT_EQUAL(sbx_written_own_update(w, old, ours), 1);
	/* Once arrived, the same update again is not ours any more. */
	CU_ASSERT_EQUAL(sbx_written_own_update(w, old, ours), 0);
	/* A relist folds a user's write (rv 10: suspend) and ours (rv 11) into
	 * one update from 9 to 11: the user's change must be reconciled. */
	cJSON *folded = sandbox("11", "true", "Running");
	sbx_written_put(w, "u1", "11");
	CU_ASSERT_EQUAL(sbx_written_own_update(w, old, folded), 0);
	/* ... and the entry is gone, as after any arrival. */
	CU_ASSERT_EQUAL(sbx_written_own_update(w, old, ours), 0);
	/* A label or annotation changed alongside: not ours either. */
	cJSON *labelled = sandbox("11", "false", "Running");
	cJSON_AddItemToObject(cJSON_GetObjectItem(labelled, "metadata"), "labels", cJSON_Parse("{\"a\":\"b\"}"));
	sbx_written_put(w, "u1", "11");
	CU_ASSERT_EQUAL(sbx_written_own_update(w, old, labelled), 0);
	/* Another version than our write: not ours. */
	sbx_written_put(w, "u1", "12");
	CU_ASSERT_EQUAL(sbx_written_own_update(w, old, ours), 0);
	cJSON_Delete(old);
	cJSON_Delete(ours);
	cJSON_Delete(folded);
	cJSON_Delete(labelled);
	sbx_written_free(w);
}

static void test_changed_beyond_status(void)
{
	cJSON *a = sandbox("1", "false", "Pending"), *b = sandbox("2", "false", "Running");
	cJSON *c = sandbox("3", "true", "Running");
	CU_ASSERT_EQUAL(sbx_changed_beyond_status(a, b), 0);
	CU_ASSERT_EQUAL(sbx_changed_beyond_status(a, c), 1);
	CU_ASSERT_EQUAL(sbx_changed_beyond_status(b, c), 1);
	cJSON_Delete(a);
	cJSON_Delete(b);
	cJSON_Delete(c);
}

void register_reconcile_written_tests(void)
{
	SBX_SUITE("reconcile/written (own writes)", { "an own status write and a relist's fold", test_own_update },
		  { "changes beyond the status", test_changed_beyond_status });
}
