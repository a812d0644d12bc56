#include "test_suites.h"
void register_kube_tests(void) {}
