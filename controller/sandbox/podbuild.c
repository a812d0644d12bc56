#include "sandbox/podbuild.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"
#include "sandbox/api.h"
#include "sandbox/spec.h"

/* Default resources when the spec has none: requests = limits. */
#define DEFAULT_CPU "2"
#define DEFAULT_MEMORY "4Gi"

/* cJSON reports allocation failure by returning NULL/false. A silently
 * missing member could drop a subPath and mount a whole shared volume, so
 * the program's out-of-memory policy applies: abort. */
static void *must(void *x)
{
	if (!x) {
		fprintf(stderr, "sandbox-controller: out of memory building a pod\n");
		abort();
	}
	return x;
}

/* Checked cJSON constructors: each returns or attaches a new node and
 * aborts when cJSON cannot allocate. */
static cJSON *new_obj(void)
{
	return must(cJSON_CreateObject());
}

static void add(cJSON *o, const char *k, cJSON *item)
{
	if (!cJSON_AddItemToObject(o, k, item))
		must(NULL);
}

static void push(cJSON *a, cJSON *item)
{
	if (!cJSON_AddItemToArray(a, item))
		must(NULL);
}

static void add_str(cJSON *o, const char *k, const char *v)
{
	add(o, k, must(cJSON_CreateString(v)));
}

static cJSON *add_obj(cJSON *o, const char *k)
{
	cJSON *c = new_obj();
	add(o, k, c);
	return c;
}

static cJSON *add_arr(cJSON *o, const char *k)
{
	cJSON *a = must(cJSON_CreateArray());
	add(o, k, a);
	return a;
}

static void add_bool(cJSON *o, const char *k, int v)
{
	add(o, k, must(cJSON_CreateBool(v)));
}

/* Returns the pod's metadata as a new object; owner NULL = no owner. */
static cJSON *metadata(const struct sbx_pod_params *p, const char *owner)
{
	cJSON *md = new_obj();
	add_str(md, "name", p->pod_name);
	add_str(md, "namespace", p->ns);

	cJSON *labels = add_obj(md, "labels");
	add_str(labels, SBX_LABEL_DIGEST, p->scope->digest);
	add_str(labels, SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	add_str(labels, SBX_LABEL_NAME, SBX_NAME);

	cJSON *ann = add_obj(md, "annotations");
	if (owner)
		add_str(ann, SBX_ANN_OWNER, owner);
	add_str(ann, SBX_ANN_FINGERPRINT, p->scope->fingerprint);
	add_str(ann, SBX_ANN_CLAIMED_AT, p->claimed_at);
	if (p->claim && strcmp(p->claim, p->pod_name))
		add_str(ann, SBX_ANN_CLAIM, p->claim);
	add_str(ann, SBX_ANN_SEAL, p->seal);

	cJSON *ref = new_obj();
	add_str(ref, "apiVersion", SBX_API);
	add_str(ref, "kind", "Sandbox");
	add_str(ref, "name", p->sandbox_name);
	add_str(ref, "uid", p->sandbox_uid);
	add_bool(ref, "controller", 1);
	add_bool(ref, "blockOwnerDeletion", 1);
	push(add_arr(md, "ownerReferences"), ref);
	return md;
}

/* Copies the string array spec.<f> into container c when present. */
static void copy_strings(cJSON *c, const cJSON *spec, const char *f)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(spec, f);
	if (!cJSON_IsArray(a))
		return;
	cJSON *out = add_arr(c, f);
	for (const cJSON *e = a->child; e; e = e->next)
		if (cJSON_IsString(e))
			push(out, must(cJSON_CreateString(e->valuestring)));
}

/* Copies name and value of each spec.env entry, nothing else. */
static void copy_env(cJSON *c, const cJSON *spec)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(spec, "env");
	if (!cJSON_IsArray(env))
		return;
	cJSON *out = add_arr(c, "env");
	for (const cJSON *e = env->child; e; e = e->next) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *value = cJSON_GetObjectItemCaseSensitive(e, "value");
		if (!cJSON_IsString(name))
			continue;
		cJSON *o = new_obj();
		add_str(o, "name", name->valuestring);
		if (cJSON_IsString(value))
			add_str(o, "value", value->valuestring);
		push(out, o);
	}
}

/* Returns a new resources object: spec.resources, or the contract's default. */
static cJSON *resources(const cJSON *spec)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(spec, "resources");
	if (cJSON_IsObject(r))
		return must(cJSON_Duplicate(r, 1));
	cJSON *out = new_obj();
	static const char *const parts[] = { "requests", "limits" };
	for (size_t i = 0; i < 2; i++) {
		cJSON *q = add_obj(out, parts[i]);
		add_str(q, "cpu", DEFAULT_CPU);
		add_str(q, "memory", DEFAULT_MEMORY);
	}
	return out;
}

