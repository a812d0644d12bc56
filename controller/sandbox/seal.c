#include "sandbox/seal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/buf.h"
#include "base/xmalloc.h"
#include "sandbox/mac.h"

/* Cap on the sealed message; its fields are names, hashes and a timestamp. */
#define SEAL_MSG_CAP (64 * 1024)

/* Returns 1 iff s is exactly 64 lowercase hex digits. */
static int is_seal_hex(const char *s)
{
	size_t i;
	for (i = 0; s[i]; i++)
		if (i >= 64 || !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == 64;
}

int sbx_seal_compute(const unsigned char *key, size_t keylen, const char *ns, const char *pod_name,
		     const char *digest, const char *owner, const char *fingerprint,
		     const char *claimed_at, char out[65])
{
	static const unsigned char absent = 0x00, present = 0x01;
	struct buf m;
	int rc = -1;

	out[0] = '\0';
	if (!key || keylen < SBX_SEAL_KEY_MIN || !ns || !pod_name || !digest || !fingerprint || !claimed_at)
		return -1;
	buf_init(&m, SEAL_MSG_CAP);
	int e = sbx_lp_str(&m, "sandbox.dev/seal/v1") | sbx_lp_str(&m, ns) | sbx_lp_str(&m, pod_name) |
		sbx_lp_str(&m, digest);
	if (owner)
		e |= buf_append(&m, &present, 1) | sbx_lp_str(&m, owner);
	else
		e |= buf_append(&m, &absent, 1);
	e |= sbx_lp_str(&m, fingerprint) | sbx_lp_str(&m, claimed_at);
	if (!e)
		rc = sbx_mac_hex(key, keylen, &m, out);
	buf_release(&m);
	return rc;
}

int sbx_seal_equal(const char *a, const char *b)
{
	if (!a || !b || !is_seal_hex(a) || !is_seal_hex(b))
		return 0;
	return CRYPTO_memcmp(a, b, 64) == 0;
}

void sbx_seal_keys_init(struct sbx_seal_keys *k)
{
	memset(k, 0, sizeof *k);
}

void sbx_seal_keys_release(struct sbx_seal_keys *k)
{
	for (size_t i = 0; i < k->n; i++) {
		OPENSSL_cleanse(k->key[i], k->len[i]);
		free(k->key[i]);
	}
	memset(k, 0, sizeof *k);
}

int sbx_seal_keys_add(struct sbx_seal_keys *k, const unsigned char *key, size_t len, size_t min,
		      char *err, size_t errlen)
{
	if (len < min || len < SBX_SEAL_KEY_MIN || len > SBX_SEAL_KEY_MAX) {
		snprintf(err, errlen, "a seal key holds %zu bytes; %zu..%d are needed", len,
			 min > SBX_SEAL_KEY_MIN ? min : (size_t)SBX_SEAL_KEY_MIN, SBX_SEAL_KEY_MAX);
		return -1;
	}
	if (k->n >= SBX_SEAL_MAX_KEYS) {
		snprintf(err, errlen, "more than %d seal keys", SBX_SEAL_MAX_KEYS);
		return -1;
	}
	k->key[k->n] = xmalloc(len);
	memcpy(k->key[k->n], key, len);
	k->len[k->n++] = len;
	return 0;
}

int sbx_seal_keys_parse(struct sbx_seal_keys *k, const char *text, size_t len, const char *what,
			char *err, size_t errlen)
{
	size_t before = k->n, line = 0;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		size_t n = (size_t)(e - p);
		line++;
		if (n && p[n - 1] == '\r')
			n--;
		if (n) {
			char why[160];
			if (sbx_seal_keys_add(k, (const unsigned char *)p, n, SBX_SEAL_FILE_KEY_MIN, why,
					      sizeof why) < 0) {
				snprintf(err, errlen, "%s line %zu: %s", what, line, why);
				goto fail;
			}
		}
		p = nl ? nl + 1 : end;
	}
	if (k->n == before) {
		snprintf(err, errlen, "%s holds no key", what);
		return -1;
	}
	return (int)(k->n - before);
fail:
	while (k->n > before) {
		k->n--;
		OPENSSL_cleanse(k->key[k->n], k->len[k->n]);
		free(k->key[k->n]);
		k->key[k->n] = NULL;
	}
	return -1;
}

int sbx_seal_keys_load(struct sbx_seal_keys *k, const char *path, char *err, size_t errlen)
{
	struct buf b;
	buf_init(&b, SBX_SEAL_FILE_MAX);
	if (buf_read_file(&b, path) < 0) {
		int e = errno;
		snprintf(err, errlen, "seal key file %s: %s", path,
			 e == EFBIG ? "too large" : strerror(e));
		OPENSSL_cleanse(b.data, b.len);
		buf_release(&b);
		return -1;
	}
	int rc = sbx_seal_keys_parse(k, b.data, b.len, path, err, errlen);
	OPENSSL_cleanse(b.data, b.len);
	buf_release(&b);
	return rc;
}

int sbx_seal_sign(const struct sbx_seal_keys *k, const char *ns, const char *pod_name,
		  const char *digest, const char *owner, const char *fingerprint,
		  const char *claimed_at, char out[65])
{
	out[0] = '\0';
	if (!k || !k->n)
		return -1;
	return sbx_seal_compute(k->key[0], k->len[0], ns, pod_name, digest, owner, fingerprint,
				claimed_at, out);
}

void sbx_seal_pod_name(const char *pod_name, const char *claim, char *out, size_t n)
{
	if (claim && strcmp(claim, pod_name))
		snprintf(out, n, "%s=%s", pod_name, claim);
	else
		snprintf(out, n, "%s", pod_name);
}

int sbx_seal_check(const struct sbx_seal_keys *k, const char *ns, const char *pod_name,
		   const char *digest, const char *owner, const char *fingerprint,
		   const char *claimed_at, const char *seal)
{
	int found = -1;
	for (size_t i = 0; k && i < k->n; i++) {
		char want[65];
		if (sbx_seal_compute(k->key[i], k->len[i], ns, pod_name, digest, owner, fingerprint,
				     claimed_at, want) == 0 &&
		    sbx_seal_equal(seal, want) && found < 0)
			found = (int)i;
		OPENSSL_cleanse(want, sizeof want);
	}
	return found;
}
