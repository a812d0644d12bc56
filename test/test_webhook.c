/* Unit tests for the admission half: the owner authorization record
 * (sandbox/authz), AdmissionReview decoding/encoding and the Sandbox
 * admission decisions (webhook/). Adversarial cases first: forged, copied
 * and replayed records, reserved metadata, bad owners, key conflicts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/jsoncount.h"
#include "sandbox/authz.h"
#include "sandbox/claimrec.h"
#include "sandbox/netprofile.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/scope.h"
#include "webhook/admission.h"
#include "webhook/pod_admission.h"
#include "webhook/sandbox_admission.h"
#include "test_suites.h"

static const unsigned char KEY1[] = "0123456789abcdef0123456789abcdef-key-one";
static const unsigned char KEY2[] = "fedcba9876543210fedcba9876543210-key-two";
#define FP_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define FP_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static struct sbx_authz_subject subject(void)
{
	struct sbx_authz_subject s = { .ns = "team-a", .name = "alice-42", .owner = "alice", .fingerprint = FP_A, .username = "alice", .run = 1 };
	return s;
}

static enum sbx_authz_check verify1(const struct sbx_authz_subject *s, time_t created, const char *rec)
{
	const unsigned char *keys[] = { KEY1 };
	size_t lens[] = { sizeof KEY1 - 1 };
	return sbx_authz_verify(keys, lens, 1, s, created, rec, NULL);
}

static void test_authz_roundtrip(void)
{
	struct sbx_authz_subject s = subject();
	char rec[SBX_AUTHZ_MAX];
	CU_ASSERT_EQUAL_FATAL(sbx_authz_issue(KEY1, sizeof KEY1 - 1, &s, 1000, rec, sizeof rec), 0);
	CU_ASSERT_EQUAL(strncmp(rec, "v2.1000.1.", 10), 0);
	CU_ASSERT_EQUAL(verify1(&s, 1000, rec), SBX_AUTHZ_OK);
	CU_ASSERT_EQUAL(verify1(&s, 1000 + SBX_AUTHZ_MAX_AGE_S, rec), SBX_AUTHZ_OK);
}

/* Every field of the intent is bound: changing any one is a mismatch. */
static void test_authz_not_transferable(void)
{
	struct sbx_authz_subject s = subject();
	char rec[SBX_AUTHZ_MAX];
	CU_ASSERT_EQUAL_FATAL(sbx_authz_issue(KEY1, sizeof KEY1 - 1, &s, 1000, rec, sizeof rec), 0);
	struct sbx_authz_subject t;
	t = s;
	t.ns = "team-b";
	CU_ASSERT_EQUAL(verify1(&t, 1000, rec), SBX_AUTHZ_MISMATCH);
	t = s;
	t.name = "bob-42";
	CU_ASSERT_EQUAL(verify1(&t, 1000, rec), SBX_AUTHZ_MISMATCH);
	t = s;
	t.owner = "bob";
	CU_ASSERT_EQUAL(verify1(&t, 1000, rec), SBX_AUTHZ_MISMATCH);
	t = s;
	t.fingerprint = FP_B;
	CU_ASSERT_EQUAL(verify1(&t, 1000, rec), SBX_AUTHZ_MISMATCH);
	t = s;
	t.username = "bob";
	CU_ASSERT_EQUAL(verify1(&t, 1000, rec), SBX_AUTHZ_MISMATCH);
	/* a forged MAC (one digit changed) */
	char forged[SBX_AUTHZ_MAX];
	snprintf(forged, sizeof forged, "%s", rec);
	forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
	CU_ASSERT_EQUAL(verify1(&s, 1000, forged), SBX_AUTHZ_MISMATCH);
	/* the issue time is authenticated too */
	char moved[SBX_AUTHZ_MAX];
	snprintf(moved, sizeof moved, "v2.2000%s", rec + 7);
	CU_ASSERT_EQUAL(verify1(&s, 2000, moved), SBX_AUTHZ_MISMATCH);
	/* so is the run: a creation's record is no resume's */
	snprintf(moved, sizeof moved, "v2.1000.2%s", rec + 9);
	CU_ASSERT_EQUAL(verify1(&s, 1000, moved), SBX_AUTHZ_MISMATCH);
	/* a key the controller does not hold */
	char other[SBX_AUTHZ_MAX];
	CU_ASSERT_EQUAL(sbx_authz_issue(KEY2, sizeof KEY2 - 1, &s, 1000, other, sizeof other), 0);
	CU_ASSERT_EQUAL(verify1(&s, 1000, other), SBX_AUTHZ_MISMATCH);
}

static void test_authz_stale_and_malformed(void)
{
	struct sbx_authz_subject s = subject();
	char rec[SBX_AUTHZ_MAX];
	CU_ASSERT_EQUAL_FATAL(sbx_authz_issue(KEY1, sizeof KEY1 - 1, &s, 1000, rec, sizeof rec), 0);
	CU_ASSERT_EQUAL(verify1(&s, 1000 + SBX_AUTHZ_MAX_AGE_S + 1, rec), SBX_AUTHZ_STALE);
	CU_ASSERT_EQUAL(verify1(&s, 1000 - SBX_AUTHZ_MAX_SKEW_S - 1, rec), SBX_AUTHZ_STALE);
	CU_ASSERT_EQUAL(verify1(&s, 1000, NULL), SBX_AUTHZ_MISSING);
	struct sbx_authz_subject nouser = s;
	nouser.username = NULL;
	CU_ASSERT_EQUAL(verify1(&nouser, 1000, rec), SBX_AUTHZ_MISSING);
	static const char *const bad[] = { "", "v2.1.n.x", "v1..n." FP_A, "v1.1x.n." FP_A, "v1.1.x." FP_A,
					   "v1.1.n.abc", "v1.1.n", "v2.1.0." FP_A, "v2..1." FP_A, "v4.1.1." FP_A,
					   "v1.1.g." FP_A };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CU_ASSERT_EQUAL(verify1(&s, 1, bad[i]), SBX_AUTHZ_MALFORMED);
	/* a key shorter than the seal minimum is refused */
	CU_ASSERT_EQUAL(sbx_authz_issue((const unsigned char *)"short", 5, &s, 1, rec, sizeof rec), -1);
}

/* A record with the whole identity (v3): it verifies only with that
 * identity, as stored; the identity is the JCS form of the userInfo's four
 * members, and one too large or of the wrong shape is not recorded. */
static void test_authz_identity(void)
{
	cJSON *u = cJSON_Parse("{\"username\":\"bob\",\"uid\":\"42\",\"groups\":[\"devs\",\"system:authenticated\"],"
			       "\"extra\":{\"scopes\":[\"a\"]},\"other\":1}");
	char *id = sbx_authz_identity(u);
	CU_ASSERT_PTR_NOT_NULL_FATAL(id);
	CU_ASSERT_STRING_EQUAL(id, "{\"extra\":{\"scopes\":[\"a\"]},\"groups\":[\"devs\",\"system:authenticated\"],"
				   "\"uid\":\"42\",\"username\":\"bob\"}");
	cJSON *back = sbx_authz_identity_parse(id);
	CU_ASSERT_PTR_NOT_NULL(back);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(back, "username")->valuestring, "bob");
	cJSON_Delete(back);
	struct sbx_authz_subject s = subject();
	s.username = "bob";
	s.identity = id;
	char rec[SBX_AUTHZ_MAX];
	CU_ASSERT_EQUAL_FATAL(sbx_authz_issue(KEY1, sizeof KEY1 - 1, &s, 1000, rec, sizeof rec), 0);
	CU_ASSERT_EQUAL(strncmp(rec, "v3.1000.1.", 10), 0);
	struct sbx_authz_info info = { 0 };
	const unsigned char *keys[] = { KEY1 };
	size_t lens[] = { sizeof KEY1 - 1 };
	CU_ASSERT_EQUAL(sbx_authz_verify(keys, lens, 1, &s, 1000, rec, &info), SBX_AUTHZ_OK);
	CU_ASSERT_TRUE(info.has_identity);
	struct sbx_authz_subject t = s;
	t.identity = "{\"groups\":[\"system:masters\"],\"username\":\"bob\"}";
	CU_ASSERT_EQUAL(verify1(&t, 1000, rec), SBX_AUTHZ_MISMATCH);
	t.identity = NULL;
	CU_ASSERT_EQUAL(verify1(&t, 1000, rec), SBX_AUTHZ_MISMATCH);
	/* a v2 record verifies without an identity, and says it has none */
	s.identity = NULL;
	CU_ASSERT_EQUAL_FATAL(sbx_authz_issue(KEY1, sizeof KEY1 - 1, &s, 1000, rec, sizeof rec), 0);
	CU_ASSERT_EQUAL(sbx_authz_verify(keys, lens, 1, &t, 1000, rec, &info), SBX_AUTHZ_OK);
	CU_ASSERT_FALSE(info.has_identity);
	free(id);
	cJSON_Delete(u);
	/* shapes refused: no username, a group that is no string, too large */
	static const char *const bad[] = { "{\"groups\":[\"a\"]}", "{\"username\":\"a\",\"groups\":[1]}",
					   "{\"username\":\"a\",\"extra\":{\"k\":\"v\"}}", "{\"username\":5}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		u = cJSON_Parse(bad[i]);
		CU_ASSERT_PTR_NULL(sbx_authz_identity(u));
		CU_ASSERT_PTR_NULL(sbx_authz_identity_parse(bad[i]));
		cJSON_Delete(u);
	}
	u = cJSON_CreateObject();
	cJSON_AddStringToObject(u, "username", "big");
	cJSON *groups = cJSON_AddArrayToObject(u, "groups");
	char g[200];
	memset(g, 'g', sizeof g - 1);
	g[sizeof g - 1] = '\0';
	for (int i = 0; i < 100; i++)
		cJSON_AddItemToArray(groups, cJSON_CreateString(g));
	CU_ASSERT_PTR_NULL(sbx_authz_identity(u)); /* 20 kB > SBX_AUTHZ_IDENTITY_MAX */
	cJSON_Delete(u);
}

/* The controller's note that a pool's record was made while the webhook was
 * in force: bound to the namespace, pool name, uid and record; any key of
 * the rotation verifies it. */
