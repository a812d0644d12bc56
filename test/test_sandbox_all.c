/* Registers the suites of controller/sandbox (the domain), one file per
 * module group: test_sandbox_*.c, linked into domain-tests too. */
#include "test_suites.h"

void register_sandbox_jcs_tests(void);
void register_sandbox_scope_tests(void);
void register_sandbox_config_tests(void);
void register_sandbox_pod_tests(void);
void register_sandbox_trim_tests(void);
void register_sandbox_status_tests(void);
void register_sandbox_lifecycle_tests(void);
void register_sandbox_claimrec_tests(void);
void register_sandbox_pool_tests(void);
void register_sandbox_wsprep_tests(void);
void register_sandbox_quota_tests(void);
void register_sandbox_netfloor_tests(void);
void register_sandbox_netprofile_tests(void);
void register_sandbox_netprobe_tests(void);

void register_sandbox_tests(void)
{
	register_sandbox_jcs_tests();
	register_sandbox_scope_tests();
	register_sandbox_config_tests();
	register_sandbox_pod_tests();
	register_sandbox_trim_tests();
	register_sandbox_status_tests();
	register_sandbox_lifecycle_tests();
	register_sandbox_claimrec_tests();
	register_sandbox_pool_tests();
	register_sandbox_wsprep_tests();
	register_sandbox_quota_tests();
	register_sandbox_netfloor_tests();
	register_sandbox_netprofile_tests();
	register_sandbox_netprobe_tests();
}
