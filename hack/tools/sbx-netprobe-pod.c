/* sbx-netprobe-pod: prints a pod of the NetworkPolicy probe the controller
 * builds (controller/sandbox/netprobe.h), so the policy tests
 * (e2e/test_policy.sh) admit and refuse the controller's real shape, not a
 * copy of it. Not shipped.
 *
 *   sbx-netprobe-pod NAMESPACE target|client IMAGE   ->  the pod of round 1, JSON
 * (the client's target address is 10.0.0.2) */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"
#include "sandbox/netprobe.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: sbx-netprobe-pod NAMESPACE target|client IMAGE\n");
		return 2;
	}
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	cJSON *pod = sbx_netprobe_pod(argv[1], argv[2], 1, "10.0.0.2", &cfg, argv[3]);
	sbx_config_release(&cfg);
	if (!pod) {
		fprintf(stderr, "no probe pod of role %s\n", argv[2]);
		return 1;
	}
	char *s = cJSON_PrintUnformatted(pod);
	printf("%s\n", s);
	free(s);
	cJSON_Delete(pod);
	return 0;
}
