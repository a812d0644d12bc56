#include "sandbox/mac.h"

#include <stdint.h>

int sbx_lp_append(struct buf *b, const void *x, size_t len)
{
	if (len > UINT32_MAX)
		return -1;
	unsigned char be[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
			       (unsigned char)(len >> 8), (unsigned char)len};
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
