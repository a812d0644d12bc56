#include "base/cidr.h"

#include <arpa/inet.h>
#include <string.h>

/* Longest CIDR text accepted: an IPv6 address (45) and "/128". */
#define CIDR_MAX 49

int sbx_cidr_ok(const char *s)
{
	char addr[CIDR_MAX + 1];
	unsigned char bytes[16];
	size_t n = s ? strlen(s) : 0;
	const char *slash = s ? strchr(s, '/') : NULL;
	if (!slash || n > CIDR_MAX || slash == s)
		return 0;
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = '\0';
	int v6 = strchr(addr, ':') != NULL;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, addr, bytes) != 1)
		return 0;
	const char *p = slash + 1;
	int max = v6 ? 128 : 32, prefix = 0;
	if (!*p || strlen(p) > 3 || (p[0] == '0' && p[1]))
		return 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return 0;
		prefix = prefix * 10 + (*p - '0');
	}
	if (prefix > max)
		return 0;
	for (int bit = prefix; bit < max; bit++) /* the host bits are zero */
		if (bytes[bit / 8] & (0x80 >> (bit % 8)))
			return 0;
	return 1;
}
