#include "support.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonget.h"
#include "sandbox/spec.h"

const unsigned char fuzz_seal_key[32] = "fuzz-seal-key-fuzz-seal-key-0123";

size_t fuzz_printed_size(const cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	assert(s != NULL);
	size_t n = strlen(s);
	free(s);
	return n;
}

const struct sbx_seal_keys *fuzz_seal_keys(void)
{
	static struct sbx_seal_keys k;
	if (!k.n) {
		char err[128];
		sbx_seal_keys_init(&k);
		if (sbx_seal_keys_add(&k, fuzz_seal_key, sizeof fuzz_seal_key, 16, err, sizeof err) < 0 ||
		    sbx_seal_keys_add(&k, (const unsigned char *)"previous-key-previous-key-012345", 32, 16, err,
				      sizeof err) < 0)
			abort();
	}
	return &k;
}

void fuzz_check_mounts(const cJSON *pod, const struct sbx_config *cfg, const char *owner)
{
	const cJSON *ps = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	const cJSON *v;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(ps, "volumes"))
	{
		const cJSON *hp = cJSON_GetObjectItemCaseSensitive(v, "hostPath");
		const cJSON *pvc = cJSON_GetObjectItemCaseSensitive(v, "persistentVolumeClaim");
		if (hp) {
			assert(owner && cfg->ws_mode == SBX_WS_HOSTPATH);
			const char *path = jstr(hp, "path");
			assert(path);
			size_t rl = strlen(cfg->host_root);
			assert(!strncmp(path, cfg->host_root, rl) && path[rl] == '/');
			const char *rest = path + rl + 1;
			size_t nl = strlen(FUZZ_NS), ol = strlen(owner);
			assert(!strncmp(rest, FUZZ_NS, nl) && rest[nl] == '/');
			rest += nl + 1;
			assert(!strncmp(rest, owner, ol) && rest[ol] == '/');
			assert(sbx_safe_segment(rest + ol + 1));
		}
		if (pvc)
			assert(owner && cfg->ws_mode == SBX_WS_PVC);
	}
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(ps, "containers"))
	{
		const cJSON *m;
		cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(c, "volumeMounts"))
		{
			const char *sub = jstr(m, "subPath");
			if (!sub)
				continue;
			assert(owner && cfg->ws_mode == SBX_WS_PVC);
			size_t ol = strlen(owner);
			assert(!strncmp(sub, owner, ol) && sub[ol] == '/' && sbx_safe_segment(sub + ol + 1));
		}
	}
}

void fuzz_configs(const struct sbx_config **pvc, const struct sbx_config **host)
{
	static struct sbx_config p, h;
	static int ready;
	if (!ready) {
		char err[256];
		static const char y[] = "workspace: {mode: hostPath, hostPathRoot: /srv/ws}\n";
		sbx_config_init(&p);
		sbx_config_init(&h);
		if (sbx_config_parse(&h, y, sizeof y - 1, err, sizeof err) < 0)
			abort();
		ready = 1;
	}
	*pvc = &p;
	*host = &h;
}
