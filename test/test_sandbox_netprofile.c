/* Unit tests for allow profiles: controller/sandbox/netprofile (the names a
 * spec lists, the set's hash, the floor's ranges, the policy of a set with
 * its except blocks) and the CIDR nesting of base/cidr. */
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/cidr.h"
#include "base/jbuild.h"
#include "sandbox/config.h"
#include "sandbox/netfloor.h"
#include "sandbox/netprofile.h"
#include "test_suites.h"

void register_sandbox_netprofile_tests(void); /* called from test_sandbox_all.c */

static struct sbx_cidr cidr(const char *s)
{
	struct sbx_cidr c = { 0 };
	CU_ASSERT_EQUAL(sbx_cidr_parse(s, &c), 0);
	return c;
}

static void test_cidr_contains(void)
{
	struct sbx_cidr all = cidr("0.0.0.0/0"), ten = cidr("10.0.0.0/8"), host = cidr("10.0.0.1/32"),
			v6 = cidr("::/0"), ula = cidr("fc00::/7"), fd = cidr("fd12::/16");
	CU_ASSERT_TRUE(sbx_cidr_contains(&all, &ten));
	CU_ASSERT_TRUE(sbx_cidr_contains(&ten, &host));
	CU_ASSERT_TRUE(sbx_cidr_contains(&ten, &ten));
	CU_ASSERT_FALSE(sbx_cidr_contains(&host, &ten));
	CU_ASSERT_FALSE(sbx_cidr_contains(&all, &v6)); /* families apart */
	CU_ASSERT_TRUE(sbx_cidr_contains(&ula, &fd));
	struct sbx_cidr odd = cidr("100.64.0.0/10"), in = cidr("100.100.100.200/32"), out = cidr("100.128.0.0/9");
	CU_ASSERT_TRUE(sbx_cidr_contains(&odd, &in));
	CU_ASSERT_FALSE(sbx_cidr_contains(&odd, &out));
	struct sbx_cidr ip;
	CU_ASSERT_EQUAL(sbx_cidr_parse_ip("10.0.0.1", &ip), 0);
	CU_ASSERT_TRUE(sbx_cidr_contains(&host, &ip) && sbx_cidr_contains(&ip, &host));
	CU_ASSERT_EQUAL(sbx_cidr_parse_ip("10.0.0.1/32", &ip), -1);
	char text[SBX_CIDR_MAX + 1];
	sbx_cidr_format(&fd, text);
	CU_ASSERT_STRING_EQUAL(text, "fd12::/16");
	sbx_cidr_format(&odd, text);
	CU_ASSERT_STRING_EQUAL(text, "100.64.0.0/10");
	struct sbx_cidr h6 = cidr("2001:db8::1/128");
	sbx_cidr_format(&h6, text);
	CU_ASSERT_STRING_EQUAL(text, "2001:db8::1/128");
	CU_ASSERT_EQUAL(sbx_cidr_parse("10.1.2.3/8", &ip), -1); /* host bits */
	CU_ASSERT_EQUAL(sbx_cidr_parse("example.com", &ip), -1);
}

static void test_spec_profiles(void)
{
	const char *names[SBX_PROFILES_MAX];
	size_t n = 99;
	char msg[256];
	cJSON *spec = cJSON_Parse("{\"image\":\"x\"}");
	CU_ASSERT_EQUAL(sbx_spec_profiles(spec, names, &n, msg, sizeof msg), 0);
	CU_ASSERT_EQUAL(n, 0);
	cJSON_Delete(spec);
	spec = cJSON_Parse("{\"image\":\"x\",\"network\":{\"profiles\":[\"web\",\"db-1\"]}}");
	CU_ASSERT_EQUAL(sbx_spec_profiles(spec, names, &n, msg, sizeof msg), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(names[0], "web");
	CU_ASSERT_STRING_EQUAL(names[1], "db-1");
	cJSON_Delete(spec);
	static const char *const bad[] = {
		"{\"network\":[]}",
		"{\"network\":{\"profiles\":[]}}",
		"{\"network\":{\"profiles\":\"web\"}}",
		"{\"network\":{\"profiles\":[\"Web\"]}}",
		"{\"network\":{\"profiles\":[\"web\",\"web\"]}}",
		"{\"network\":{\"profiles\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]}}",
		"{\"network\":{\"profiles\":[\"example.com\"]}}",
		"{\"network\":{\"profiles\":[\"web\"],\"domains\":[\"example.com\"]}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		spec = cJSON_Parse(bad[i]);
		CU_ASSERT_EQUAL(sbx_spec_profiles(spec, names, &n, msg, sizeof msg), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, "spec.network"));
		cJSON_Delete(spec);
	}
}

