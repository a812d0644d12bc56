/* Tests of reconcile/reauthz.h: the answers the controller keeps about
 * whether a pool's author may still use an owner. */
#include <string.h>

#include "reconcile/reauthz.h"
#include "test_suites.h"

void register_reconcile_reauthz_tests(void);

static const char KEY[] = "0123456789abcdef0123456789abcdef";

/* An answer is kept for its time (15 s allowed, 5 s refused) from when its
 * question was asked, then is none. */
static void test_kept_for_its_time(void)
{
	struct sbx_reauthz *ra = sbx_reauthz_new();
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 1000, NULL, 0), -1);
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 1, NULL, 1000, 1010), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 1000 + SBX_REAUTHZ_ALLOW_MS - 1, NULL, 0), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 1000 + SBX_REAUTHZ_ALLOW_MS, NULL, 0), -1);
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 0, NULL, 20000, 20010), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 20000 + SBX_REAUTHZ_DENY_MS - 1, NULL, 0), 0);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 20000 + SBX_REAUTHZ_DENY_MS, NULL, 0), -1);
	/* a later question's answer replaces it */
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 1, NULL, 30000, 30010), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 30020, NULL, 0), 1);
	sbx_reauthz_free(ra);
}

/* A review the API server was slow to answer (asked at 1.0 s, answered at
 * 5.0 s) is kept for its time from 1.0 s: the authorizer may have looked
 * as soon as it was asked, so a grant taken away just after stands no
 * longer than SBX_REAUTHZ_ALLOW_MS (docs/api.md), not that plus the review's
 * time. */
static void test_kept_from_the_question(void)
{
	struct sbx_reauthz *ra = sbx_reauthz_new();
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 1, NULL, 1000, 5000), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 5001, NULL, 0), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 1000 + SBX_REAUTHZ_ALLOW_MS, NULL, 0), -1);
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 0, NULL, 30000, 34000), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 30000 + SBX_REAUTHZ_DENY_MS, NULL, 0), -1);
	sbx_reauthz_free(ra);
}

/* Two checks of one question at once (a pool's reconcile and a bind): the
 * one asked before the grant was taken away is answered last. Its "allowed"
 * must not replace the refusal given to the question asked after it, or the
 * revoked author is taken as allowed for another 15 s. */
static void test_an_older_question_answered_late_keeps_the_refusal(void)
{
	struct sbx_reauthz *ra = sbx_reauthz_new();
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 0, NULL, 2000, 2100), 1); /* asked at 2.0 s: refused */
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 1, NULL, 1000, 2500), 0); /* asked at 1.0 s, answered at 2.5 s: allowed */
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 2600, NULL, 0), 0);
	/* ... and after the refusal's time, no answer, not the late one */
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 2100 + SBX_REAUTHZ_DENY_MS, NULL, 0), -1);
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 1, NULL, 1500, 9000), 0);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 9001, NULL, 0), -1);
	/* the same the other way round: a grant given back */
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 1, NULL, 12000, 12100), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 0, NULL, 11000, 12200), 0);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 12300, NULL, 0), 1);
	sbx_reauthz_free(ra);
}

/* A kept refusal gives the authorizer's reason again: a status message
 * built from it reads the same whether the answer was asked or kept, so
 * reconciles a few seconds apart do not rewrite it (and send an event)
 * with each other wording. A reason too long for its room is cut. */
static void test_a_kept_refusal_keeps_its_reason(void)
{
	struct sbx_reauthz *ra = sbx_reauthz_new();
	char why[64] = "stale", longer[400];
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 0, "RBAC: no rule grants use", 1000, 1010), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 1020, why, sizeof why), 0);
	CU_ASSERT_STRING_EQUAL(why, "RBAC: no rule grants use");
	/* a later question's answer replaces the reason too */
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 0, NULL, 2000, 2010), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 2020, why, sizeof why), 0);
	CU_ASSERT_STRING_EQUAL(why, "");
	memset(longer, 'r', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';
	CU_ASSERT_EQUAL(sbx_reauthz_keep(ra, KEY, 0, longer, 3000, 3010), 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 3020, why, sizeof why), 0);
	CU_ASSERT_EQUAL(strlen(why), sizeof why - 1);
	CU_ASSERT_EQUAL(sbx_reauthz_kept(ra, KEY, 3020 + SBX_REAUTHZ_DENY_MS, why, sizeof why), -1);
	CU_ASSERT_STRING_EQUAL(why, "");
	sbx_reauthz_free(ra);
}

void register_reconcile_reauthz_tests(void)
{
	CU_pSuite s = CU_add_suite("reconcile/reauthz", NULL, NULL);
	CU_add_test(s, "answers: kept for their time", test_kept_for_its_time);
	CU_add_test(s, "answers: their time runs from the question", test_kept_from_the_question);
	CU_add_test(s, "answers: an older question answered late keeps the refusal",
		    test_an_older_question_answered_late_keeps_the_refusal);
	CU_add_test(s, "answers: a kept refusal keeps its reason", test_a_kept_refusal_keeps_its_reason);
}