static void test_authz_attest(void)
{
	char a[65], b[65];
	CU_ASSERT_EQUAL_FATAL(sbx_authz_attest(KEY1, sizeof KEY1 - 1, "team-a", "pool-a", "u-1", "v3.1.1.ab", a), 0);
	CU_ASSERT_EQUAL(strlen(a), 64);
	const unsigned char *keys[] = { KEY2, KEY1 };
	size_t lens[] = { sizeof KEY2 - 1, sizeof KEY1 - 1 };
	CU_ASSERT_TRUE(sbx_authz_attest_check(keys, lens, 2, "team-a", "pool-a", "u-1", "v3.1.1.ab", a));
	CU_ASSERT_FALSE(sbx_authz_attest_check(keys, lens, 1, "team-a", "pool-a", "u-1", "v3.1.1.ab", a));
	CU_ASSERT_FALSE(sbx_authz_attest_check(keys, lens, 2, "team-a", "pool-a", "u-2", "v3.1.1.ab", a));
	CU_ASSERT_FALSE(sbx_authz_attest_check(keys, lens, 2, "team-a", "pool-b", "u-1", "v3.1.1.ab", a));
	CU_ASSERT_FALSE(sbx_authz_attest_check(keys, lens, 2, "team-b", "pool-a", "u-1", "v3.1.1.ab", a));
	CU_ASSERT_FALSE(sbx_authz_attest_check(keys, lens, 2, "team-a", "pool-a", "u-1", "v3.1.2.ab", a));
	CU_ASSERT_FALSE(sbx_authz_attest_check(keys, lens, 2, "team-a", "pool-a", "u-1", "v3.1.1.ab", NULL));
	/* the fields are length-prefixed: no shifting a byte from one to the next */
	CU_ASSERT_EQUAL_FATAL(sbx_authz_attest(KEY1, sizeof KEY1 - 1, "team-a", "pool-au", "-1", "v3.1.1.ab", b), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	CU_ASSERT_EQUAL(sbx_authz_attest((const unsigned char *)"short", 5, "a", "b", "c", "d", b), -1);
}

/* lp(x) of the record formats, for building a v1 record by hand. */
static size_t lp_put(unsigned char *b, size_t at, const char *x)
{
	size_t n = strlen(x);
	b[at] = (unsigned char)(n >> 24);
	b[at + 1] = (unsigned char)(n >> 16);
	b[at + 2] = (unsigned char)(n >> 8);
	b[at + 3] = (unsigned char)n;
	memcpy(b + at + 4, x, n);
	return at + 4 + n;
}

/* Records of the previous format, issued by replicas not upgraded yet: the
 * named form still verifies (within its 300 s window, run 1); the
 * generateName form, which named only a prefix, does not. */
static void test_authz_v1_records(void)
{
	struct sbx_authz_subject s = subject();
	unsigned char m[1024], mac[32];
	size_t n = lp_put(m, 0, "sandbox.dev/owner-authorization/v1");
	n = lp_put(m, n, s.ns);
	m[n++] = 'n';
	n = lp_put(m, n, s.name);
	n = lp_put(m, n, s.owner);
	n = lp_put(m, n, s.fingerprint);
	n = lp_put(m, n, s.username);
	n = lp_put(m, n, "1000");
	unsigned int ml = 0;
	HMAC(EVP_sha256(), KEY1, sizeof KEY1 - 1, m, n, mac, &ml);
	char rec[SBX_AUTHZ_MAX], hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	snprintf(rec, sizeof rec, "v1.1000.n.%s", hex);
	const unsigned char *keys[] = { KEY1 };
	size_t lens[] = { sizeof KEY1 - 1 };
	struct sbx_authz_info info = { 0 };
	CU_ASSERT_EQUAL(sbx_authz_verify(keys, lens, 1, &s, 1000 + SBX_AUTHZ_V1_MAX_AGE_S, rec, &info), SBX_AUTHZ_OK);
	CU_ASSERT_EQUAL(info.run, 1);
	CU_ASSERT_EQUAL(info.issued, 1000);
	CU_ASSERT_EQUAL(verify1(&s, 1001 + SBX_AUTHZ_V1_MAX_AGE_S, rec), SBX_AUTHZ_STALE);
	struct sbx_authz_subject t = s;
	t.name = "bob-42";
	CU_ASSERT_EQUAL(verify1(&t, 1000, rec), SBX_AUTHZ_MISMATCH);
	rec[8] = 'g';
	CU_ASSERT_EQUAL(verify1(&s, 1000, rec), SBX_AUTHZ_MALFORMED);
}

/* A resume's record (run > 1) is not held to the creation window: what
 * counts is its run, which the caller compares (info). */
static void test_authz_resume_run(void)
{
	struct sbx_authz_subject s = subject();
	s.run = 4;
	char rec[SBX_AUTHZ_MAX];
	CU_ASSERT_EQUAL_FATAL(sbx_authz_issue(KEY1, sizeof KEY1 - 1, &s, 5000, rec, sizeof rec), 0);
	const unsigned char *keys[] = { KEY1 };
	size_t lens[] = { sizeof KEY1 - 1 };
	struct sbx_authz_info info = { 0 };
	CU_ASSERT_EQUAL(sbx_authz_verify(keys, lens, 1, &s, 1000, rec, &info), SBX_AUTHZ_OK);
	CU_ASSERT_EQUAL(info.run, 4);
	CU_ASSERT_EQUAL(info.issued, 5000);
	s.run = 0;
	CU_ASSERT_EQUAL(sbx_authz_issue(KEY1, sizeof KEY1 - 1, &s, 5000, rec, sizeof rec), -1);
}

static void test_authz_rotation(void)
{
	struct sbx_authz_subject s = subject();
	char rec[SBX_AUTHZ_MAX];
	CU_ASSERT_EQUAL_FATAL(sbx_authz_issue(KEY2, sizeof KEY2 - 1, &s, 1000, rec, sizeof rec), 0);
	const unsigned char *keys[] = { KEY1, KEY2 };
	size_t lens[] = { sizeof KEY1 - 1, sizeof KEY2 - 1 };
	CU_ASSERT_EQUAL(sbx_authz_verify(keys, lens, 2, &s, 1000, rec, NULL), SBX_AUTHZ_OK);
	CU_ASSERT_EQUAL(sbx_authz_verify(keys, lens, 1, &s, 1000, rec, NULL), SBX_AUTHZ_MISMATCH);
}

/* ---- AdmissionReview ---- */

/* The groups of the reviews' userInfo (a test may set others for a while). */
static const char *review_groups = "[\"system:authenticated\"]";

static char *review_json(const char *op, const char *user, const char *object, const char *old)
{
	size_t n = strlen(object) + (old ? strlen(old) : 0) + strlen(review_groups) + 1024;
	char *b = malloc(n);
	snprintf(b, n,
		 "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
		 "\"uid\":\"req-1\",\"operation\":\"%s\",\"kind\":{\"group\":\"sandbox.dev\",\"version\":"
		 "\"v1alpha1\",\"kind\":\"Sandbox\"},\"resource\":{\"group\":\"sandbox.dev\",\"resource\":"
		 "\"sandboxes\"},\"namespace\":\"team-a\",\"name\":\"s1\",\"userInfo\":{\"username\":\"%s\","
		 "\"groups\":%s},\"object\":%s%s%s}}",
		 op, user, review_groups, object, old ? ",\"oldObject\":" : "", old ? old : "");
	return b;
}

static void test_review_decode(void)
{
	char *b = review_json("CREATE", "alice", "{\"metadata\":{\"name\":\"s1\"}}", NULL);
	struct wh_review r;
	char err[256];
	CU_ASSERT_EQUAL_FATAL(wh_review_decode(b, strlen(b), &r, err, sizeof err), 0);
	CU_ASSERT_STRING_EQUAL(r.uid, "req-1");
	CU_ASSERT_STRING_EQUAL(r.operation, "CREATE");
	CU_ASSERT_STRING_EQUAL(r.kind, "Sandbox");
	CU_ASSERT_STRING_EQUAL(r.ns, "team-a");
	CU_ASSERT_STRING_EQUAL(r.username, "alice");
	CU_ASSERT_PTR_NOT_NULL(r.object);
	wh_review_release(&r);
	free(b);
	static const char *const bad[] = {
		"",
		"not json",
		"{}",
		"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\"}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\"}}",
		("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":1,"
		 "\"operation\":\"CREATE\",\"kind\":{\"kind\":\"Sandbox\"},\"userInfo\":{\"username\":\"a\"}}}"),
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CU_ASSERT_EQUAL(wh_review_decode(bad[i], strlen(bad[i]), &r, err, sizeof err), -1);
	CU_ASSERT_EQUAL(wh_review_decode("{}", WH_REVIEW_MAX + 1, &r, err, sizeof err), -1);
}

static cJSON *decode_patch(const char *resp)
{
	cJSON *root = cJSON_Parse(resp);
	const cJSON *r = cJSON_GetObjectItem(root, "response");
	const cJSON *p = cJSON_GetObjectItem(r, "patch");
	cJSON *out = NULL;
	if (cJSON_IsString(p)) {
		size_t n = strlen(p->valuestring);
		unsigned char *d = calloc(1, n + 1);
		int len = EVP_DecodeBlock(d, (const unsigned char *)p->valuestring, (int)n);
		while (len > 0 && d[len - 1] == '\0')
			len--;
		out = cJSON_ParseWithLength((const char *)d, (size_t)len);
		free(d);
		CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(r, "patchType")->valuestring, "JSONPatch");
	}
	cJSON_Delete(root);
	return out;
}

/* A review of a million tiny values is refused before it is parsed (its
 * values counted by base/jsoncount.h, tested in test_base.c). */
static void test_json_values(void)
{
	size_t n = 2000001;
	char *b = malloc(n + 2);
	b[0] = '[';
	for (size_t i = 1; i < n; i += 2) {
		b[i] = '0';
		b[i + 1] = ',';
	}
	b[n - 1] = '0';
	b[n] = ']';
	b[n + 1] = '\0';
	CU_ASSERT(json_count_values(b, n + 1) > WH_REVIEW_MAX_NODES);
	struct wh_review r;
	char err[256];
	CU_ASSERT_EQUAL(wh_review_decode(b, n + 1, &r, err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "JSON values"));
	free(b);
}

static void test_identity_caps(void)
{
	char why[256], *big;
	cJSON *u = cJSON_Parse("{\"username\":\"alice\",\"uid\":\"1\",\"groups\":[\"a\",\"b\"],\"extra\":{\"k\":[\"v\"]}}");
	CU_ASSERT_EQUAL(wh_identity_check(u, why, sizeof why), 0);
	cJSON_Delete(u);
	big = calloc(1, WH_USERNAME_MAX + 2);
	memset(big, 'u', WH_USERNAME_MAX + 1);
	u = cJSON_CreateObject();
	cJSON_AddStringToObject(u, "username", big);
	CU_ASSERT_EQUAL(wh_identity_check(u, why, sizeof why), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "username"));
	cJSON_Delete(u);
	free(big);
	u = cJSON_Parse("{\"username\":\"x\"}");
	cJSON *g = cJSON_AddArrayToObject(u, "groups");
	for (int i = 0; i <= WH_GROUPS_MAX; i++)
		cJSON_AddItemToArray(g, cJSON_CreateString("g"));
	CU_ASSERT_EQUAL(wh_identity_check(u, why, sizeof why), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "groups"));
	cJSON_Delete(u);
	/* fewer groups, but more bytes than the cap altogether */
	big = calloc(1, 1001);
	memset(big, 'g', 1000);
	u = cJSON_Parse("{\"username\":\"x\"}");
	g = cJSON_AddArrayToObject(u, "groups");
	for (int i = 0; i < 100; i++)
		cJSON_AddItemToArray(g, cJSON_CreateString(big));
	CU_ASSERT_EQUAL(wh_identity_check(u, why, sizeof why), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "bytes"));
	cJSON_Delete(u);
	free(big);
	u = cJSON_Parse("{\"username\":\"x\",\"groups\":[1]}");
	CU_ASSERT_EQUAL(wh_identity_check(u, why, sizeof why), -1);
	cJSON_Delete(u);
}

static void test_response_encode(void)
{
	struct wh_verdict v;
	wh_verdict_deny(&v, 422, "Invalid", "key %s held", "k");
	char *s = wh_response_encode("u1", &v);
	cJSON *root = cJSON_Parse(s);
	const cJSON *r = cJSON_GetObjectItem(root, "response");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(r, "uid")->valuestring, "u1");
	CU_ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(r, "allowed")));
	CU_ASSERT_EQUAL((int)cJSON_GetObjectItem(cJSON_GetObjectItem(r, "status"), "code")->valuedouble, 422);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "status"), "message")->valuestring,
			       "key k held");
	cJSON_Delete(root);
	free(s);
	wh_verdict_release(&v);
	char esc[64];
	wh_json_pointer_escape("sandbox.dev/a~b", esc, sizeof esc);
	CU_ASSERT_STRING_EQUAL(esc, "sandbox.dev~1a~0b");
}

/* ---- Sandbox decisions ---- */

struct fake {
	int sar_answer; /* 1, 0, -1 */
	int sar_calls;
	char last_owner[64];
	cJSON *cache;	       /* array of Sandboxes returned for any digest */
	const char *pod_owner; /* the owner of every sbx- pod; "" none; NULL: no such pod */
	int pod_error;	       /* 1: pods cannot be read; 2: the pod is not known */
	int pod_reads;
	int quota_full; /* quota_refuses answers 1 */
	char quota_owner[64], quota_digest[40];
	const char *profiles_usable;   /* ",a,b,": the profiles the requester may use */
	const char *profiles_existing; /* ",a,b,": those that exist; NULL: the cache cannot tell */
	int profile_sar_calls;
	cJSON *records;	   /* array of claim records returned for any digest */
	int unnamed_calls; /* may_use_owner asked about every owner (NULL) */
};

static int fake_may_use_profile(void *ctx, const cJSON *ui, const char *profile, char *why, size_t n)
{
	struct fake *f = ctx;
	char needle[80];
	f->profile_sar_calls++;
	snprintf(needle, sizeof needle, ",%s,", profile);
	snprintf(why, n, "%s", "");
	return f->profiles_usable && strstr(f->profiles_usable, needle) != NULL;
}

static int fake_profile_exists(void *ctx, const char *profile)
{
	struct fake *f = ctx;
	char needle[80];
	snprintf(needle, sizeof needle, ",%s,", profile);
	return f->profiles_existing ? strstr(f->profiles_existing, needle) != NULL : -1;
}

static int fake_may_use(void *ctx, const cJSON *ui, const char *ns, const char *owner, char *why, size_t n)
{
	struct fake *f = ctx;
	f->sar_calls++;
	snprintf(f->last_owner, sizeof f->last_owner, "%s", owner);
	snprintf(why, n, "%s", f->sar_answer < 0 ? "connection refused" : "");
	return f->sar_answer;
}

static cJSON *fake_by_digest(void *ctx, const char *digest)
{
	struct fake *f = ctx;
	return f->cache ? cJSON_Duplicate(f->cache, 1) : cJSON_CreateArray();
}

static cJSON *fake_records_by_digest(void *ctx, const char *digest)
{
	struct fake *f = ctx;
	return f->records ? cJSON_Duplicate(f->records, 1) : cJSON_CreateArray();
}

