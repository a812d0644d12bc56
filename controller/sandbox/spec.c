#include "sandbox/spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/jsonget.h"
#include "base/ktime.h"
#include "sandbox/jcs.h"
#include "sandbox/mac.h"

/* Longest user value quoted in a message, in bytes before escaping. */
#define QUOTE_MAX 64

/* Returns 1 iff c may appear in an owner; edge: first or last position. */
static int owner_char(char c, int edge)
{
	if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
		return 1;
	return !edge && (c == '.' || c == '_' || c == '-');
}

int sbx_owner_valid(const char *owner)
{
	if (!owner)
		return 0;
	size_t n = strlen(owner);
	if (n < 1 || n > SBX_OWNER_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!owner_char(owner[i], i == 0 || i == n - 1))
			return 0;
	return 1;
}

int sbx_key_valid(const char *key)
{
	if (!key)
		return 0;
	size_t n = strlen(key);
	if (n < 1 || n > SBX_KEY_MAX)
		return 0;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t used = jcs_utf8_next(key + i, n - i, &cp);
		if (!used || cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
			return 0;
		i += used;
	}
	return 1;
}

/* Writes s into out as a double-quoted string of printable ASCII (other bytes
 * as \xNN), cut after QUOTE_MAX bytes, so a hostile value cannot forge log
 * lines or bloat a status message. */
static void quote(const char *s, char *out, size_t outlen)
{
	size_t o = 0;
	if (outlen < 8) {
		if (outlen)
			out[0] = '\0';
		return;
	}
	out[o++] = '"';
	size_t i;
	for (i = 0; i < QUOTE_MAX && s[i] && o + 8 < outlen; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
	}
	if (s[i] && o + 5 < outlen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o++] = '"';
	out[o] = '\0';
}

static int fail(char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats the message and returns -1, so checks read "return fail(...)". */
static int fail(char *msg, size_t msglen, const char *fmt, ...)
{
	if (msglen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, msglen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Checks that field f, when present, is an array of strings. */
static int check_string_array(const cJSON *spec, const char *f, char *msg, size_t msglen)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(spec, f);
	if (!a)
		return 0;
	if (!cJSON_IsArray(a))
		return fail(msg, msglen, "spec.%s must be an array of strings", f);
	int i = 0;
	for (const cJSON *c = a->child; c; c = c->next, i++)
		if (!cJSON_IsString(c) || !c->valuestring)
			return fail(msg, msglen, "spec.%s[%d] must be a string", f, i);
	return 0;
}

/* Checks spec.env, when present: an array of {name, value?} objects. */
static int check_env(const cJSON *spec, char *msg, size_t msglen)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(spec, "env");
	if (!env)
		return 0;
	if (!cJSON_IsArray(env))
		return fail(msg, msglen, "spec.env must be an array of {name, value}");
	int i = 0;
	for (const cJSON *e = env->child; e; e = e->next, i++) {
		if (!cJSON_IsObject(e))
			return fail(msg, msglen,
				    "spec.env[%d] must be an object with name and value", i);
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
		if (!cJSON_IsString(name) || !name->valuestring || !name->valuestring[0])
			return fail(msg, msglen, "spec.env[%d].name must be a non-empty string", i);
		const cJSON *value = cJSON_GetObjectItemCaseSensitive(e, "value");
		if (value && (!cJSON_IsString(value) || !value->valuestring))
			return fail(msg, msglen, "spec.env[%d].value must be a string", i);
	}
	return 0;
}

/* Checks spec.resources, when present: an object whose limits and requests
 * are objects (quantities are left to the apiserver). */
static int check_resources(const cJSON *spec, char *msg, size_t msglen)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(spec, "resources");
	if (!r)
		return 0;
	if (!cJSON_IsObject(r))
		return fail(msg, msglen,
			    "spec.resources must be an object (core/v1 ResourceRequirements)");
	static const char *const parts[] = { "limits", "requests" };
	/* Nothing else: the builder copies resources as given, and adoption
	 * certifies only these (the API prunes other members anyway). */
	const cJSON *m;
	cJSON_ArrayForEach(m, r)
	{
		if (!m->string || (strcmp(m->string, "limits") && strcmp(m->string, "requests")))
			return fail(msg, msglen, "spec.resources may only hold limits and requests");
	}
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, parts[i]);
		if (p && !cJSON_IsObject(p))
			return fail(msg, msglen, "spec.resources.%s must be an object", parts[i]);
		const cJSON *q;
		double d;
		cJSON_ArrayForEach(q, p)
		{
			/* The apiserver would refuse the pod; adoption could never
			 * certify it (verify.c compares quantities). */
			char num[32];
			const char *text = cJSON_IsString(q) ? q->valuestring : NULL;
			if (cJSON_IsNumber(q)) {
				snprintf(num, sizeof num, "%.17g", q->valuedouble); /* as verify.c reads it */
				text = num;
			}
			if (sbx_quantity_parse(text, &d) < 0)
				return fail(msg, msglen, "spec.resources.%s.%.32s is not a quantity", parts[i],
					    q->string ? q->string : "?");
		}
	}
	return 0;
}

