#include "sandbox/mac.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

int sbx_lp_append(struct buf *b, const void *x, size_t len)
{
	if (len > UINT32_MAX)
		return -1;
	unsigned char be[4] = { (unsigned char)(len >> 24), (unsigned char)(len >> 16),
				(unsigned char)(len >> 8), (unsigned char)len };
	if (buf_append(b, be, 4) < 0)
		return -1;
	return buf_append(b, x, len);
}

void sbx_hex(const unsigned char *p, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[p[i] >> 4];
		out[2 * i + 1] = hx[p[i] & 15];
	}
	out[2 * n] = '\0';
}

int sbx_lp_str(struct buf *b, const char *s)
{
	return sbx_lp_append(b, s, strlen(s));
}

int sbx_mac_hex(const unsigned char *key, size_t keylen, const struct buf *m, char out[65])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	int rc = -1;
	out[0] = '\0';
	if (!key || keylen > (size_t)INT_MAX)
		return -1;
	if (HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)m->data, m->len, mac, &maclen) &&
	    maclen == 32) {
		sbx_hex(mac, 32, out);
		rc = 0;
	}
	OPENSSL_cleanse(mac, sizeof mac);
	return rc;
}