/* An authorizer that denies by name: every owner (no name) allowed, as
 * RBAC grants it, but "ceo" denied (a webhook authorizer before RBAC). */
static int fake_may_use_by_name(void *ctx, const cJSON *ui, const char *ns, const char *owner, char *why, size_t n)
{
	struct fake *f = ctx;
	snprintf(why, n, "%s", "");
	if (!owner) {
		f->unnamed_calls++;
		return 1;
	}
	f->sar_calls++;
	snprintf(f->last_owner, sizeof f->last_owner, "%s", owner);
	return strcmp(owner, "ceo") != 0;
}

static int fake_pod_owner(void *ctx, const char *ns, const char *name, char *owner, size_t n)
{
	struct fake *f = ctx;
	f->pod_reads++;
	if (f->pod_error)
		return -f->pod_error;
	if (!f->pod_owner)
		return 0;
	snprintf(owner, n, "%s", f->pod_owner);
	return 1;
}

static int fake_quota_refuses(void *ctx, const char *ns, const char *owner, const char *digest, char *msg, size_t n)
{
	struct fake *f = ctx;
	snprintf(f->quota_owner, sizeof f->quota_owner, "%s", owner ? owner : "-");
	snprintf(f->quota_digest, sizeof f->quota_digest, "%s", digest);
	snprintf(msg, n, "workspace owner %s holds 1 of 1 active sandboxes in namespace %s", owner ? owner : "-", ns);
	return f->quota_full;
}

static const unsigned char *const POLICY_KEYS[] = { KEY1 };
static const size_t POLICY_LENS[] = { sizeof KEY1 - 1 };

static struct wh_sandbox_policy policy(struct fake *f)
{
	struct wh_sandbox_policy p = { POLICY_KEYS, POLICY_LENS, 1, SBX_OWNER_AUTHZ_ACCESS_REVIEW, 86400,
				       fake_may_use, fake_by_digest, fake_pod_owner, NULL, f, fake_may_use_profile,
				       fake_profile_exists, NULL, 0 };
	return p;
}

#define SPEC_ALICE "{\"image\":\"img:1\",\"idempotencyKey\":\"task-43\",\"workspaceOwner\":\"alice\"}"
#define SPEC_ALICE2 "{\"image\":\"evil:1\",\"idempotencyKey\":\"task-43\",\"workspaceOwner\":\"alice\"}"

/* Whether decide's reviews come from an authenticated caller (the API server). */
static int decide_authenticated = 1;

static void decide(const struct wh_sandbox_policy *p, int mutate, const char *op, const char *user,
		   const char *object, const char *old, struct wh_verdict *v)
{
	char *b = review_json(op, user, object, old);
	struct wh_review r;
	char err[256];
	CU_ASSERT_EQUAL_FATAL(wh_review_decode(b, strlen(b), &r, err, sizeof err), 0);
	r.authenticated = decide_authenticated;
	(mutate ? wh_sandbox_mutate : wh_sandbox_validate)(p, &r, 1000, v);
	wh_review_release(&r);
	free(b);
}

/* Applies the webhook's JSON Patch (only "add" of a map or a map entry under
 * /metadata, all it ever emits) to obj. */
static void apply_patch(cJSON *obj, const cJSON *patch)
{
	const cJSON *op;
	cJSON_ArrayForEach(op, patch)
	{
		CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(op, "op")->valuestring, "add");
		const char *path = cJSON_GetObjectItem(op, "path")->valuestring;
		cJSON *meta = cJSON_GetObjectItem(obj, "metadata");
		char map[32] = "", key[128] = "";
		const char *p = path + strlen("/metadata/"), *slash = strchr(p, '/');
		if (!slash) {
			cJSON_DeleteItemFromObject(meta, p);
			cJSON_AddItemToObject(meta, p, cJSON_Duplicate(cJSON_GetObjectItem(op, "value"), 1));
			continue;
		}
		snprintf(map, sizeof map, "%.*s", (int)(slash - p), p);
		size_t k = 0;
		for (const char *q = slash + 1; *q && k + 1 < sizeof key; q++) {
			if (q[0] == '~' && q[1] == '1') {
				key[k++] = '/';
				q++;
			} else if (q[0] == '~' && q[1] == '0') {
				key[k++] = '~';
				q++;
			} else
				key[k++] = *q;
		}
		key[k] = '\0';
		cJSON_DeleteItemFromObject(cJSON_GetObjectItem(meta, map), key); /* "add" replaces */
		cJSON_AddItemToObject(cJSON_GetObjectItem(meta, map), key,
				      cJSON_Duplicate(cJSON_GetObjectItem(op, "value"), 1));
	}
}

static void test_mutate_refuses_unauthorized_owner(void)
{
	struct fake f = { .sar_answer = 0 };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	decide(&p, 1, "CREATE", "bob", "{\"metadata\":{\"name\":\"s1\"},\"spec\":" SPEC_ALICE "}", NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "\"alice\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "\"use\" on workspaces.sandbox.dev"));
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "bob"));
	CU_ASSERT_STRING_EQUAL(f.last_owner, "alice");
	wh_verdict_release(&v);
	/* the authorizer cannot be asked: fail closed */
	f.sar_answer = -1;
	decide(&p, 1, "CREATE", "bob", "{\"metadata\":{\"name\":\"s1\"},\"spec\":" SPEC_ALICE "}", NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 500);
	wh_verdict_release(&v);
	/* owner "" is refused by validation, never read as "no owner"; the
	 * mutating step leaves it to the schema and stamps nothing */
	f.sar_answer = 1;
	const char *empty = "{\"metadata\":{\"name\":\"s1\"},\"spec\":{\"image\":\"i\",\"workspaceOwner\":\"\"}}";
	decide(&p, 1, "CREATE", "bob", empty, NULL, &v);
	CU_ASSERT_PTR_NULL(v.patch);
	wh_verdict_release(&v);
	decide(&p, 0, "CREATE", "bob", empty, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 422);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "workspaceOwner"));
	wh_verdict_release(&v);
}

static void test_mutate_refuses_reserved(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	decide(&p, 1, "CREATE", "alice",
	       "{\"metadata\":{\"name\":\"s1\",\"annotations\":{\"sandbox.dev/owner-authorization\":\"v1.1.n.x\"}},"
	       "\"spec\":" SPEC_ALICE "}",
	       NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "reserved"));
	CU_ASSERT_EQUAL(f.sar_calls, 0);
	wh_verdict_release(&v);
	decide(&p, 1, "CREATE", "alice",
	       "{\"metadata\":{\"name\":\"s1\",\"labels\":{\"sandbox.dev/scope-digest\":\"x\"}},\"spec\":{\"image\":\"i\"}}",
	       NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
}

/* Authorized: the stamped object passes validation and the controller's check. */
static void test_mutate_then_validate(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	const char *obj_s = "{\"metadata\":{\"name\":\"s1\",\"namespace\":\"team-a\",\"labels\":{\"app\":\"x\"}},"
			    "\"spec\":" SPEC_ALICE "}";
	decide(&p, 1, "CREATE", "alice", obj_s, NULL, &v);
	CU_ASSERT_TRUE_FATAL(v.allowed);
	CU_ASSERT_STRING_EQUAL(v.outcome, "mutated");
	char *resp = wh_response_encode("req-1", &v);
	cJSON *patch = decode_patch(resp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(patch);
	cJSON *obj = cJSON_Parse(obj_s);
	apply_patch(obj, patch);
	const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "annotations");
	const cJSON *lab = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "labels");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_REQUESTED_BY)->valuestring, "alice");
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(ann, SBX_ANN_OWNER_AUTHZ));
	CU_ASSERT_EQUAL(strlen(cJSON_GetObjectItem(lab, SBX_LABEL_DIGEST)->valuestring), 32);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(lab, "app")->valuestring, "x");
	/* the whole identity is recorded, under the record's MAC (v3), for the
	 * controller to ask about again if the pod comes late */
	CU_ASSERT_EQUAL(strncmp(cJSON_GetObjectItem(ann, SBX_ANN_OWNER_AUTHZ)->valuestring, "v3.", 3), 0);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_AUTHZ_IDENTITY)->valuestring,
			       "{\"groups\":[\"system:authenticated\"],\"username\":\"alice\"}");
	char *stamped = cJSON_PrintUnformatted(obj);
	struct wh_verdict vv;
	decide(&p, 0, "CREATE", "alice", stamped, NULL, &vv);
	CU_ASSERT_TRUE(vv.allowed);
	wh_verdict_release(&vv);
	/* the same username in other groups is another identity: refused */
	review_groups = "[\"system:authenticated\",\"system:masters\"]";
	decide(&p, 0, "CREATE", "alice", stamped, NULL, &vv);
	review_groups = "[\"system:authenticated\"]";
	CU_ASSERT_FALSE(vv.allowed);
	CU_ASSERT_EQUAL(vv.code, 403);
	wh_verdict_release(&vv);
	/* the recorded identity changed (a group added): the MAC no longer holds */
	cJSON *forged = cJSON_Duplicate(obj, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(forged, "metadata"), "annotations"),
				  SBX_ANN_AUTHZ_IDENTITY,
				  cJSON_CreateString("{\"groups\":[\"system:masters\"],\"username\":\"alice\"}"));
	char *forged_s = cJSON_PrintUnformatted(forged);
	review_groups = "[\"system:masters\"]";
	decide(&p, 0, "CREATE", "alice", forged_s, NULL, &vv);
	review_groups = "[\"system:authenticated\"]";
	CU_ASSERT_FALSE(vv.allowed);
	wh_verdict_release(&vv);
	free(forged_s);
	cJSON_Delete(forged);
	/* bob replays alice's stamped object under his own identity: refused */
	decide(&p, 0, "CREATE", "bob", stamped, NULL, &vv);
	CU_ASSERT_FALSE(vv.allowed);
	CU_ASSERT_EQUAL(vv.code, 403);
	wh_verdict_release(&vv);
	/* alice's record on another spec (bob copies it onto his own image) */
	cJSON_ReplaceItemInObject(obj, "spec", cJSON_Parse(SPEC_ALICE2));
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(obj, "metadata"), "labels");
	char *copied = cJSON_PrintUnformatted(obj);
	decide(&p, 0, "CREATE", "alice", copied, NULL, &vv);
	CU_ASSERT_FALSE(vv.allowed);
	CU_ASSERT_PTR_NOT_NULL(strstr(vv.message, "not issued for this Sandbox"));
	wh_verdict_release(&vv);
	free(copied);
	free(stamped);
	free(resp);
	cJSON_Delete(obj);
	cJSON_Delete(patch);
	wh_verdict_release(&v);
}

/* Allow profiles (contract section 9): a profile the requester may not
 * use, or that does not exist, is refused naming it; one it may use is
 * recorded, and the record binds the spec and the requester. */
