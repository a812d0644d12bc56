#include "sandbox/verify.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/seal.h"
#include "sandbox/claimrec.h"
#include "base/xmalloc.h"
#include "sandbox/config.h"
#include "sandbox/spec.h"

/* Returns the string member k of obj, or NULL when absent or not a string. */
static const char *str_member(const cJSON *obj, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Returns 1 iff a and b are both non-NULL and byte-for-byte equal. */
static int same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

enum sbx_verify sbx_pod_verify(const cJSON *pod, const struct sbx_verify_expect *e)
{
	if (!e || !e->ns || !e->scope)
		return SBX_VERIFY_MALFORMED;
	if (!cJSON_IsObject(pod))
		return SBX_VERIFY_MALFORMED;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	if (!cJSON_IsObject(md))
		return SBX_VERIFY_MALFORMED;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(md, "annotations");
	if ((labels && !cJSON_IsObject(labels)) || (ann && !cJSON_IsObject(ann)))
		return SBX_VERIFY_MALFORMED;
	const char *name = str_member(md, "name");
	const char *claimed = str_member(ann, SBX_ANN_CLAIMED_AT);
	const char *fp = str_member(ann, SBX_ANN_FINGERPRINT);
	if (!name || !claimed || !fp)
		return SBX_VERIFY_MALFORMED;

	const char *ns = str_member(md, "namespace");
	if (!same(ns, e->ns))
		return SBX_VERIFY_NAMESPACE_MISMATCH;

	if (!same(str_member(labels, SBX_LABEL_MANAGED_BY), SBX_MANAGED_BY) ||
	    !same(str_member(labels, SBX_LABEL_NAME), SBX_NAME))
		return SBX_VERIFY_NOT_MANAGED;

	const char *digest = str_member(labels, SBX_LABEL_DIGEST);
	if (!same(digest, e->scope->digest))
		return SBX_VERIFY_DIGEST_MISMATCH;

	/* Absent matches only absent: a pod of an owner-less claim must never
	 * be handed to an owner, nor the reverse, and "" is not "none". */
	const cJSON *ow = cJSON_GetObjectItemCaseSensitive(ann, SBX_ANN_OWNER);
	const char *owner = NULL;
	if (ow) {
		if (!cJSON_IsString(ow) || !e->owner || strcmp(ow->valuestring, e->owner) != 0)
			return SBX_VERIFY_OWNER_MISMATCH;
		owner = ow->valuestring;
	} else if (e->owner) {
		return SBX_VERIFY_OWNER_MISMATCH;
	}

	/* A warm pod bound to the scope names its claim (one of the digest's
	 * claim names), and the seal covers that too. */
	const cJSON *cl = cJSON_GetObjectItemCaseSensitive(ann, SBX_ANN_CLAIM);
	if (cl && (!cJSON_IsString(cl) || sbx_claim_generation(cl->valuestring, digest) < 0))
		return SBX_VERIFY_MALFORMED;
	char sealed[600];
	sbx_seal_pod_name(name, cl ? cl->valuestring : NULL, sealed, sizeof sealed);
	if (sbx_seal_check(e->keys, ns, sealed, digest, owner, fp, claimed,
			   str_member(ann, SBX_ANN_SEAL)) < 0)
		return SBX_VERIFY_BAD_SEAL;

	const cJSON *del = cJSON_GetObjectItemCaseSensitive(md, "deletionTimestamp");
	if (del && !cJSON_IsNull(del))
		return SBX_VERIFY_TERMINATING;

	if (e->check_fingerprint && !same(fp, e->scope->fingerprint))
		return SBX_VERIFY_FINGERPRINT_MISMATCH;
	return SBX_VERIFY_OK;
}

int sbx_pod_orphaned(const cJSON *pod, const struct sbx_seal_keys *keys)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata"), *ref;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(md, "annotations");
	const char *digest = str_member(labels, SBX_LABEL_DIGEST);
	if (!cJSON_IsObject(md) || !digest || cJSON_GetObjectItemCaseSensitive(labels, SBX_LABEL_POOL))
		return 0;
	cJSON_ArrayForEach(ref, cJSON_GetObjectItemCaseSensitive(md, "ownerReferences"))
	{
		const char *kind = str_member(ref, "kind"), *api = str_member(ref, "apiVersion");
		if (same(kind, "Sandbox") && api && !strncmp(api, "sandbox.dev/", 12))
			return 0;
	}
	/* Checked last, on pods no Sandbox holds (rare): the seal costs an
	 * HMAC per key, and the pod cache calls this on every pod event. Its
	 * own digest and owner are expected: whatever scope it is of, it must
	 * be the controller's own, or it is left alone. */
	struct sbx_scope sc = { 0 };
	snprintf(sc.digest, sizeof sc.digest, "%s", digest); /* one too long is cut: no match */
	const cJSON *ow = cJSON_GetObjectItemCaseSensitive(ann, SBX_ANN_OWNER);
	struct sbx_verify_expect e = { .ns = str_member(md, "namespace"),
				       .owner = cJSON_IsString(ow) ? ow->valuestring : NULL,
				       .scope = &sc,
				       .keys = keys,
				       .check_fingerprint = 0 };
	return keys && sbx_pod_verify(pod, &e) == SBX_VERIFY_OK;
}