int sbx_spec_validate(const cJSON *spec, char *msg, size_t msglen)
{
	char q[QUOTE_MAX * 4 + 8];
	if (msglen)
		msg[0] = '\0';
	if (!cJSON_IsObject(spec))
		return fail(msg, msglen, "spec must be an object");
	const cJSON *image = cJSON_GetObjectItemCaseSensitive(spec, "image");
	if (!image)
		return fail(msg, msglen, "spec.image is required");
	if (!cJSON_IsString(image) || !image->valuestring || !image->valuestring[0])
		return fail(msg, msglen, "spec.image must be a non-empty string");
	if (check_string_array(spec, "command", msg, msglen) < 0 ||
	    check_string_array(spec, "args", msg, msglen) < 0 || check_env(spec, msg, msglen) < 0 ||
	    check_resources(spec, msg, msglen) < 0)
		return -1;
	const cJSON *rc = cJSON_GetObjectItemCaseSensitive(spec, "runtimeClassName");
	if (rc && (!cJSON_IsString(rc) || !rc->valuestring || !rc->valuestring[0]))
		return fail(msg, msglen, "spec.runtimeClassName must be a non-empty string");
	const cJSON *key = cJSON_GetObjectItemCaseSensitive(spec, "idempotencyKey");
	if (key) {
		if (!cJSON_IsString(key) || !key->valuestring)
			return fail(msg, msglen, "spec.idempotencyKey must be a string");
		if (!sbx_key_valid(key->valuestring)) {
			quote(key->valuestring, q, sizeof q);
			return fail(
			    msg, msglen,
			    "spec.idempotencyKey %s is invalid: must be 1..%d bytes of UTF-8 "
			    "without control characters",
			    q, SBX_KEY_MAX);
		}
	}
	struct sbx_lifecycle lc;
	if (sbx_lifecycle_parse(spec, &lc, msg, msglen) < 0)
		return -1;
	const cJSON *owner = cJSON_GetObjectItemCaseSensitive(spec, "workspaceOwner");
	if (owner) {
		if (!cJSON_IsString(owner) || !owner->valuestring)
			return fail(msg, msglen, "spec.workspaceOwner must be a string");
		if (!sbx_owner_valid(owner->valuestring)) {
			quote(owner->valuestring, q, sizeof q);
			return fail(msg, msglen,
				    "spec.workspaceOwner %s is invalid: must match %s%s", q,
				    SBX_OWNER_PATTERN,
				    owner->valuestring[0] ? "" : " (omit the field for no owner)");
		}
	}
	const char *profiles[SBX_PROFILES_MAX];
	size_t nprofiles;
	return sbx_spec_profiles(spec, profiles, &nprofiles, msg, msglen);
}

const char *sbx_spec_owner(const cJSON *spec)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(spec, "workspaceOwner");
	return cJSON_IsString(o) ? o->valuestring : NULL;
}

