#include "test_standin_common.h"