static void test_profiles(void)
{
	struct fake f = { .sar_answer = 1, .profiles_usable = ",web,gone,", .profiles_existing = ",web,secret," };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	decide(&p, 1, "CREATE", "bob",
	       "{\"metadata\":{\"name\":\"s1\"},\"spec\":{\"image\":\"i\",\"network\":{\"profiles\":[\"web\",\"secret\"]}}}",
	       NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "may not use network profile \"secret\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "sandboxnetworkprofiles"));
	wh_verdict_release(&v);
	decide(&p, 1, "CREATE", "bob",
	       "{\"metadata\":{\"name\":\"s1\"},\"spec\":{\"image\":\"i\",\"network\":{\"profiles\":[\"gone\"]}}}", NULL,
	       &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "network profile \"gone\" does not exist"));
	wh_verdict_release(&v);
	/* who may not use a profile learns nothing of whether it exists */
	decide(&p, 1, "CREATE", "bob",
	       "{\"metadata\":{\"name\":\"s1\"},\"spec\":{\"image\":\"i\",\"network\":{\"profiles\":[\"nope\"]}}}", NULL,
	       &v);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "may not use network profile \"nope\""));
	wh_verdict_release(&v);
	/* no owner, a generateName: named, stamped, validated */
	const char *obj_s = "{\"metadata\":{\"generateName\":\"w-\",\"namespace\":\"team-a\"},\"spec\":{\"image\":\"i\","
			    "\"network\":{\"profiles\":[\"web\"]}}}";
	decide(&p, 1, "CREATE", "bob", obj_s, NULL, &v);
	CU_ASSERT_TRUE_FATAL(v.allowed);
	char *resp = wh_response_encode("req-1", &v);
	cJSON *patch = decode_patch(resp);
	cJSON *obj = cJSON_Parse(obj_s);
	apply_patch(obj, patch);
	const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "annotations");
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(ann, SBX_ANN_NET_AUTHZ));
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "name"));
	/* the requester's whole identity, under the record's MAC, for a pod that comes late */
	CU_ASSERT_EQUAL(strncmp(cJSON_GetObjectItem(ann, SBX_ANN_NET_AUTHZ)->valuestring, "v3.", 3), 0);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_AUTHZ_IDENTITY)->valuestring,
			       "{\"groups\":[\"system:authenticated\"],\"username\":\"bob\"}");
	char *stamped = cJSON_PrintUnformatted(obj);
	struct wh_verdict vv;
	decide(&p, 0, "CREATE", "bob", stamped, NULL, &vv);
	CU_ASSERT_TRUE(vv.allowed);
	wh_verdict_release(&vv);
	review_groups = "[\"system:masters\"]"; /* bob in other groups: another identity */
	decide(&p, 0, "CREATE", "bob", stamped, NULL, &vv);
	review_groups = "[\"system:authenticated\"]";
	CU_ASSERT_FALSE(vv.allowed);
	wh_verdict_release(&vv);
	decide(&p, 0, "CREATE", "alice", stamped, NULL, &vv); /* another requester */
	CU_ASSERT_FALSE(vv.allowed);
	wh_verdict_release(&vv);
	/* the record on another set of profiles */
	cJSON_ReplaceItemInObject(obj, "spec", cJSON_Parse("{\"image\":\"i\",\"network\":{\"profiles\":[\"secret\"]}}"));
	char *copied = cJSON_PrintUnformatted(obj);
	decide(&p, 0, "CREATE", "bob", copied, NULL, &vv);
	CU_ASSERT_FALSE(vv.allowed);
	CU_ASSERT_PTR_NOT_NULL(strstr(vv.message, "not issued for this Sandbox"));
	wh_verdict_release(&vv);
	/* without the mutating webhook's record */
	decide(&p, 0, "CREATE", "bob", obj_s, NULL, &vv);
	CU_ASSERT_FALSE(vv.allowed);
	wh_verdict_release(&vv);
	/* the cache cannot tell yet: fail closed */
	f.profiles_existing = NULL;
	decide(&p, 1, "CREATE", "bob", obj_s, NULL, &vv);
	CU_ASSERT_FALSE(vv.allowed);
	CU_ASSERT_EQUAL(vv.code, 500);
	wh_verdict_release(&vv);
	free(copied);
	free(stamped);
	free(resp);
	cJSON_Delete(obj);
	cJSON_Delete(patch);
	wh_verdict_release(&v);
}

static void test_namespace_mode_skips_review(void)
{
	struct fake f = { .sar_answer = 0 };
	struct wh_sandbox_policy p = policy(&f);
	p.owner_authz = SBX_OWNER_AUTHZ_NAMESPACE;
	struct wh_verdict v;
	decide(&p, 1, "CREATE", "bob", "{\"metadata\":{\"name\":\"s1\"},\"spec\":" SPEC_ALICE "}", NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	CU_ASSERT_EQUAL(f.sar_calls, 0);
	wh_verdict_release(&v);
}

static void test_validate_update_guards(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	const char *old = "{\"metadata\":{\"name\":\"s1\",\"annotations\":{\"sandbox.dev/requested-by\":\"alice\","
			  "\"note\":\"a\"}},\"spec\":" SPEC_ALICE "}";
	/* an ordinary annotation may change */
	decide(&p, 0, "UPDATE", "alice",
	       "{\"metadata\":{\"name\":\"s1\",\"annotations\":{\"sandbox.dev/requested-by\":\"alice\",\"note\":\"b\"}},"
	       "\"spec\":" SPEC_ALICE "}",
	       old, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	/* a reserved one may not change, be added or be removed */
	decide(&p, 0, "UPDATE", "alice",
	       "{\"metadata\":{\"name\":\"s1\",\"annotations\":{\"sandbox.dev/requested-by\":\"bob\"}},"
	       "\"spec\":" SPEC_ALICE "}",
	       old, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	decide(&p, 0, "UPDATE", "alice", "{\"metadata\":{\"name\":\"s1\"},\"spec\":" SPEC_ALICE "}", old, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	decide(&p, 0, "UPDATE", "alice",
	       "{\"metadata\":{\"name\":\"s1\",\"labels\":{\"sandbox.dev/x\":\"1\"},\"annotations\":{"
	       "\"sandbox.dev/requested-by\":\"alice\"}},\"spec\":" SPEC_ALICE "}",
	       old, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* spec changes are refused */
	decide(&p, 0, "UPDATE", "alice",
	       "{\"metadata\":{\"name\":\"s1\",\"annotations\":{\"sandbox.dev/requested-by\":\"alice\",\"note\":\"a\"}},"
	       "\"spec\":" SPEC_ALICE2 "}",
	       old, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 422);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "immutable"));
	wh_verdict_release(&v);
}

/* A stamped object for user/spec, as the mutating step leaves it. */
static char *stamped_object(struct wh_sandbox_policy *p, const char *user, const char *name, const char *spec)
{
	char obj_s[1024];
	snprintf(obj_s, sizeof obj_s, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"team-a\"},\"spec\":%s}", name,
		 spec);
	struct wh_verdict v;
	decide(p, 1, "CREATE", user, obj_s, NULL, &v);
	char *resp = wh_response_encode("r", &v);
	cJSON *patch = decode_patch(resp);
	cJSON *obj = cJSON_Parse(obj_s);
	apply_patch(obj, patch);
	char *out = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	cJSON_Delete(patch);
	free(resp);
	wh_verdict_release(&v);
	return out;
}

static void test_validate_quota_full(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	p.quota_refuses = fake_quota_refuses;
	char *mine = stamped_object(&p, "alice", "alice-second", SPEC_ALICE);
	struct wh_verdict v;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	CU_ASSERT_STRING_EQUAL(f.quota_owner, "alice");
	CU_ASSERT_EQUAL(strlen(f.quota_digest), 32); /* the request's scope: a retry of an intent passes */
	wh_verdict_release(&v);
	f.quota_full = 1;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "exceeded quota: workspace owner alice holds 1 of 1"));
	wh_verdict_release(&v);
	/* counts are told only to the API server */
	decide_authenticated = 0;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	decide_authenticated = 1;
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NULL(strstr(v.message, "1 of 1"));
	wh_verdict_release(&v);
	/* updates (a resume waits in the controller) are not refused */
	decide(&p, 0, "UPDATE", "alice", mine, mine, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	free(mine);
}

static void test_validate_key_conflict(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	/* The cache holds alice-first with the same owner and key, another spec, bound 10 s ago. */
	char *held = stamped_object(&p, "alice", "alice-first", SPEC_ALICE2);
	cJSON *h = cJSON_Parse(held);
	cJSON_AddStringToObject(cJSON_GetObjectItem(h, "metadata"), "namespace", "team-a");
	cJSON *st = cJSON_AddObjectToObject(h, "status");
	cJSON_AddStringToObject(st, "phase", "Running");
	cJSON_AddStringToObject(st, "claimedAt", "1970-01-01T00:16:30Z"); /* 990 */
	cJSON_AddStringToObject(st, "keyExpiresAt", "1970-01-02T00:16:30Z");
	f.cache = cJSON_CreateArray();
	cJSON_AddItemToArray(f.cache, h);
	char *mine = stamped_object(&p, "alice", "alice-second", SPEC_ALICE);
	struct wh_verdict v;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 422);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "team-a/alice-first"));
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "task-43"));
	wh_verdict_release(&v);
	/* the same spec shares the key: allowed */
	char *same = stamped_object(&p, "alice", "alice-third", SPEC_ALICE2);
	decide(&p, 0, "CREATE", "alice", same, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	/* an expired claim no longer holds the key */
	p.key_lifetime_s = 5;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	p.key_lifetime_s = 86400;
	/* a rejected Sandbox holds nothing */
	cJSON_ReplaceItemInObject(st, "phase", cJSON_CreateString("Rejected"));
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	/* another owner with the same key is another scope (the fake ignores the digest: the re-check must not) */
	cJSON_ReplaceItemInObject(st, "phase", cJSON_CreateString("Running"));
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, "spec"), "workspaceOwner", cJSON_CreateString("bob"));
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	free(same);
	free(mine);
	free(held);
	cJSON_Delete(f.cache);
}

/* A generateName create gets its name from the webhook, so the record names
 * the Sandbox itself, not a prefix others may share (issue 15, finding 7). */
static void test_mutate_names_generate_name(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	const char *obj_s = "{\"metadata\":{\"generateName\":\"job-\",\"namespace\":\"team-a\"},\"spec\":" SPEC_ALICE "}";
	decide(&p, 1, "CREATE", "alice", obj_s, NULL, &v);
	CU_ASSERT_TRUE_FATAL(v.allowed);
	char *resp = wh_response_encode("req-1", &v);
	cJSON *patch = decode_patch(resp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(patch);
	cJSON *obj = cJSON_Parse(obj_s);
	apply_patch(obj, patch);
	const cJSON *name = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "name");
	CU_ASSERT_FATAL(cJSON_IsString(name));
	CU_ASSERT_EQUAL(strlen(name->valuestring), 9);
	CU_ASSERT_EQUAL(strncmp(name->valuestring, "job-", 4), 0);
	CU_ASSERT_EQUAL(strspn(name->valuestring + 4, "bcdfghjklmnpqrstvwxz2456789"), 5);
	const char *rec = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "annotations"),
					      SBX_ANN_OWNER_AUTHZ)
			      ->valuestring;
	CU_ASSERT_PTR_NULL(strstr(rec, ".g."));
	char *stamped = cJSON_PrintUnformatted(obj);
	struct wh_verdict vv;
	decide(&p, 0, "CREATE", "alice", stamped, NULL, &vv);
	CU_ASSERT_TRUE(vv.allowed);
	wh_verdict_release(&vv);
	/* the same record on another name of the prefix: not this Sandbox's */
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(obj, "metadata"), "name", cJSON_CreateString("job-zzzzz"));
	char *other = cJSON_PrintUnformatted(obj);
	decide(&p, 0, "CREATE", "alice", other, NULL, &vv);
	CU_ASSERT_FALSE(vv.allowed);
	wh_verdict_release(&vv);
	free(other);
	free(stamped);
	free(resp);
	cJSON_Delete(obj);
	cJSON_Delete(patch);
	wh_verdict_release(&v);
}

/* Only the API server learns who holds a key: a review from a caller the
 * webhook did not authenticate gets the refusal without the holder's name
 * and expiry (issue 15, finding 7). */
static void test_validate_key_conflict_unauthenticated(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	char *held = stamped_object(&p, "alice", "alice-first", SPEC_ALICE2);
	cJSON *h = cJSON_Parse(held);
	cJSON *st = cJSON_AddObjectToObject(h, "status");
	cJSON_AddStringToObject(st, "phase", "Running");
	cJSON_AddStringToObject(st, "claimedAt", "1970-01-01T00:16:30Z");
	cJSON_AddStringToObject(st, "keyExpiresAt", "1970-01-02T00:16:30Z");
	f.cache = cJSON_CreateArray();
	cJSON_AddItemToArray(f.cache, h);
	char *mine = stamped_object(&p, "alice", "alice-second", SPEC_ALICE);
	struct wh_verdict v;
	decide_authenticated = 0;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	decide_authenticated = 1;
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 422);
	CU_ASSERT_PTR_NULL(strstr(v.message, "alice-first"));
	CU_ASSERT_PTR_NULL(strstr(v.message, "1970-01-02"));
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "held by another Sandbox"));
	wh_verdict_release(&v);
	free(mine);
	free(held);
	cJSON_Delete(f.cache);
}

#define SPEC_ALICE_SUSPENDED                                                                                           \
	"{\"image\":\"img:1\",\"idempotencyKey\":\"task-43\",\"workspaceOwner\":\"alice\",\"lifecycle\":{\"suspend\":" \
	"true}}"

/* alice's Sandbox name of spec as the cache holds it: phase, and claimedAt
 * (NULL: not bound yet). */
static cJSON *cached_sandbox(struct wh_sandbox_policy *p, const char *name, const char *spec, const char *phase,
			     const char *claimed)
{
	char *s = stamped_object(p, "alice", name, spec);
	cJSON *h = cJSON_Parse(s);
	free(s);
	cJSON *st = cJSON_AddObjectToObject(h, "status");
	cJSON_AddStringToObject(st, "phase", phase);
	if (claimed)
		cJSON_AddStringToObject(st, "claimedAt", claimed);
	return h;
}

static void connect_as(const struct wh_sandbox_policy *p, const char *user, const char *pod, const char *sub,
		       struct wh_verdict *v);

/* The claim record of generation 0 of alice's spec_s in team-a (sealed
 * with key), claimed at 990, its key living until a day later, state,
 * naming sandbox. A new object. */
