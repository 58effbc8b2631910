/* SPDX-License-Identifier: MIT */
/* libfxplug.so: the plugin fx-dlopen loads at run time. plug_hot spins; it is
 * built without frame pointers, so only its CFI leads back to call_plugin. */
#include "workload.h"

#define UNIT 1000000ULL

volatile uint64_t wl_sink;

uint64_t plug_hot(uint64_t x);

uint64_t plug_hot(uint64_t x)
{
	WL_SPIN(x, UNIT, 1442695040888963407ULL);
	return x;
}
