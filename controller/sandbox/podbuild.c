#include "sandbox/podbuild.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jbuild.h"
#include "base/xmalloc.h"
#include "sandbox/api.h"
#include "sandbox/spec.h"

/* Default resources when the spec has none: requests = limits. */
#define DEFAULT_CPU "2"
#define DEFAULT_MEMORY "4Gi"

/* Returns the pod's metadata as a new object; owner NULL = no owner. */
static cJSON *metadata(const struct sbx_pod_params *p, const char *owner)
{
	cJSON *md = jb_obj();
	jb_str(md, "name", p->pod_name);
	jb_str(md, "namespace", p->ns);

	cJSON *labels = jb_add_obj(md, "labels");
	jb_str(labels, SBX_LABEL_DIGEST, p->scope->digest);
	jb_str(labels, SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	jb_str(labels, SBX_LABEL_NAME, SBX_NAME);
	/* The profiles' policy selects the pod by the set's hash
	 * (sandbox/netprofile.h); the keeper reads the names. */
	const char *profiles[SBX_PROFILES_MAX];
	size_t nprofiles = 0;
	char joined[SBX_PROFILES_JOINED_MAX], hash[17];
	int with_profiles = sbx_spec_profiles(p->spec, profiles, &nprofiles, NULL, 0) == 0 && nprofiles &&
			    sbx_profiles_set(profiles, nprofiles, joined, hash) == 0;
	if (with_profiles)
		jb_str(labels, SBX_LABEL_NETPROFILES, hash);

	cJSON *ann = jb_add_obj(md, "annotations");
	if (owner)
		jb_str(ann, SBX_ANN_OWNER, owner);
	if (with_profiles)
		jb_str(ann, SBX_ANN_NETPROFILES, joined);
	jb_str(ann, SBX_ANN_FINGERPRINT, p->scope->fingerprint);
	jb_str(ann, SBX_ANN_CLAIMED_AT, p->claimed_at);
	if (p->claim && strcmp(p->claim, p->pod_name))
		jb_str(ann, SBX_ANN_CLAIM, p->claim);
	jb_str(ann, SBX_ANN_SEAL, p->seal);

	cJSON *ref = jb_obj();
	jb_str(ref, "apiVersion", SBX_API);
	jb_str(ref, "kind", "Sandbox");
	jb_str(ref, "name", p->sandbox_name);
	jb_str(ref, "uid", p->sandbox_uid);
	jb_bool(ref, "controller", 1);
	jb_bool(ref, "blockOwnerDeletion", 1);
	jb_push(jb_add_arr(md, "ownerReferences"), ref);
	return md;
}

/* Copies the string array spec.<f> into container c when present. */
static void copy_strings(cJSON *c, const cJSON *spec, const char *f)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(spec, f);
	if (!cJSON_IsArray(a))
		return;
	cJSON *out = jb_add_arr(c, f);
	for (const cJSON *e = a->child; e; e = e->next)
		if (cJSON_IsString(e))
			jb_push_str(out, e->valuestring);
}

/* Copies name and value of each spec.env entry, nothing else. */
static void copy_env(cJSON *c, const cJSON *spec)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(spec, "env");
	if (!cJSON_IsArray(env))
		return;
	cJSON *out = jb_add_arr(c, "env");
	for (const cJSON *e = env->child; e; e = e->next) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *value = cJSON_GetObjectItemCaseSensitive(e, "value");
		if (!cJSON_IsString(name))
			continue;
		cJSON *o = jb_obj();
		jb_str(o, "name", name->valuestring);
		if (cJSON_IsString(value))
			jb_str(o, "value", value->valuestring);
		jb_push(out, o);
	}
}

/* Returns a new resources object: spec.resources, or the contract's default. */
static cJSON *resources(const cJSON *spec)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(spec, "resources");
	if (cJSON_IsObject(r))
		return jb_must(cJSON_Duplicate(r, 1));
	cJSON *out = jb_obj();
	static const char *const parts[] = { "requests", "limits" };
	for (size_t i = 0; i < 2; i++) {
		cJSON *q = jb_add_obj(out, parts[i]);
		jb_str(q, "cpu", DEFAULT_CPU);
		jb_str(q, "memory", DEFAULT_MEMORY);
	}
	return out;
}

