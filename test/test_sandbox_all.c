#include "test_suites.h"
void register_sandbox_tests(void) {}
