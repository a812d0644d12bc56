/* Unit tests for the network floor: controller/sandbox/netfloor (the policy
 * the controller keeps in each namespace, whether a stored one is as
 * rendered, the informer's copy) and the config's network section. */
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/cidr.h"
#include "sandbox/config.h"
#include "sandbox/netfloor.h"
#include "test_suites.h"

void register_sandbox_netfloor_tests(void); /* called from test_sandbox_all.c */

/* The policy rendered from a config text, as compact JSON (caller frees). */
static char *render(const char *yaml)
{
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL_FATAL(sbx_config_parse(&c, yaml, strlen(yaml), err, sizeof err), 0);
	cJSON *np = sbx_netfloor_policy("team-a", &c.net);
	char *s = cJSON_PrintUnformatted(np);
	cJSON_Delete(np);
	sbx_config_release(&c);
	return s;
}

#define META                                                                                              \
	"{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\",\"metadata\":{\"name\":"     \
	"\"sandbox-floor\",\"namespace\":\"team-a\",\"labels\":{\"app.kubernetes.io/managed-by\":"        \
	"\"sandbox-controller\",\"sandbox.dev/network-floor\":\"true\"}},\"spec\":{\"podSelector\":{"     \
	"\"matchLabels\":{\"app.kubernetes.io/managed-by\":\"sandbox-controller\"},\"matchExpressions\":" \
	"[{\"key\":\"app.kubernetes.io/name\",\"operator\":\"In\",\"values\":[\"sandbox\","               \
	"\"sandbox-workspace-init\"]}]},\"policyTypes\":[\"Ingress\",\"Egress\"],"
#define DNS_PORTS "\"ports\":[{\"protocol\":\"UDP\",\"port\":53},{\"protocol\":\"TCP\",\"port\":53}]"

/* Without a network section: no ingress at all, egress only to the kube-dns
 * pods of kube-system on port 53. */
static void test_floor_default(void)
{
	char *s = render("{}");
	CU_ASSERT_STRING_EQUAL(s, META "\"egress\":[{\"to\":[{\"namespaceSelector\":{\"matchLabels\":"
				       "{\"kubernetes.io/metadata.name\":\"kube-system\"}},\"podSelector\":{"
				       "\"matchLabels\":{\"k8s-app\":\"kube-dns\"}}}]," DNS_PORTS "}]}}");
	free(s);
}

/* The operator's resolver and sources: only they, and only port 53 out. */
static void test_floor_configured(void)
{
	char *s = render("network: {dns: [10.96.0.10/32, 169.254.20.10/32], ingressFrom: [10.0.5.0/24, fd00::/8]}");
	CU_ASSERT_STRING_EQUAL(s, META "\"ingress\":[{\"from\":[{\"ipBlock\":{\"cidr\":\"10.0.5.0/24\"}},{\"ipBlock\":"
				       "{\"cidr\":\"fd00::/8\"}}]}],\"egress\":[{\"to\":[{\"ipBlock\":{\"cidr\":"
				       "\"10.96.0.10/32\"}},{\"ipBlock\":{\"cidr\":\"169.254.20.10/32\"}}]," DNS_PORTS
				       "}]}}");
	free(s);
}

/* A stored policy is as rendered only with the same spec and the labels. */
static void test_as_rendered(void)
{
	struct sbx_net_settings n = { .policies = 1 };
	cJSON *want = sbx_netfloor_policy("ns", &n), *have = cJSON_Duplicate(want, 1);
	cJSON_AddStringToObject(cJSON_GetObjectItem(have, "metadata"), "resourceVersion", "7");
	cJSON *trimmed = sbx_netfloor_trim(have);
	CU_ASSERT_TRUE(sbx_netfloor_as_rendered(trimmed, want));
	CU_ASSERT_FALSE(sbx_netfloor_as_rendered(NULL, want));
	/* egress opened to everything */
	cJSON *eg = cJSON_CreateArray();
	cJSON_AddItemToArray(eg, cJSON_CreateObject());
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(have, "spec"), "egress", eg);
	CU_ASSERT_FALSE(sbx_netfloor_as_rendered(have, want));
	cJSON_Delete(have);
	/* its floor label gone */
	have = cJSON_Duplicate(want, 1);
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cJSON_GetObjectItem(have, "metadata"), "labels"),
				   SBX_LABEL_NETFLOOR);
	CU_ASSERT_FALSE(sbx_netfloor_as_rendered(have, want));
	cJSON_Delete(have);
	/* a selector narrowed to nothing */
	have = cJSON_Duplicate(want, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(have, "spec"), "podSelector"),
				  "matchLabels", cJSON_CreateObject());
	CU_ASSERT_FALSE(sbx_netfloor_as_rendered(have, want));
	cJSON_Delete(have);
	cJSON_Delete(trimmed);
	cJSON_Delete(want);
}

/* The API server stores a policy without its empty lists (ingress: [] is
 * dropped) and with defaults filled in: a floor read back as stored is as
 * rendered, or the controller would write it over and over (849 PUTs in 15 s
 * in test_network's log before this test). */