static cJSON *claim_record(const char *spec_s, enum sbx_claim_state state, const char *sandbox,
			   const unsigned char *key, size_t keylen)
{
	cJSON *spec = cJSON_Parse(spec_s);
	struct sbx_scope sc;
	char msg[256];
	CU_ASSERT_EQUAL_FATAL(sbx_scope_compute("team-a", "x", spec, &sc, msg, sizeof msg), 0);
	cJSON_Delete(spec);
	struct sbx_claimrec r = { .generation = 0, .has_owner = 1, .state = state };
	sbx_pod_name(&sc, 0, r.name, sizeof r.name);
	snprintf(r.digest, sizeof r.digest, "%s", sc.digest);
	snprintf(r.pod_name, sizeof r.pod_name, "%s", r.name);
	snprintf(r.claimed_at, sizeof r.claimed_at, "1970-01-01T00:16:30Z");
	snprintf(r.key_expires_at, sizeof r.key_expires_at, "1970-01-02T00:16:30Z");
	snprintf(r.fingerprint, sizeof r.fingerprint, "%s", sc.fingerprint);
	snprintf(r.owner, sizeof r.owner, "alice");
	snprintf(r.sandbox, sizeof r.sandbox, "%s", sandbox);
	snprintf(r.since, sizeof r.since, "1970-01-01T00:16:35Z");
	struct sbx_seal_keys k;
	sbx_seal_keys_init(&k);
	CU_ASSERT_EQUAL_FATAL(sbx_seal_keys_add(&k, key, keylen, 32, msg, sizeof msg), 0);
	cJSON *o = sbx_claimrec_build(&r, "team-a", &k, NULL);
	sbx_seal_keys_release(&k);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	return o;
}

/* A key reused with another spec after its holders were deleted: the
 * generation's claim record (Expired, Rejected, Suspended) holds it until
 * the key's lifetime ends, as the controller holds it
 * (Rejected/IdempotencyKeyConflict), so the create is refused with 422
 * naming what holds it (contract section 5). */
static void test_validate_key_conflict_record(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	p.records_by_digest = fake_records_by_digest;
	char *mine = stamped_object(&p, "alice", "alice-second", SPEC_ALICE);
	struct wh_verdict v;
	static const enum sbx_claim_state states[] = { SBX_CLAIM_EXPIRED, SBX_CLAIM_REJECTED, SBX_CLAIM_SUSPENDED };
	for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
		f.records = cJSON_CreateArray();
		cJSON_AddItemToArray(f.records, claim_record(SPEC_ALICE2, states[i], "alice-first", KEY1, sizeof KEY1 - 1));
		decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
		CU_ASSERT_FALSE(v.allowed);
		CU_ASSERT_EQUAL(v.code, 422);
		CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "task-43"));
		CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "alice-first"));
		CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "1970-01-02T00:16:30Z"));
		wh_verdict_release(&v);
		cJSON_Delete(f.records);
	}
	f.records = cJSON_CreateArray();
	cJSON *rec = claim_record(SPEC_ALICE2, SBX_CLAIM_EXPIRED, "alice-first", KEY1, sizeof KEY1 - 1);
	cJSON_AddItemToArray(f.records, rec);
	/* only the API server learns who holds it */
	decide_authenticated = 0;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	decide_authenticated = 1;
	CU_ASSERT_EQUAL(v.code, 422);
	CU_ASSERT_PTR_NULL(strstr(v.message, "alice-first"));
	wh_verdict_release(&v);
	/* the key's lifetime ended: a new intent */
	p.key_lifetime_s = 5;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	p.key_lifetime_s = 86400;
	/* the same spec: no conflict (the controller's stored outcome) */
	char *same = stamped_object(&p, "alice", "alice-third", SPEC_ALICE2);
	decide(&p, 0, "CREATE", "alice", same, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	/* a record this controller did not seal counts for nothing */
	cJSON_Delete(f.records);
	f.records = cJSON_CreateArray();
	cJSON_AddItemToArray(f.records, claim_record(SPEC_ALICE2, SBX_CLAIM_EXPIRED, "alice-first", KEY2, sizeof KEY2 - 1));
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	/* nor does one of another namespace */
	cJSON_Delete(f.records);
	f.records = cJSON_CreateArray();
	rec = claim_record(SPEC_ALICE2, SBX_CLAIM_EXPIRED, "alice-first", KEY1, sizeof KEY1 - 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(rec, "metadata"), "namespace", cJSON_CreateString("team-b"));
	cJSON_AddItemToArray(f.records, rec);
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	cJSON_Delete(f.records);
	free(same);
	free(mine);
}

/* The quota's early refusal and the records: an intent whose generation is
 * recorded Expired gets the stored outcome from the controller (no pod, no
 * slot), so it is not refused for the quota; one recorded Rejected is the
 * quota's stored refusal and stays refused. */
static void test_validate_quota_record_generation(void)
{
	struct fake f = { .sar_answer = 1, .quota_full = 1 };
	struct wh_sandbox_policy p = policy(&f);
	p.quota_refuses = fake_quota_refuses;
	p.records_by_digest = fake_records_by_digest;
	char *mine = stamped_object(&p, "alice", "alice-second", SPEC_ALICE);
	struct wh_verdict v;
	f.records = cJSON_CreateArray();
	cJSON_AddItemToArray(f.records, claim_record(SPEC_ALICE, SBX_CLAIM_EXPIRED, "alice-first", KEY1, sizeof KEY1 - 1));
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	cJSON_Delete(f.records);
	f.records = cJSON_CreateArray();
	cJSON_AddItemToArray(f.records, claim_record(SPEC_ALICE, SBX_CLAIM_REJECTED, "alice-first", KEY1, sizeof KEY1 - 1));
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	wh_verdict_release(&v);
	cJSON_Delete(f.records);
	f.records = NULL;
	free(mine);
}

/* Contract section 2a: an owner is allowed only as the API server answers
 * for the workspaces named X. An authorizer may deny a name that the
 * unnamed question allows; asking about every owner first is an option
 * (admission.askEveryNameFirst), off by default. */
static void test_owner_review_by_name(void)
{
	struct fake f = { .sar_answer = 1, .pod_owner = "ceo" };
	struct wh_sandbox_policy p = policy(&f);
	p.may_use_owner = fake_may_use_by_name;
	const char *ceo = "{\"metadata\":{\"name\":\"s1\",\"namespace\":\"team-a\"},\"spec\":{\"image\":\"i\","
			  "\"workspaceOwner\":\"ceo\"}}";
	struct wh_verdict v;
	decide(&p, 1, "CREATE", "bob", ceo, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "\"ceo\""));
	wh_verdict_release(&v);
	CU_ASSERT_EQUAL(f.unnamed_calls, 0);
	connect_as(&p, "bob", "sbx-0123", "exec", &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	CU_ASSERT_EQUAL(f.unnamed_calls, 0);
	/* the option on: one unnamed yes covers every owner */
	p.ask_every_name_first = 1;
	f.sar_calls = 0;
	decide(&p, 1, "CREATE", "bob", ceo, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	connect_as(&p, "bob", "sbx-0123", "exec", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	CU_ASSERT_EQUAL(f.unnamed_calls, 2);
	CU_ASSERT_EQUAL(f.sar_calls, 0);
}

/* The early quota refusal is for a new intent that would take a slot now
 * (contract sections 5a and 10): a Sandbox created suspended takes none,
 * and one whose intent already has a generation joins it (a resume waits
 * for a slot in either mode; retries count once). */
static void test_validate_quota_spares_joiners(void)
{
	struct fake f = { .sar_answer = 1, .quota_full = 1 };
	struct wh_sandbox_policy p = policy(&f);
	p.quota_refuses = fake_quota_refuses;
	struct wh_verdict v;
	/* (A) created suspended: no pod, no slot */
	char *susp = stamped_object(&p, "alice", "alice-later", SPEC_ALICE_SUSPENDED);
	decide(&p, 0, "CREATE", "alice", susp, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	/* (B) alice-first holds the intent's generation, suspended (its slot
	 * freed, taken since by another intent): alice-second joins it */
	f.cache = cJSON_CreateArray();
	cJSON *first = cached_sandbox(&p, "alice-first", SPEC_ALICE, "Suspended", "1970-01-01T00:16:30Z");
	cJSON_AddItemToArray(f.cache, first);
	char *mine = stamped_object(&p, "alice", "alice-second", SPEC_ALICE);
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	/* the generation's key has ended: a new intent, refused */
	p.key_lifetime_s = 5;
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	wh_verdict_release(&v);
	p.key_lifetime_s = 86400;
	/* a rejected Sandbox holds no generation */
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(first, "status"), "phase", cJSON_CreateString("Rejected"));
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* nor does one of another owner (the fake ignores the digest) */
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(first, "status"), "phase", cJSON_CreateString("Suspended"));
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(first, "spec"), "workspaceOwner", cJSON_CreateString("bob"));
	decide(&p, 0, "CREATE", "alice", mine, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "exceeded quota"));
	wh_verdict_release(&v);
	free(mine);
	free(susp);
	cJSON_Delete(f.cache);
}

/* A CONNECT review of pod subresource sub for user, as the API server sends it. */
static void connect_as(const struct wh_sandbox_policy *p, const char *user, const char *pod, const char *sub,
		       struct wh_verdict *v)
{
	char b[1024];
	snprintf(b, sizeof b,
		 "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"c-1\","
		 "\"operation\":\"CONNECT\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"PodExecOptions\"},"
		 "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},\"subResource\":\"%s\","
		 "\"namespace\":\"team-a\",\"name\":\"%s\",\"userInfo\":{\"username\":\"%s\"},"
		 "\"object\":{\"kind\":\"PodExecOptions\",\"command\":[\"sh\"]}}}",
		 sub, pod, user);
	struct wh_review r;
	char err[256];
	CU_ASSERT_EQUAL_FATAL(wh_review_decode(b, strlen(b), &r, err, sizeof err), 0);
	wh_pod_connect(p, &r, 1000, v);
	wh_review_release(&r);
}

