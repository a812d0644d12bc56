/* Tests of reconcile/inforce.h: when the product's mutating webhook counts as
 * in force for a Sandbox, judged on the MutatingWebhookConfiguration the API
 * server stores (shapes as it answers them, managedFields included). */
#include <string.h>

#include "base/ktime.h"
#include "reconcile/inforce.h"
#include "test_suites.h"

void register_reconcile_inforce_tests(void);

/* The product's configuration as stored: created at 10:00:00, applied by
 * kubectl then (rules, failurePolicy...), caBundle rewritten by the
 * controller at 11:00:00. */
static const char *const STORED =
    "{\"metadata\":{\"name\":\"sandbox-controller\",\"uid\":\"u1\",\"resourceVersion\":\"7\","
    "\"creationTimestamp\":\"2026-12-01T10:00:00Z\",\"managedFields\":["
    "{\"manager\":\"kubectl-client-side-apply\",\"operation\":\"Update\",\"time\":\"2026-12-01T10:00:00Z\","
    "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:labels\":{}},\"f:webhooks\":{\".\":{},"
    "\"k:{\\\"name\\\":\\\"mutate.sandboxes.sandbox.dev\\\"}\":{\".\":{},\"f:failurePolicy\":{},\"f:rules\":{},"
    "\"f:clientConfig\":{\".\":{},\"f:url\":{}}}}}},"
    "{\"manager\":\"sandbox-controller\",\"operation\":\"Update\",\"time\":\"2026-12-01T11:00:00Z\","
    "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:webhooks\":{\"k:{\\\"name\\\":\\\"mutate.sandboxes.sandbox.dev\\\"}\":"
    "{\"f:clientConfig\":{\"f:caBundle\":{}}}}}}]},"
    "\"webhooks\":[{\"name\":\"mutate.sandboxes.sandbox.dev\",\"failurePolicy\":\"Fail\","
    "\"clientConfig\":{\"url\":\"https://127.0.0.1:9443/mutate-sandbox\",\"caBundle\":\"Q0E=\"},"
    "\"rules\":[{\"apiGroups\":[\"sandbox.dev\"],\"apiVersions\":[\"v1alpha1\"],\"operations\":[\"CREATE\",\"UPDATE\"],"
    "\"resources\":[\"sandboxes\"],\"scope\":\"Namespaced\"}],"
    "\"namespaceSelector\":{\"matchExpressions\":[{\"key\":\"kubernetes.io/metadata.name\",\"operator\":\"NotIn\","
    "\"values\":[\"kube-system\",\"sandbox-system\"]}]},\"objectSelector\":{},"
    "\"matchConditions\":[{\"name\":\"not-being-deleted\",\"expression\":"
    "\"request.operation != 'UPDATE' || !has(object.metadata.deletionTimestamp)\"}]}]}";

static time_t at(const char *ts)
{
	time_t t = 0;
	CU_ASSERT_EQUAL_FATAL(ktime_parse_rfc3339(ts, &t), 0);
	return t;
}

/* The trimmed stored configuration with one change applied by edit (a JSON
 * text replacement), or unchanged for edit NULL. */
static cJSON *trimmed(const char *from, const char *to)
{
	char buf[4096];
	const char *src = STORED;
	if (from) {
		const char *p = strstr(STORED, from);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - STORED), STORED, to, p + strlen(from));
		src = buf;
	}
	cJSON *raw = cJSON_Parse(src);
	CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
	cJSON *t = sbx_inforce_trim(raw);
	cJSON_Delete(raw);
	return t;
}

static int in_force(const cJSON *t, const char *op, const char *ns, char *why)
{
	time_t since;
	return sbx_inforce_eval(t, SBX_MUTATING_WEBHOOK, "sandboxes", op, ns, &since, why, 256);
}

