/* Registers the suites of controller/reconcile (the controller), one file
 * per module group. */
#include "test_suites.h"

void register_reconcile_inforce_tests(void);
void register_reconcile_refusal_tests(void);
void register_reconcile_pool_tests(void);
void register_reconcile_reauthz_tests(void);
void register_reconcile_written_tests(void);

void register_reconcile_tests(void)
{
	register_reconcile_inforce_tests();
	register_reconcile_refusal_tests();
	register_reconcile_pool_tests();
	register_reconcile_reauthz_tests();
	register_reconcile_written_tests();
}