const char *sbx_verify_str(enum sbx_verify v)
{
	switch (v) {
	case SBX_VERIFY_OK:
		return "verified";
	case SBX_VERIFY_NOT_MANAGED:
		return "pod is not managed by sandbox-controller (labels missing or wrong)";
	case SBX_VERIFY_DIGEST_MISMATCH:
		return "pod's scope-digest label does not match the Sandbox's scope";
	case SBX_VERIFY_OWNER_MISMATCH:
		return "pod's workspace owner does not match the Sandbox's";
	case SBX_VERIFY_FINGERPRINT_MISMATCH:
		return "pod was created for a different spec with the same idempotency key";
	case SBX_VERIFY_NAMESPACE_MISMATCH:
		return "pod is in another namespace";
	case SBX_VERIFY_TERMINATING:
		return "pod is terminating";
	case SBX_VERIFY_BAD_SEAL:
		return "pod's seal is missing or was not produced by this controller";
	case SBX_VERIFY_MALFORMED:
		return "pod object is malformed or lacks the controller's annotations";
	case SBX_VERIFY_PAYLOAD_MISMATCH:
		return "pod's containers or volumes differ from what the controller builds for this Sandbox";
	}
	return "unknown verification result";
}

/* ---- the payload certificate (see verify.h for the rule) ---- */

struct cert {
	const struct sbx_config *cfg;
	const char *ns, *owner; /* from the expected pod */
	const cJSON *want;	/* the expected pod */
	const cJSON *spec;	/* the Sandbox's spec, or NULL */
	const cJSON *live;
	char *why;
	size_t whylen;
};

static int refuse(struct cert *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records why the pod is refused (the first reason wins) and returns 0. */
static int refuse(struct cert *c, const char *fmt, ...)
{
	if (c->whylen && !c->why[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->why, c->whylen, fmt, ap);
		va_end(ap);
	}
	return 0;
}

static const cJSON *field(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* Absent and JSON null count as equal; everything else must be identical. */
static int same_opt(const cJSON *a, const cJSON *b)
{
	int na = !a || cJSON_IsNull(a), nb = !b || cJSON_IsNull(b);
	if (na || nb)
		return na && nb;
	return cJSON_Compare(a, b, 1);
}

/* 1 iff v is absent, null or false. */
static int off(const cJSON *v)
{
	return !v || cJSON_IsNull(v) || cJSON_IsFalse(v);
}

/* 1 iff v is a whole number >= min. */
static int whole_at_least(const cJSON *v, double min)
{
	return cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
	       v->valuedouble == floor(v->valuedouble) && v->valuedouble >= min;
}

static int in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return 1;
	return 0;
}

/* Fails (returns 0) on the first member of o not named in allowed. */
static int only_members(struct cert *c, const cJSON *o, const char *const *allowed,
			const char *where)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, o)
	{
		if (!in_list(m->string, allowed))
			return refuse(c, "%s.%.64s is not something the controller builds", where,
				      m->string);
	}
	return 1;
}

/* 1 iff two quantities (strings or numbers) denote the same amount. */
static int same_quantity(const cJSON *a, const cJSON *b)
{
	double x, y;
	char bufa[32], bufb[32];
	const char *sa = cJSON_IsString(a) ? a->valuestring : NULL;
	const char *sb = cJSON_IsString(b) ? b->valuestring : NULL;
	if (cJSON_IsNumber(a))
		snprintf(bufa, sizeof bufa, "%.17g", a->valuedouble), sa = bufa;
	if (cJSON_IsNumber(b))
		snprintf(bufb, sizeof bufb, "%.17g", b->valuedouble), sb = bufb;
	if (sbx_quantity_parse(sa, &x) < 0 || sbx_quantity_parse(sb, &y) < 0)
		return 0;
	return fabs(x - y) <= 1e-9 * fmax(1.0, fmax(fabs(x), fabs(y)));
}

/* 1 iff name is declared in adoption.allowedMutations.resourceDefaults:
 * admission may fill it in where the Sandbox sets none. */
