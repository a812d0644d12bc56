#include "sandbox/authz.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/buf.h"
#include "sandbox/jcs.h"
#include "sandbox/mac.h"
#include "sandbox/seal.h"

/* Cap on the authenticated message: names, an owner, a hash, a username,
 * an identity. */
#define AUTHZ_MSG_CAP (SBX_AUTHZ_IDENTITY_MAX + 16 * 1024)

/* The MAC of a v2 record, or a v3 one with identity (issued and run as
 * decimal text), into out (65 bytes), or of a v1 one ('n' form, run NULL). */
static int authz_mac(const unsigned char *key, size_t keylen, const struct sbx_authz_subject *s, const char *issued,
		     const char *run, const char *identity, char out[65])
{
	struct buf m;
	int rc = -1;
	out[0] = '\0';
	if (!key || keylen < SBX_SEAL_KEY_MIN || !s->ns || !s->name || !*s->name || !s->owner || !s->fingerprint ||
	    !s->username)
		return -1;
	buf_init(&m, AUTHZ_MSG_CAP);
	int e;
	if (run && identity) {
		e = sbx_lp_str(&m, "sandbox.dev/owner-authorization/v3") | sbx_lp_str(&m, s->ns) |
		    sbx_lp_str(&m, s->name) | sbx_lp_str(&m, s->owner) | sbx_lp_str(&m, s->fingerprint) |
		    sbx_lp_str(&m, s->username) | sbx_lp_str(&m, identity) | sbx_lp_str(&m, issued) |
		    sbx_lp_str(&m, run);
	} else if (run) {
		e = sbx_lp_str(&m, "sandbox.dev/owner-authorization/v2") | sbx_lp_str(&m, s->ns) |
		    sbx_lp_str(&m, s->name) | sbx_lp_str(&m, s->owner) | sbx_lp_str(&m, s->fingerprint) |
		    sbx_lp_str(&m, s->username) | sbx_lp_str(&m, issued) | sbx_lp_str(&m, run);
	} else {
		const char form = 'n';
		e = sbx_lp_str(&m, "sandbox.dev/owner-authorization/v1") | sbx_lp_str(&m, s->ns) |
		    buf_append(&m, &form, 1) | sbx_lp_str(&m, s->name) | sbx_lp_str(&m, s->owner) |
		    sbx_lp_str(&m, s->fingerprint) | sbx_lp_str(&m, s->username) | sbx_lp_str(&m, issued);
	}
	if (!e)
		rc = sbx_mac_hex(key, keylen, &m, out);
	buf_release(&m);
	return rc;
}

int sbx_authz_issue(const unsigned char *key, size_t keylen, const struct sbx_authz_subject *s, time_t issued,
		    char *out, size_t outlen)
{
	char t[24], run[24], mac[65];
	if (outlen)
		out[0] = '\0';
	if (outlen < SBX_AUTHZ_MAX || issued < 0 || s->run < 1)
		return -1;
	snprintf(t, sizeof t, "%" PRIdMAX, (intmax_t)issued);
	snprintf(run, sizeof run, "%lld", s->run);
	if ((s->identity && strlen(s->identity) > SBX_AUTHZ_IDENTITY_MAX) ||
	    authz_mac(key, keylen, s, t, run, s->identity, mac) < 0)
		return -1;
	snprintf(out, outlen, "v%c.%s.%s.%s", s->identity ? '3' : '2', t, run, mac);
	return 0;
}

/* 1 when user_info's members are those of a userInfo, of their types:
 * username a string; uid a string; groups strings; extra arrays of strings. */
static int identity_shaped(const cJSON *u)
{
	const cJSON *m, *v;
	if (!cJSON_IsObject(u) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(u, "username")))
		return 0;
	cJSON_ArrayForEach(m, u)
	{
		if (!strcmp(m->string, "username") || !strcmp(m->string, "uid")) {
			if (!cJSON_IsString(m))
				return 0;
		} else if (!strcmp(m->string, "groups")) {
			if (!cJSON_IsArray(m))
				return 0;
			cJSON_ArrayForEach(v, m) if (!cJSON_IsString(v)) return 0;
		} else if (!strcmp(m->string, "extra")) {
			if (!cJSON_IsObject(m))
				return 0;
			const cJSON *kv;
			cJSON_ArrayForEach(kv, m)
			{
				if (!cJSON_IsArray(kv))
					return 0;
				cJSON_ArrayForEach(v, kv) if (!cJSON_IsString(v)) return 0;
			}
		} else {
			return 0;
		}
	}
	return 1;
}

char *sbx_authz_identity(const cJSON *user_info)
{
	static const char *const kept[] = { "username", "uid", "groups", "extra", NULL };
	cJSON *u = cJSON_CreateObject();
	if (!u)
		abort(); /* out of memory */
	for (const char *const *k = kept; *k; k++) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(user_info, *k);
		if (m && !cJSON_AddItemToObject(u, *k, cJSON_Duplicate(m, 1)))
			abort(); /* out of memory */
	}
	char *out = identity_shaped(u) ? jcs_string(u) : NULL;
	cJSON_Delete(u);
	if (out && strlen(out) > SBX_AUTHZ_IDENTITY_MAX) {
		free(out);
		out = NULL;
	}
	return out;
}

