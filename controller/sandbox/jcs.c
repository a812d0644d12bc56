#include "sandbox/jcs.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"

/* Decodes one UTF-8 sequence from s[0..len). Returns the bytes it used and
 * the code point in *cp, or 0 when the sequence is malformed, overlong, a
 * surrogate or above U+10FFFF. */
static size_t utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xC2 && c <= 0xDF) {
		n = 2, v = c & 0x1F, min = 0x80;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3, v = c & 0x0F, min = 0x800;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	*cp = v;
	return n;
}

size_t jcs_utf8_next(const char *s, size_t len, uint32_t *cp)
{
	return len ? utf8_decode((const unsigned char *)s, len, cp) : 0;
}

int jcs_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	while (len) {
		uint32_t cp;
		size_t n = utf8_decode(p, len, &cp);
		if (!n)
			return 0;
		p += n;
		len -= n;
	}
	return 1;
}

/* Walks a valid UTF-8 string as UTF-16 code units, the order RFC 8785 sorts
 * member names by (it differs from byte order above U+FFFF). */
struct u16iter {
	const unsigned char *p;
	size_t left;
	uint16_t pending; /* low surrogate still to return, or 0 */
};

/* Stores the next code unit in *u; returns 0 at the end of the string. */
static int u16_next(struct u16iter *it, uint16_t *u)
{
	if (it->pending) {
		*u = it->pending;
		it->pending = 0;
		return 1;
	}
	if (!it->left)
		return 0;
	uint32_t cp = 0;
	size_t n = utf8_decode(it->p, it->left, &cp);
	if (!n) { /* cannot happen: names are validated before sorting */
		n = 1;
		cp = 0xFFFD;
	}
	it->p += n;
	it->left -= n;
	if (cp < 0x10000) {
		*u = (uint16_t)cp;
	} else {
		cp -= 0x10000;
		*u = (uint16_t)(0xD800 + (cp >> 10));
		it->pending = (uint16_t)(0xDC00 + (cp & 0x3FF));
	}
	return 1;
}

/* qsort comparator over cJSON member pointers, by UTF-16 code units. */
static int cmp_members(const void *a, const void *b)
{
	const char *x = (*(const cJSON *const *)a)->string;
	const char *y = (*(const cJSON *const *)b)->string;
	struct u16iter ix = { (const unsigned char *)x, strlen(x), 0 };
	struct u16iter iy = { (const unsigned char *)y, strlen(y), 0 };
	for (;;) {
		uint16_t ux, uy;
		int hx = u16_next(&ix, &ux), hy = u16_next(&iy, &uy);
		if (!hx || !hy)
			return hx - hy;
		if (ux != uy)
			return ux < uy ? -1 : 1;
	}
}

/* Appends s as a JSON string literal escaped the way JSON.stringify does. */
static int write_string(const char *s, struct buf *out)
{
	size_t len = strlen(s);
	if (!jcs_utf8_valid(s, len))
		return -1;
	if (buf_append(out, "\"", 1) < 0)
		return -1;
	size_t run = 0; /* start of the pending run of bytes copied verbatim */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		const char *e = NULL;
		switch (c) {
		case '"':
			e = "\\\"";
			break;
		case '\\':
			e = "\\\\";
			break;
		case '\b':
			e = "\\b";
			break;
		case '\f':
			e = "\\f";
			break;
		case '\n':
			e = "\\n";
			break;
		case '\r':
			e = "\\r";
			break;
		case '\t':
			e = "\\t";
			break;
		default:
			if (c < 0x20) {
				snprintf(esc, sizeof esc, "\\u%04x", c);
				e = esc;
			}
		}
		if (!e)
			continue;
		if (buf_append(out, s + run, i - run) < 0 || buf_appends(out, e) < 0)
			return -1;
		run = i + 1;
	}
	if (buf_append(out, s + run, len - run) < 0 || buf_append(out, "\"", 1) < 0)
		return -1;
	return 0;
}

/* Returns 1 iff the decimal s * 10^exp reads back as exactly d. */
static int round_trips(uint64_t s, int exp, double d)
{
	char tmp[48];
	snprintf(tmp, sizeof tmp, "%llue%d", (unsigned long long)s, exp);
	return strtod(tmp, NULL) == d;
}

/* Finds the ECMAScript digits of a finite d > 0: the fewest significant
 * digits (k of them, in digits[]) that read back as d, and among those the
 * closest to d, with d ~= 0.digits * 10^n. %.*e gives the closest k-digit
 * decimal; near powers of two the rounding interval is lopsided, so the
 * neighbours one unit either side are tried before adding a digit. */