static void test_as_stored(void)
{
	struct sbx_net_settings n = { .policies = 1 };
	cJSON *want = sbx_netfloor_policy("ns", &n), *have = cJSON_Duplicate(want, 1);
	cJSON *spec = cJSON_GetObjectItem(have, "spec");
	cJSON_DeleteItemFromObject(spec, "ingress");
	CU_ASSERT_TRUE(sbx_netfloor_as_rendered(have, want));
	cJSON_AddItemToObject(spec, "ingress", cJSON_CreateArray());
	CU_ASSERT_TRUE(sbx_netfloor_as_rendered(have, want));
	cJSON_Delete(have);
	cJSON_Delete(want);
}

/* The informer keeps no spec larger than a floor's: an empty one instead. */
static void test_trim_caps_spec(void)
{
	cJSON *big = cJSON_Parse("{\"metadata\":{\"name\":\"sandbox-floor\",\"namespace\":\"a\",\"managedFields\":[1]},"
				 "\"spec\":{\"x\":\"\"}}");
	char *pad = malloc(SBX_NETFLOOR_SPEC_MAX + 1);
	memset(pad, 'a', SBX_NETFLOOR_SPEC_MAX);
	pad[SBX_NETFLOOR_SPEC_MAX] = '\0';
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(big, "spec"), "x", cJSON_CreateString(pad));
	free(pad);
	cJSON *t = sbx_netfloor_trim(big);
	CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItem(t, "spec")), 0);
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "metadata"), "managedFields"));
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "metadata"), "name")->valuestring,
			       "sandbox-floor");
	cJSON_Delete(t);
	cJSON_Delete(big);
}

static void test_cidr_ok(void)
{
	static const char *const good[] = { "10.0.0.0/8", "192.0.2.53/32", "0.0.0.0/0", "fc00::/7",
					    "fe80::/10", "2001:db8::1/128", "::/0" };
	static const char *const bad[] = { "10.0.0.1/8", "10.0.0.0", "10.0.0.0/33", "10.0.0.0/", "/8",
					   "10.0.0.0/08", "10.0.0.0/8x", "fc00::/129", "fc01::/7", "a/1",
					   "10.0.0.0/-1", "", "1.2.3.4/32/1",
					   "2001:0db8:0000:0000:0000:0000:0000:0001/128x",
					   /* IPv4-mapped IPv6: read as IPv4 by some enforcers, where no
					    * floor range excepts it */
					   "::ffff:0.0.0.0/96", "::ffff:169.254.0.0/112", "::ffff:a9fe:a9fe/128" };
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		CU_ASSERT_TRUE(sbx_cidr_ok(good[i]));
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CU_ASSERT_FALSE(sbx_cidr_ok(bad[i]));
	CU_ASSERT_FALSE(sbx_cidr_ok(NULL));
	for (size_t i = 0; sbx_netfloor_never[i]; i++)
		CU_ASSERT_TRUE(sbx_cidr_ok(sbx_netfloor_never[i]));
}

static void test_config_network(void)
{
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL(c.net.policies, 1);
	/* Enforcement is verified unless the operator says not to; nothing is
	 * refused for it unless the operator says so (issue 24 item 4). */
	CU_ASSERT_EQUAL(c.net.verify, 1);
	CU_ASSERT_EQUAL(c.net.require_enforced, 0);
	static const char *const refused[] = { "network: {dns: [10.0.0.1/8]}", "network: {policies: yes-please}",
					       "network: {egress: []}", "network: {ingressFrom: 10.0.0.0/8}",
					       "network: {clusterCIDRs: [x]}" };
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		CU_ASSERT_EQUAL(sbx_config_parse(&c, refused[i], strlen(refused[i]), err, sizeof err), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "network"));
	}
	const char *ok = "network: {policies: false, clusterCIDRs: [10.244.0.0/16, 10.96.0.0/12]}";
	CU_ASSERT_EQUAL(sbx_config_parse(&c, ok, strlen(ok), err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.net.policies, 0);
	CU_ASSERT_EQUAL(c.net.verify, 1);
	CU_ASSERT_EQUAL(c.net.ncluster, 2);
	CU_ASSERT_STRING_EQUAL(c.net.cluster[1], "10.96.0.0/12");
	const char *off = "network: {verify: false}";
	CU_ASSERT_EQUAL(sbx_config_parse(&c, off, strlen(off), err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.net.verify, 0);
	sbx_config_release(&c);
}

void register_sandbox_netfloor_tests(void)
{
	SBX_SUITE("sandbox_netfloor", { "floor_default", test_floor_default },
		  { "floor_configured", test_floor_configured }, { "as_rendered", test_as_rendered },
		  { "as_stored", test_as_stored },
		  { "trim_caps_spec", test_trim_caps_spec }, { "cidr_ok", test_cidr_ok },
		  { "config_network", test_config_network });
}
