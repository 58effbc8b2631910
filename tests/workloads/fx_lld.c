/* SPDX-License-Identifier: MIT */
/* fx-lld: linked by lld as a PIE, whose executable segment sits at a
 * virtual address other than its file offset: CFI lookups need the right load
 * bias.
 * Shape: main -> level1 -> level2 -> lld_hot (fx_levels.h). */
#define LEVELS_HOT lld_hot
#include "fx_levels.h"