static int resource_declared(const struct cert *c, const char *name)
{
	for (size_t i = 0; i < c->cfg->mutations.nresource_defaults; i++)
		if (!strcmp(c->cfg->mutations.resource_defaults[i], name))
			return 1;
	return 0;
}

/* Resources: the spec's (or the defaults), compared as quantities. The
 * apiserver copies a limit into requests when a resource has a limit and
 * no request (before any admission plugin runs, so that request is the
 * limit's). A resource the spec sets in neither way may have been filled in
 * by a LimitRange: accepted, at any quantity, when declared in
 * adoption.allowedMutations.resourceDefaults. Nothing else may be added. */
static int check_resources(struct cert *c, const cJSON *live, const cJSON *want)
{
	static const char *const parts[] = { "limits", "requests", "claims", NULL };
	if (!only_members(c, live, parts, "container.resources"))
		return 0;
	if (field(live, "claims"))
		return refuse(c, "container.resources.claims is not something the controller builds");
	const cJSON *wl = field(want, "limits"), *wr = field(want, "requests");
	const cJSON *ll = field(live, "limits"), *lr = field(live, "requests");
	const cJSON *e;
	if ((ll && !cJSON_IsObject(ll)) || (lr && !cJSON_IsObject(lr)))
		return refuse(c, "container.resources is malformed");
	cJSON_ArrayForEach(e, wl)
	{
		const cJSON *l = field(ll, e->string);
		if (!l)
			return refuse(c, "container.resources.limits.%.64s is missing", e->string);
		if (!same_quantity(l, e))
			return refuse(c, "container.resources.limits.%.64s differs from the Sandbox's",
				      e->string);
	}
	cJSON_ArrayForEach(e, ll)
	{
		if (!field(wl, e->string) && !resource_declared(c, e->string))
			return refuse(c,
				      "container.resources.limits.%.64s is not set by the Sandbox nor declared in "
				      "adoption.allowedMutations.resourceDefaults",
				      e->string);
	}
	cJSON_ArrayForEach(e, lr)
	{
		const cJSON *w = field(wr, e->string);
		if (!w)
			w = field(wl, e->string); /* defaulted from the limit */
		if (!w && resource_declared(c, e->string))
			continue;
		if (!w)
			return refuse(c,
				      "container.resources.requests.%.64s is not set by the Sandbox nor declared in "
				      "adoption.allowedMutations.resourceDefaults",
				      e->string);
		if (!same_quantity(e, w))
			return refuse(c, "container.resources.requests.%.64s differs from the Sandbox's",
				      e->string);
	}
	cJSON_ArrayForEach(e, wr)
	{
		if (!field(lr, e->string))
			return refuse(c, "container.resources.requests.%.64s is missing", e->string);
	}
	return 1;
}

/* The image rule: equal, or (declared digest pinning) the same image or its
 * repository followed by @sha256:<64 lowercase hex>. */
int sbx_image_matches(const char *live, const char *want, int digest_pinning)
{
	if (!live || !want)
		return 0;
	if (!strcmp(live, want))
		return 1;
	if (!digest_pinning || strchr(want, '@'))
		return 0;
	const char *at = strrchr(live, '@');
	if (!at || strncmp(at, "@sha256:", 8) || strlen(at + 8) != 64 ||
	    strspn(at + 8, "0123456789abcdef") != 64)
		return 0;
	size_t plen = (size_t)(at - live);
	if (plen == strlen(want) && !strncmp(live, want, plen))
		return 1;
	/* The repository: want without its tag (a ':' after the last '/'). */
	const char *slash = strrchr(want, '/');
	const char *colon = strrchr(slash ? slash : want, ':');
	size_t rlen = colon ? (size_t)(colon - want) : strlen(want);
	return plen == rlen && !strncmp(live, want, rlen);
}

/* 1 iff s is "<prefix>/<one safe segment>" exactly. */
static int under_one_segment(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);
	return s && !strncmp(s, prefix, n) && s[n] == '/' && sbx_safe_segment(s + n + 1);
}

/* The element of list (volumes, mounts) whose "name" is name, or NULL. */
static const cJSON *named(const cJSON *list, const char *name)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, list)
	{
		const cJSON *n = field(v, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return v;
	}
	return NULL;
}

/* A workspace mount of the sandbox container and its volume: an emptyDir;
 * or, for an owner, today's PVC with subPath "<owner>/<segment>", or (in
 * hostPath mode) "<root>/<namespace>/<owner>/<segment>". Nothing else: no
 * whole-PVC mount, no other claim, no other host path, no other source. */
