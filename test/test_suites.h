/* Suite registration entry points, one per area, called by test/main.c. */
#ifndef SBX_TEST_SUITES_H
#define SBX_TEST_SUITES_H

#include <stdlib.h>

#include <CUnit/CUnit.h>

void register_base_tests(void);
void register_sandbox_tests(void);
void register_kube_tests(void);
void register_reconcile_tests(void);
void register_obs_tests(void);
void register_webhook_certs_tests(void);
void register_obs_httpserver_tests(void);
void register_obs_probes_tests(void);
void register_webhook_tests(void);

/* Adds a suite with its tests; aborts the run if CUnit cannot register it. */
#define SBX_SUITE(name, ...)                                             \
	do {                                                             \
		CU_pSuite s_ = CU_add_suite(name, NULL, NULL);           \
		struct {                                                 \
			const char *n;                                   \
			CU_TestFunc f;                                   \
		} t_[] = { __VA_ARGS__ };                                \
		if (!s_)                                                 \
			abort();                                         \
		for (size_t i_ = 0; i_ < sizeof t_ / sizeof t_[0]; i_++) \
			if (!CU_add_test(s_, t_[i_].n, t_[i_].f))        \
				abort();                                 \
	} while (0)

#endif
