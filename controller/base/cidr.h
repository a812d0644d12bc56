/* CIDR text as Kubernetes' NetworkPolicy ipBlock takes it. */
#ifndef SBX_BASE_CIDR_H
#define SBX_BASE_CIDR_H

/* Returns 1 iff s is an IPv4 or IPv6 CIDR "address/prefix" (decimal prefix,
 * no leading zero) whose host bits are zero, at most 49 bytes; s may be
 * NULL (0). */
int sbx_cidr_ok(const char *s);

#endif
