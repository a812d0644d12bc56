#include "sandbox/netprofile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/jbuild.h"
#include "base/jsonget.h"
#include "sandbox/netfloor.h"
#include "sandbox/podbuild.h"

static int fail(char *msg, size_t msglen, const char *text)
{
	if (msglen)
		snprintf(msg, msglen, "%s", text);
	return -1;
}

size_t sbx_netprofile_floor(const struct sbx_net_settings *n, const char *const *api, size_t napi,
			    struct sbx_cidr *out, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; sbx_netfloor_never[i] && k < max; i++)
		if (sbx_cidr_parse(sbx_netfloor_never[i], &out[k]) == 0)
			k++;
	for (size_t i = 0; i < n->ncluster && k < max; i++)
		if (sbx_cidr_parse(n->cluster[i], &out[k]) == 0)
			k++;
	for (size_t i = 0; i < napi && k < max; i++)
		if (sbx_cidr_parse_ip(api[i], &out[k]) == 0 || sbx_cidr_parse(api[i], &out[k]) == 0)
			k++;
	return k;
}

/* Checks one entry of spec.ports. */
static int port_ok(const cJSON *p)
{
	const char *proto = jstr(p, "protocol");
	const cJSON *port = jobj(p, "port"), *end = jobj(p, "endPort"), *m;
	cJSON_ArrayForEach(m, p) if (strcmp(m->string, "protocol") && strcmp(m->string, "port") &&
				     strcmp(m->string, "endPort")) return 0;
	if (!proto || (strcmp(proto, "TCP") && strcmp(proto, "UDP")) || !cJSON_IsNumber(port) ||
	    port->valuedouble < 1 || port->valuedouble > 65535 || port->valuedouble != (double)port->valueint)
		return 0;
	return !end || (cJSON_IsNumber(end) && end->valuedouble >= port->valuedouble && end->valuedouble <= 65535 &&
			end->valuedouble == (double)end->valueint);
}

int sbx_netprofile_check(const cJSON *profile, char *msg, size_t msglen)
{
	const cJSON *spec = jobj(profile, "spec"), *egress = jobj(spec, "egress"), *rule;
	if (!cJSON_IsObject(spec) || !cJSON_IsArray(egress))
		return fail(msg, msglen, "spec.egress must be a list");
	if (cJSON_GetArraySize(egress) > SBX_PROFILE_RULES_MAX)
		return fail(msg, msglen, "spec.egress holds too many entries");
	cJSON_ArrayForEach(rule, egress)
	{
		const cJSON *ports = jobj(rule, "ports"), *p, *m;
		if (!cJSON_IsObject(rule) || !sbx_cidr_ok(jstr(rule, "cidr")))
			return fail(msg, msglen, "spec.egress[].cidr must be an IPv4 or IPv6 CIDR with no host bits");
		cJSON_ArrayForEach(m, rule) if (strcmp(m->string, "cidr") && strcmp(m->string, "ports")) return fail(
		    msg, msglen, "spec.egress[] may hold only cidr and ports");
		if (ports && (!cJSON_IsArray(ports) || cJSON_GetArraySize(ports) > SBX_PROFILE_PORTS_MAX))
			return fail(msg, msglen, "spec.egress[].ports must be a list of at most 16");
		cJSON_ArrayForEach(p, ports) if (!port_ok(p)) return fail(
		    msg, msglen, "spec.egress[].ports[]: protocol TCP or UDP, port 1-65535, endPort port-65535");
	}
	return 0;
}

void sbx_netprofile_policy_name(const char *hash, char out[64])
{
	snprintf(out, 64, SBX_NETPROFILE_POLICY_PREFIX "%.16s", hash);
}

/* Appends {ipBlock: {cidr: c, except}} to the peer list to: every floor
 * range strictly inside c excepted (a range twice, or inside another
 * excepted one, once). */
static void add_block(cJSON *to, const struct sbx_cidr *c, const struct sbx_cidr *floor, size_t nfloor)
{
	cJSON *block = jb_obj();
	char text[SBX_CIDR_MAX + 1];
	sbx_cidr_format(c, text);
	jb_str(block, "cidr", text);
	cJSON *except = NULL;
	for (size_t i = 0; i < nfloor; i++) {
		if (!sbx_cidr_contains(c, &floor[i]))
			continue;
		int dup = 0;
		for (size_t j = 0; j < nfloor && !dup; j++)
			dup = j != i && sbx_cidr_contains(c, &floor[j]) && sbx_cidr_contains(&floor[j], &floor[i]) &&
			      (floor[j].prefix < floor[i].prefix || j < i);
		if (dup)
			continue;
		if (!except)
			except = jb_add_arr(block, "except");
		sbx_cidr_format(&floor[i], text);
		jb_push_str(except, text);
	}
	cJSON *peer = jb_obj();
	jb_add(peer, "ipBlock", block);
	jb_push(to, peer);
}

