#include "sandbox/wsprep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/buf.h"
#include "base/jbuild.h"
#include "base/jsonget.h"
#include "base/xmalloc.h"
#include "sandbox/mac.h"
#include "sandbox/podbuild.h"
#include "sandbox/podstate.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"

/* Cap on the digest input: a tag, namespace, owner, root, ids, subdirs. */
#define NAME_M_CAP (64 * 1024)

int sbx_wsprep_name(const char *ns, const char *owner, const struct sbx_config *cfg, char *out, size_t outlen)
{
	static const char tag[] = "sandbox.dev/workspace-init/v1";
	if (!ns || !owner || !cfg || outlen < sizeof SBX_WSPREP_NAME_PREFIX + 32)
		return -1;
	const char *root = cfg->ws_mode == SBX_WS_PVC ? cfg->pvc_name : cfg->host_root;
	char ids[64];
	snprintf(ids, sizeof ids, "%ld:%ld", cfg->pod.run_as_user, cfg->pod.run_as_group);
	struct buf m;
	buf_init(&m, NAME_M_CAP);
	int e = sbx_lp_append(&m, tag, sizeof tag - 1) | sbx_lp_append(&m, ns, strlen(ns)) |
		sbx_lp_append(&m, owner, strlen(owner)) |
		sbx_lp_append(&m, cfg->ws_mode == SBX_WS_PVC ? "pvc" : "hostPath", cfg->ws_mode == SBX_WS_PVC ? 3 : 8) |
		sbx_lp_append(&m, root ? root : "", root ? strlen(root) : 0) | sbx_lp_append(&m, ids, strlen(ids));
	for (size_t i = 0; i < cfg->nmounts; i++)
		e |= sbx_lp_append(&m, cfg->mounts[i].subdir, strlen(cfg->mounts[i].subdir));
	unsigned char md[32];
	unsigned int mdlen = 0;
	if (e || EVP_Digest(m.data, m.len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
		buf_release(&m);
		return -1;
	}
	buf_release(&m);
	char hex[33];
	sbx_hex(md, 16, hex);
	snprintf(out, outlen, SBX_WSPREP_NAME_PREFIX "%s", hex);
	return 0;
}

/* The container: workspace-init as root with only the capabilities that
 * hand a folder over, on a read-only root file system. */
static cJSON *container(const struct sbx_config *cfg, const char *image)
{
	cJSON *cmd, *sc;
	cJSON *c = sbx_pod_tool_container(SBX_WSPREP_CONTAINER, image, "workspace-init", "64Mi", &cmd, &sc);
	char n[32];
	jb_push_str(cmd, "--uid");
	snprintf(n, sizeof n, "%ld", cfg->pod.run_as_user);
	jb_push_str(cmd, n);
	jb_push_str(cmd, "--gid");
	snprintf(n, sizeof n, "%ld", cfg->pod.run_as_group);
	jb_push_str(cmd, n);
	for (size_t i = 0; i < cfg->nmounts; i++) {
		snprintf(n, sizeof n, SBX_WSPREP_MOUNT_ROOT "/%zu", i);
		jb_push_str(cmd, n);
	}
	jb_num(sc, "runAsUser", 0);
	jb_num(sc, "runAsGroup", 0);
	jb_bool(sc, "runAsNonRoot", 0);
	cJSON *caps = jb_add_obj(sc, "capabilities");
	jb_push_str(jb_add_arr(caps, "drop"), "ALL");
	cJSON *add = jb_add_arr(caps, "add");
	jb_push_str(add, "CHOWN");
	jb_push_str(add, "DAC_OVERRIDE");
	jb_push_str(add, "FOWNER");
	return c;
}

cJSON *sbx_wsprep_pod(const char *ns, const char *owner, const struct sbx_config *cfg, const char *image,
		      const struct sbx_wsprep_for *forobj)
{
	char name[64];
	if (!owner || !sbx_owner_valid(owner) || !image || !image[0] || !sbx_pod_config_usable(cfg, owner) ||
	    sbx_wsprep_name(ns, owner, cfg, name, sizeof name) < 0 || !forobj || !forobj->api_version ||
	    !forobj->kind || !forobj->name || !forobj->uid)
		return NULL;
	cJSON *pod = jb_obj();
	jb_str(pod, "apiVersion", "v1");
	jb_str(pod, "kind", "Pod");
	cJSON *md = jb_add_obj(pod, "metadata");
	jb_str(md, "name", name);
	jb_str(md, "namespace", ns);
	cJSON *labels = jb_add_obj(md, "labels");
	jb_str(labels, SBX_LABEL_WS_INIT, name + sizeof SBX_WSPREP_NAME_PREFIX - 1);
	jb_str(labels, SBX_LABEL_NAME, SBX_WSPREP_APP_NAME);
	jb_str(labels, SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY); /* the network floor selects it (sandbox/netfloor.h) */
	jb_str(jb_add_obj(md, "annotations"), SBX_ANN_OWNER, owner);
	cJSON *ref = jb_obj();
	jb_str(ref, "apiVersion", forobj->api_version);
	jb_str(ref, "kind", forobj->kind);
	jb_str(ref, "name", forobj->name);
	jb_str(ref, "uid", forobj->uid);
	jb_push(jb_add_arr(md, "ownerReferences"), ref);

	cJSON *ps = jb_add_obj(pod, "spec");
	jb_str(ps, "restartPolicy", "Never");
	jb_bool(ps, "automountServiceAccountToken", 0);
	jb_bool(ps, "enableServiceLinks", 0);
	jb_num(ps, "activeDeadlineSeconds", SBX_WSPREP_DEADLINE_S);
	jb_str(jb_add_obj(jb_add_obj(ps, "securityContext"), "seccompProfile"), "type", "RuntimeDefault");
	if (cfg->pod.runtime_default)
		jb_str(ps, "runtimeClassName", cfg->pod.runtime_default);
	cJSON *c = container(cfg, image);
	jb_push(jb_add_arr(ps, "containers"), c);
	sbx_pod_add_workspace(ps, c, cfg, ns, owner, SBX_WSPREP_MOUNT_ROOT);
	sbx_pod_add_operator_settings(pod, ps, &cfg->pod);
	return pod;
}

enum sbx_wsprep_state sbx_wsprep_state(const cJSON *pod, const char *ns, const char *owner,
				       const struct sbx_config *cfg, char *why, size_t n)
{
	char name[64];
	if (n)
		why[0] = '\0';
	const cJSON *m = jobj(pod, "metadata");
	const char *pname = jstr(m, "name"), *pns = jstr(m, "namespace"), *l = label(pod, SBX_LABEL_WS_INIT);
	const char *o = annotation(pod, SBX_ANN_OWNER);
	if (sbx_wsprep_name(ns, owner, cfg, name, sizeof name) < 0 || !pname || strcmp(pname, name) || !pns ||
	    strcmp(pns, ns) || !l || strcmp(l, name + sizeof SBX_WSPREP_NAME_PREFIX - 1) || !o || strcmp(o, owner)) {
		snprintf(why, n, "pod %.64s is not the preparation pod of owner %.64s", pname ? pname : "?", owner);
		return SBX_WSPREP_FOREIGN;
	}
	const char *phase = jstr(jobj(pod, "status"), "phase");
	sbx_pod_why(pod, SBX_WSPREP_CONTAINER, why, n);
	if (phase && !strcmp(phase, "Succeeded"))
		return SBX_WSPREP_DONE;
	if (phase && !strcmp(phase, "Failed")) {
		if (n && !why[0])
			snprintf(why, n, "it failed");
		return SBX_WSPREP_FAILED;
	}
	if (n && !why[0])
		snprintf(why, n, "%s", phase && !strcmp(phase, "Running") ? "running" : "pending");
	return SBX_WSPREP_WAITING;
}

/* Copies the string member k of from into to when it is at most max bytes. */
static void copy_short(cJSON *to, const cJSON *from, const char *k, size_t max)
{
	const char *v = jstr(from, k);
	if (v && strlen(v) <= max)
		jb_str(to, k, v);
}

cJSON *sbx_wsprep_trim(const cJSON *pod)
{
	static const char *const meta[] = { "name", "namespace", "uid", "resourceVersion", "creationTimestamp",
					    "deletionTimestamp", NULL };
	const cJSON *om = jobj(pod, "metadata"), *st = jobj(pod, "status");
	cJSON *t = jb_obj(), *m = jb_add_obj(t, "metadata");
	for (const char *const *k = meta; *k; k++)
		copy_short(m, om, *k, 253);
	const char *l = label(pod, SBX_LABEL_WS_INIT), *o = annotation(pod, SBX_ANN_OWNER);
	if (l && strlen(l) <= 63)
		jb_str(jb_add_obj(m, "labels"), SBX_LABEL_WS_INIT, l);
	if (o && strlen(o) <= 253)
		jb_str(jb_add_obj(m, "annotations"), SBX_ANN_OWNER, o);
	cJSON *ts = jb_add_obj(t, "status");
	copy_short(ts, st, "phase", 32);
	sbx_pod_why_keep(ts, st, SBX_WSPREP_CONTAINER);
	return t;
}
