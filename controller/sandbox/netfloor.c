#include "sandbox/netfloor.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/jbuild.h"
#include "sandbox/jcs.h"
#include "sandbox/podbuild.h"
#include "sandbox/wsprep.h"

const char *const sbx_netfloor_never[] = { "169.254.0.0/16", "100.64.0.0/10", "fc00::/7", "fe80::/10", NULL };

/* The key of a cached policy's spec digest (sbx_netfloor_trim), outside
 * the API's fields. */
#define SPEC_DIGEST "sandbox.dev/specDigest"

/* A new object appended to array a. */
static cJSON *push_obj(cJSON *a)
{
	cJSON *o = jb_obj();
	jb_push(a, o);
	return o;
}

/* Appends {ipBlock: {cidr}} to the peer list a. */
static void add_block(cJSON *a, const char *cidr)
{
	cJSON *peer = jb_obj();
	jb_str(jb_add_obj(peer, "ipBlock"), "cidr", cidr);
	jb_push(a, peer);
}

/* The selector of every pod the controller runs for a sandbox. */
static void add_selector(cJSON *spec)
{
	cJSON *sel = jb_add_obj(spec, "podSelector");
	jb_str(jb_add_obj(sel, "matchLabels"), SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	cJSON *e = jb_obj();
	jb_str(e, "key", SBX_LABEL_NAME);
	jb_str(e, "operator", "In");
	cJSON *vals = jb_add_arr(e, "values");
	jb_push_str(vals, SBX_NAME);
	jb_push_str(vals, SBX_WSPREP_APP_NAME);
	jb_push(jb_add_arr(sel, "matchExpressions"), e);
}

cJSON *sbx_netfloor_policy(const char *ns, const struct sbx_net_settings *n)
{
	cJSON *np = jb_obj();
	jb_str(np, "apiVersion", "networking.k8s.io/v1");
	jb_str(np, "kind", "NetworkPolicy");
	cJSON *md = jb_add_obj(np, "metadata");
	jb_str(md, "name", SBX_NETFLOOR_NAME);
	jb_str(md, "namespace", ns);
	cJSON *labels = jb_add_obj(md, "labels");
	jb_str(labels, SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	jb_str(labels, SBX_LABEL_NETFLOOR, "true");
	cJSON *spec = jb_add_obj(np, "spec");
	add_selector(spec);
	cJSON *types = jb_add_arr(spec, "policyTypes");
	jb_push_str(types, "Ingress");
	jb_push_str(types, "Egress");
	/* No ingress rule at all when no source is named (an empty list is
	 * not stored). */
	if (n->ningress) {
		cJSON *from = jb_add_arr(push_obj(jb_add_arr(spec, "ingress")), "from");
		for (size_t i = 0; i < n->ningress; i++)
			add_block(from, n->ingress[i]);
	}
	cJSON *dns = push_obj(jb_add_arr(spec, "egress"));
	cJSON *to = jb_add_arr(dns, "to");
	if (n->ndns) {
		for (size_t i = 0; i < n->ndns; i++)
			add_block(to, n->dns[i]);
	} else {
		cJSON *peer = jb_obj();
		jb_str(jb_add_obj(jb_add_obj(peer, "namespaceSelector"), "matchLabels"), "kubernetes.io/metadata.name",
		       "kube-system");
		jb_str(jb_add_obj(jb_add_obj(peer, "podSelector"), "matchLabels"), "k8s-app", "kube-dns");
		jb_push(to, peer);
	}
	cJSON *ports = jb_add_arr(dns, "ports");
	static const char *const protos[] = { "UDP", "TCP" };
	for (size_t i = 0; i < 2; i++) {
		cJSON *p = push_obj(ports);
		jb_str(p, "protocol", protos[i]);
		jb_num(p, "port", 53);
	}
	return np;
}

/* Removes the empty arrays in c, at any depth. */
static void prune(cJSON *c)
{
	cJSON *e = c->child;
	while (e) {
		cJSON *next = e->next;
		if (cJSON_IsArray(e) && !e->child)
			cJSON_Delete(cJSON_DetachItemViaPointer(c, e));
		else if (cJSON_IsObject(e) || cJSON_IsArray(e))
			prune(e);
		e = next;
	}
}

/* A copy of o (NULL: an empty object) without its empty arrays (new;
 * caller frees). */
static cJSON *pruned(const cJSON *o)
{
	cJSON *c = o ? jb_must(cJSON_Duplicate(o, 1)) : jb_obj();
	prune(c);
	return c;
}

/* The SHA-256 (hex, 65 bytes) of spec without its empty arrays, in JCS
 * form: equal for specs sbx_netfloor_as_rendered counts as the same. 0 or
 * -1. */
static int spec_digest(const cJSON *spec, char hex[65])
{
	cJSON *p = pruned(spec);
	char *canon = jcs_string(p);
	cJSON_Delete(p);
	unsigned char md[32];
	unsigned int mdlen = 0;
	int rc = canon && EVP_Digest(canon, strlen(canon), md, &mdlen, EVP_sha256(), NULL) == 1 && mdlen == 32 ? 0 : -1;
	free(canon);
	for (size_t i = 0; rc == 0 && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return rc;
}

int sbx_netfloor_as_rendered(const cJSON *have, const cJSON *want)
{
	if (!have)
		return 0;
	const cJSON *hm = cJSON_GetObjectItemCaseSensitive(have, "metadata"),
		    *wm = cJSON_GetObjectItemCaseSensitive(want, "metadata");
	const cJSON *hl = cJSON_GetObjectItemCaseSensitive(hm, "labels"),
		    *wl = cJSON_GetObjectItemCaseSensitive(wm, "labels");
	for (const cJSON *l = wl ? wl->child : NULL; l; l = l->next) {
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(hl, l->string);
		if (!cJSON_IsString(h) || strcmp(h->valuestring, l->valuestring))
			return 0;
	}
	/* A spec too large to cache is compared by its digest. */
	const cJSON *hd = cJSON_GetObjectItemCaseSensitive(have, SPEC_DIGEST);
	if (cJSON_IsString(hd)) {
		char wd[65];
		return spec_digest(cJSON_GetObjectItemCaseSensitive(want, "spec"), wd) == 0 &&
		       !strcmp(wd, hd->valuestring);
	}
	/* The API server stores a spec as sent but for empty lists, which it
	 * drops: those are compared as absent. */
	cJSON *h = pruned(cJSON_GetObjectItemCaseSensitive(have, "spec")),
	      *w = pruned(cJSON_GetObjectItemCaseSensitive(want, "spec"));
	int same = cJSON_Compare(h, w, 1);
	cJSON_Delete(h);
	cJSON_Delete(w);
	return same;
}

cJSON *sbx_netfloor_trim(const cJSON *obj)
{
	static const char *const meta[] = { "name", "namespace", "uid", "resourceVersion", "deletionTimestamp", NULL };
	static const char *const keep[] = { SBX_LABEL_MANAGED_BY, SBX_LABEL_NETFLOOR, SBX_LABEL_NETPROFILES, NULL };
	cJSON *t = jb_obj();
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	cJSON *tm = jb_add_obj(t, "metadata");
	for (size_t i = 0; meta[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(md, meta[i]);
		if (cJSON_IsString(v) && strlen(v->valuestring) <= 253)
			jb_str(tm, meta[i], v->valuestring);
	}
	/* Only the labels the keeper compares, each as short as a label value. */
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
	cJSON *tl = jb_add_obj(tm, "labels");
	for (size_t i = 0; keep[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(labels, keep[i]);
		if (cJSON_IsString(v) && strlen(v->valuestring) <= 63)
			jb_str(tl, keep[i], v->valuestring);
	}
	/* The spec, or past SBX_NETFLOOR_SPEC_MAX (a large set of profiles) its
	 * digest alone: the keeper compares either with what it renders. */
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	char *text = spec ? cJSON_PrintUnformatted(spec) : NULL, hex[65];
	if (spec && text && strlen(text) <= SBX_NETFLOOR_SPEC_MAX) {
		jb_add(t, "spec", jb_must(cJSON_Duplicate(spec, 1)));
	} else if (spec) {
		jb_add(t, "spec", jb_obj());
		if (text && spec_digest(spec, hex) == 0)
			jb_str(t, SPEC_DIGEST, hex);
	}
	free(text);
	return t;
}
