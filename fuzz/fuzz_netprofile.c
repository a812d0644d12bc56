/* libFuzzer target: allow profiles (sandbox/netprofile.h) as the controller
 * reads them: a SandboxNetworkProfile object (the informer's trim, the
 * check), a spec's network.profiles, a pod's profile annotation
 * (sbx_profiles_split) and CIDR text. The input is one JSON document
 * {"profile": ..., "spec": ..., "annotation": "...", "cidrs": ["..."]}
 * (anything else is fed whole as a profile). Invariants asserted:
 *  - a profile that fails the check is trimmed to an empty spec, one that
 *    passes keeps it;
 *  - the policy of any profile over the floor of 0.0.0.0/0's ranges never
 *    grants a CIDR inside a floor range, and every except block lies
 *    strictly inside its CIDR;
 *  - a set's joined names split back into the same names, and a split set
 *    hashes to the same set;
 *  - a CIDR that parses prints back to text that parses to the same range. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cidr.h"
#include "base/jsonget.h"
#include "sandbox/config.h"
#include "sandbox/netprofile.h"
#include "sandbox/spec.h"
#include "support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every rule of np's egress: no CIDR inside a floor range, every except
 * strictly inside its CIDR. */
static void check_policy(const cJSON *np, const struct sbx_cidr *floor, size_t nfloor)
{
	const cJSON *rule, *peer, *ex;
	cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(np, "spec"), "egress"))
	{
		cJSON_ArrayForEach(peer, cJSON_GetObjectItemCaseSensitive(rule, "to"))
		{
			const cJSON *block = cJSON_GetObjectItemCaseSensitive(peer, "ipBlock");
			struct sbx_cidr c, e;
			assert(sbx_cidr_parse(jstr(block, "cidr"), &c) == 0);
			for (size_t i = 0; i < nfloor; i++)
				assert(!sbx_cidr_contains(&floor[i], &c));
			cJSON_ArrayForEach(ex, cJSON_GetObjectItemCaseSensitive(block, "except"))
			{
				assert(cJSON_IsString(ex) && sbx_cidr_parse(ex->valuestring, &e) == 0);
				assert(sbx_cidr_contains(&c, &e) && e.prefix > c.prefix);
			}
			/* every floor range it holds is excepted (or inside one that is) */
			for (size_t i = 0; i < nfloor; i++) {
				if (!sbx_cidr_contains(&c, &floor[i]))
					continue;
				int covered = 0;
				cJSON_ArrayForEach(ex, cJSON_GetObjectItemCaseSensitive(block, "except"))
				{
					assert(sbx_cidr_parse(ex->valuestring, &e) == 0);
					covered |= sbx_cidr_contains(&e, &floor[i]);
				}
				assert(covered);
			}
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	cJSON *in = cJSON_Parse(text);
	free(text);
	if (!in)
		return 0;
	const cJSON *profile = cJSON_GetObjectItemCaseSensitive(in, "profile");
	if (!profile)
		profile = in;
	char msg[256];
	cJSON *t = sbx_netprofile_trim(profile);
	int ok = sbx_netprofile_check(profile, msg, sizeof msg) == 0;
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(t, "spec");
	if (ok) { /* the same text (cJSON_Compare tells duplicate keys apart) */
		char *a = cJSON_PrintUnformatted(ts), *b = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(profile, "spec"));
		assert(a && b && !strcmp(a, b));
		free(a);
		free(b);
	} else
		assert(cJSON_GetArraySize(ts) == 0);
	/* The floor of a config with a cluster range, and API addresses. */
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	const char *yaml = "network: {clusterCIDRs: [10.244.0.0/16, 10.96.0.0/12, fd00:10::/56]}";
	assert(sbx_config_parse(&cfg, yaml, strlen(yaml), msg, sizeof msg) == 0);
	const char *api[] = { "10.96.0.1", "192.168.1.10", "2001:db8::1" };
	struct sbx_cidr floor[SBX_NETPROFILE_FLOOR_MAX];
	size_t nfloor = sbx_netprofile_floor(&cfg.net, api, 3, floor, SBX_NETPROFILE_FLOOR_MAX);
	const cJSON *ps[] = { profile, t };
	cJSON *np = sbx_netprofile_policy("team-a", "a,b", "0123456789abcdef", ps, 2, floor, nfloor);
	check_policy(np, floor, nfloor);
	cJSON_Delete(np);
	sbx_config_release(&cfg);
	cJSON_Delete(t);
	/* A spec's profiles, their set, and the set back from its text. */
	const char *names[SBX_PROFILES_MAX], *back[SBX_PROFILES_MAX];
	size_t n = 0;
	char joined[SBX_PROFILES_JOINED_MAX], hash[17], buf[SBX_PROFILES_JOINED_MAX], j2[SBX_PROFILES_JOINED_MAX],
	    h2[17];
	if (sbx_spec_profiles(cJSON_GetObjectItemCaseSensitive(in, "spec"), names, &n, msg, sizeof msg) == 0 && n) {
		assert(sbx_profiles_set(names, n, joined, hash) == 0);
		int m = sbx_profiles_split(joined, buf, back);
		assert(m == (int)n);
		assert(sbx_profiles_set(back, (size_t)m, j2, h2) == 0 && !strcmp(j2, joined) && !strcmp(h2, hash));
	}
	const char *ann = jstr(in, "annotation");
	int m = sbx_profiles_split(ann, buf, back);
	assert(m == -1 || (m >= 1 && m <= SBX_PROFILES_MAX));
	if (m > 0) {
		assert(sbx_profiles_set(back, (size_t)m, j2, h2) == 0 && !strcmp(j2, ann));
	}
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(in, "cidrs"))
	{
		struct sbx_cidr r, r2;
		char out[SBX_CIDR_MAX + 1];
		if (cJSON_IsString(c) && sbx_cidr_parse(c->valuestring, &r) == 0) {
			sbx_cidr_format(&r, out);
			assert(sbx_cidr_parse(out, &r2) == 0 && r2.family == r.family && r2.prefix == r.prefix &&
			       !memcmp(r2.addr, r.addr, sizeof r.addr));
		}
	}
	cJSON_Delete(in);
	return 0;
}
