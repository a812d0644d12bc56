/* libFuzzer target: kubeconfig parsing (kube/config.h, kube_config_parse).
 * Relative file names resolve into a directory that does not exist. Exec
 * plugins are never run here (they run on the first credentials request). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct kube_config *c = kube_config_parse((const char *)data, size, "/nonexistent-fuzz-dir", NULL,
						  err, sizeof err);
	if (!c) {
		assert(memchr(err, '\0', sizeof err) != NULL);
		return 0;
	}
	const char *server = kube_config_server(c);
	assert(server && strstr(server, "://"));
	assert(server[strlen(server) - 1] != '/');
	assert(kube_config_namespace(c) != NULL);
	kube_config_free(c);
	return 0;
}
