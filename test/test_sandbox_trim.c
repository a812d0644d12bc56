/* Tests of the cache trimmers (sandbox/trim.h): a tenant-sized object
 * (annotations up to the API's 256 KiB, long foreign metadata, a huge spec)
 * leaves only a small, bounded copy in the informer caches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/xmalloc.h"
#include "base/zpack.h"
#include "sandbox/trim.h"
#include "test_suites.h"

/* Packed size of the trimmed form of the object in file (test/data/sandbox),
 * with and without the cache's dictionary; *text gets the trimmed size. */
static void packed_sizes(const char *file, cJSON *(*trim)(const cJSON *), const char *dict, size_t *text,
			 size_t *with, size_t *without)
{
	struct buf b;
	buf_init(&b, 1 << 20);
	char path[512];
	snprintf(path, sizeof path, "%s/sandbox/%s", SBX_TEST_DATA, file);
	CU_ASSERT_EQUAL_FATAL(buf_read_file(&b, path), 0);
	cJSON *o = cJSON_Parse(b.data);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	cJSON *t = trim(o);
	char *s = cJSON_PrintUnformatted(t);
	*text = strlen(s);
	struct zpack *zd = zpack_new(dict, strlen(dict)), *zn = zpack_new(NULL, 0);
	unsigned char *p = zpack_pack(zd, s, *text, with);
	char *back = zpack_unpack(zd, p, *with, *text);
	CU_ASSERT(back && !strcmp(back, s));
	free(back);
	free(p);
	free(zpack_pack(zn, s, *text, without));
	zpack_free(zd);
	zpack_free(zn);
	free(s);
	cJSON_Delete(t);
	cJSON_Delete(o);
	buf_release(&b);
}

/* The dictionaries match what the trimmers print: a bound Sandbox and its pod
 * (as a real API server returned them) cost under a third of their text in
 * the cache, clearly less than deflate alone would make of them. */
static void test_trim_packs_small(void)
{
	size_t text, with, without;
	packed_sizes("sandbox-bound.json", sbx_trim_sandbox, sbx_sandbox_dictionary, &text, &with, &without);
	CU_ASSERT(with * 3 < text);
	CU_ASSERT(with * 4 < without * 3);
	packed_sizes("pod-bound.json", sbx_trim_pod, sbx_pod_dictionary, &text, &with, &without);
	CU_ASSERT(with * 3 < text);
	CU_ASSERT(with * 4 < without * 3);
}

void register_sandbox_trim_tests(void);

/* A string of n 'x' (caller frees). */
static char *filler(size_t n)
{
	char *s = xmalloc(n + 1);
	memset(s, 'x', n);
	s[n] = '\0';
	return s;
}

/* Printed size of o in bytes. */
static size_t printed(const cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	size_t n = strlen(s);
	free(s);
	return n;
}

static const cJSON *path2(const cJSON *o, const char *a, const char *b)
{
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
}

static cJSON *big_pod(size_t ann_bytes, size_t spec_bytes)
{
	char *big = filler(ann_bytes), *sbig = filler(spec_bytes);
	cJSON *pod = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(pod, "metadata");
	cJSON_AddStringToObject(m, "name", "sbx-0123456789abcdef0123456789abcdef");
	cJSON_AddStringToObject(m, "namespace", "ns1");
	cJSON_AddStringToObject(m, "uid", "u-1");
	cJSON_AddStringToObject(m, "resourceVersion", "9");
	cJSON *l = cJSON_AddObjectToObject(m, "labels");
	cJSON_AddStringToObject(l, "sandbox.dev/scope-digest", "0123456789abcdef0123456789abcdef");
	cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "sandbox-controller");
	cJSON_AddStringToObject(l, "tenant.example/other", "yes");
	cJSON *a = cJSON_AddObjectToObject(m, "annotations");
	cJSON_AddStringToObject(a, "sandbox.dev/seal", "00ff");
	cJSON_AddStringToObject(a, "sandbox.dev/claimed-at", "2026-01-01T00:00:00Z");
	cJSON_AddStringToObject(a, "tenant.example/blob", big);
	cJSON *refs = cJSON_AddArrayToObject(m, "ownerReferences");
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "apiVersion", "sandbox.dev/v1alpha1");
	cJSON_AddStringToObject(r, "kind", "Sandbox");
	cJSON_AddStringToObject(r, "name", "s1");
	cJSON_AddStringToObject(r, "uid", "su-1");
	cJSON_AddTrueToObject(r, "controller");
	cJSON_AddItemToArray(refs, r);
	r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "apiVersion", "example.com/v1");
	cJSON_AddStringToObject(r, "kind", "Blob");
	cJSON_AddStringToObject(r, "name", big);
	cJSON_AddStringToObject(r, "uid", "x");
	cJSON_AddItemToArray(refs, r);
	cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
	cJSON_AddStringToObject(spec, "nodeName", sbig);
	cJSON *st = cJSON_AddObjectToObject(pod, "status");
	cJSON_AddStringToObject(st, "phase", "Running");
	cJSON_AddStringToObject(st, "message", big);
	free(big);
	free(sbig);
	return pod;
}

