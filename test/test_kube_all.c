/* Registers the suites of controller/kube, one file per module under test. */
#include "test_suites.h"

void register_kube_watch_tests(void);
void register_kube_errors_tests(void);
void register_kube_workqueue_tests(void);
void register_kube_config_tests(void);
void register_kube_client_tests(void);
void register_kube_lease_tests(void);

void register_kube_tests(void)
{
	register_kube_watch_tests();
	register_kube_errors_tests();
	register_kube_workqueue_tests();
	register_kube_config_tests();
	register_kube_client_tests();
	register_kube_lease_tests();
}