static int check_workspace_mount(struct cert *c, const cJSON *m, const cJSON *vols)
{
	static const char *const mkeys[] = { "name", "mountPath", "subPath",
					     "readOnly", "mountPropagation", "recursiveReadOnly",
					     NULL };
	if (!only_members(c, m, mkeys, "container.volumeMounts[]"))
		return 0;
	const cJSON *name = field(m, "name"), *mp = field(m, "mountPath");
	const cJSON *prop = field(m, "mountPropagation");
	if (!cJSON_IsString(name) || !cJSON_IsString(mp) || mp->valuestring[0] != '/')
		return refuse(c, "a volume mount of the sandbox container is malformed");
	if (prop && !(cJSON_IsString(prop) && !strcmp(prop->valuestring, "None")))
		return refuse(c, "volume mount %.64s propagates mounts", name->valuestring);
	const cJSON *v = named(vols, name->valuestring);
	if (!v)
		return refuse(c, "volume mount %.64s names no volume", name->valuestring);
	const char *sub = cJSON_IsString(field(m, "subPath")) ? field(m, "subPath")->valuestring : NULL;
	if (field(m, "subPath") && !sub)
		return refuse(c, "volume mount %.64s has a malformed subPath", name->valuestring);
	if (cJSON_GetArraySize(v) != 2)
		return refuse(c, "volume %.64s has more than one source", name->valuestring);
	if (field(v, "emptyDir"))
		return cJSON_IsObject(field(v, "emptyDir"))
			   ? 1
			   : refuse(c, "volume %.64s is malformed", name->valuestring);
	const cJSON *pvc = field(v, "persistentVolumeClaim"), *hp = field(v, "hostPath");
	if (pvc) {
		const cJSON *claim = field(pvc, "claimName");
		if (!c->owner || c->cfg->ws_mode != SBX_WS_PVC || !cJSON_IsString(claim) ||
		    strcmp(claim->valuestring, c->cfg->pvc_name))
			return refuse(c, "volume %.64s mounts a claim that is not this owner's workspace",
				      name->valuestring);
		if (!under_one_segment(sub, c->owner))
			return refuse(c, "volume mount %.64s reaches outside %s/ on the workspace claim",
				      name->valuestring, c->owner);
		return 1;
	}
	if (hp) {
		const cJSON *path = field(hp, "path"), *type = field(hp, "type");
		if (!c->owner || c->cfg->ws_mode != SBX_WS_HOSTPATH || !c->cfg->host_root ||
		    !cJSON_IsString(path) || sub)
			return refuse(c, "volume %.64s mounts a host path that is not this owner's workspace",
				      name->valuestring);
		char *prefix = xasprintf("%s/%s/%s", c->cfg->host_root, c->ns, c->owner);
		int ok = under_one_segment(path->valuestring, prefix);
		free(prefix);
		if (!ok)
			return refuse(c, "volume %.64s mounts host path %.128s, outside %s/%s/%s/",
				      name->valuestring, path->valuestring, c->cfg->host_root, c->ns,
				      c->owner);
		if (type && !(cJSON_IsString(type) && (!strcmp(type->valuestring, "DirectoryOrCreate") ||
						       !strcmp(type->valuestring, "Directory"))))
			return refuse(c, "volume %.64s has host path type other than a directory",
				      name->valuestring);
		return 1;
	}
	return refuse(c, "volume %.64s has a source the controller never builds", name->valuestring);
}

/* The sandbox container's securityContext: the restricted profile. The uid
 * and gid may be any non-root value (an older configuration's). */
static int check_container_security(struct cert *c, const cJSON *sc, const char *who)
{
	static const char *const keys[] = { "allowPrivilegeEscalation", "capabilities", "runAsNonRoot",
					    "runAsUser", "runAsGroup", "privileged",
					    "seccompProfile", "readOnlyRootFilesystem", "procMount",
					    NULL };
	if (!cJSON_IsObject(sc))
		return refuse(c, "%s has no securityContext", who);
	if (!only_members(c, sc, keys, "container.securityContext"))
		return 0;
	if (!cJSON_IsFalse(field(sc, "allowPrivilegeEscalation")) || !off(field(sc, "privileged")))
		return refuse(c, "%s may escalate privileges or is privileged", who);
	const cJSON *caps = field(sc, "capabilities"), *d;
	int drops_all = 0;
	cJSON_ArrayForEach(d, field(caps, "drop"))
	{
		if (cJSON_IsString(d) && !strcmp(d->valuestring, "ALL"))
			drops_all = 1;
	}
	const cJSON *add = field(caps, "add");
	if (!drops_all || (add && cJSON_GetArraySize(add) > 0))
		return refuse(c, "%s does not drop ALL capabilities or adds some", who);
	const cJSON *nr = field(sc, "runAsNonRoot"), *uid = field(sc, "runAsUser"),
		    *gid = field(sc, "runAsGroup"), *pm = field(sc, "procMount");
	const cJSON *sp = field(sc, "seccompProfile");
	if ((nr && !cJSON_IsTrue(nr)) || (uid && !whole_at_least(uid, 1)) ||
	    (gid && !whole_at_least(gid, 1)))
		return refuse(c, "%s may run as root", who);
	if (sp && !(cJSON_GetArraySize(sp) == 1 && cJSON_IsString(field(sp, "type")) &&
		    !strcmp(field(sp, "type")->valuestring, "RuntimeDefault")))
		return refuse(c, "%s has a seccomp profile other than RuntimeDefault", who);
	if (pm && !(cJSON_IsString(pm) && !strcmp(pm->valuestring, "Default")))
		return refuse(c, "%s has an unmasked /proc", who);
	return 1;
}

