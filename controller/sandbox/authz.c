#include "sandbox/authz.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/buf.h"
#include "sandbox/scope.h"
#include "sandbox/seal.h"

/* Cap on the authenticated message: names, an owner, a hash, a username. */
#define AUTHZ_MSG_CAP (16 * 1024)

static int lp_str(struct buf *b, const char *s)
{
	return sbx_lp_append(b, s, strlen(s));
}

/* The MAC for form ('n' or 'g') and its name into out (65 bytes). */
static int authz_mac(const unsigned char *key, size_t keylen, const struct sbx_authz_subject *s, char form,
		     const char *form_name, const char *issued, char out[65])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	struct buf m;
	int rc = -1;
	out[0] = '\0';
	if (!key || keylen < SBX_SEAL_KEY_MIN || keylen > (size_t)INT_MAX || !s->ns || !form_name || !s->owner ||
	    !s->fingerprint || !s->username)
		return -1;
	buf_init(&m, AUTHZ_MSG_CAP);
	int e = lp_str(&m, "sandbox.dev/owner-authorization/v1") | lp_str(&m, s->ns) | buf_append(&m, &form, 1) |
		lp_str(&m, form_name) | lp_str(&m, s->owner) | lp_str(&m, s->fingerprint) |
		lp_str(&m, s->username) | lp_str(&m, issued);
	if (!e && HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)m.data, m.len, mac, &maclen) &&
	    maclen == 32) {
		sbx_hex(mac, 32, out);
		rc = 0;
	}
	OPENSSL_cleanse(mac, sizeof mac);
	buf_release(&m);
	return rc;
}

int sbx_authz_issue(const unsigned char *key, size_t keylen, const struct sbx_authz_subject *s, time_t issued,
		    char *out, size_t outlen)
{
	char t[24], mac[65];
	if (outlen)
		out[0] = '\0';
	if (outlen < SBX_AUTHZ_MAX || issued < 0)
		return -1;
	int named = s->name && *s->name;
	const char *form_name = named ? s->name : s->generate_name;
	if (!form_name || !*form_name)
		return -1;
	snprintf(t, sizeof t, "%" PRIdMAX, (intmax_t)issued);
	if (authz_mac(key, keylen, s, named ? 'n' : 'g', form_name, t, mac) < 0)
		return -1;
	snprintf(out, outlen, "v1.%s.%c.%s", t, named ? 'n' : 'g', mac);
	return 0;
}

enum sbx_authz_check sbx_authz_verify(const unsigned char *const *keys, const size_t *keylens, size_t nkeys,
				      const struct sbx_authz_subject *s, time_t created, const char *record)
{
	if (!record || !s->username || !*s->username)
		return SBX_AUTHZ_MISSING;
	/* v1.<digits>.<n|g>.<64 hex> */
	if (strncmp(record, "v1.", 3) != 0)
		return SBX_AUTHZ_MALFORMED;
	const char *p = record + 3, *dot = strchr(p, '.');
	if (!dot || dot == p || dot - p > 19)
		return SBX_AUTHZ_MALFORMED;
	char t[24];
	memcpy(t, p, (size_t)(dot - p));
	t[dot - p] = '\0';
	for (const char *q = t; *q; q++)
		if (*q < '0' || *q > '9')
			return SBX_AUTHZ_MALFORMED;
	char form = dot[1];
	if ((form != 'n' && form != 'g') || dot[2] != '.')
		return SBX_AUTHZ_MALFORMED;
	const char *mac = dot + 3;
	if (strlen(mac) != 64)
		return SBX_AUTHZ_MALFORMED;
	const char *form_name = s->name;
	if (form == 'g') {
		size_t gl = s->generate_name ? strlen(s->generate_name) : 0;
		if (!gl || !s->name || strncmp(s->name, s->generate_name, gl) != 0)
			return SBX_AUTHZ_MISMATCH;
		form_name = s->generate_name;
	}
	if (!form_name || !*form_name)
		return SBX_AUTHZ_MISMATCH;
	int match = 0;
	for (size_t i = 0; i < nkeys && !match; i++) {
		char want[65];
		if (authz_mac(keys[i], keylens[i], s, form, form_name, t, want) == 0)
			match = sbx_seal_equal(want, mac);
		OPENSSL_cleanse(want, sizeof want);
	}
	if (!match)
		return SBX_AUTHZ_MISMATCH;
	long long issued = strtoll(t, NULL, 10);
	if ((long long)created - issued > SBX_AUTHZ_MAX_AGE_S || issued - (long long)created > SBX_AUTHZ_MAX_SKEW_S)
		return SBX_AUTHZ_STALE;
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