static void test_trim_drops_ca_bundle_and_dates_enforcement(void)
{
	cJSON *t = trimmed(NULL, NULL);
	char *text = cJSON_PrintUnformatted(t);
	CU_ASSERT_PTR_NULL(strstr(text, "caBundle"));
	CU_ASSERT_PTR_NULL(strstr(text, "managedFields"));
	/* kubectl's apply at 10:00 counts; the caBundle rewrite at 11:00 does not */
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(t, SBX_INFORCE_SINCE)->valuestring, "2026-12-01T10:00:00Z");
	cJSON_free(text);
	cJSON_Delete(t);
	/* a later manager that changes the failure policy moves it */
	t = trimmed("\"f:clientConfig\":{\"f:caBundle\":{}}", "\"f:failurePolicy\":{}");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(t, SBX_INFORCE_SINCE)->valuestring, "2026-12-01T11:00:00Z");
	cJSON_Delete(t);
}

static void test_eval(void)
{
	char why[256];
	time_t since;
	cJSON *t = trimmed(NULL, NULL);
	CU_ASSERT_TRUE(sbx_inforce_eval(t, SBX_MUTATING_WEBHOOK, "sandboxes", "CREATE", "team-a", &since, why, sizeof why));
	CU_ASSERT_EQUAL(since, at("2026-12-01T10:00:00Z"));
	CU_ASSERT_TRUE(in_force(t, "UPDATE", "team-a", why));
	/* the excluded namespaces */
	CU_ASSERT_FALSE(in_force(t, "CREATE", "sandbox-system", why));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "does not cover namespace sandbox-system"));
	CU_ASSERT_FALSE(sbx_inforce_eval(NULL, SBX_MUTATING_WEBHOOK, "sandboxes", "CREATE", "team-a", &since, why, sizeof why));
	CU_ASSERT_FALSE(sbx_inforce_eval(t, "other.example.com", "sandboxes", "CREATE", "team-a", &since, why, sizeof why));
	cJSON_Delete(t);

	struct {
		const char *from, *to, *why;
	} bad[] = {
		{ "\"failurePolicy\":\"Fail\"", "\"failurePolicy\":\"Ignore\"", "fails open" },
		{ "[\"CREATE\",\"UPDATE\"]", "[\"UPDATE\"]", "not sent CREATE" },
		{ "[\"sandboxes\"]", "[\"pods\"]", "not sent CREATE" },
		{ "[\"sandbox.dev\"]", "[\"example.com\"]", "not sent CREATE" },
		{ "\"objectSelector\":{}", "\"objectSelector\":{\"matchLabels\":{\"x\":\"y\"}}", "objectSelector" },
		{ "\"request.operation != 'UPDATE' || ", "\"", "may skip a create" },
		{ "\"values\":[\"kube-system\",\"sandbox-system\"]", "\"values\":[\"kube-system\",\"team-a\"]",
		  "does not cover namespace team-a" },
		{ "\"key\":\"kubernetes.io/metadata.name\"", "\"key\":\"team\"", "cannot judge" },
		{ "\"operator\":\"NotIn\"", "\"operator\":\"Gt\"", "operator" },
		{ "\"creationTimestamp\":\"2026-12-01T10:00:00Z\",\"managedFields\"",
		  "\"creationTimestamp\":\"2026-12-01T10:00:00Z\",\"deletionTimestamp\":\"2026-12-01T12:00:00Z\","
		  "\"managedFields\"",
		  "being deleted" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		t = trimmed(bad[i].from, bad[i].to);
		why[0] = '\0';
		CU_ASSERT_FALSE(in_force(t, "CREATE", "team-a", why));
		if (!strstr(why, bad[i].why))
			fprintf(stderr, "case %zu: why '%s' lacks '%s'\n", i, why, bad[i].why);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, bad[i].why));
		cJSON_Delete(t);
	}
	/* an In list, matchLabels on the name, "*" wildcards, no matchConditions: covered */
	t = trimmed("\"operator\":\"NotIn\",\"values\":[\"kube-system\",\"sandbox-system\"]",
		    "\"operator\":\"In\",\"values\":[\"team-a\"]");
	CU_ASSERT_TRUE(in_force(t, "CREATE", "team-a", why));
	CU_ASSERT_FALSE(in_force(t, "CREATE", "team-b", why));
	cJSON_Delete(t);
	t = trimmed("\"namespaceSelector\":{\"matchExpressions\":[{\"key\":\"kubernetes.io/metadata.name\",\"operator\":"
		    "\"NotIn\",\"values\":[\"kube-system\",\"sandbox-system\"]}]}",
		    "\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"team-a\"}}");
	CU_ASSERT_TRUE(in_force(t, "CREATE", "team-a", why));
	CU_ASSERT_FALSE(in_force(t, "CREATE", "team-b", why));
	cJSON_Delete(t);
	t = trimmed("\"apiGroups\":[\"sandbox.dev\"],\"apiVersions\":[\"v1alpha1\"],\"operations\":[\"CREATE\",\"UPDATE\"],"
		    "\"resources\":[\"sandboxes\"]",
		    "\"apiGroups\":[\"*\"],\"apiVersions\":[\"*\"],\"operations\":[\"*\"],\"resources\":[\"*/*\"]");
	CU_ASSERT_TRUE(in_force(t, "CREATE", "team-a", why));
	cJSON_Delete(t);
}

