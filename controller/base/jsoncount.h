/* Counting the values of a JSON text without parsing it: each value costs a
 * parse a cJSON node (64 bytes) and an allocation or two, so values per
 * byte, not bytes, decide what a text costs to parse, and a sender chooses
 * them (a tenant's objects, an admission request). Counted first, a text
 * over a budget can be refused, or asked for in smaller pieces, before any
 * of that memory is spent. A pure function. */
#ifndef SBX_BASE_JSONCOUNT_H
#define SBX_BASE_JSONCOUNT_H

#include <stddef.h>

/* The number of JSON values (objects, arrays, strings, numbers, literals;
 * an object's key counts as a string) in text[0..len), counted without
 * parsing: structural characters outside strings. An upper bound for valid
 * JSON, cheap for anything: one pass, no allocation, text need not end in
 * NUL. */
size_t json_count_values(const char *text, size_t len);

#endif
