#include "t.h"

int t_checks, t_failures, t_tests, t_tests_failed;