/* The exec gate: a sandbox pod with an owner only for those who may use it. */
static void test_pod_connect_gate(void)
{
	struct fake f = { .sar_answer = 0, .pod_owner = "alice" };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	static const char *const subs[] = { "exec", "attach", "portforward", "proxy" };
	for (size_t i = 0; i < 4; i++) {
		connect_as(&p, "bob", "sbx-0123", subs[i], &v);
		CU_ASSERT_FALSE(v.allowed);
		CU_ASSERT_EQUAL(v.code, 403);
		CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "\"alice\""));
		CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "\"use\" on workspaces.sandbox.dev"));
		CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "bob"));
		wh_verdict_release(&v);
	}
	CU_ASSERT_STRING_EQUAL(f.last_owner, "alice");
	/* pods/proxy names "[scheme:]pod[:port]": the pod is what is gated */
	static const char *const proxied[] = { "sbx-0123:8080", "https:sbx-0123:443", "http:sbx-0123:" };
	for (size_t i = 0; i < 3; i++) {
		connect_as(&p, "bob", proxied[i], "proxy", &v);
		CU_ASSERT_FALSE(v.allowed);
		CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "may not proxy to sandbox pod sbx-0123 "));
		wh_verdict_release(&v);
	}
	connect_as(&p, "bob", "a:sbx-0123:1:2", "proxy", &v); /* not a name the API server accepts */
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	f.sar_answer = 1;
	connect_as(&p, "alice", "https:sbx-0123:443", "proxy", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	connect_as(&p, "alice", "sbx-0123", "exec", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	/* fail closed for sandbox pods: the authorizer or the pod cannot be read */
	f.sar_answer = -1;
	connect_as(&p, "alice", "sbx-0123", "exec", &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 500);
	wh_verdict_release(&v);
	f.sar_answer = 0;
	f.pod_error = 1;
	connect_as(&p, "alice", "sbx-0123", "exec", &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* an sbx- pod the controller does not know: refused, never asked about */
	f.pod_error = 2;
	int asked = f.sar_calls;
	connect_as(&p, "alice", "sbx-invented", "proxy", &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 404);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "sbx-invented is not known"));
	CU_ASSERT_EQUAL(f.sar_calls, asked);
	wh_verdict_release(&v);
	f.pod_error = 0;
	/* no owner, no such pod, not a sandbox pod, another subresource: not gated */
	f.pod_owner = "";
	connect_as(&p, "bob", "sbx-0123", "exec", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	f.pod_owner = NULL;
	connect_as(&p, "bob", "sbx-0123", "exec", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	f.pod_owner = "alice";
	int reads = f.pod_reads, calls = f.sar_calls;
	connect_as(&p, "bob", "web-1", "exec", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	connect_as(&p, "bob", "https:web-1:443", "proxy", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	connect_as(&p, "bob", "sbx-0123", "log", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	CU_ASSERT_EQUAL(f.pod_reads, reads);
	CU_ASSERT_EQUAL(f.sar_calls, calls);
	/* namespace mode: RBAC alone decides */
	p.owner_authz = SBX_OWNER_AUTHZ_NAMESPACE;
	connect_as(&p, "bob", "sbx-0123", "exec", &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
}

/* alice's Sandbox of spec as stored, suspended at generation 2 (new). */
static cJSON *suspended_sandbox(struct wh_sandbox_policy *p, const char *spec)
{
	char *stamped = stamped_object(p, "alice", "s1", spec);
	cJSON *old = cJSON_Parse(stamped);
	free(stamped);
	cJSON_AddNumberToObject(cJSON_GetObjectItem(old, "metadata"), "generation", 2);
	cJSON_AddItemToObject(cJSON_GetObjectItem(old, "spec"), "lifecycle", cJSON_Parse("{\"suspend\":true}"));
	return old;
}

/* A resume names the Sandbox's network profiles anew (contract sections 5a
 * and 9): a resumer who may not use one of them is refused at the mutating
 * step, with or without a workspace owner; one who may use them resumes,
 * also when a profile was deleted since (the controller waits for it). */
static void resume_with_profiles(const char *spec, const char *resumer)
{
	struct fake f = { .sar_answer = 1, .profiles_usable = ",web,", .profiles_existing = ",web," };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	cJSON *old = suspended_sandbox(&p, spec);
	char *old_s = cJSON_PrintUnformatted(old);
	cJSON *upd = cJSON_Duplicate(old, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle", cJSON_Parse("{\"suspend\":false}"));
	char *upd_s = cJSON_PrintUnformatted(upd);
	/* the resumer lost use on web */
	f.profiles_usable = "";
	decide(&p, 1, "UPDATE", resumer, upd_s, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "may not use network profile \"web\" to resume this Sandbox"));
	wh_verdict_release(&v);
	/* may use it: the resume goes on, also when web was deleted since (the
	 * controller waits for it: NetworkProfileNotFound) */
	f.profiles_usable = ",web,";
	decide(&p, 1, "UPDATE", resumer, upd_s, old_s, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	f.profiles_existing = "";
	decide(&p, 1, "UPDATE", resumer, upd_s, old_s, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	free(upd_s);
	free(old_s);
	cJSON_Delete(upd);
	cJSON_Delete(old);
}

static void test_resume_profiles(void)
{
	resume_with_profiles("{\"image\":\"img:1\",\"workspaceOwner\":\"alice\",\"network\":{\"profiles\":[\"web\"]}}",
			     "alice");
	resume_with_profiles("{\"image\":\"img:1\",\"network\":{\"profiles\":[\"web\"]}}", "bob");
}

/* upd, stamped by the mutating webhook for resumer's resume of a Sandbox
 * suspended at generation 2: validation passes the stamps as resumer's at
 * generation 3 (the API server bumps the generation before validating
 * admission), and refuses them as other's and at generation 4. Leaves
 * upd's generation at 4. */
static void resume_stamps_hold(const struct wh_sandbox_policy *p, cJSON *upd, const char *old_s, const char *resumer,
			       const char *other)
{
	struct wh_verdict v;
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "metadata"), "generation", cJSON_CreateNumber(3));
	char *upd_s = cJSON_PrintUnformatted(upd);
	decide(p, 0, "UPDATE", resumer, upd_s, old_s, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	decide(p, 0, "UPDATE", other, upd_s, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	free(upd_s);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "metadata"), "generation", cJSON_CreateNumber(4));
	upd_s = cJSON_PrintUnformatted(upd);
	decide(p, 0, "UPDATE", resumer, upd_s, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	free(upd_s);
}

/* The resume of a Sandbox whose owner record does not cover it (no owner)
 * but that names profiles: the profiles' record is made anew for the run,
 * issued to the resumer, and validation holds the resume to it. */
static void test_resume_profiles_record(void)
{
	struct fake f = { .sar_answer = 1, .profiles_usable = ",web,", .profiles_existing = ",web," };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	cJSON *old = suspended_sandbox(&p, "{\"image\":\"img:1\",\"network\":{\"profiles\":[\"web\"]}}");
	char *old_s = cJSON_PrintUnformatted(old);
	const char *created = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(old, "metadata"), "annotations"),
						  SBX_ANN_NET_AUTHZ)
				  ->valuestring;
	CU_ASSERT_EQUAL(strncmp(created, "v3.1000.1.", 10), 0);
	cJSON *upd = cJSON_Duplicate(old, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle", cJSON_Parse("{\"suspend\":false}"));
	char *upd_s = cJSON_PrintUnformatted(upd);
	/* without a record of this run, validation refuses the resume */
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "metadata"), "generation", cJSON_CreateNumber(3));
	char *unstamped = cJSON_PrintUnformatted(upd);
	decide(&p, 0, "UPDATE", "bob", unstamped, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(v.message ? strstr(v.message, "network profiles") : NULL);
	wh_verdict_release(&v);
	/* bob resumes: a record of run 3, issued to bob, with his identity */
	decide(&p, 1, "UPDATE", "bob", upd_s, old_s, &v);
	CU_ASSERT_TRUE_FATAL(v.allowed);
	char *resp = wh_response_encode("r", &v);
	cJSON *patch = decode_patch(resp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(patch);
	apply_patch(upd, patch);
	wh_verdict_release(&v);
	const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(upd, "metadata"), "annotations");
	CU_ASSERT_EQUAL(strncmp(cJSON_GetObjectItem(ann, SBX_ANN_NET_AUTHZ)->valuestring, "v3.1000.3.", 10), 0);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_RESUMED_BY)->valuestring, "bob");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_RESUMED_IDENTITY)->valuestring,
			       "{\"groups\":[\"system:authenticated\"],\"username\":\"bob\"}");
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(ann, SBX_ANN_OWNER_AUTHZ));
	/* the stamps pass validation as bob's, at the generation they name;
	 * not as carol's, nor at a later generation */
	resume_stamps_hold(&p, upd, old_s, "bob", "carol");
	free(upd_s);
	free(unstamped);
	free(resp);
	cJSON_Delete(patch);
	cJSON_Delete(upd);
	free(old_s);
	cJSON_Delete(old);

	/* With an owner, the owner's record covers the resume: the profiles'
	 * record of the creation stays, and one put in its place is refused. */
	old = suspended_sandbox(&p, "{\"image\":\"img:1\",\"workspaceOwner\":\"alice\",\"network\":{\"profiles\":[\"web\"]}}");
	old_s = cJSON_PrintUnformatted(old);
	upd = cJSON_Duplicate(old, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle", cJSON_Parse("{\"suspend\":false}"));
	upd_s = cJSON_PrintUnformatted(upd);
	decide(&p, 1, "UPDATE", "alice", upd_s, old_s, &v);
	CU_ASSERT_TRUE_FATAL(v.allowed);
	resp = wh_response_encode("r", &v);
	patch = decode_patch(resp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(patch);
	char *patch_s = cJSON_PrintUnformatted(patch);
	CU_ASSERT_PTR_NULL(strstr(patch_s, "network-authorization"));
	apply_patch(upd, patch);
	wh_verdict_release(&v);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "metadata"), "generation", cJSON_CreateNumber(3));
	cJSON *meta_ann = cJSON_GetObjectItem(cJSON_GetObjectItem(upd, "metadata"), "annotations");
	cJSON_ReplaceItemInObject(meta_ann, SBX_ANN_NET_AUTHZ, cJSON_CreateString("v3.1000.3.00"));
	free(upd_s);
	upd_s = cJSON_PrintUnformatted(upd);
	decide(&p, 0, "UPDATE", "alice", upd_s, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	free(patch_s);
	free(upd_s);
	free(resp);
	cJSON_Delete(patch);
	cJSON_Delete(upd);
	free(old_s);
	cJSON_Delete(old);
}

/* resumer's resume of the suspended Sandbox of spec, sent without
 * metadata.annotations (and, with no_labels, without metadata.labels): a
 * merge patch setting annotations null, or a server-side apply of a
 * manifest that carries none. Applied in order, the patch must leave both
 * the resume's stamps (record_key of run 3, resumed-by, resumed-identity)
 * and the reserved entries of the creation put back, and the result must
 * validate as resumer's. */
static void resume_unannotated(const char *spec, const char *resumer, const char *record_key, const char *other,
			       int no_labels)
{
	struct fake f = { .sar_answer = 1, .profiles_usable = ",web,", .profiles_existing = ",web," };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	cJSON *old = suspended_sandbox(&p, spec);
	char *old_s = cJSON_PrintUnformatted(old);
	const cJSON *old_meta = cJSON_GetObjectItem(old, "metadata");
	const cJSON *old_ann = cJSON_GetObjectItem(old_meta, "annotations");
	cJSON *upd = cJSON_Duplicate(old, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle", cJSON_Parse("{\"suspend\":false}"));
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(upd, "metadata"), "annotations");
	if (no_labels)
		cJSON_DeleteItemFromObject(cJSON_GetObjectItem(upd, "metadata"), "labels");
	char *upd_s = cJSON_PrintUnformatted(upd);
	decide(&p, 1, "UPDATE", resumer, upd_s, old_s, &v);
	CU_ASSERT_TRUE_FATAL(v.allowed);
	char *resp = wh_response_encode("r", &v);
	cJSON *patch = decode_patch(resp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(patch);
	apply_patch(upd, patch);
	wh_verdict_release(&v);
	const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(upd, "metadata"), "annotations");
	const cJSON *rec = cJSON_GetObjectItem(ann, record_key), *by = cJSON_GetObjectItem(ann, SBX_ANN_RESUMED_BY);
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(ann, SBX_ANN_RESUMED_IDENTITY));
	CU_ASSERT_TRUE(cJSON_IsString(rec) && !strncmp(rec->valuestring, "v3.1000.3.", 10));
	CU_ASSERT_TRUE(cJSON_IsString(by) && !strcmp(by->valuestring, resumer));
	/* the creation's reserved entries are back, as they were */
	static const char *const kept[] = { SBX_ANN_REQUESTED_BY, SBX_ANN_AUTHZ_IDENTITY, NULL };
	for (const char *const *k = kept; *k; k++) {
		const cJSON *was = cJSON_GetObjectItem(old_ann, *k), *now = cJSON_GetObjectItem(ann, *k);
		CU_ASSERT_TRUE(cJSON_IsString(was) && cJSON_IsString(now) && !strcmp(was->valuestring, now->valuestring));
	}
	const cJSON *lab = cJSON_GetObjectItem(cJSON_GetObjectItem(upd, "metadata"), "labels");
	const cJSON *old_lab = cJSON_GetObjectItem(old_meta, "labels");
	CU_ASSERT_TRUE((!lab && !old_lab) || cJSON_Compare(old_lab, lab, 1));
	resume_stamps_hold(&p, upd, old_s, resumer, other);
	free(resp);
	cJSON_Delete(patch);
	free(upd_s);
	cJSON_Delete(upd);
	free(old_s);
	cJSON_Delete(old);
}

/* A resume that drops all annotations (and labels) is stamped and put
 * back in one patch: the owner's record, and for a Sandbox without an
 * owner that names profiles, the profiles'. */
static void test_resume_unannotated(void)
{
	resume_unannotated(SPEC_ALICE, "alice", SBX_ANN_OWNER_AUTHZ, "bob", 0);
	resume_unannotated(SPEC_ALICE, "alice", SBX_ANN_OWNER_AUTHZ, "bob", 1);
	resume_unannotated("{\"image\":\"img:1\",\"network\":{\"profiles\":[\"web\"]}}", "bob", SBX_ANN_NET_AUTHZ,
			   "carol", 0);
}

/* UPDATEs (contract sections 2 and 5a): only spec.lifecycle changes; a resume
 * is authorized anew and stamped with a record of the new run; Expired is
 * final. */