static void test_profiles_set(void)
{
	const char *a[] = { "web", "db" }, *b[] = { "db", "web" };
	char ja[SBX_PROFILES_JOINED_MAX], ha[17], jb[SBX_PROFILES_JOINED_MAX], hb[17];
	CU_ASSERT_EQUAL(sbx_profiles_set(a, 2, ja, ha), 0);
	CU_ASSERT_EQUAL(sbx_profiles_set(b, 2, jb, hb), 0);
	CU_ASSERT_STRING_EQUAL(ja, "db,web");
	CU_ASSERT_STRING_EQUAL(ha, hb); /* a set: the order does not matter */
	CU_ASSERT_EQUAL(strlen(ha), 16);
	/* The first 8 bytes of SHA-256("db,web") in lowercase hex: a pod label, kept across versions. */
	CU_ASSERT_STRING_EQUAL(ha, "61102ad8bf45387f");
	CU_ASSERT_EQUAL(sbx_profiles_set(a, 1, jb, hb), 0);
	CU_ASSERT_STRING_NOT_EQUAL(ha, hb);
	char buf[SBX_PROFILES_JOINED_MAX];
	const char *names[SBX_PROFILES_MAX];
	CU_ASSERT_EQUAL(sbx_profiles_split(ja, buf, names), 2);
	CU_ASSERT_STRING_EQUAL(names[1], "web");
	CU_ASSERT_EQUAL(sbx_profiles_split("web,db", buf, names), -1); /* not sorted */
	CU_ASSERT_EQUAL(sbx_profiles_split("db,db", buf, names), -1);
	CU_ASSERT_EQUAL(sbx_profiles_split("", buf, names), -1);
	CU_ASSERT_EQUAL(sbx_profiles_split("a,b,c,d,e,f,g,h,i", buf, names), -1);
	CU_ASSERT_EQUAL(sbx_profiles_split("db,,web", buf, names), -1);
}

/* The floor of a config with clusterCIDRs and the API server's addresses. */
static size_t floor_of(const char *yaml, const char *const *api, size_t napi, struct sbx_cidr *out)
{
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL(sbx_config_parse(&c, yaml, strlen(yaml), err, sizeof err), 0);
	size_t n = sbx_netprofile_floor(&c.net, api, napi, out, SBX_NETPROFILE_FLOOR_MAX);
	sbx_config_release(&c);
	return n;
}

/* The policy of one profile text over the floor, as compact JSON of its
 * spec.egress (caller frees). */
static char *egress_of(const char *profile, const struct sbx_cidr *floor, size_t nfloor)
{
	cJSON *p = cJSON_Parse(profile);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	const cJSON *ps[] = { p };
	cJSON *np = sbx_netprofile_policy("team-a", "open", "0123456789abcdef", ps, 1, floor, nfloor);
	char *s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(np, "spec"), "egress"));
	cJSON_Delete(np);
	cJSON_Delete(p);
	return s;
}

/* 0.0.0.0/0 and ::/0 come out with every floor range of their family
 * excepted: link-local, shared address space, the cluster's ranges, the API
 * server's Service address and endpoint; IPv6 unique- and link-local. Each
 * as its two halves: kube-router v2.1.0 writes ::/0 into its ipsets as
 * 2000::/3 and fd00::/8, and its fd00::/8 entry is more specific than an
 * except of fc00::/7 (ipset matches the most specific entry first), so
 * fd00::/8 would stay open; no /0 is ever sent. */
static void test_policy_everything(void)
{
	struct sbx_cidr floor[SBX_NETPROFILE_FLOOR_MAX];
	const char *api[] = { "10.0.0.1", "192.168.10.5", "2001:db8::5" };
	size_t n = floor_of("network: {clusterCIDRs: [10.213.0.0/24, 10.0.0.0/24, fd00:10::/64]}", api, 3, floor);
	CU_ASSERT_EQUAL(n, 10);
	char *s = egress_of("{\"spec\":{\"egress\":[{\"cidr\":\"0.0.0.0/0\"},{\"cidr\":\"::/0\",\"ports\":[{\"protocol\":"
			    "\"TCP\",\"port\":443,\"endPort\":444}]}]}}",
			    floor, n);
	/* 10.0.0.1 lies in 10.0.0.0/24 (excepted once); fd00:10::/64 in fc00::/7. */
	CU_ASSERT_STRING_EQUAL(s, "[{\"to\":[{\"ipBlock\":{\"cidr\":\"0.0.0.0/1\",\"except\":[\"100.64.0.0/10\","
				  "\"10.213.0.0/24\",\"10.0.0.0/24\"]}},{\"ipBlock\":{\"cidr\":\"128.0.0.0/1\",\"except\":"
				  "[\"169.254.0.0/16\",\"192.168.10.5/32\"]}}]},"
				  "{\"to\":[{\"ipBlock\":{\"cidr\":\"::/1\",\"except\":[\"2001:db8::5/128\"]}},{\"ipBlock\":"
				  "{\"cidr\":\"8000::/1\",\"except\":[\"fc00::/7\",\"fe80::/10\"]}}],\"ports\":[{\"protocol\":"
				  "\"TCP\",\"port\":443,\"endPort\":444}]}]");
	free(s);
}