/* The sandbox container: the Sandbox's payload, the restricted profile,
 * mounts only inside the owner's workspace, and nothing else. */
static int check_main(struct cert *c, const cJSON *l, const cJSON *w, const cJSON *vols)
{
	static const char *const keys[] = {
		"name", "image", "command", "args",
		"env", "resources", "volumeMounts", "securityContext",
		/* set by the apiserver's defaulting */
		"terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "resizePolicy",
		NULL
	};
	static const char *const env_keys[] = { "name", "value", NULL };
	if (!only_members(c, l, keys, "container \"sandbox\""))
		return 0;
	const cJSON *li = field(l, "image"), *wi = field(w, "image");
	if (!cJSON_IsString(li) || !cJSON_IsString(wi) ||
	    !sbx_image_matches(li->valuestring, wi->valuestring, c->cfg->mutations.digest_pinning))
		return refuse(c, "the sandbox container's image %.128s is not the Sandbox's %.128s",
			      cJSON_IsString(li) ? li->valuestring : "?",
			      cJSON_IsString(wi) ? wi->valuestring : "?");
	if (!same_opt(field(l, "command"), field(w, "command")) ||
	    !same_opt(field(l, "args"), field(w, "args")))
		return refuse(c, "the sandbox container's command or args differ from the Sandbox's");
	const cJSON *le = field(l, "env"), *we = field(w, "env");
	int nle = cJSON_IsArray(le) ? cJSON_GetArraySize(le) : 0;
	int nwe = cJSON_IsArray(we) ? cJSON_GetArraySize(we) : 0;
	if (nle != nwe || (le && !cJSON_IsArray(le)))
		return refuse(c, "the sandbox container's env differs from the Sandbox's");
	for (int i = 0; i < nle; i++) {
		const cJSON *x = cJSON_GetArrayItem(le, i), *y = cJSON_GetArrayItem(we, i);
		if (!only_members(c, x, env_keys, "container.env[]") ||
		    !same_opt(field(x, "name"), field(y, "name")) ||
		    !same_opt(field(x, "value"), field(y, "value")))
			return refuse(c, "the sandbox container's env differs from the Sandbox's");
	}
	if (!check_resources(c, field(l, "resources"), field(w, "resources")))
		return 0;
	if (!check_container_security(c, field(l, "securityContext"), "the sandbox container"))
		return 0;
	const cJSON *m, *mounts = field(l, "volumeMounts");
	if (mounts && !cJSON_IsArray(mounts))
		return refuse(c, "container.volumeMounts is malformed");
	cJSON_ArrayForEach(m, mounts)
	{
		if (!check_workspace_mount(c, m, vols))
			return 0;
	}
	return 1;
}

/* The declared injection matching container x (by name, kind and image). */
static const struct sbx_injected *declared(const struct cert *c, const cJSON *x, int init)
{
	const cJSON *name = field(x, "name"), *image = field(x, "image");
	if (!cJSON_IsString(name) || !cJSON_IsString(image))
		return NULL;
	for (size_t i = 0; i < c->cfg->mutations.ninjected; i++) {
		const struct sbx_injected *d = &c->cfg->mutations.injected[i];
		if (d->init == init && !strcmp(d->name, name->valuestring) &&
		    sbx_image_pattern_match(d->image, image->valuestring))
			return d;
	}
	return NULL;
}

static int declares_volume(const struct sbx_injected *d, const char *vol)
{
	for (size_t i = 0; d && i < d->nvolumes; i++)
		if (!strcmp(d->volumes[i], vol))
			return 1;
	return 0;
}

