/* Unit tests for the NetworkPolicy probe (controller/sandbox/netprobe): its
 * policy and pods, and what the client pod's status means. */
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "sandbox/config.h"
#include "sandbox/netprobe.h"
#include "sandbox/status.h"
#include "test_suites.h"

void register_sandbox_netprobe_tests(void); /* called from test_sandbox_all.c */

static const char *sget(const cJSON *o, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* Two policies: the target's ingress on 8081 and 8082 only, the client's
 * egress to the target pods on 8080 and 8081 only. Each shut port is denied
 * by one direction alone (an ingress-only policy said "enforced" on a
 * cluster that enforces no egress rule, the floor's main one); one policy
 * selecting both pods for both directions reads "not enforced" on
 * kube-router, which runs a policy's ingress and egress rules as one chain. */
static void test_policy(void)
{
	cJSON *np = sbx_netprobe_policy("sandbox-system");
	cJSON *eg = sbx_netprobe_egress_policy("sandbox-system");
	char *s = cJSON_PrintUnformatted(cJSON_GetObjectItem(np, "spec"));
	char *e = cJSON_PrintUnformatted(cJSON_GetObjectItem(eg, "spec"));
	CU_ASSERT_STRING_EQUAL(s, "{\"podSelector\":{\"matchLabels\":{\"sandbox.dev/netprobe\":\"target\"}},\"policyTypes\":"
				  "[\"Ingress\"],\"ingress\":[{\"ports\":[{\"protocol\":\"TCP\",\"port\":8081},{\"protocol\":"
				  "\"TCP\",\"port\":8082}]}]}");
	CU_ASSERT_STRING_EQUAL(e, "{\"podSelector\":{\"matchLabels\":{\"sandbox.dev/netprobe\":\"client\"}},\"policyTypes\":"
				  "[\"Egress\"],\"egress\":[{\"to\":[{\"podSelector\":{\"matchLabels\":{\"sandbox.dev/"
				  "netprobe\":\"target\"}}}],\"ports\":[{\"protocol\":\"TCP\",\"port\":8080},{\"protocol\":"
				  "\"TCP\",\"port\":8081}]}]}");
	CU_ASSERT_STRING_EQUAL(sget(np, "metadata", "name"), "sbx-netprobe");
	CU_ASSERT_STRING_EQUAL(sget(eg, "metadata", "name"), "sbx-netprobe-egress");
	CU_ASSERT_STRING_EQUAL(sget(eg, "metadata", "namespace"), "sandbox-system");
	const cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(eg, "metadata"), "labels"),
					     "app.kubernetes.io/managed-by");
	CU_ASSERT_TRUE(cJSON_IsString(l) && !strcmp(l->valuestring, "sandbox-controller"));
	free(s);
	free(e);
	cJSON_Delete(np);
	cJSON_Delete(eg);
}

/* The operator's pod labels and annotations go on the probe's pods too (the
 * probe pod had no annotations object: the controller aborted at start,
 * "out of memory building JSON", with pod.annotations set). */
static void test_pods_operator_metadata(void)
{
	struct sbx_config c;
	char err[256];
	const char *yaml = "pod: {labels: {team: platform}, annotations: {example.com/cost-center: \"42\"}}";
	sbx_config_init(&c);
	CU_ASSERT_EQUAL_FATAL(sbx_config_parse(&c, yaml, strlen(yaml), err, sizeof err), 0);
	cJSON *t = sbx_netprobe_pod("ns", "target", 7, NULL, &c, "img:1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(t, "metadata");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(md, "annotations"),
							  "example.com/cost-center");
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(md, "labels"), "team");
	CU_ASSERT_TRUE(cJSON_IsString(a) && !strcmp(a->valuestring, "42"));
	CU_ASSERT_TRUE(cJSON_IsString(l) && !strcmp(l->valuestring, "platform"));
	cJSON_Delete(t);
	sbx_config_release(&c);
}

/* Non-root, nothing added, no token, the operator's placement, the
 * controller's image and subcommand; the client needs an address. */
