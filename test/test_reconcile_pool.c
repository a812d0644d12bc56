/* Unit tests for the controller's pool bookkeeping (reconcile/pool.h) and
 * its sets of short strings (reconcile/strset.h). */
#include <stdio.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/ktime.h"
#include "reconcile/pool.h"
#include "reconcile/strset.h"
#include "test_suites.h"

void register_reconcile_pool_tests(void); /* called from test_reconcile_all.c */

/* A namespace whose pool left: for a while it still claims through records. */
static void test_pool_gone(void)
{
	struct sbx_pool_state *s = sbx_pool_state_new(10);
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-a", 1000, 90));
	sbx_pool_gone(s, "team-a", 1000);
	CU_ASSERT_TRUE(sbx_pool_gone_within(s, "team-a", 1089, 90));
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-a", 1090, 90));
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-b", 1000, 90));
	sbx_pool_state_free(s);
}

/* The timed members of a set (pods gone, pods released): a member until its
 * time is up, renewed by a second add, swept in bulk without touching the
 * untimed members. Each check has a margin far beyond a descheduled thread
 * (the renewal once got 20 ms, and a loaded machine took more). */
static void test_strset_timed_members(void)
{
	struct sbx_strset *s = sbx_strset_new();
	sbx_strset_add_for(s, "gone", 200);
	CU_ASSERT_TRUE(sbx_strset_has(s, "gone"));
	CU_ASSERT_FALSE(sbx_strset_has(s, "other"));
	CU_ASSERT_EQUAL(sbx_strset_add(s, "kept"), 1);
	ktime_sleep_ms(250);
	CU_ASSERT_FALSE(sbx_strset_has(s, "gone"));
	sbx_strset_add_for(s, "renewed", 100);
	ktime_sleep_ms(50);
	sbx_strset_add_for(s, "renewed", 5000); /* renewed: past the first time, a member still */
	ktime_sleep_ms(100);
	CU_ASSERT_TRUE(sbx_strset_has(s, "renewed"));
	char key[32];
	for (int i = 0; i < 6000; i++) {
		snprintf(key, sizeof key, "k%d", i);
		sbx_strset_add_for(s, key, 1);
	}
	ktime_sleep_ms(5);
	for (int i = 0; i < 3000; i++)
		sbx_strset_add_for(s, "again", 1000);
	CU_ASSERT_TRUE(sbx_strset_has(s, "again"));
	CU_ASSERT_FALSE(sbx_strset_has(s, "k10"));
	CU_ASSERT_EQUAL(sbx_strset_add(s, "kept"), 0); /* untimed: never swept */
	sbx_strset_free(s);
}

void register_reconcile_pool_tests(void)
{
	SBX_SUITE("reconcile/pool", { "pools gone", test_pool_gone }, { "timed set members", test_strset_timed_members });
}