cJSON *sbx_authz_identity_parse(const char *identity)
{
	if (!identity || strlen(identity) > SBX_AUTHZ_IDENTITY_MAX)
		return NULL;
	cJSON *u = cJSON_Parse(identity);
	if (u && !identity_shaped(u)) {
		cJSON_Delete(u);
		u = NULL;
	}
	return u;
}

/* Copies the decimal field p[0..dot) (1..19 digits) into out; -1 otherwise. */
static int digits(const char *p, const char *dot, char out[24])
{
	if (!dot || dot == p || dot - p > 19)
		return -1;
	memcpy(out, p, (size_t)(dot - p));
	out[dot - p] = '\0';
	for (const char *q = out; *q; q++)
		if (*q < '0' || *q > '9')
			return -1;
	return 0;
}

enum sbx_authz_check sbx_authz_verify(const unsigned char *const *keys, const size_t *keylens, size_t nkeys,
				      const struct sbx_authz_subject *s, time_t created, const char *record,
				      struct sbx_authz_info *info)
{
	if (!record || !s->username || !*s->username)
		return SBX_AUTHZ_MISSING;
	/* v3. or v2.<digits>.<digits>.<64 hex>, or v1.<digits>.n.<64 hex> */
	int v3 = !strncmp(record, "v3.", 3), v2 = v3 || !strncmp(record, "v2.", 3);
	if (!v2 && strncmp(record, "v1.", 3))
		return SBX_AUTHZ_MALFORMED;
	char t[24], run[24] = "1";
	const char *p = record + 3, *dot = strchr(p, '.');
	if (digits(p, dot, t) < 0)
		return SBX_AUTHZ_MALFORMED;
	p = dot + 1;
	dot = strchr(p, '.');
	if (v2 ? digits(p, dot, run) < 0 : (dot != p + 1 || *p != 'n'))
		return SBX_AUTHZ_MALFORMED;
	const char *mac = dot + 1;
	long long r = strtoll(run, NULL, 10);
	if (strlen(mac) != 64 || r < 1)
		return SBX_AUTHZ_MALFORMED;
	if (!s->name || !*s->name || (v3 && (!s->identity || strlen(s->identity) > SBX_AUTHZ_IDENTITY_MAX)))
		return SBX_AUTHZ_MISMATCH;
	int match = 0;
	for (size_t i = 0; i < nkeys && !match; i++) {
		char want[65];
		if (authz_mac(keys[i], keylens[i], s, t, v2 ? run : NULL, v3 ? s->identity : NULL, want) == 0)
			match = sbx_seal_equal(want, mac);
		OPENSSL_cleanse(want, sizeof want);
	}
	if (!match)
		return SBX_AUTHZ_MISMATCH;
	long long issued = strtoll(t, NULL, 10);
	long long max_age = v2 ? SBX_AUTHZ_MAX_AGE_S : SBX_AUTHZ_V1_MAX_AGE_S;
	if (r == 1 && ((long long)created - issued > max_age || issued - (long long)created > SBX_AUTHZ_MAX_SKEW_S))
		return SBX_AUTHZ_STALE;
	if (info) {
		info->run = r;
		info->issued = (time_t)issued;
		info->has_identity = v3;
	}
	return SBX_AUTHZ_OK;
}

const char *sbx_authz_str(enum sbx_authz_check c)
{
	switch (c) {
	case SBX_AUTHZ_OK: return "owner authorization verified";
	case SBX_AUTHZ_MISSING: return "no owner authorization recorded by the admission webhook";
	case SBX_AUTHZ_MALFORMED: return "the owner authorization record is malformed";
	case SBX_AUTHZ_MISMATCH:
		return "the owner authorization record was not issued for this Sandbox (forged or copied)";
	case SBX_AUTHZ_STALE: return "the owner authorization record is older than this Sandbox allows";
	}
	return "unknown";
}

int sbx_authz_attest(const unsigned char *key, size_t keylen, const char *ns, const char *name, const char *uid,
		     const char *record, char out[65])
{
	struct buf m;
	out[0] = '\0';
	if (!key || keylen < SBX_SEAL_KEY_MIN || !ns || !name || !uid || !record)
		return -1;
	buf_init(&m, 4096);
	int rc = -1;
	if (!(sbx_lp_str(&m, "sandbox.dev/owner-authorization-in-force/v1") | sbx_lp_str(&m, ns) | sbx_lp_str(&m, name) |
	      sbx_lp_str(&m, uid) | sbx_lp_str(&m, record)))
		rc = sbx_mac_hex(key, keylen, &m, out);
	buf_release(&m);
	return rc;
}

int sbx_authz_attest_check(const unsigned char *const *keys, const size_t *keylens, size_t nkeys, const char *ns,
			   const char *name, const char *uid, const char *record, const char *attest)
{
	if (!attest || strlen(attest) != 64)
		return 0;
	int match = 0;
	for (size_t i = 0; i < nkeys && !match; i++) {
		char want[65];
		if (sbx_authz_attest(keys[i], keylens[i], ns, name, uid, record, want) == 0)
			match = sbx_seal_equal(want, attest);
		OPENSSL_cleanse(want, sizeof want);
	}
	return match;
}