void sbx_pod_add_workspace(cJSON *ps, cJSON *c, const struct sbx_config *cfg, const char *ns, const char *owner,
			   const char *mount_root)
{
	cJSON *mounts = jb_add_arr(c, "volumeMounts");
	cJSON *vols = jb_add_arr(ps, "volumes");
	int shared_pvc = owner && cfg->ws_mode == SBX_WS_PVC;
	if (shared_pvc) {
		cJSON *v = jb_obj();
		jb_str(v, "name", SBX_PVC_VOLUME);
		jb_str(jb_add_obj(v, "persistentVolumeClaim"), "claimName", cfg->pvc_name);
		jb_push(vols, v);
	}
	for (size_t i = 0; i < cfg->nmounts; i++) {
		const struct sbx_mount *m = &cfg->mounts[i];
		cJSON *vm = jb_obj();
		char *at = mount_root ? xasprintf("%s/%zu", mount_root, i) : xstrdup(m->path);
		if (shared_pvc) {
			char *sub = xasprintf("%s/%s", owner, m->subdir);
			jb_str(vm, "name", SBX_PVC_VOLUME);
			jb_str(vm, "mountPath", at);
			jb_str(vm, "subPath", sub);
			free(sub);
		} else {
			char vname[32];
			snprintf(vname, sizeof vname, "ws-%zu", i);
			cJSON *v = jb_obj();
			jb_str(v, "name", vname);
			if (owner) {
				char *path = xasprintf("%s/%s/%s/%s", cfg->host_root, ns, owner,
						       m->subdir);
				cJSON *hp = jb_add_obj(v, "hostPath");
				jb_str(hp, "path", path);
				jb_str(hp, "type", "DirectoryOrCreate");
				free(path);
			} else {
				jb_add_obj(v, "emptyDir");
			}
			jb_push(vols, v);
			jb_str(vm, "name", vname);
			jb_str(vm, "mountPath", at);
		}
		free(at);
		jb_push(mounts, vm);
	}
}

/* The pod-level securityContext of the restricted Pod Security profile. */
static cJSON *pod_security(const struct sbx_pod_settings *ps)
{
	cJSON *sc = jb_obj();
	jb_bool(sc, "runAsNonRoot", 1);
	jb_num(sc, "runAsUser", (double)ps->run_as_user);
	jb_num(sc, "runAsGroup", (double)ps->run_as_group);
	jb_num(sc, "fsGroup", (double)ps->fs_group);
	jb_str(jb_add_obj(sc, "seccompProfile"), "type", "RuntimeDefault");
	return sc;
}

/* The container's securityContext: no escalation, no capabilities. */
static cJSON *container_security(void)
{
	cJSON *sc = jb_obj();
	jb_bool(sc, "allowPrivilegeEscalation", 0);
	jb_bool(sc, "runAsNonRoot", 1);
	jb_push_str(jb_add_arr(jb_add_obj(sc, "capabilities"), "drop"), "ALL");
	return sc;
}

cJSON *sbx_pod_tool_container(const char *name, const char *image, const char *subcommand, const char *mem_limit,
			      cJSON **cmd, cJSON **sc)
{
	cJSON *c = jb_obj();
	jb_str(c, "name", name);
	jb_str(c, "image", image);
	jb_str(c, "imagePullPolicy", "IfNotPresent");
	*cmd = jb_add_arr(c, "command");
	jb_push_str(*cmd, "/sandbox-controller");
	jb_push_str(*cmd, subcommand);
	jb_str(c, "terminationMessagePolicy", "FallbackToLogsOnError");
	cJSON *res = jb_add_obj(c, "resources");
	cJSON *rq = jb_add_obj(res, "requests"), *lim = jb_add_obj(res, "limits");
	jb_str(rq, "cpu", "10m");
	jb_str(rq, "memory", "16Mi");
	jb_str(lim, "cpu", "100m");
	jb_str(lim, "memory", mem_limit);
	*sc = jb_add_obj(c, "securityContext");
	jb_bool(*sc, "allowPrivilegeEscalation", 0);
	jb_bool(*sc, "readOnlyRootFilesystem", 1);
	return c;
}

void sbx_pod_add_operator_settings(cJSON *pod, cJSON *ps, const struct sbx_pod_settings *s)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *e;
	/* Not every pod built has both maps yet (the probe's has no
	 * annotations): made here when the operator adds to one. */
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels"),
	      *ann = cJSON_GetObjectItemCaseSensitive(md, "annotations");
	if (!labels && cJSON_GetArraySize(s->labels) > 0)
		labels = jb_add_obj(md, "labels");
	if (!ann && cJSON_GetArraySize(s->annotations) > 0)
		ann = jb_add_obj(md, "annotations");
	cJSON_ArrayForEach(e, s->labels)
	{
		jb_str(labels, e->string, e->valuestring);
	}
	cJSON_ArrayForEach(e, s->annotations)
	{
		jb_str(ann, e->string, e->valuestring);
	}
	if (s->node_selector)
		jb_add(ps, "nodeSelector", jb_must(cJSON_Duplicate(s->node_selector, 1)));
	if (s->tolerations)
		jb_add(ps, "tolerations", jb_must(cJSON_Duplicate(s->tolerations, 1)));
	if (s->priority_class)
		jb_str(ps, "priorityClassName", s->priority_class);
	if (s->pull_secrets)
		jb_add(ps, "imagePullSecrets", jb_must(cJSON_Duplicate(s->pull_secrets, 1)));
}