/* A container the cluster's admission chain injected: declared by name,
 * kind and image in adoption.allowedMutations; never privileged; mounts
 * only the volumes its declaration names. */
static int check_injected(struct cert *c, const cJSON *x, int init)
{
	const cJSON *name = field(x, "name");
	const char *n = cJSON_IsString(name) ? name->valuestring : "?";
	const struct sbx_injected *d = declared(c, x, init);
	if (!d)
		return refuse(c, "%s \"%.64s\" is not the controller's and not a declared injection",
			      init ? "init container" : "container", n);
	const cJSON *sc = field(x, "securityContext");
	if (!off(field(sc, "privileged")) || field(x, "volumeDevices"))
		return refuse(c, "injected container \"%.64s\" is privileged", n);
	const cJSON *m;
	cJSON_ArrayForEach(m, field(x, "volumeMounts"))
	{
		const cJSON *vn = field(m, "name");
		if (!cJSON_IsString(vn) || !declares_volume(d, vn->valuestring))
			return refuse(c, "injected container \"%.64s\" mounts an undeclared volume", n);
	}
	return 1;
}

/* Volumes nobody but a declared injection mounts: only declared names, and
 * only sources that hold no shared storage. */
static int check_other_volume(struct cert *c, const cJSON *v, const cJSON *ls)
{
	static const char *const safe[] = { "name", "emptyDir", "configMap", "secret",
					    "downwardAPI", "projected", NULL };
	const cJSON *name = field(v, "name");
	const char *n = cJSON_IsString(name) ? name->valuestring : "?";
	int ok = 0;
	static const char *const lists[] = { "containers", "initContainers", NULL };
	for (const char *const *l = lists; *l && !ok; l++) {
		const cJSON *x;
		cJSON_ArrayForEach(x, field(ls, *l))
		{
			if (declares_volume(declared(c, x, *l == lists[1]), n))
				ok = 1;
		}
	}
	if (!ok)
		return refuse(c, "volume %.64s is not mounted by the sandbox container nor declared",
			      n);
	if (!only_members(c, v, safe, "declared volume"))
		return 0;
	return 1;
}

/* The pod-level securityContext: runAsNonRoot, non-root ids (any: an older
 * configuration's), seccomp RuntimeDefault, nothing else. */
static int check_pod_security(struct cert *c, const cJSON *sc)
{
	static const char *const keys[] = { "runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup",
					    "seccompProfile", NULL };
	if (!cJSON_IsObject(sc))
		return refuse(c, "the pod has no securityContext");
	if (!only_members(c, sc, keys, "pod.spec.securityContext"))
		return 0;
	const cJSON *sp = field(sc, "seccompProfile");
	if (!cJSON_IsTrue(field(sc, "runAsNonRoot")) || !whole_at_least(field(sc, "runAsUser"), 1) ||
	    (field(sc, "runAsGroup") && !whole_at_least(field(sc, "runAsGroup"), 1)) ||
	    (field(sc, "fsGroup") && !whole_at_least(field(sc, "fsGroup"), 1)))
		return refuse(c, "the pod may run as root");
	if (!(cJSON_GetArraySize(sp) == 1 && cJSON_IsString(field(sp, "type")) &&
	      !strcmp(field(sp, "type")->valuestring, "RuntimeDefault")))
		return refuse(c, "the pod's seccomp profile is not RuntimeDefault");
	return 1;
}

/* The runtime class: the one the Sandbox names (which must be allowed);
 * for a Sandbox that names none, today's default or, when the pod was built
 * under another default, any class still allowed; no class only when today
 * has no default either. */
static int check_runtime(struct cert *c, const cJSON *live)
{
	const cJSON *want = field(field(c->want, "spec"), "runtimeClassName");
	const cJSON *named = field(c->spec, "runtimeClassName");
	const char *l = cJSON_IsString(live) ? live->valuestring : NULL;
	if (live && !l)
		return refuse(c, "runtimeClassName is malformed");
	if (!l)
		return want ? refuse(c, "the pod has no runtime class; the configuration requires %.64s",
				     cJSON_IsString(want) ? want->valuestring : "one")
			    : 1;
	if (cJSON_IsString(want) && !strcmp(l, want->valuestring))
		return 1;
	if (!named && sbx_runtime_allowed(c->cfg, l))
		return 1;
	return refuse(c, "runtime class %.64s is not the Sandbox's nor allowed", l);
}

/* Labels: the controller's, today's configured ones, and keys declared as
 * added by admission. Labels select pods for network policies and services,
 * so an unknown one is not harmless. Annotations are free except the
 * controller's reserved ones and the legacy AppArmor/seccomp keys. */
