/* SPDX-License-Identifier: MIT */
/* fx-dbgframe: no .eh_frame for its own functions (-fno-asynchronous-unwind-
 * tables) and no frame pointers: only .debug_frame describes them.
 * Shape: main -> level1 -> level2 -> dbgframe_hot (fx_levels.h). */
#define LEVELS_HOT dbgframe_hot
#include "fx_levels.h"
