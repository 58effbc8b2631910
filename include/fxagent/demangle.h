/* SPDX-License-Identifier: MIT */
/* demangle: C++ (Itanium) and Rust (legacy and v0) names, through libiberty. */
#ifndef FXAGENT_DEMANGLE_H
#define FXAGENT_DEMANGLE_H

/* Returns a malloc'ed demangled form of @name, or NULL when @name is not a
 * mangled name (or on ENOMEM): the caller then keeps @name as it is. */
char *fx_demangle(const char *name);

#endif