static int check_metadata(struct cert *c)
{
	const cJSON *md = field(c->live, "metadata"), *e;
	const cJSON *wl = field(field(c->want, "metadata"), "labels");
	cJSON_ArrayForEach(e, field(md, "labels"))
	{
		int ok = same_opt(e, field(wl, e->string));
		for (size_t i = 0; !ok && i < c->cfg->mutations.nlabels; i++)
			ok = !strcmp(c->cfg->mutations.labels[i], e->string);
		if (!ok)
			return refuse(c, "label %.64s is not the controller's nor declared", e->string);
	}
	static const char *const ours[] = { SBX_ANN_OWNER, SBX_ANN_FINGERPRINT, SBX_ANN_CLAIMED_AT,
					    SBX_ANN_SEAL, SBX_ANN_CLAIM, NULL };
	const cJSON *wa = field(field(c->want, "metadata"), "annotations");
	cJSON_ArrayForEach(e, field(md, "annotations"))
	{
		const char *k = e->string;
		/* The allow profiles' names: exactly as built (the keeper reads them). */
		if (!strcmp(k, SBX_ANN_NETPROFILES)) {
			if (!same_opt(e, field(wa, k)))
				return refuse(c, "annotation %.64s differs from what the controller builds", k);
			continue;
		}
		if ((!strncmp(k, "sandbox.dev/", 12) && !in_list(k, ours)) ||
		    ((!strncmp(k, "container.apparmor.security.beta.kubernetes.io/", 47) ||
		      !strncmp(k, "seccomp.security.alpha.kubernetes.io/", 37)) &&
		     !(cJSON_IsString(e) && !strcmp(e->valuestring, "runtime/default"))))
			return refuse(c, "annotation %.64s is not allowed on a sandbox pod", k);
	}
	return 1;
}

static int certify(struct cert *c)
{
	static const char *const keys[] = {
		"containers", "initContainers", "ephemeralContainers", "volumes",
		"restartPolicy", "automountServiceAccountToken", "enableServiceLinks", "securityContext",
		"runtimeClassName", "hostNetwork", "hostPID", "hostIPC",
		"shareProcessNamespace", "hostUsers",
		/* operator settings; placement only, accepted as they are (verify.h) */
		"nodeSelector", "tolerations", "priorityClassName", "imagePullSecrets",
		/* set by the apiserver, its admission plugins or the scheduler */
		"serviceAccountName", "serviceAccount", "dnsPolicy", "schedulerName",
		"terminationGracePeriodSeconds", "priority", "preemptionPolicy", "nodeName", "overhead",
		NULL
	};
	const cJSON *ls = field(c->live, "spec"), *ws = field(c->want, "spec");
	if (!cJSON_IsObject(ls) || !cJSON_IsObject(ws))
		return refuse(c, "the pod has no spec");
	if (!only_members(c, ls, keys, "pod.spec") || !check_metadata(c))
		return 0;
	static const char *const host[] = { "hostNetwork", "hostPID", "hostIPC",
					    "shareProcessNamespace", "hostUsers", NULL };
	/* hostUsers: false (a user namespace) is more isolation, so only true is refused. */
	for (const char *const *h = host; *h; h++)
		if (!off(field(ls, *h)))
			return refuse(c, "pod.spec.%s is set", *h);
	if (!cJSON_IsFalse(field(ls, "automountServiceAccountToken")) ||
	    !cJSON_IsFalse(field(ls, "enableServiceLinks")))
		return refuse(c, "the pod mounts a service account token or enables service links");
	const cJSON *rp = field(ls, "restartPolicy");
	if (!cJSON_IsString(rp) || strcmp(rp->valuestring, "Never"))
		return refuse(c, "pod.spec.restartPolicy is not Never");
	static const char *const sa[] = { "serviceAccountName", "serviceAccount", NULL };
	for (const char *const *k = sa; *k; k++) {
		const cJSON *v = field(ls, *k);
		if (v && !(cJSON_IsString(v) && !strcmp(v->valuestring, "default")))
			return refuse(c, "the pod runs as service account %.64s",
				      cJSON_IsString(v) ? v->valuestring : "?");
	}
	const cJSON *dp = field(ls, "dnsPolicy"), *sn = field(ls, "schedulerName");
	if (dp && !(cJSON_IsString(dp) && !strcmp(dp->valuestring, "ClusterFirst")))
		return refuse(c, "pod.spec.dnsPolicy is not ClusterFirst");
	if (sn && !(cJSON_IsString(sn) && !strcmp(sn->valuestring, "default-scheduler")))
		return refuse(c, "pod.spec.schedulerName is not default-scheduler");
	if (!check_pod_security(c, field(ls, "securityContext")) ||
	    !check_runtime(c, field(ls, "runtimeClassName")))
		return 0;
	if (cJSON_GetArraySize(field(ls, "ephemeralContainers")) > 0)
		return refuse(c, "the pod has ephemeral containers");

	const cJSON *wc = cJSON_GetArrayItem(field(ws, "containers"), 0), *x, *main_c = NULL;
	const cJSON *vols = field(ls, "volumes");
	cJSON_ArrayForEach(x, field(ls, "containers"))
	{
		const cJSON *n = field(x, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, SBX_CONTAINER)) {
			if (main_c)
				return refuse(c, "two sandbox containers");
			main_c = x;
			if (!check_main(c, x, wc, vols))
				return 0;
		} else if (!check_injected(c, x, 0)) {
			return 0;
		}
	}
	if (!main_c)
		return refuse(c, "the pod has no sandbox container");
	cJSON_ArrayForEach(x, field(ls, "initContainers"))
	{
		if (!check_injected(c, x, 1))
			return 0;
	}
	const cJSON *v;
	cJSON_ArrayForEach(v, vols)
	{
		const cJSON *n = field(v, "name");
		if (!cJSON_IsString(n))
			return refuse(c, "a volume has no name");
		if (!named(field(main_c, "volumeMounts"), n->valuestring) && !check_other_volume(c, v, ls))
			return 0;
	}
	return 1;
}