int sbx_pod_runtime_class(const cJSON *spec, const struct sbx_config *cfg, const char **out,
			  char *msg, size_t msglen)
{
	const cJSON *rc = cJSON_GetObjectItemCaseSensitive(spec, "runtimeClassName");
	*out = NULL;
	if (!rc) {
		*out = cfg->pod.runtime_default;
		return 0;
	}
	if (cJSON_IsString(rc) && rc->valuestring[0] && sbx_runtime_allowed(cfg, rc->valuestring)) {
		*out = rc->valuestring;
		return 0;
	}
	if (msglen) {
		int n = snprintf(msg, msglen, "spec.runtimeClassName \"%.64s\" is not allowed; the "
					      "controller's configuration allows: ",
				 cJSON_IsString(rc) ? rc->valuestring : "?");
		for (size_t i = 0; n >= 0 && (size_t)n < msglen && i < cfg->pod.nruntime_allowed; i++)
			n += snprintf(msg + n, msglen - (size_t)n, "%s%s", i ? ", " : "",
				      cfg->pod.runtime_allowed[i]);
		if (!cfg->pod.nruntime_allowed && n >= 0 && (size_t)n < msglen)
			snprintf(msg + n, msglen - (size_t)n, "none (pod.runtimeClasses.allowed)");
	}
	return -1;
}

int sbx_pod_config_usable(const struct sbx_config *cfg, const char *owner)
{
	if (owner && cfg->ws_mode == SBX_WS_PVC && (!cfg->pvc_name || !cfg->pvc_name[0]))
		return 0;
	if (owner && cfg->ws_mode == SBX_WS_HOSTPATH &&
	    (!cfg->host_root || cfg->host_root[0] != '/'))
		return 0;
	for (size_t i = 0; i < cfg->nmounts; i++)
		if (!cfg->mounts[i].path || !cfg->mounts[i].subdir ||
		    !sbx_safe_segment(cfg->mounts[i].subdir))
			return 0;
	return 1;
}

cJSON *sbx_pod_build(const struct sbx_pod_params *p)
{
	if (!p || !p->ns || !p->pod_name || !p->sandbox_name || !p->sandbox_uid || !p->spec ||
	    !p->scope || !p->claimed_at || !p->seal || !p->cfg)
		return NULL;
	const cJSON *image = cJSON_GetObjectItemCaseSensitive(p->spec, "image");
	if (!cJSON_IsString(image) || !image->valuestring || !image->valuestring[0])
		return NULL;
	const cJSON *ow = cJSON_GetObjectItemCaseSensitive(p->spec, "workspaceOwner");
	const char *owner = NULL;
	if (ow) {
		/* Present but unusable is refused, never read as "no owner". */
		if (!cJSON_IsString(ow) || !sbx_owner_valid(ow->valuestring))
			return NULL;
		owner = ow->valuestring;
	}
	if (!sbx_pod_config_usable(p->cfg, owner))
		return NULL;
	const char *rc = NULL;
	if (sbx_pod_runtime_class(p->spec, p->cfg, &rc, NULL, 0) < 0)
		return NULL;

	cJSON *pod = jb_obj();
	jb_str(pod, "apiVersion", "v1");
	jb_str(pod, "kind", "Pod");
	jb_add(pod, "metadata", metadata(p, owner));

	cJSON *ps = jb_add_obj(pod, "spec");
	jb_str(ps, "restartPolicy", "Never");
	jb_bool(ps, "automountServiceAccountToken", 0);
	jb_bool(ps, "enableServiceLinks", 0);
	jb_add(ps, "securityContext", pod_security(&p->cfg->pod));
	if (rc)
		jb_str(ps, "runtimeClassName", rc);

	cJSON *c = jb_obj();
	jb_push(jb_add_arr(ps, "containers"), c);
	jb_str(c, "name", SBX_CONTAINER);
	jb_str(c, "image", image->valuestring);
	copy_strings(c, p->spec, "command");
	copy_strings(c, p->spec, "args");
	copy_env(c, p->spec);
	jb_add(c, "resources", resources(p->spec));
	jb_add(c, "securityContext", container_security());
	sbx_pod_add_workspace(ps, c, p->cfg, p->ns, owner, NULL);
	sbx_pod_add_operator_settings(pod, ps, &p->cfg->pod);
	return pod;
}
