/* SPDX-License-Identifier: MIT */
/* fx-nofp: built without frame pointers (-fomit-frame-pointer): only CFI can
 * walk it.
 * Shape: main -> level1 -> level2 -> nofp_hot (fx_levels.h). */
#define LEVELS_HOT nofp_hot
#include "fx_levels.h"