static void test_trim_pod_bounded(void)
{
	cJSON *pod = big_pod(250 * 1024, 10);
	cJSON *t = sbx_trim_pod(pod);
	CU_ASSERT(printed(t) < 4096);
	const cJSON *ann = path2(t, "metadata", "annotations");
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(ann, "tenant.example/blob"));
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItemCaseSensitive(ann, "sandbox.dev/seal"));
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItemCaseSensitive(ann, "sandbox.dev/claimed-at"));
	const cJSON *labels = path2(t, "metadata", "labels");
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItemCaseSensitive(labels, "sandbox.dev/scope-digest"));
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(labels, "tenant.example/other"));
	CU_ASSERT_EQUAL(cJSON_GetArraySize(path2(t, "metadata", "ownerReferences")), 1);
	CU_ASSERT_PTR_NULL(path2(t, "metadata", SBX_TRIM_REFS_TRUNCATED));
	CU_ASSERT_STRING_EQUAL(path2(t, "status", "phase")->valuestring, "Running");
	/* of the spec, only container names and images (the tamper check) */
	CU_ASSERT_PTR_NULL(path2(t, "spec", "nodeName"));
	cJSON_Delete(t);
	cJSON_Delete(pod);

	/* more Sandbox holders than kept: 256 kept, and it says so */
	pod = big_pod(10, 10);
	cJSON *refs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "ownerReferences");
	for (int i = 0; i < 300; i++) {
		char n[32];
		snprintf(n, sizeof n, "s-%d", i);
		cJSON *r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "apiVersion", "sandbox.dev/v1alpha1");
		cJSON_AddStringToObject(r, "kind", "Sandbox");
		cJSON_AddStringToObject(r, "name", n);
		cJSON_AddStringToObject(r, "uid", n);
		cJSON_AddItemToArray(refs, r);
	}
	t = sbx_trim_pod(pod);
	CU_ASSERT_EQUAL(cJSON_GetArraySize(path2(t, "metadata", "ownerReferences")), 256);
	CU_ASSERT_TRUE(cJSON_IsTrue(path2(t, "metadata", SBX_TRIM_REFS_TRUNCATED)));
	cJSON_Delete(t);
	cJSON_Delete(pod);

	pod = big_pod(10, 512 * 1024); /* a huge pod spec is not kept */
	t = sbx_trim_pod(pod);
	CU_ASSERT(printed(t) < 4096);
	CU_ASSERT_PTR_NULL(path2(t, "spec", "nodeName"));
	cJSON_Delete(t);
	cJSON_Delete(pod);
}

static void test_trim_sandbox_bounded(void)
{
	char *big = filler(240 * 1024);
	cJSON *s = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(s, "metadata");
	cJSON_AddStringToObject(m, "name", "s1");
	cJSON_AddStringToObject(m, "namespace", "ns1");
	cJSON_AddStringToObject(m, "uid", "u");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "annotations"), "big", big);
	cJSON *spec = cJSON_AddObjectToObject(s, "spec");
	cJSON_AddStringToObject(spec, "image", "busybox");
	cJSON *t = sbx_trim_sandbox(s);
	CU_ASSERT(printed(t) < 4096);
	CU_ASSERT_PTR_NULL(path2(t, "metadata", "annotations"));
	CU_ASSERT_STRING_EQUAL(path2(t, "spec", "image")->valuestring, "busybox");
	cJSON_Delete(t);
	/* A spec far beyond anything a sandbox needs is not cached: the trimmed
	 * copy says how big it was, and the reconcile rejects it. */
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "args"), cJSON_CreateString(big));
	t = sbx_trim_sandbox(s);
	CU_ASSERT(printed(t) < 4096);
	CU_ASSERT_PTR_NULL(path2(t, "spec", "args"));
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItemCaseSensitive(t, SBX_TRIM_OVERSIZED));
	cJSON_Delete(t);
	cJSON_Delete(s);
	free(big);
}

void register_sandbox_trim_tests(void)
{
	SBX_SUITE("sandbox/trim (cache copies are bounded)",
		  { "pod: only what the reconcile reads", test_trim_pod_bounded },
		  { "sandbox: no annotations, bounded spec", test_trim_sandbox_bounded },
		  { "cache dictionaries fit the trimmed shapes", test_trim_packs_small });
}