/* An UPDATE (a resume, a pool's new template) is judged by what the
 * configuration does with UPDATEs: a matchCondition that lets every CREATE
 * through may still skip updates, so only the product's own (skip an object
 * being deleted, which is never resumed) counts as sending them. */
static void test_eval_updates(void)
{
	char why[256];
	static const char *const skipping[] = { "request.operation != 'UPDATE' || false",
						"request.operation != 'UPDATE' || object.spec.image == 'x'",
						"request.operation != 'UPDATE' || !has(object.spec.lifecycle)" };
	for (size_t i = 0; i < sizeof skipping / sizeof skipping[0]; i++) {
		char to[256];
		snprintf(to, sizeof to, "\"%s\"", skipping[i]);
		cJSON *t = trimmed("\"request.operation != 'UPDATE' || !has(object.metadata.deletionTimestamp)\"", to);
		CU_ASSERT_TRUE(in_force(t, "CREATE", "team-a", why));
		why[0] = '\0';
		CU_ASSERT_FALSE(in_force(t, "UPDATE", "team-a", why));
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "may skip an update"));
		cJSON_Delete(t);
	}
	/* the product's own, blanks aside: updates are sent */
	cJSON *t = trimmed("\"request.operation != 'UPDATE' || !has(object.metadata.deletionTimestamp)\"",
			   "\"request.operation!='UPDATE'||\\n  !has(object.metadata.deletionTimestamp)\"");
	CU_ASSERT_TRUE(in_force(t, "UPDATE", "team-a", why));
	cJSON_Delete(t);
}

/* A CREATE is judged by the leading "request.operation != 'UPDATE' ||" only
 * when nothing after it can bind looser: in CEL the ternary does, so
 * "A || true ? false : false" is "(A || true) ? false : false", false for
 * every request. Strings, parentheses and comments are read as CEL reads
 * them, so a '?' inside them changes nothing. (JSON text: \" and \\.) */
