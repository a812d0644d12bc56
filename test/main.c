/* The CUnit runner for every unit test (unit-tests), or with
 * SBX_DOMAIN_TESTS for the domain's and base's alone (domain-tests, linked
 * against those two libraries alone). Each area registers its suites from a
 * file of its own (test_<area>_*.c), so areas can grow independently. */
#include <stdio.h>
#include <stdlib.h>

#include <CUnit/Basic.h>

#include "test_suites.h"

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	register_base_tests();
	register_sandbox_tests();
#ifndef SBX_DOMAIN_TESTS
	register_kube_tests();
	register_reconcile_tests();
	register_obs_tests();
	register_webhook_certs_tests();
	register_obs_httpserver_tests();
	register_obs_probes_tests();
	register_webhook_tests();
#endif
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	unsigned run = CU_get_number_of_tests_run();
	CU_cleanup_registry();
	printf("\n%u tests run, %u failures\n", run, failed);
	return failed ? 1 : 0;
}