/* Appends the egress rule granting the rule's cidr (with its except
 * blocks) on its ports to egress, unless the floor holds the cidr whole. A
 * /0 goes as its two halves: kube-router v2.1.0 writes ::/0 as 2000::/3 and
 * fd00::/8, an entry more specific than the except fc00::/7, which ipset
 * would match first (test_sandbox_netprofile, policy_everything). */
static void add_rule(cJSON *egress, const cJSON *rule, const struct sbx_cidr *floor, size_t nfloor)
{
	struct sbx_cidr c;
	if (sbx_cidr_parse(jstr(rule, "cidr"), &c) < 0)
		return;
	for (size_t i = 0; i < nfloor; i++)
		if (sbx_cidr_contains(&floor[i], &c))
			return; /* nothing of it may be granted */
	cJSON *r = jb_obj(), *to = jb_add_arr(r, "to");
	if (c.prefix == 0) {
		struct sbx_cidr half = c;
		half.prefix = 1;
		add_block(to, &half, floor, nfloor);
		half.addr[0] = 0x80;
		add_block(to, &half, floor, nfloor);
	} else {
		add_block(to, &c, floor, nfloor);
	}
	const cJSON *ports = jobj(rule, "ports"), *p;
	if (cJSON_GetArraySize(ports) > 0) {
		cJSON *out = jb_add_arr(r, "ports");
		cJSON_ArrayForEach(p, ports)
		{
			cJSON *o = jb_obj();
			jb_str(o, "protocol", jstr(p, "protocol"));
			jb_num(o, "port", jobj(p, "port")->valuedouble);
			if (jobj(p, "endPort"))
				jb_num(o, "endPort", jobj(p, "endPort")->valuedouble);
			jb_push(out, o);
		}
	}
	jb_push(egress, r);
}

cJSON *sbx_netprofile_policy(const char *ns, const char *joined, const char *hash, const cJSON *const *profiles,
			     size_t nprofiles, const struct sbx_cidr *floor, size_t nfloor)
{
	char name[64];
	sbx_netprofile_policy_name(hash, name);
	cJSON *np = jb_obj();
	jb_str(np, "apiVersion", "networking.k8s.io/v1");
	jb_str(np, "kind", "NetworkPolicy");
	cJSON *md = jb_add_obj(np, "metadata");
	jb_str(md, "name", name);
	jb_str(md, "namespace", ns);
	cJSON *labels = jb_add_obj(md, "labels");
	jb_str(labels, SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	jb_str(labels, SBX_LABEL_NETFLOOR, SBX_NETFLOOR_PROFILES);
	jb_str(labels, SBX_LABEL_NETPROFILES, hash);
	jb_str(jb_add_obj(md, "annotations"), SBX_ANN_NETPROFILES, joined);
	cJSON *spec = jb_add_obj(np, "spec");
	cJSON *ml = jb_add_obj(jb_add_obj(spec, "podSelector"), "matchLabels");
	jb_str(ml, SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	jb_str(ml, SBX_LABEL_NAME, SBX_NAME);
	jb_str(ml, SBX_LABEL_NETPROFILES, hash);
	jb_push_str(jb_add_arr(spec, "policyTypes"), "Egress");
	cJSON *egress = jb_add_arr(spec, "egress");
	for (size_t i = 0; i < nprofiles; i++) {
		char msg[160];
		const cJSON *rule;
		if (!profiles[i] || sbx_netprofile_check(profiles[i], msg, sizeof msg) < 0)
			continue;
		cJSON_ArrayForEach(rule, jobj(jobj(profiles[i], "spec"), "egress")) add_rule(egress, rule, floor, nfloor);
	}
	return np;
}

cJSON *sbx_netprofile_trim(const cJSON *obj)
{
	static const char *const meta[] = { "name", "uid", "resourceVersion", NULL };
	cJSON *t = jb_obj(), *tm = jb_add_obj(t, "metadata");
	const cJSON *md = jobj(obj, "metadata");
	for (size_t i = 0; meta[i]; i++) {
		const char *v = jstr(md, meta[i]);
		if (v && strlen(v) <= 253)
			jb_str(tm, meta[i], v);
	}
	char msg[160];
	const cJSON *spec = jobj(obj, "spec");
	jb_add(t, "spec",
	       spec && sbx_netprofile_check(obj, msg, sizeof msg) == 0 ? jb_must(cJSON_Duplicate(spec, 1)) : jb_obj());
	return t;
}