static void test_update_lifecycle(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	cJSON *old = suspended_sandbox(&p, SPEC_ALICE);
	char *old_s = cJSON_PrintUnformatted(old);
	/* a lifecycle change, and an invalid one */
	cJSON *upd = cJSON_Duplicate(old, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle",
				  cJSON_Parse("{\"suspend\":true,\"shutdownTime\":\"1970-01-01T01:00:00Z\"}"));
	char *upd_s = cJSON_PrintUnformatted(upd);
	decide(&p, 0, "UPDATE", "alice", upd_s, old_s, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	free(upd_s);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle", cJSON_Parse("{\"shutdownPolicy\":\"Never\"}"));
	upd_s = cJSON_PrintUnformatted(upd);
	decide(&p, 0, "UPDATE", "alice", upd_s, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 422);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "shutdownPolicy"));
	wh_verdict_release(&v);
	free(upd_s);
	/* anything else of spec: refused */
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle", cJSON_Parse("{\"suspend\":true}"));
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "image", cJSON_CreateString("evil:1"));
	upd_s = cJSON_PrintUnformatted(upd);
	decide(&p, 0, "UPDATE", "alice", upd_s, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "immutable"));
	wh_verdict_release(&v);
	free(upd_s);
	cJSON_Delete(upd);

	/* a resume by bob, who may not use alice: refused at the mutating step */
	upd = cJSON_Duplicate(old, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle", cJSON_Parse("{\"suspend\":false}"));
	upd_s = cJSON_PrintUnformatted(upd);
	f.sar_answer = 0;
	decide(&p, 1, "UPDATE", "bob", upd_s, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "to resume this Sandbox"));
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "workspaces.sandbox.dev"));
	wh_verdict_release(&v);
	/* without a new record, validation refuses the resume */
	decide(&p, 0, "UPDATE", "alice", upd_s, old_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* alice may: a record of run 3 (the old generation + 1) and resumed-by */
	f.sar_answer = 1;
	decide(&p, 1, "UPDATE", "alice", upd_s, old_s, &v);
	CU_ASSERT_TRUE_FATAL(v.allowed);
	char *resp = wh_response_encode("r", &v);
	cJSON *patch = decode_patch(resp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(patch);
	apply_patch(upd, patch);
	const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(upd, "metadata"), "annotations");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_RESUMED_BY)->valuestring, "alice");
	CU_ASSERT_EQUAL(strncmp(cJSON_GetObjectItem(ann, SBX_ANN_OWNER_AUTHZ)->valuestring, "v3.1000.3.", 10), 0);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_RESUMED_IDENTITY)->valuestring,
			       "{\"groups\":[\"system:authenticated\"],\"username\":\"alice\"}");
	wh_verdict_release(&v);
	/* the stamps pass validation as alice's, at generation 3; the same
	 * stamps are not bob's, nor a later generation's */
	resume_stamps_hold(&p, upd, old_s, "alice", "bob");
	free(upd_s);
	cJSON_Delete(upd);
	cJSON_Delete(patch);
	free(resp);

	/* Expired is final: no lifecycle change once the old shutdownTime is reached (decide's now is 1000) */
	cJSON *exp = cJSON_Duplicate(old, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(exp, "spec"), "lifecycle",
				  cJSON_Parse("{\"shutdownTime\":\"1970-01-01T00:10:00Z\"}"));
	char *exp_s = cJSON_PrintUnformatted(exp);
	upd = cJSON_Duplicate(exp, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "lifecycle",
				  cJSON_Parse("{\"shutdownTime\":\"1970-01-02T00:00:00Z\"}"));
	upd_s = cJSON_PrintUnformatted(upd);
	decide(&p, 0, "UPDATE", "alice", upd_s, exp_s, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "expired at 1970-01-01T00:10:00Z"));
	wh_verdict_release(&v);
	free(upd_s);
	free(exp_s);
	cJSON_Delete(upd);
	cJSON_Delete(exp);
	free(old_s);
	cJSON_Delete(old);
}

/* ---- SandboxWarmPool decisions ---- */

/* decide for a SandboxWarmPool review. */
static void decide_pool(const struct wh_sandbox_policy *p, int mutate, const char *op, const char *user,
			const char *object, const char *old, struct wh_verdict *v)
{
	char *b = review_json(op, user, object, old), *k;
	/* the same review, of another kind and resource */
	size_t n = strlen(b) + 64;
	char *c = malloc(n);
	k = strstr(b, "\"kind\":\"Sandbox\"},\"resource\":{\"group\":\"sandbox.dev\",\"resource\":\"sandboxes\"}");
	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	snprintf(c, n, "%.*s\"kind\":\"SandboxWarmPool\"},\"resource\":{\"group\":\"sandbox.dev\",\"resource\":"
		       "\"sandboxwarmpools\"}%s",
		 (int)(k - b), b, k + strlen("\"kind\":\"Sandbox\"},\"resource\":{\"group\":\"sandbox.dev\",\"resource\":\"sandboxes\"}"));
	struct wh_review r;
	char err[256];
	CU_ASSERT_EQUAL_FATAL(wh_review_decode(c, strlen(c), &r, err, sizeof err), 0);
	r.authenticated = 1;
	(mutate ? wh_sandbox_mutate : wh_sandbox_validate)(p, &r, 1000, v);
	wh_review_release(&r);
	free(c);
	free(b);
}

#define POOL_ALICE "{\"metadata\":{\"name\":\"pool-a\",\"namespace\":\"team-a\"%s},\"spec\":{\"replicas\":%d,\"workspaceOwner\":\"alice\",\"template\":{\"image\":\"%s\"}}}"

/* The pool as the mutating step leaves it for user, or NULL (refused). */
static cJSON *stamped_pool(const struct wh_sandbox_policy *p, const char *op, const char *user, const char *obj_s,
			   const char *old_s)
{
	struct wh_verdict v;
	decide_pool(p, 1, op, user, obj_s, old_s, &v);
	if (!v.allowed) {
		wh_verdict_release(&v);
		return NULL;
	}
	cJSON *obj = cJSON_Parse(obj_s);
	if (v.patch) {
		char *resp = wh_response_encode("r", &v);
		cJSON *patch = decode_patch(resp);
		apply_patch(obj, patch);
		cJSON_Delete(patch);
		free(resp);
	}
	wh_verdict_release(&v);
	return obj;
}

/* 1 when validation refuses alice's CREATE of pool with obj[a][b][key] set
 * to value (a copied or altered stamp). */
static int pool_refused_with(const struct wh_sandbox_policy *p, const cJSON *pool, const char *a, const char *b,
			     const char *key, const char *value)
{
	struct wh_verdict v;
	cJSON *copy = cJSON_Duplicate(pool, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(copy, a), b), key, cJSON_CreateString(value));
	char *copy_s = cJSON_PrintUnformatted(copy);
	decide_pool(p, 0, "CREATE", "alice", copy_s, NULL, &v);
	int refused = !v.allowed;
	wh_verdict_release(&v);
	free(copy_s);
	cJSON_Delete(copy);
	return refused;
}

/* A change of replicas alone to the stored pool (its stamps omitted, as an
 * apply may): user needs no right, *calls (a fake's count of reviews) does
 * not grow, stamp `key` is kept as rec, and the update validates. */
static void pool_scale_keeps(const struct wh_sandbox_policy *p, const cJSON *pool, const char *stored,
			     const char *user, const int *calls, const char *key, const char *rec)
{
	struct wh_verdict v;
	int before = *calls;
	cJSON *upd = cJSON_Duplicate(pool, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "replicas", cJSON_CreateNumber(5));
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(upd, "metadata"), "annotations");
	char *upd_s = cJSON_PrintUnformatted(upd);
	cJSON *kept = stamped_pool(p, "UPDATE", user, upd_s, stored);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kept);
	CU_ASSERT_EQUAL(*calls, before);
	const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(kept, "metadata"), "annotations");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, key)->valuestring, rec);
	char *kept_s = cJSON_PrintUnformatted(kept);
	decide_pool(p, 0, "UPDATE", user, kept_s, stored, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	free(kept_s);
	cJSON_Delete(kept);
	free(upd_s);
	cJSON_Delete(upd);
}

/* The stored pool with its template's member `member` set to value (taken):
 * a new object (caller frees). Refused for user at the mutating step (for
 * this pool's warm pods) and at validation with the old stamps. */
static cJSON *pool_change_refused(const struct wh_sandbox_policy *p, const cJSON *pool, const char *stored,
				  const char *user, const char *member, cJSON *value)
{
	struct wh_verdict v;
	cJSON *upd = cJSON_Duplicate(pool, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(upd, "spec"), "template"), member, value);
	char *upd_s = cJSON_PrintUnformatted(upd);
	decide_pool(p, 1, "UPDATE", user, upd_s, stored, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NOT_NULL(v.message ? strstr(v.message, "for this pool's warm pods") : NULL);
	wh_verdict_release(&v);
	decide_pool(p, 0, "UPDATE", user, upd_s, stored, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	free(upd_s);
	return upd;
}

static void test_pool_admission(void)
{
	struct fake f = { .sar_answer = 0 };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	char obj_s[1024], old_s[1024];
	snprintf(obj_s, sizeof obj_s, POOL_ALICE, "", 2, "img:1");
	/* bob may not use alice: the pool is refused, naming owner and permission */
	decide_pool(&p, 1, "CREATE", "bob", obj_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "\"use\" on workspaces.sandbox.dev \"alice\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "for a warm pool"));
	wh_verdict_release(&v);
	/* and without stamps validation refuses it too */
	decide_pool(&p, 0, "CREATE", "bob", obj_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* alice may: stamped, and the stamps validate for alice only */
	f.sar_answer = 1;
	cJSON *pool = stamped_pool(&p, "CREATE", "alice", obj_s, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pool);
	const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(pool, "metadata"), "annotations");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_REQUESTED_BY)->valuestring, "alice");
	const char *rec = cJSON_GetObjectItem(ann, SBX_ANN_OWNER_AUTHZ)->valuestring;
	CU_ASSERT_EQUAL(strncmp(rec, "v3.1000.1.", 10), 0);
	/* the whole identity, recorded for the controller to ask about again */
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ann, SBX_ANN_AUTHZ_IDENTITY)->valuestring,
			       "{\"groups\":[\"system:authenticated\"],\"username\":\"alice\"}");
	char *stamped = cJSON_PrintUnformatted(pool);
	decide_pool(&p, 0, "CREATE", "alice", stamped, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	decide_pool(&p, 0, "CREATE", "bob", stamped, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* another identity recorded (groups added): refused, the record covers it */
	CU_ASSERT_TRUE(pool_refused_with(&p, pool, "metadata", "annotations", SBX_ANN_AUTHZ_IDENTITY,
					 "{\"groups\":[\"system:masters\"],\"username\":\"alice\"}"));
	/* a pool's record never passes for a Sandbox of the pool's name and spec */
	char sbx_s[1200];
	snprintf(sbx_s, sizeof sbx_s,
		 "{\"metadata\":{\"name\":\"pool-a\",\"namespace\":\"team-a\",\"annotations\":{\"%s\":\"alice\",\"%s\":\"%s\"}},"
		 "\"spec\":{\"image\":\"img:1\",\"workspaceOwner\":\"alice\"}}",
		 SBX_ANN_REQUESTED_BY, SBX_ANN_OWNER_AUTHZ, rec);
	decide(&p, 0, "CREATE", "alice", sbx_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* the stamps on another template (a copied record): refused */
	CU_ASSERT_TRUE(pool_refused_with(&p, pool, "spec", "template", "image", "evil:1"));
	/* reserved metadata of the requester's own: refused at once */
	snprintf(old_s, sizeof old_s, POOL_ALICE, ",\"labels\":{\"sandbox.dev/pool\":\"x\"}", 2, "img:1");
	decide_pool(&p, 1, "CREATE", "alice", old_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "reserved"));
	wh_verdict_release(&v);
	/* an invalid template: 422 naming it */
	decide_pool(&p, 0, "CREATE", "alice",
		    "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"replicas\":1,\"template\":{\"command\":[\"sh\"]}}}", NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 422);
	CU_ASSERT_PTR_NOT_NULL(strstr(v.message, "spec.template"));
	wh_verdict_release(&v);

	/* updates: the stored pool at generation 1 */
	cJSON_AddNumberToObject(cJSON_GetObjectItem(pool, "metadata"), "generation", 1);
	char *stored = cJSON_PrintUnformatted(pool);
	/* replicas only (kubectl edit): no review asked, stamps kept as they were */
	f.sar_answer = 0;
	pool_scale_keeps(&p, pool, stored, "bob", &f.sar_calls, SBX_ANN_OWNER_AUTHZ, rec);
	/* a new template by bob: refused at the mutating step, nor does it
	 * validate with the old stamps */
	cJSON *upd = pool_change_refused(&p, pool, stored, "bob", "image", cJSON_CreateString("evil:1"));
	char *upd_s = cJSON_PrintUnformatted(upd);
	/* alice's change: a record of run 2 for the new template, requested-by alice */
	f.sar_answer = 1;
	cJSON *changed = stamped_pool(&p, "UPDATE", "alice", upd_s, stored);
	CU_ASSERT_PTR_NOT_NULL_FATAL(changed);
	ann = cJSON_GetObjectItem(cJSON_GetObjectItem(changed, "metadata"), "annotations");
	CU_ASSERT_EQUAL(strncmp(cJSON_GetObjectItem(ann, SBX_ANN_OWNER_AUTHZ)->valuestring, "v3.1000.2.", 10), 0);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(changed, "metadata"), "generation", cJSON_CreateNumber(2));
	char *changed_s = cJSON_PrintUnformatted(changed);
	decide_pool(&p, 0, "UPDATE", "alice", changed_s, stored, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	decide_pool(&p, 0, "UPDATE", "bob", changed_s, stored, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* the same change sent without annotations (a server-side apply of a
	 * manifest with none): its stamps made in one map, and valid */
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(upd, "metadata"), "annotations");
	char *bare_s = cJSON_PrintUnformatted(upd);
	cJSON *bare = stamped_pool(&p, "UPDATE", "alice", bare_s, stored);
	CU_ASSERT_PTR_NOT_NULL_FATAL(bare);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(bare, "metadata"), "generation", cJSON_CreateNumber(2));
	free(bare_s);
	bare_s = cJSON_PrintUnformatted(bare);
	decide_pool(&p, 0, "UPDATE", "alice", bare_s, stored, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	free(bare_s);
	cJSON_Delete(bare);
	free(changed_s);
	cJSON_Delete(changed);
	free(upd_s);
	cJSON_Delete(upd);
	free(stored);
	free(stamped);
	cJSON_Delete(pool);
}

#define POOL_NET                                                                                                 \
	"{\"metadata\":{\"name\":\"pool-n\",\"namespace\":\"team-a\"},\"spec\":{\"replicas\":2,%s\"template\":{" \
	"\"image\":\"img:1\",\"network\":{\"profiles\":[%s]}}}}"

/* A pool's name may be as long as the API allows (253): its record names
 * "pool:" and the whole name, as the controller verifies it (finding: an
 * 80-byte subject cut names of 75 and more). */
static void test_pool_long_name(void)
{
	struct fake f = { .sar_answer = 1 };
	struct wh_sandbox_policy p = policy(&f);
	static const size_t lens[] = { 100, 253 };
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		char name[254], obj_s[1024], fp[65], subject[300];
		memset(name, 'p', lens[i]);
		name[lens[i]] = '\0';
		snprintf(obj_s, sizeof obj_s,
			 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"team-a\"},\"spec\":{\"replicas\":1,"
			 "\"workspaceOwner\":\"alice\",\"template\":{\"image\":\"img:1\"}}}",
			 name);
		cJSON *pool = stamped_pool(&p, "CREATE", "alice", obj_s, NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(pool);
		cJSON *tmpl = sbx_pool_spec(pool);
		CU_ASSERT_EQUAL_FATAL(sbx_template_fingerprint(tmpl, fp), 0);
		cJSON_Delete(tmpl);
		snprintf(subject, sizeof subject, SBX_POOL_AUTHZ_PREFIX "%s", name);
		const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(pool, "metadata"), "annotations");
		struct sbx_authz_subject s = {
			.ns = "team-a",
			.name = subject,
			.owner = "alice",
			.fingerprint = fp,
			.username = "alice",
			.identity = cJSON_GetStringValue(cJSON_GetObjectItem(ann, SBX_ANN_AUTHZ_IDENTITY)),
		};
		CU_ASSERT_EQUAL(sbx_authz_verify(POLICY_KEYS, POLICY_LENS, 1, &s, 1000,
						 cJSON_GetStringValue(cJSON_GetObjectItem(ann, SBX_ANN_OWNER_AUTHZ)), NULL),
				SBX_AUTHZ_OK);
		/* and validation holds it to the same subject */
		char *stamped = cJSON_PrintUnformatted(pool);
		struct wh_verdict v;
		decide_pool(&p, 0, "CREATE", "alice", stamped, NULL, &v);
		CU_ASSERT_TRUE(v.allowed);
		wh_verdict_release(&v);
		free(stamped);
		cJSON_Delete(pool);
	}
}