static void test_pods(void)
{
	struct sbx_config c;
	char err[256];
	const char *yaml = "pod: {nodeSelector: {node.sandbox.dev/real: \"true\"}}";
	sbx_config_init(&c);
	CU_ASSERT_EQUAL_FATAL(sbx_config_parse(&c, yaml, strlen(yaml), err, sizeof err), 0);
	cJSON *t = sbx_netprobe_pod("ns", "target", 7, NULL, &c, "img:1");
	cJSON *cl = sbx_netprobe_pod("ns", "client", 7, "10.1.2.3", &c, "img:1");
	CU_ASSERT_PTR_NULL(sbx_netprobe_pod("ns", "client", 7, NULL, &c, "img:1"));
	CU_ASSERT_PTR_NULL(sbx_netprobe_pod("ns", "other", 7, NULL, &c, "img:1"));
	CU_ASSERT_PTR_NULL(sbx_netprobe_pod("ns", "target", 7, NULL, &c, ""));
	CU_ASSERT_STRING_EQUAL(sget(t, "metadata", "name"), "sbx-netprobe-target-7");
	CU_ASSERT_STRING_EQUAL(sget(cl, "metadata", "name"), "sbx-netprobe-client-7");
	char *ts = cJSON_PrintUnformatted(t), *cs = cJSON_PrintUnformatted(cl);
	CU_ASSERT_PTR_NOT_NULL(strstr(ts, "\"command\":[\"/sandbox-controller\",\"net-probe\",\"listen\",\"8080\",\"8081\",\"8082\"]"));
	CU_ASSERT_PTR_NOT_NULL(
	    strstr(cs, "\"command\":[\"/sandbox-controller\",\"net-probe\",\"connect\",\"10.1.2.3\",\"8080\",\"8082\",\"8081\",\"10\"]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(ts, "\"runAsNonRoot\":true"));
	CU_ASSERT_PTR_NOT_NULL(strstr(ts, "\"automountServiceAccountToken\":false"));
	CU_ASSERT_PTR_NOT_NULL(strstr(ts, "\"drop\":[\"ALL\"]"));
	CU_ASSERT_PTR_NULL(strstr(ts, "\"add\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(ts, "\"nodeSelector\":{\"node.sandbox.dev/real\":\"true\"}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(ts, "\"sandbox.dev/netprobe\":\"target\""));
	CU_ASSERT_PTR_NULL(strstr(ts, "scope-digest"));
	free(ts);
	free(cs);
	cJSON_Delete(t);
	cJSON_Delete(cl);
	sbx_config_release(&c);
}

static enum sbx_netprobe_result verdict_why(const char *json, int *done, char *why, size_t n)
{
	cJSON *p = cJSON_Parse(json);
	enum sbx_netprobe_result r = sbx_netprobe_verdict(p, done, why, n);
	CU_ASSERT_TRUE(*done == 0 || why[0] != '\0');
	cJSON_Delete(p);
	return r;
}

static enum sbx_netprobe_result verdict(const char *json, int *done)
{
	char why[300];
	return verdict_why(json, done, why, sizeof why);
}

#define TERM(code) \
	"{\"status\":{\"phase\":\"Failed\",\"containerStatuses\":[{\"state\":{\"terminated\":{\"exitCode\":" #code "}}}]}}"

static void test_verdict(void)
{
	int done;
	CU_ASSERT_EQUAL(verdict("{\"status\":{\"phase\":\"Running\"}}", &done), SBX_NETPROBE_UNKNOWN);
	CU_ASSERT_EQUAL(done, 0);
	CU_ASSERT_EQUAL(verdict("{}", &done), SBX_NETPROBE_UNKNOWN);
	CU_ASSERT_EQUAL(done, 0);
	CU_ASSERT_EQUAL(verdict(TERM(0), &done), SBX_NETPROBE_ENFORCED);
	CU_ASSERT_EQUAL(done, 1);
	CU_ASSERT_EQUAL(verdict(TERM(3), &done), SBX_NETPROBE_NOT_ENFORCED);
	CU_ASSERT_EQUAL(done, 1);
	CU_ASSERT_EQUAL(verdict(TERM(4), &done), SBX_NETPROBE_UNKNOWN);
	CU_ASSERT_EQUAL(done, 1);
	CU_ASSERT_EQUAL(verdict(TERM(2), &done), SBX_NETPROBE_UNKNOWN);
	CU_ASSERT_EQUAL(done, 1);
	CU_ASSERT_EQUAL(verdict("{\"status\":{\"phase\":\"Failed\",\"reason\":\"DeadlineExceeded\"}}", &done),
			SBX_NETPROBE_UNKNOWN);
	CU_ASSERT_EQUAL(done, 1);
}