/* A CIDR inside a floor range grants nothing; one that holds a floor range
 * excepts it; one beside the floor is granted as it is. */
static void test_policy_nesting(void)
{
	struct sbx_cidr floor[SBX_NETPROFILE_FLOOR_MAX];
	const char *api[] = { "10.0.0.1" };
	size_t n = floor_of("network: {clusterCIDRs: [10.244.0.0/16]}", api, 1, floor);
	char *s = egress_of("{\"spec\":{\"egress\":[{\"cidr\":\"169.254.169.254/32\"},{\"cidr\":\"100.100.0.0/16\"},"
			    "{\"cidr\":\"10.244.3.0/24\"},{\"cidr\":\"10.0.0.1/32\"},{\"cidr\":\"fe80::/10\"},"
			    "{\"cidr\":\"10.0.0.0/8\"},{\"cidr\":\"192.0.2.10/32\",\"ports\":[{\"protocol\":\"UDP\","
			    "\"port\":53}]}]}}",
			    floor, n);
	CU_ASSERT_STRING_EQUAL(s, "[{\"to\":[{\"ipBlock\":{\"cidr\":\"10.0.0.0/8\",\"except\":[\"10.244.0.0/16\","
				  "\"10.0.0.1/32\"]}}]},{\"to\":[{\"ipBlock\":{\"cidr\":\"192.0.2.10/32\"}}],\"ports\":"
				  "[{\"protocol\":\"UDP\",\"port\":53}]}]");
	free(s);
	/* Without any rule left: egress allowed nowhere by it (an empty list). */
	s = egress_of("{\"spec\":{\"egress\":[{\"cidr\":\"100.64.0.0/10\"}]}}", floor, n);
	CU_ASSERT_STRING_EQUAL(s, "[]");
	free(s);
}

/* A profile that fails the check grants nothing, and the policy's shape. */
static void test_policy_shape_and_check(void)
{
	struct sbx_cidr floor[SBX_NETPROFILE_FLOOR_MAX];
	size_t n = floor_of("network: {}", NULL, 0, floor);
	CU_ASSERT_EQUAL(n, 4);
	static const char *const bad[] = {
		"{\"spec\":{\"egress\":[{\"cidr\":\"example.com\"}]}}",
		"{\"spec\":{\"egress\":[{\"cidr\":\"10.1.2.3/8\"}]}}",
		"{\"spec\":{\"egress\":[{\"cidr\":\"10.0.0.0/8\",\"ports\":[{\"protocol\":\"SCTP\",\"port\":1}]}]}}",
		"{\"spec\":{\"egress\":[{\"cidr\":\"10.0.0.0/8\",\"ports\":[{\"protocol\":\"TCP\",\"port\":0}]}]}}",
		"{\"spec\":{\"egress\":[{\"cidr\":\"10.0.0.0/8\",\"ports\":[{\"protocol\":\"TCP\",\"port\":80,"
		"\"endPort\":79}]}]}}",
		"{\"spec\":{\"egress\":[{\"cidr\":\"10.0.0.0/8\",\"domain\":\"example.com\"}]}}",
		"{\"spec\":{}}",
		"{\"spec\":{\"egress\":[{\"cidr\":\"::ffff:0.0.0.0/96\"}]}}",
		"{\"spec\":{\"egress\":[{\"cidr\":\"::ffff:169.254.0.0/112\"}]}}",
	};
	char msg[160];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cJSON *p = cJSON_Parse(bad[i]);
		CU_ASSERT_EQUAL(sbx_netprofile_check(p, msg, sizeof msg), -1);
		cJSON *t = sbx_netprofile_trim(p);
		CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "spec")), 0);
		cJSON_Delete(t);
		cJSON_Delete(p);
		char *s = egress_of(bad[i], floor, n);
		CU_ASSERT_STRING_EQUAL(s, "[]");
		free(s);
	}
	cJSON *p = cJSON_Parse("{\"metadata\":{\"name\":\"web\"},\"spec\":{\"egress\":[{\"cidr\":\"192.0.2.0/24\"}]}}");
	const cJSON *ps[] = { p, NULL };
	cJSON *np = sbx_netprofile_policy("team-a", "gone,web", "0123456789abcdef", ps, 2, floor, n);
	char *s = cJSON_PrintUnformatted(np);
	CU_ASSERT_STRING_EQUAL(
	    s, "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\",\"metadata\":{\"name\":"
	       "\"sandbox-profiles-0123456789abcdef\",\"namespace\":\"team-a\",\"labels\":{\"app.kubernetes.io/"
	       "managed-by\":\"sandbox-controller\",\"sandbox.dev/network-floor\":\"profiles\","
	       "\"sandbox.dev/network-profiles\":\"0123456789abcdef\"},\"annotations\":{\"sandbox.dev/network-"
	       "profiles\":\"gone,web\"}},\"spec\":{\"podSelector\":{\"matchLabels\":{\"app.kubernetes.io/managed-by\":"
	       "\"sandbox-controller\",\"app.kubernetes.io/name\":\"sandbox\",\"sandbox.dev/network-profiles\":"
	       "\"0123456789abcdef\"}},\"policyTypes\":[\"Egress\"],\"egress\":[{\"to\":[{\"ipBlock\":{\"cidr\":"
	       "\"192.0.2.0/24\"}}]}]}}");
	free(s);
	cJSON *t = sbx_netprofile_trim(p);
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "spec"), "egress"));
	cJSON_Delete(t);
	cJSON_Delete(np);
	cJSON_Delete(p);
}

