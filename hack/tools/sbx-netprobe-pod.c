/* sbx-netprobe-pod: prints a pod, or the NetworkPolicy, of the
 * NetworkPolicy probe the controller builds (controller/sandbox/netprobe.h),
 * so the policy tests (e2e/test_policy.sh) admit and refuse the controller's
 * real shape, not a copy of it. Not shipped.
 *
 *   sbx-netprobe-pod NAMESPACE target|client IMAGE   ->  the pod of round 1, JSON
 *   sbx-netprobe-pod NAMESPACE policy                ->  the policy sbx-netprobe, JSON
 *   sbx-netprobe-pod NAMESPACE egress-policy         ->  the policy sbx-netprobe-egress, JSON
 * (the client's target address is 10.0.0.2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"
#include "sandbox/netprobe.h"

int main(int argc, char **argv)
{
	int policy = argc == 3 && !strcmp(argv[2], "policy");
	int egress = argc == 3 && !strcmp(argv[2], "egress-policy");
	if (argc != 4 && !policy && !egress) {
		fprintf(stderr, "usage: sbx-netprobe-pod NAMESPACE target|client IMAGE, or NAMESPACE policy|egress-policy\n");
		return 2;
	}
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	cJSON *pod = policy   ? sbx_netprobe_policy(argv[1])
		     : egress ? sbx_netprobe_egress_policy(argv[1])
			      : sbx_netprobe_pod(argv[1], argv[2], 1, "10.0.0.2", &cfg, argv[3]);
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