/* Each direction failing alone is NotEnforced, and the words name it: the
 * client's exit 5 (the port only ingress denies answered), 6 (the one only
 * egress denies answered), 3 (both). */
static void test_verdict_directions(void)
{
	int done;
	char why[300];
	CU_ASSERT_EQUAL(verdict_why(TERM(0), &done, why, sizeof why), SBX_NETPROBE_ENFORCED);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "ingress and egress"));
	CU_ASSERT_EQUAL(verdict_why(TERM(5), &done, why, sizeof why), SBX_NETPROBE_NOT_ENFORCED);
	CU_ASSERT_EQUAL(done, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "does not enforce NetworkPolicy on ingress"));
	CU_ASSERT_PTR_NULL(strstr(why, "on egress"));
	CU_ASSERT_EQUAL(verdict_why(TERM(6), &done, why, sizeof why), SBX_NETPROBE_NOT_ENFORCED);
	CU_ASSERT_EQUAL(done, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "does not enforce NetworkPolicy on egress"));
	CU_ASSERT_PTR_NULL(strstr(why, "on ingress"));
	CU_ASSERT_EQUAL(verdict_why(TERM(3), &done, why, sizeof why), SBX_NETPROBE_NOT_ENFORCED);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "on ingress nor on egress"));
	static const struct {
		const char *pod;
		unsigned dirs;
	} cases[] = { { TERM(0), 0 },
		      { TERM(3), SBX_NETPROBE_INGRESS | SBX_NETPROBE_EGRESS },
		      { TERM(4), 0 },
		      { TERM(5), SBX_NETPROBE_INGRESS },
		      { TERM(6), SBX_NETPROBE_EGRESS },
		      { "{\"status\":{\"phase\":\"Running\"}}", 0 } };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cJSON *p = cJSON_Parse(cases[i].pod);
		CU_ASSERT_EQUAL(sbx_netprobe_unenforced(p), cases[i].dirs);
		cJSON_Delete(p);
	}
	CU_ASSERT_EQUAL(sbx_netprobe_unenforced(NULL), 0);
}

/* The condition is written only when given, with its three states. */
static void test_condition(void)
{
	struct sbx_status_in in = { .phase = "Running", .bound = 1, .bound_reason = "PodCreated", .ready = 1, .ready_reason = "PodReady" };
	cJSON *s = sbx_status_build(&in, NULL, "2026-01-01T00:00:00Z");
	CU_ASSERT_PTR_NULL(sbx_status_condition(s, "NetworkPolicyEnforced"));
	cJSON_Delete(s);
	in.net_status = "Unknown";
	in.net_reason = "NotVerified";
	in.net_message = "not yet";
	s = sbx_status_build(&in, NULL, "2026-01-01T00:00:00Z");
	const cJSON *c = sbx_status_condition(s, "NetworkPolicyEnforced");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(c, "status")->valuestring, "Unknown");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(c, "reason")->valuestring, "NotVerified");
	cJSON_Delete(s);
}

void register_sandbox_netprobe_tests(void)
{
	SBX_SUITE("sandbox_netprobe", { "policy", test_policy }, { "pods", test_pods }, { "pods: the operator's labels and annotations", test_pods_operator_metadata }, { "verdict", test_verdict },
		  { "verdict: each direction", test_verdict_directions },
		  { "condition", test_condition });
}