/* Adds the volumes to pod spec ps and the matching mounts to container c. */
static void workspace(cJSON *ps, cJSON *c, const struct sbx_config *cfg, const char *ns,
		      const char *owner)
{
	cJSON *mounts = add_arr(c, "volumeMounts");
	cJSON *vols = add_arr(ps, "volumes");
	int shared_pvc = owner && cfg->ws_mode == SBX_WS_PVC;
	if (shared_pvc) {
		cJSON *v = new_obj();
		add_str(v, "name", SBX_PVC_VOLUME);
		add_str(add_obj(v, "persistentVolumeClaim"), "claimName", cfg->pvc_name);
		push(vols, v);
	}
	for (size_t i = 0; i < cfg->nmounts; i++) {
		const struct sbx_mount *m = &cfg->mounts[i];
		cJSON *vm = new_obj();
		if (shared_pvc) {
			char *sub = xasprintf("%s/%s", owner, m->subdir);
			add_str(vm, "name", SBX_PVC_VOLUME);
			add_str(vm, "mountPath", m->path);
			add_str(vm, "subPath", sub);
			free(sub);
		} else {
			char vname[32];
			snprintf(vname, sizeof vname, "ws-%zu", i);
			cJSON *v = new_obj();
			add_str(v, "name", vname);
			if (owner) {
				char *path = xasprintf("%s/%s/%s/%s", cfg->host_root, ns, owner,
						       m->subdir);
				cJSON *hp = add_obj(v, "hostPath");
				add_str(hp, "path", path);
				add_str(hp, "type", "DirectoryOrCreate");
				free(path);
			} else {
				add_obj(v, "emptyDir");
			}
			push(vols, v);
			add_str(vm, "name", vname);
			add_str(vm, "mountPath", m->path);
		}
		push(mounts, vm);
	}
}

/* The pod-level securityContext of the restricted Pod Security profile. */
static cJSON *pod_security(const struct sbx_pod_settings *ps)
{
	cJSON *sc = new_obj();
	add_bool(sc, "runAsNonRoot", 1);
	add(sc, "runAsUser", must(cJSON_CreateNumber((double)ps->run_as_user)));
	add(sc, "runAsGroup", must(cJSON_CreateNumber((double)ps->run_as_group)));
	add(sc, "fsGroup", must(cJSON_CreateNumber((double)ps->fs_group)));
	add_str(add_obj(sc, "seccompProfile"), "type", "RuntimeDefault");
	return sc;
}

/* The container's securityContext: no escalation, no capabilities. */
static cJSON *container_security(void)
{
	cJSON *sc = new_obj();
	add_bool(sc, "allowPrivilegeEscalation", 0);
	add_bool(sc, "runAsNonRoot", 1);
	push(add_arr(add_obj(sc, "capabilities"), "drop"), must(cJSON_CreateString("ALL")));
	return sc;
}

/* Adds the operator's settings from the config (validated when loaded;
 * reserved keys were refused there). */
static void operator_settings(cJSON *pod, cJSON *ps, const struct sbx_pod_settings *s)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *e;
	cJSON_ArrayForEach(e, s->labels)
	{
		add_str(cJSON_GetObjectItemCaseSensitive(md, "labels"), e->string, e->valuestring);
	}
	cJSON_ArrayForEach(e, s->annotations)
	{
		add_str(cJSON_GetObjectItemCaseSensitive(md, "annotations"), e->string,
			e->valuestring);
	}
	if (s->node_selector)
		add(ps, "nodeSelector", must(cJSON_Duplicate(s->node_selector, 1)));
	if (s->tolerations)
		add(ps, "tolerations", must(cJSON_Duplicate(s->tolerations, 1)));
	if (s->priority_class)
		add_str(ps, "priorityClassName", s->priority_class);
	if (s->pull_secrets)
		add(ps, "imagePullSecrets", must(cJSON_Duplicate(s->pull_secrets, 1)));
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

/* Returns 1 iff the config can be turned into volumes for this owner. */
static int config_usable(const struct sbx_config *cfg, const char *owner)
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
	if (!config_usable(p->cfg, owner))
		return NULL;
	const char *rc = NULL;
	if (sbx_pod_runtime_class(p->spec, p->cfg, &rc, NULL, 0) < 0)
		return NULL;

	cJSON *pod = new_obj();
	add_str(pod, "apiVersion", "v1");
	add_str(pod, "kind", "Pod");
	add(pod, "metadata", metadata(p, owner));

	cJSON *ps = add_obj(pod, "spec");
	add_str(ps, "restartPolicy", "Never");
	add_bool(ps, "automountServiceAccountToken", 0);
	add_bool(ps, "enableServiceLinks", 0);
	add(ps, "securityContext", pod_security(&p->cfg->pod));
	if (rc)
		add_str(ps, "runtimeClassName", rc);

	cJSON *c = new_obj();
	push(add_arr(ps, "containers"), c);
	add_str(c, "name", SBX_CONTAINER);
	add_str(c, "image", image->valuestring);
	copy_strings(c, p->spec, "command");
	copy_strings(c, p->spec, "args");
	copy_env(c, p->spec);
	add(c, "resources", resources(p->spec));
	add(c, "securityContext", container_security());
	workspace(ps, c, p->cfg, p->ns, owner);
	operator_settings(pod, ps, &p->cfg->pod);
	return pod;
}
