/* RFC 8785 JSON Canonicalization Scheme (JCS) over a cJSON tree: the byte
 * string the spec fingerprint and the scope digest hash, so it must never
 * change for a given tree (contract section 3).
 *
 * Object members are sorted by their names' UTF-16 code units, there is no
 * whitespace, strings are escaped as ECMAScript JSON.stringify does (\" \\ \b
 * \f \n \r \t, other C0 controls as \u00xx, everything else as raw UTF-8) and
 * numbers use the ECMAScript shortest round-trip form (2 -> "2", 1e21 ->
 * "1e+21", 0.1 -> "0.1"). Refused: NaN and infinities, invalid UTF-8,
 * duplicate member names, cJSON raw values, nesting deeper than JCS_MAX_DEPTH. */
#ifndef SBX_SANDBOX_JCS_H
#define SBX_SANDBOX_JCS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/buf.h"

#define JCS_MAX_DEPTH 128
/* Cap on the output of jcs_string(). */
#define JCS_STRING_CAP (1024 * 1024)

/* Appends the canonical form of v to out. Returns 0, or -1 when v holds an
 * unsupported value or out's cap would be exceeded; on error out may hold a
 * partial prefix (the caller discards it). */
int jcs_write(const cJSON *v, struct buf *out);

/* Returns the canonical form of v as a heap string (caller frees), or NULL on
 * any error of jcs_write() or when it exceeds JCS_STRING_CAP bytes. */
char *jcs_string(const cJSON *v);

/* Writes the ECMAScript Number::toString form of a finite double into out
 * (outlen >= 32). Returns 0, or -1 for NaN and infinities. */
int jcs_format_number(double d, char *out, size_t outlen);

/* Decodes the UTF-8 sequence at s[0..len) (len >= 1) into *cp. Returns the
 * bytes it used, or 0 when malformed, overlong, a surrogate or above U+10FFFF. */
size_t jcs_utf8_next(const char *s, size_t len, uint32_t *cp);

/* Returns 1 iff s[0..len) is well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
int jcs_utf8_valid(const char *s, size_t len);

#endif