static void shortest_digits(double d, char digits[20], int *k, int *n)
{
	for (int p = 1; p <= 17; p++) {
		char tmp[48];
		snprintf(tmp, sizeof tmp, "%.*e", p - 1, d);
		uint64_t s = 0;
		const char *q = tmp;
		for (; *q && *q != 'e'; q++)
			if (*q >= '0' && *q <= '9')
				s = s * 10 + (uint64_t)(*q - '0');
		int e10 = atoi(q + 1); /* d ~= s * 10^(e10 - p + 1) */
		int exp = e10 - p + 1;
		uint64_t lo = 1;
		for (int i = 1; i < p; i++)
			lo *= 10;
		uint64_t found = 0;
		if (round_trips(s, exp, d))
			found = s;
		else if (s - 1 >= lo && round_trips(s - 1, exp, d))
			found = s - 1;
		else if (s + 1 < lo * 10 && round_trips(s + 1, exp, d))
			found = s + 1;
		if (!found && p < 17)
			continue;
		if (!found) /* 17 digits always round-trip; keep %.17e's answer */
			found = s;
		while (found % 10 == 0 && p > 1) {
			found /= 10;
			p--;
			exp++;
		}
		snprintf(digits, 20, "%llu", (unsigned long long)found);
		*k = (int)strlen(digits);
		*n = exp + *k;
		return;
	}
}

int jcs_format_number(double d, char *out, size_t outlen)
{
	if (!isfinite(d) || outlen < 32)
		return -1;
	if (d == 0) { /* includes -0, which ECMAScript prints as "0" */
		snprintf(out, outlen, "0");
		return 0;
	}
	char digits[20];
	int k, n;
	shortest_digits(fabs(d), digits, &k, &n);
	/* At most 1 + 21 + 1 + 6 + 17 bytes: the cases below are those of
	 * ECMAScript's Number::toString, with n the decimal point position. */
	char *o = out;
	if (d < 0)
		*o++ = '-';
	if (k <= n && n <= 21) {
		memcpy(o, digits, (size_t)k);
		memset(o + k, '0', (size_t)(n - k));
		o += n;
		*o = '\0';
	} else if (n > 0 && n <= 21) {
		memcpy(o, digits, (size_t)n);
		o[n] = '.';
		strcpy(o + n + 1, digits + n);
	} else if (n > -6 && n <= 0) {
		*o++ = '0';
		*o++ = '.';
		memset(o, '0', (size_t)-n);
		strcpy(o - n, digits);
	} else {
		int e = n - 1;
		*o++ = digits[0];
		if (k > 1) {
			*o++ = '.';
			memcpy(o, digits + 1, (size_t)(k - 1));
			o += k - 1;
		}
		snprintf(o, outlen - (size_t)(o - out), "e%c%d", e < 0 ? '-' : '+', e < 0 ? -e : e);
	}
	return 0;
}

/* Appends the canonical form of v; depth bounds the recursion. */
static int write_value(const cJSON *v, struct buf *out, int depth)
{
	if (!v || depth > JCS_MAX_DEPTH)
		return -1;
	if (cJSON_IsNull(v))
		return buf_appends(out, "null");
	if (cJSON_IsTrue(v))
		return buf_appends(out, "true");
	if (cJSON_IsFalse(v))
		return buf_appends(out, "false");
	if (cJSON_IsNumber(v)) {
		char num[32];
		if (jcs_format_number(v->valuedouble, num, sizeof num) < 0)
			return -1;
		return buf_appends(out, num);
	}
	if (cJSON_IsString(v))
		return v->valuestring ? write_string(v->valuestring, out) : -1;
	if (cJSON_IsArray(v)) {
		if (buf_append(out, "[", 1) < 0)
			return -1;
		for (const cJSON *c = v->child; c; c = c->next) {
			if (c != v->child && buf_append(out, ",", 1) < 0)
				return -1;
			if (write_value(c, out, depth + 1) < 0)
				return -1;
		}
		return buf_append(out, "]", 1);
	}
	if (cJSON_IsObject(v)) {
		size_t n = 0;
		for (const cJSON *c = v->child; c; c = c->next) {
			if (!c->string || !jcs_utf8_valid(c->string, strlen(c->string)))
				return -1;
			n++;
		}
		const cJSON **m = xcalloc(n ? n : 1, sizeof *m);
		size_t i = 0;
		for (const cJSON *c = v->child; c; c = c->next)
			m[i++] = c;
		qsort(m, n, sizeof *m, cmp_members);
		int rc = buf_append(out, "{", 1);
		for (i = 0; rc == 0 && i < n; i++) {
			/* RFC 8785 inherits I-JSON's unique names: a duplicate
			 * would make the canonical form ambiguous. */
			if (i && strcmp(m[i - 1]->string, m[i]->string) == 0)
				rc = -1;
			else if (i && buf_append(out, ",", 1) < 0)
				rc = -1;
			else if (write_string(m[i]->string, out) < 0 || buf_append(out, ":", 1) < 0)
				rc = -1;
			else
				rc = write_value(m[i], out, depth + 1);
		}
		free(m);
		return rc < 0 ? -1 : buf_append(out, "}", 1);
	}
	return -1; /* cJSON_Raw, cJSON_Invalid */
}

int jcs_write(const cJSON *v, struct buf *out)
{
	return write_value(v, out, 0) < 0 ? -1 : 0;
}

char *jcs_string(const cJSON *v)
{
	struct buf b;
	buf_init(&b, JCS_STRING_CAP);
	if (jcs_write(v, &b) < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b);
}
