/* Unit tests for the leader-election decision in kube/lease. */
#include <CUnit/CUnit.h>

#include "kube/lease.h"
#include "test_suites.h"

void register_kube_lease_tests(void);

static void test_can_take(void)
{
	/* Free, released or ours: take it. */
	CU_ASSERT_EQUAL(lease_can_take(NULL, "me", 0, 15), 1);
	CU_ASSERT_EQUAL(lease_can_take("", "me", 0, 15), 1);
	CU_ASSERT_EQUAL(lease_can_take("me", "me", 0, 15), 1);
	/* Another holder: only after its record stood still for the whole duration,
	 * measured on our clock. */
	CU_ASSERT_EQUAL(lease_can_take("other", "me", 0, 15), 0);
	CU_ASSERT_EQUAL(lease_can_take("other", "me", 14999, 15), 0);
	CU_ASSERT_EQUAL(lease_can_take("other", "me", 15000, 15), 1);
	CU_ASSERT_EQUAL(lease_can_take("other", "me", 1000, 1), 1);
	/* A prefix of our identity is someone else. */
	CU_ASSERT_EQUAL(lease_can_take("me", "me-2", 0, 15), 0);
}

void register_kube_lease_tests(void)
{
	SBX_SUITE("kube/lease", { "who may take the lease", test_can_take });
}