/* A warm pool naming allow profiles (issue 24 item 2): whoever creates it or
 * sets its template needs `use` on each, as for a Sandbox, and the profiles
 * must exist; a record of it, with the whole identity, is stamped whether
 * the pool has an owner or not, and only that record validates. Updates that
 * leave the template (and so the profiles) alone ask nothing again. */
static void test_pool_profiles(void)
{
	struct fake f = { .sar_answer = 1, .profiles_usable = ",web,gone,", .profiles_existing = ",web,secret," };
	struct wh_sandbox_policy p = policy(&f);
	struct wh_verdict v;
	char obj_s[1024];
	/* a profile bob may not use: refused at the mutating step, naming it */
	snprintf(obj_s, sizeof obj_s, POOL_NET, "", "\"web\",\"secret\"");
	decide_pool(&p, 1, "CREATE", "bob", obj_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_EQUAL(v.code, 403);
	CU_ASSERT_PTR_NOT_NULL(v.message ? strstr(v.message, "may not use network profile \"secret\" for a warm pool")
					 : NULL);
	CU_ASSERT_PTR_NOT_NULL(v.message ? strstr(v.message, "\"use\" on sandboxnetworkprofiles.sandbox.dev \"secret\"")
					 : NULL);
	wh_verdict_release(&v);
	/* and validation refuses it without the record */
	decide_pool(&p, 0, "CREATE", "bob", obj_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* one that does not exist */
	snprintf(obj_s, sizeof obj_s, POOL_NET, "", "\"gone\"");
	decide_pool(&p, 1, "CREATE", "bob", obj_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NOT_NULL(v.message ? strstr(v.message, "network profile \"gone\" does not exist") : NULL);
	wh_verdict_release(&v);
	/* "web" without an owner: recorded with the identity, validated for bob only */
	snprintf(obj_s, sizeof obj_s, POOL_NET, "", "\"web\"");
	f.sar_calls = 0;
	cJSON *pool = stamped_pool(&p, "CREATE", "bob", obj_s, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pool);
	CU_ASSERT_EQUAL(f.sar_calls, 0); /* no owner to ask about */
	const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(pool, "metadata"), "annotations");
	const cJSON *rec = cJSON_GetObjectItem(ann, SBX_ANN_NET_AUTHZ);
	CU_ASSERT_TRUE_FATAL(cJSON_IsString(rec));
	CU_ASSERT_EQUAL(strncmp(rec->valuestring, "v3.1000.1.", 10), 0);
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(ann, SBX_ANN_AUTHZ_IDENTITY));
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(ann, SBX_ANN_OWNER_AUTHZ));
	char *stamped = cJSON_PrintUnformatted(pool);
	decide_pool(&p, 0, "CREATE", "bob", stamped, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	decide_pool(&p, 0, "CREATE", "carol", stamped, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* the record on another set of profiles, or forged: refused */
	cJSON *other = cJSON_Duplicate(pool, 1);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(other, "spec"), "template"), "network",
				  cJSON_Parse("{\"profiles\":[\"secret\"]}"));
	char *other_s = cJSON_PrintUnformatted(other);
	decide_pool(&p, 0, "CREATE", "bob", other_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	CU_ASSERT_PTR_NOT_NULL(v.message ? strstr(v.message, "network profiles") : NULL);
	wh_verdict_release(&v);
	free(other_s);
	cJSON_Delete(other);
	CU_ASSERT_TRUE(pool_refused_with(&p, pool, "metadata", "annotations", SBX_ANN_NET_AUTHZ,
					 "v3.1000.1.0000000000000000000000000000000000000000000000000000000000000000"));
	/* a pool's record never passes for a Sandbox of its name and spec */
	char sbx_s[1200];
	snprintf(sbx_s, sizeof sbx_s,
		 "{\"metadata\":{\"name\":\"pool-n\",\"namespace\":\"team-a\",\"annotations\":{\"%s\":\"bob\",\"%s\":\"%s\"}},"
		 "\"spec\":{\"image\":\"img:1\",\"network\":{\"profiles\":[\"web\"]}}}",
		 SBX_ANN_REQUESTED_BY, SBX_ANN_NET_AUTHZ, rec->valuestring);
	decide(&p, 0, "CREATE", "bob", sbx_s, NULL, &v);
	CU_ASSERT_FALSE(v.allowed);
	wh_verdict_release(&v);
	/* with an owner too: both records */
	char own_s[1024];
	snprintf(own_s, sizeof own_s, POOL_NET, "\"workspaceOwner\":\"alice\",", "\"web\"");
	cJSON *owned = stamped_pool(&p, "CREATE", "bob", own_s, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(owned);
	const cJSON *oann = cJSON_GetObjectItem(cJSON_GetObjectItem(owned, "metadata"), "annotations");
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(oann, SBX_ANN_OWNER_AUTHZ));
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(oann, SBX_ANN_NET_AUTHZ));
	char *owned_s = cJSON_PrintUnformatted(owned);
	decide_pool(&p, 0, "CREATE", "bob", owned_s, NULL, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	free(owned_s);
	cJSON_Delete(owned);

	/* updates of the stored pool (generation 1) */
	cJSON_AddNumberToObject(cJSON_GetObjectItem(pool, "metadata"), "generation", 1);
	char *stored = cJSON_PrintUnformatted(pool);
	/* replicas only, by carol who may use nothing: nothing asked, the record kept */
	f.profiles_usable = "";
	pool_scale_keeps(&p, pool, stored, "carol", &f.profile_sar_calls, SBX_ANN_NET_AUTHZ, rec->valuestring);
	/* carol adds "gone" to the profiles: refused, for this pool's warm pods,
	 * and the old record does not do */
	cJSON *upd = pool_change_refused(&p, pool, stored, "carol", "network",
					 cJSON_Parse("{\"profiles\":[\"web\",\"gone\"]}"));
	char *upd_s;
	/* bob, who may use web and secret: a record of run 2 */
	f.profiles_usable = ",web,secret,";
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(upd, "spec"), "template"), "network",
				  cJSON_Parse("{\"profiles\":[\"web\",\"secret\"]}"));
	upd_s = cJSON_PrintUnformatted(upd);
	cJSON *changed = stamped_pool(&p, "UPDATE", "bob", upd_s, stored);
	CU_ASSERT_PTR_NOT_NULL_FATAL(changed);
	const cJSON *cann = cJSON_GetObjectItem(cJSON_GetObjectItem(changed, "metadata"), "annotations");
	CU_ASSERT_EQUAL(strncmp(cJSON_GetObjectItem(cann, SBX_ANN_NET_AUTHZ)->valuestring, "v3.1000.2.", 10), 0);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(changed, "metadata"), "generation", cJSON_CreateNumber(2));
	char *changed_s = cJSON_PrintUnformatted(changed);
	decide_pool(&p, 0, "UPDATE", "bob", changed_s, stored, &v);
	CU_ASSERT_TRUE(v.allowed);
	wh_verdict_release(&v);
	free(changed_s);
	cJSON_Delete(changed);
	free(upd_s);
	cJSON_Delete(upd);
	free(stored);
	free(stamped);
	cJSON_Delete(pool);
}

void register_webhook_tests(void)
{
	SBX_SUITE("sandbox/authz", { "issue and verify", test_authz_roundtrip },
		  { "not transferable to another intent", test_authz_not_transferable },
		  { "records with the whole identity", test_authz_identity },
		  { "the in-force note of a pool", test_authz_attest },
		  { "stale and malformed records", test_authz_stale_and_malformed },
		  { "v1 records", test_authz_v1_records }, { "resume records carry their run", test_authz_resume_run },
		  { "key rotation", test_authz_rotation });
	SBX_SUITE("webhook/admission", { "decode", test_review_decode }, { "encode", test_response_encode },
		  { "too many JSON values refused unparsed", test_json_values }, { "identity caps", test_identity_caps },
		  { "owner not authorized", test_mutate_refuses_unauthorized_owner },
		  { "reserved metadata refused", test_mutate_refuses_reserved },
		  { "mutate then validate; copies refused", test_mutate_then_validate },
		  { "network profiles: use, existence, record", test_profiles },
		  { "namespace mode", test_namespace_mode_skips_review },
		  { "update guards", test_validate_update_guards },
		  { "key conflict 422", test_validate_key_conflict },
		  { "a full Reject quota refuses a new intent early", test_validate_quota_full },
		  { "a full Reject quota spares a suspended create and a joiner", test_validate_quota_spares_joiners },
		  { "generateName: the webhook names the Sandbox", test_mutate_names_generate_name },
		  { "key conflict: the holder only for the API server", test_validate_key_conflict_unauthenticated },
		  { "key conflict 422: a claim record holds the key", test_validate_key_conflict_record },
		  { "a full Reject quota and the generation's record", test_validate_quota_record_generation },
		  { "owners asked about by name; every name first only as configured", test_owner_review_by_name },
		  { "exec gate: sandbox pods only for those who may use the owner", test_pod_connect_gate },
		  { "updates: lifecycle only, resumes authorized anew, expired final", test_update_lifecycle },
		  { "resumes: network profiles authorized anew", test_resume_profiles },
		  { "resumes without an owner: the profiles' record of the run", test_resume_profiles_record },
		  { "resumes without annotations: stamps and reserved entries in one patch", test_resume_unannotated },
		  { "warm pools: owner authorized on create and on a new template", test_pool_admission },
		  { "warm pools: network profiles authorized like an owner", test_pool_profiles },
		  { "warm pools: a name of 253 characters recorded whole", test_pool_long_name });
}