const char *sbx_spec_key(const cJSON *spec)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(spec, "idempotencyKey");
	return cJSON_IsString(k) ? k->valuestring : NULL;
}

/* 1 iff s is a decimal exponent: [eE][+-]?digits. */
static int is_exponent(const char *s)
{
	if (s[0] != 'e' && s[0] != 'E')
		return 0;
	s += 1 + (s[1] == '+' || s[1] == '-');
	return s[0] && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 3;
}

int sbx_quantity_parse(const char *s, double *out)
{
	static const struct {
		const char *suffix;
		double mult;
	} suffixes[] = {
		{ "", 1 },
		{ "m", 1e-3 },
		{ "k", 1e3 },
		{ "M", 1e6 },
		{ "G", 1e9 },
		{ "T", 1e12 },
		{ "P", 1e15 },
		{ "E", 1e18 },
		{ "Ki", 1024.0 },
		{ "Mi", 1048576.0 },
		{ "Gi", 1073741824.0 },
		{ "Ti", 1099511627776.0 },
		{ "Pi", 1125899906842624.0 },
		{ "Ei", 1152921504606846976.0 },
	};
	if (!s || !s[0] || strlen(s) > 64)
		return -1;
	size_t i = 0;
	if (s[i] == '+' || s[i] == '-')
		i++;
	size_t digits = strspn(s + i, "0123456789");
	i += digits;
	if (s[i] == '.') {
		size_t frac = strspn(s + i + 1, "0123456789");
		digits += frac;
		i += 1 + frac;
	}
	if (!digits)
		return -1;
	char num[72];
	memcpy(num, s, i);
	num[i] = '\0';
	double v = strtod(num, NULL);
	const char *suf = s + i;
	if (is_exponent(suf)) {
		*out = v * pow(10, atof(suf + 1));
		return isfinite(*out) ? 0 : -1;
	}
	for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++)
		if (!strcmp(suf, suffixes[k].suffix)) {
			*out = v * suffixes[k].mult;
			return 0;
		}
	return -1;
}

int sbx_lifecycle_parse(const cJSON *spec, struct sbx_lifecycle *out, char *msg, size_t msglen)
{
	memset(out, 0, sizeof *out);
	const cJSON *lc = jobj(spec, "lifecycle");
	if (!lc)
		return 0;
	if (!cJSON_IsObject(lc)) {
		snprintf(msg, msglen, "spec.lifecycle must be an object");
		return -1;
	}
	const cJSON *m;
	cJSON_ArrayForEach(m, lc)
	{
		if (strcmp(m->string, "shutdownTime") && strcmp(m->string, "shutdownPolicy") && strcmp(m->string, "suspend")) {
			snprintf(msg, msglen, "spec.lifecycle.%.64s is not a lifecycle field (shutdownTime, shutdownPolicy, suspend)",
				 m->string);
			return -1;
		}
	}
	const cJSON *t = jobj(lc, "shutdownTime"), *p = jobj(lc, "shutdownPolicy"), *s = jobj(lc, "suspend");
	if (t) {
		if (!cJSON_IsString(t) || ktime_parse_rfc3339(t->valuestring, &out->shutdown) < 0) {
			snprintf(msg, msglen, "spec.lifecycle.shutdownTime must be an RFC 3339 time (e.g. 2026-12-01T18:00:00Z)");
			return -1;
		}
		out->has_shutdown = 1;
	}
	if (p) {
		if (!cJSON_IsString(p) || (strcmp(p->valuestring, "Retain") && strcmp(p->valuestring, "Delete"))) {
			snprintf(msg, msglen, "spec.lifecycle.shutdownPolicy must be Retain or Delete");
			return -1;
		}
		out->delete_policy = !strcmp(p->valuestring, "Delete");
	}
	if (s) {
		if (!cJSON_IsBool(s)) {
			snprintf(msg, msglen, "spec.lifecycle.suspend must be true or false");
			return -1;
		}
		out->suspend = cJSON_IsTrue(s);
	}
	return 0;
}

