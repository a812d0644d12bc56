/* libFuzzer target: the controller's YAML configuration (sandbox/config.h).
 * Invariants: a config that parses has safe mount subdirectories, absolute
 * mount paths and a key lifetime in range, and network CIDRs (base/cidr.h)
 * that render into a floor policy (sandbox/netfloor.h) whose every ipBlock
 * is one of them; on error nothing is changed. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/cidr.h"
#include "sandbox/config.h"
#include "sandbox/netfloor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_config c;
	sbx_config_init(&c);
	char err[512];
	long before = c.key_lifetime_s;
	if (sbx_config_parse(&c, (const char *)data, size, err, sizeof err) == 0) {
		assert(c.key_lifetime_s > 0 && c.key_lifetime_s <= SBX_KEY_LIFETIME_MAX);
		assert(c.nmounts <= SBX_CONFIG_MAX_MOUNTS);
		for (size_t i = 0; i < c.nmounts; i++) {
			assert(sbx_safe_segment(c.mounts[i].subdir));
			assert(c.mounts[i].path[0] == '/');
		}
		if (c.ws_mode == SBX_WS_HOSTPATH)
			assert(c.host_root && c.host_root[0] == '/');
		assert(c.net.ndns <= SBX_CONFIG_MAX_ITEMS && c.net.ningress <= SBX_CONFIG_MAX_ITEMS &&
		       c.net.ncluster <= SBX_CONFIG_MAX_ITEMS);
		for (size_t i = 0; i < c.net.ndns; i++)
			assert(sbx_cidr_ok(c.net.dns[i]));
		for (size_t i = 0; i < c.net.ningress; i++)
			assert(sbx_cidr_ok(c.net.ingress[i]));
		for (size_t i = 0; i < c.net.ncluster; i++)
			assert(sbx_cidr_ok(c.net.cluster[i]));
		cJSON *np = sbx_netfloor_policy("ns", &c.net);
		assert(np);
		cJSON_Delete(np);
	} else {
		assert(c.key_lifetime_s == before);
		assert(memchr(err, '\0', sizeof err) != NULL);
	}
	sbx_config_release(&c);
	return 0;
}