enum sbx_verify sbx_pod_payload_verify(const cJSON *live, const struct sbx_certify *in, char *why,
				       size_t whylen)
{
	if (whylen)
		why[0] = '\0';
	if (!cJSON_IsObject(live) || !in || !cJSON_IsObject(in->expected) || !in->cfg)
		return SBX_VERIFY_MALFORMED;
	const cJSON *wmd = field(in->expected, "metadata");
	struct cert c = {
		.cfg = in->cfg,
		.ns = str_member(wmd, "namespace"),
		.owner = str_member(field(wmd, "annotations"), SBX_ANN_OWNER),
		.want = in->expected,
		.spec = in->spec,
		.live = live,
		.why = why,
		.whylen = whylen,
	};
	if (!c.ns)
		return SBX_VERIFY_MALFORMED;
	return certify(&c) ? SBX_VERIFY_OK : SBX_VERIFY_PAYLOAD_MISMATCH;
}

/* Follows the images of a bound pod, which is all of a pod's spec that can
 * change after creation besides scheduling details. */
enum sbx_verify sbx_pod_tamper_check(const cJSON *pod, const struct sbx_certify *in, char *why,
				     size_t whylen)
{
	if (whylen)
		why[0] = '\0';
	if (!cJSON_IsObject(pod) || !in || !cJSON_IsObject(in->expected) || !in->cfg)
		return SBX_VERIFY_MALFORMED;
	struct cert c = { .cfg = in->cfg, .want = in->expected, .why = why, .whylen = whylen };
	const cJSON *ls = field(pod, "spec"), *x;
	const cJSON *wc = cJSON_GetArrayItem(field(field(in->expected, "spec"), "containers"), 0);
	int seen = 0, ok = 1;
	if (cJSON_IsTrue(field(ls, "truncated")))
		ok = refuse(&c, "the pod has more containers than a sandbox pod can have");
	if (ok && cJSON_GetArraySize(field(ls, "ephemeralContainers")) > 0)
		ok = refuse(&c, "an ephemeral container was added to the pod");
	cJSON_ArrayForEach(x, field(ls, "containers"))
	{
		const char *n = str_member(x, "name");
		if (!ok)
			break;
		if (n && !strcmp(n, SBX_CONTAINER)) {
			seen++;
			const char *li = str_member(x, "image"), *wi = str_member(wc, "image");
			if (!sbx_image_matches(li, wi, in->cfg->mutations.digest_pinning))
				ok = refuse(&c, "the sandbox container's image was changed to %.128s",
					    li ? li : "?");
		} else if (!declared(&c, x, 0)) {
			ok = refuse(&c, "container \"%.64s\" is not the controller's nor declared",
				    n ? n : "?");
		}
	}
	cJSON_ArrayForEach(x, field(ls, "initContainers"))
	{
		if (ok && !declared(&c, x, 1))
			ok = refuse(&c, "init container \"%.64s\" is not declared",
				    str_member(x, "name") ? str_member(x, "name") : "?");
	}
	if (ok && seen != 1)
		ok = refuse(&c, "the pod does not have exactly one sandbox container");
	return ok ? SBX_VERIFY_OK : SBX_VERIFY_PAYLOAD_MISMATCH;
}