cJSON *sbx_spec_intent(const cJSON *spec)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *m;
	cJSON_ArrayForEach(m, spec)
	{
		if (m->string && strcmp(m->string, "lifecycle"))
			cJSON_AddItemReferenceToObject(o, m->string, (cJSON *)m);
	}
	return o;
}

int sbx_spec_same_intent(const cJSON *a, const cJSON *b)
{
	if (!cJSON_IsObject(a) || !cJSON_IsObject(b))
		return cJSON_Compare(a, b, 1);
	cJSON *x = sbx_spec_intent(a), *y = sbx_spec_intent(b);
	int same = cJSON_Compare(x, y, 1);
	cJSON_Delete(x);
	cJSON_Delete(y);
	return same;
}

int sbx_lifecycle_expired(const struct sbx_lifecycle *l, time_t now)
{
	return l->has_shutdown && l->shutdown <= now;
}

int sbx_profile_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n < 1 || n > SBX_PROFILE_NAME_MAX || name[0] == '-' || name[n - 1] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '-'))
			return 0;
	return 1;
}

int sbx_spec_profiles(const cJSON *spec, const char **names, size_t *n, char *msg, size_t msglen)
{
	*n = 0;
	const cJSON *net = jobj(spec, "network");
	if (!net)
		return 0;
	if (!cJSON_IsObject(net))
		return fail(msg, msglen, "spec.network must be an object");
	const cJSON *m;
	cJSON_ArrayForEach(m, net) if (strcmp(m->string, "profiles")) return fail(msg, msglen,
										  "spec.network may hold only profiles");
	const cJSON *list = jobj(net, "profiles");
	if (!list)
		return 0;
	int count = cJSON_GetArraySize(list);
	if (!cJSON_IsArray(list) || count < 1 || count > SBX_PROFILES_MAX) {
		if (msglen)
			snprintf(msg, msglen, "spec.network.profiles must be a list of 1 to %d profile names",
				 SBX_PROFILES_MAX);
		return -1;
	}
	size_t k = 0;
	cJSON_ArrayForEach(m, list)
	{
		if (!cJSON_IsString(m) || !sbx_profile_name_ok(m->valuestring))
			return fail(msg, msglen,
				    "spec.network.profiles: each must be a profile name (a DNS label: lowercase "
				    "letters, digits and '-', at most 63)");
		for (size_t j = 0; j < k; j++)
			if (!strcmp(names[j], m->valuestring))
				return fail(msg, msglen, "spec.network.profiles: a profile is named twice");
		names[k++] = m->valuestring;
	}
	*n = k;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int sbx_profiles_set(const char *const *names, size_t n, char joined[SBX_PROFILES_JOINED_MAX], char hash[17])
{
	const char *sorted[SBX_PROFILES_MAX];
	joined[0] = hash[0] = '\0';
	if (n < 1 || n > SBX_PROFILES_MAX)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!sbx_profile_name_ok(names[i]))
			return -1;
		sorted[i] = names[i];
	}
	qsort(sorted, n, sizeof sorted[0], cmp_str);
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(sorted[i]);
		if (i)
			joined[len++] = ',';
		memcpy(joined + len, sorted[i], l);
		len += l;
	}
	joined[len] = '\0';
	unsigned char md[32];
	unsigned int mdlen = 0;
	if (EVP_Digest(joined, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
		joined[0] = '\0';
		return -1;
	}
	sbx_hex(md, 8, hash);
	return 0;
}

int sbx_profiles_split(const char *joined, char buf[SBX_PROFILES_JOINED_MAX], const char **names)
{
	if (!joined || !*joined || strlen(joined) >= SBX_PROFILES_JOINED_MAX)
		return -1;
	memcpy(buf, joined, strlen(joined) + 1);
	int n = 0;
	for (char *p = buf;;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (n >= SBX_PROFILES_MAX || !sbx_profile_name_ok(p) || (n && strcmp(names[n - 1], p) >= 0))
			return -1;
		names[n++] = p;
		if (!comma)
			break;
		p = comma + 1;
	}
	return n;
}