/* The largest set a profile check allows (8 profiles of 32 rules of 16
 * ports) renders to far more than the informer keeps of a spec; its cached
 * copy must still count as rendered, or the keeper writes it again on each
 * look (every resync, for ever). A copy that differs does not. */
static void test_policy_large_set_as_rendered(void)
{
	struct sbx_cidr floor[SBX_NETPROFILE_FLOOR_MAX];
	const char *api[] = { "10.0.0.1", "2001:db8::5" };
	size_t n = floor_of("network: {clusterCIDRs: [10.213.0.0/24, fd00:10::/64]}", api, 2, floor);
	cJSON *ps[SBX_PROFILES_MAX];
	for (int i = 0; i < SBX_PROFILES_MAX; i++) {
		cJSON *p = jb_obj(), *egress = jb_add_arr(jb_add_obj(p, "spec"), "egress");
		for (int r = 0; r < SBX_PROFILE_RULES_MAX; r++) {
			cJSON *rule = jb_obj(), *ports = jb_add_arr(rule, "ports");
			jb_str(rule, "cidr", r % 2 ? "0.0.0.0/0" : "::/0");
			for (int k = 0; k < SBX_PROFILE_PORTS_MAX; k++) {
				cJSON *port = jb_obj();
				jb_str(port, "protocol", "TCP");
				jb_num(port, "port", 1000 + 100 * i + k);
				jb_num(port, "endPort", 1050 + 100 * i + k);
				jb_push(ports, port);
			}
			jb_push(egress, rule);
		}
		char msg[160];
		CU_ASSERT_EQUAL(sbx_netprofile_check(p, msg, sizeof msg), 0);
		ps[i] = p;
	}
	cJSON *np = sbx_netprofile_policy("team-a", "p0,p1,p2,p3,p4,p5,p6,p7", "0123456789abcdef",
					  (const cJSON *const *)ps, SBX_PROFILES_MAX, floor, n);
	char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(np, "spec"));
	CU_ASSERT_TRUE(strlen(text) > SBX_NETFLOOR_SPEC_MAX);
	free(text);
	cJSON *cached = sbx_netfloor_trim(np);
	CU_ASSERT_TRUE(sbx_netfloor_as_rendered(cached, np));
	cJSON_Delete(cached);
	/* One port changed (as a stolen token might): not as rendered. */
	cJSON *changed = jb_must(cJSON_Duplicate(np, 1));
	cJSON *port = cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(
		cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(changed, "spec"), "egress"),
				   7),
		"ports"),
	    3);
	cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(port, "port"), 9);
	cached = sbx_netfloor_trim(changed);
	CU_ASSERT_FALSE(sbx_netfloor_as_rendered(cached, np));
	cJSON_Delete(cached);
	cJSON_Delete(changed);
	cJSON_Delete(np);
	for (int i = 0; i < SBX_PROFILES_MAX; i++)
		cJSON_Delete(ps[i]);
}

void register_sandbox_netprofile_tests(void)
{
	SBX_SUITE("sandbox_netprofile", { "cidr_contains", test_cidr_contains }, { "spec_profiles", test_spec_profiles },
		  { "profiles_set", test_profiles_set }, { "policy_everything", test_policy_everything },
		  { "policy_nesting", test_policy_nesting }, { "policy_shape_and_check", test_policy_shape_and_check },
		  { "policy_large_set_as_rendered", test_policy_large_set_as_rendered });
}
