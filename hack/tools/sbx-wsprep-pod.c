/* sbx-wsprep-pod: prints the workspace preparation pod the controller builds
 * (controller/sandbox/wsprep.h) for an owner in a namespace, so the policy
 * tests (e2e/test_policy.sh) admit and refuse the controller's real shape,
 * not a copy of it. Not shipped.
 *
 *   sbx-wsprep-pod NAMESPACE OWNER IMAGE [CONFIG_YAML]   ->  the pod, JSON
 * (owned by a Sandbox "s" with uid "0"; CONFIG_YAML: the controller's config) */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"
#include "sandbox/wsprep.h"

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: sbx-wsprep-pod NAMESPACE OWNER IMAGE [CONFIG_YAML]\n");
		return 2;
	}
	struct sbx_config cfg;
	char err[512];
	sbx_config_init(&cfg);
	if (argc == 5 && sbx_config_load(&cfg, argv[4], err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		sbx_config_release(&cfg);
		return 1;
	}
	const struct sbx_wsprep_for sb = { "sandbox.dev/v1alpha1", "Sandbox", "s", "0" };
	cJSON *pod = sbx_wsprep_pod(argv[1], argv[2], &cfg, argv[3], &sb);
	sbx_config_release(&cfg);
	if (!pod) {
		fprintf(stderr, "no preparation pod for owner %s with this config\n", argv[2]);
		return 1;
	}
	char *s = cJSON_PrintUnformatted(pod);
	printf("%s\n", s);
	free(s);
	cJSON_Delete(pod);
	return 0;
}
