/* CIDR text as Kubernetes' NetworkPolicy ipBlock takes it, and the nesting
 * of two ranges (a profile's CIDR and the floor's, sandbox/netprofile.h). */
#ifndef SBX_BASE_CIDR_H
#define SBX_BASE_CIDR_H

/* Longest CIDR text accepted: an IPv6 address (45) and "/128". */
#define SBX_CIDR_MAX 49

/* A parsed range: family 4 or 6, the address (4 or 16 bytes used), the
 * prefix length. */
struct sbx_cidr {
	int family;
	unsigned char addr[16];
	int prefix;
};

/* Returns 1 iff s is an IPv4 or IPv6 CIDR "address/prefix" (decimal prefix,
 * no leading zero) whose host bits are zero, at most SBX_CIDR_MAX bytes; s
 * may be NULL (0). */
int sbx_cidr_ok(const char *s);

/* Parses s as sbx_cidr_ok accepts it into *out. Returns 0, or -1 (then *out
 * is unchanged). */
int sbx_cidr_parse(const char *s, struct sbx_cidr *out);

/* Parses a bare address (IPv4 or IPv6, no prefix) into *out as a /32 or
 * /128. Returns 0, or -1 (then *out is unchanged). */
int sbx_cidr_parse_ip(const char *s, struct sbx_cidr *out);

/* Writes r as CIDR text (canonical address form) into out. */
void sbx_cidr_format(const struct sbx_cidr *r, char out[SBX_CIDR_MAX + 1]);

/* 1 iff a contains b: the same family, a's prefix no longer than b's and
 * b's address within a (a == b included). */
int sbx_cidr_contains(const struct sbx_cidr *a, const struct sbx_cidr *b);

#endif
