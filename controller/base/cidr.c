#include "base/cidr.h"

#include <arpa/inet.h>
#include <string.h>

/* The address before the slash, the prefix after it, host bits zero. */
int sbx_cidr_parse(const char *s, struct sbx_cidr *out)
{
	char addr[SBX_CIDR_MAX + 1];
	unsigned char bytes[16] = { 0 };
	size_t n = s ? strlen(s) : 0;
	const char *slash = s ? strchr(s, '/') : NULL;
	if (!slash || n > SBX_CIDR_MAX || slash == s)
		return -1;
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = '\0';
	int v6 = strchr(addr, ':') != NULL;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, addr, bytes) != 1)
		return -1;
	/* IPv4-mapped (::ffff:0:0/96): some enforcers read it as IPv4, where no
	 * IPv6 range excepts anything; refused, as the API server's cidr() does. */
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (v6 && !memcmp(bytes, mapped, sizeof mapped))
		return -1;
	const char *p = slash + 1;
	int max = v6 ? 128 : 32, prefix = 0;
	if (!*p || strlen(p) > 3 || (p[0] == '0' && p[1]))
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		prefix = prefix * 10 + (*p - '0');
	}
	if (prefix > max)
		return -1;
	for (int bit = prefix; bit < max; bit++) /* the host bits are zero */
		if (bytes[bit / 8] & (0x80 >> (bit % 8)))
			return -1;
	out->family = v6 ? 6 : 4;
	memcpy(out->addr, bytes, sizeof out->addr);
	out->prefix = prefix;
	return 0;
}

int sbx_cidr_ok(const char *s)
{
	struct sbx_cidr r;
	return sbx_cidr_parse(s, &r) == 0;
}

int sbx_cidr_parse_ip(const char *s, struct sbx_cidr *out)
{
	unsigned char bytes[16] = { 0 };
	if (!s || strlen(s) > 45)
		return -1;
	int v6 = strchr(s, ':') != NULL;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, s, bytes) != 1)
		return -1;
	out->family = v6 ? 6 : 4;
	memcpy(out->addr, bytes, sizeof out->addr);
	out->prefix = v6 ? 128 : 32;
	return 0;
}

void sbx_cidr_format(const struct sbx_cidr *r, char out[SBX_CIDR_MAX + 1])
{
	char a[INET6_ADDRSTRLEN] = "";
	size_t n;
	if (!inet_ntop(r->family == 6 ? AF_INET6 : AF_INET, r->addr, a, sizeof a))
		a[0] = '\0';
	n = strlen(a);
	memcpy(out, a, n);
	out[n++] = '/';
	int p = r->prefix;
	if (p >= 100)
		out[n++] = (char)('0' + p / 100);
	if (p >= 10)
		out[n++] = (char)('0' + p / 10 % 10);
	out[n++] = (char)('0' + p % 10);
	out[n] = '\0';
}

int sbx_cidr_contains(const struct sbx_cidr *a, const struct sbx_cidr *b)
{
	if (a->family != b->family || a->prefix > b->prefix)
		return 0;
	int full = a->prefix / 8, rest = a->prefix % 8;
	if (memcmp(a->addr, b->addr, (size_t)full))
		return 0;
	if (!rest)
		return 1;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (a->addr[full] & mask) == (b->addr[full] & mask);
}