static void test_eval_creates(void)
{
	static const char *const skipping[] = {
		"request.operation != 'UPDATE' || true ? false : false",
		"request.operation != 'UPDATE' || (true) ? false : false",
		"request.operation != 'UPDATE' || object.metadata.name == 'it\\\\'s' ? false : false",
		"request.operation != 'UPDATE' || object.metadata.name == \\\"?\\\" ? false : false",
		"request.operation != 'UPDATE' || object.metadata.name == '''a'b''' ? false : false",
		"request.operation != 'UPDATE' || true // it's\\n ? false : false // '",
		"request.operation != 'UPDATE' || true) || (false",
		"request.operation != 'UPDATE' || object.metadata.name == 'unterminated ? false : false",
	};
	static const char *const sending[] = {
		"request.operation != 'UPDATE' || !has(object.metadata.deletionTimestamp)", /* the product's */
		"request.operation != 'UPDATE' || object.metadata.name != 'a?b:c'",
		"request.operation != 'UPDATE' || object.metadata.name != \\\"it's ? x\\\" && true",
		"request.operation != 'UPDATE' || object.metadata.name != 'it\\\\' ? : ' || false",
		"request.operation != 'UPDATE' || (has(object.spec.image) ? object.spec.image != '' : true)",
		"request.operation != 'UPDATE' || {'a': 1}['a'] == 1 // a comment? yes: it's one",
	};
	char why[256];
	for (size_t i = 0; i < sizeof skipping / sizeof skipping[0] + sizeof sending / sizeof sending[0]; i++) {
		int skips = i < sizeof skipping / sizeof skipping[0];
		const char *expr = skips ? skipping[i] : sending[i - sizeof skipping / sizeof skipping[0]];
		char to[256];
		snprintf(to, sizeof to, "\"%s\"", expr);
		cJSON *t = trimmed("\"request.operation != 'UPDATE' || !has(object.metadata.deletionTimestamp)\"", to);
		why[0] = '\0';
		int got = in_force(t, "CREATE", "team-a", why);
		if (got == skips)
			fprintf(stderr, "%s: in force %d, want %d (%s)\n", expr, got, !skips, why);
		CU_ASSERT_EQUAL(got, !skips);
		if (skips)
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "may skip a create"));
		cJSON_Delete(t);
	}
}

static void test_check_since_and_floor(void)
{
	char why[256];
	struct sbx_inforce *g = sbx_inforce_new();
	cJSON *t = trimmed(NULL, NULL);
	time_t since = at("2026-12-01T10:00:00Z");
	/* created before the configuration, or within the grace: no */
	CU_ASSERT_FALSE(sbx_inforce_check(g, t, SBX_MUTATING_WEBHOOK, "sandboxes", "CREATE", "team-a", since - 60, why, sizeof why));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "before webhook"));
	CU_ASSERT_FALSE(sbx_inforce_check(g, t, SBX_MUTATING_WEBHOOK, "sandboxes", "CREATE", "team-a",
					  since + SBX_INFORCE_GRACE_S - 1, why, sizeof why));
	CU_ASSERT_TRUE(sbx_inforce_check(g, t, SBX_MUTATING_WEBHOOK, "sandboxes", "CREATE", "team-a", since + SBX_INFORCE_GRACE_S,
					 why, sizeof why));
	/* a caBundle change seen while running moves nothing */
	cJSON *rotated = trimmed("\"caBundle\":\"Q0E=\"", "\"caBundle\":\"TkVX\"");
	sbx_inforce_observe(g, t, rotated, since + 3600);
	CU_ASSERT_TRUE(sbx_inforce_check(g, rotated, SBX_MUTATING_WEBHOOK, "sandboxes", "CREATE", "team-a", since + 60, why,
					 sizeof why));
	/* a change of what is enforced, seen at 12:00 though no manager says so:
	 * nothing made before 12:00 (plus the grace) counts */
	cJSON *changed = trimmed("\"failurePolicy\":\"Fail\"", "\"failurePolicy\":\"Fail\",\"timeoutSeconds\":3");
	sbx_inforce_observe(g, rotated, changed, since + 7200);
	CU_ASSERT_FALSE(sbx_inforce_check(g, changed, SBX_MUTATING_WEBHOOK, "sandboxes", "CREATE", "team-a", since + 60, why,
					  sizeof why));
	CU_ASSERT_TRUE(sbx_inforce_check(g, changed, SBX_MUTATING_WEBHOOK, "sandboxes", "CREATE", "team-a",
					 since + 7200 + SBX_INFORCE_GRACE_S, why, sizeof why));
	cJSON_Delete(t);
	cJSON_Delete(rotated);
	cJSON_Delete(changed);
	sbx_inforce_free(g);
}

void register_reconcile_inforce_tests(void)
{
	SBX_SUITE("sandbox/inforce", { "trim drops caBundle and dates enforcement", test_trim_drops_ca_bundle_and_dates_enforcement },
		  { "updates: only conditions that never skip one", test_eval_updates },
		  { "eval: what counts as in force", test_eval },
		  { "creates: nothing after the leading || binds looser", test_eval_creates },
		  { "check: since, grace and what was seen", test_check_since_and_floor });
}
