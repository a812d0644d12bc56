/* Unit tests for controller/base: the capped buffer and YAML reading. */
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/buf.h"
#include "base/yamljson.h"
#include "test_suites.h"

static void test_buf_cap(void)
{
	struct buf b;
	buf_init(&b, 8);
	CU_ASSERT_EQUAL(buf_appends(&b, "12345678"), 0);
	CU_ASSERT_EQUAL(buf_appends(&b, "9"), -1);
	CU_ASSERT_EQUAL(b.len, 8);
	CU_ASSERT_STRING_EQUAL(b.data, "12345678");
	buf_consume(&b, 3);
	CU_ASSERT_STRING_EQUAL(b.data, "45678");
	CU_ASSERT_EQUAL(buf_appendf(&b, "%d", 123), 0);
	CU_ASSERT_EQUAL(buf_appendf(&b, "%d", 4), -1);
	CU_ASSERT_STRING_EQUAL(b.data, "45678123");
	buf_release(&b);
}

static void test_buf_overflow_arith(void)
{
	struct buf b;
	buf_init(&b, 16);
	CU_ASSERT_EQUAL(buf_append(&b, "x", (size_t)-1), -1);
	CU_ASSERT_EQUAL(b.len, 0);
	buf_release(&b);
}

static void test_yaml_types(void)
{
	const char *y = "a: 1\nb: \"1\"\nc: true\nd: [x, 'y']\ne:\n  f: ~\n";
	char err[256];
	cJSON *j = yaml_to_json(y, strlen(y), err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT(cJSON_IsNumber(cJSON_GetObjectItem(j, "a")));
	CU_ASSERT(cJSON_IsString(cJSON_GetObjectItem(j, "b")));
	CU_ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(j, "c")));
	CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItem(j, "d")), 2);
	CU_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "e"), "f")));
	cJSON_Delete(j);
}

static void test_yaml_errors(void)
{
	char err[256];
	const char *bad = "a: [1, 2\n";
	CU_ASSERT_PTR_NULL(yaml_to_json(bad, strlen(bad), err, sizeof err));
	CU_ASSERT(strstr(err, "YAML") != NULL);
	const char *alias = "a: &x [1]\nb: *x\n";
	CU_ASSERT_PTR_NULL(yaml_to_json(alias, strlen(alias), err, sizeof err));
	CU_ASSERT(strstr(err, "alias") != NULL);
	cJSON *empty = yaml_to_json("", 0, err, sizeof err);
	CU_ASSERT(cJSON_IsObject(empty));
	cJSON_Delete(empty);
}

void register_base_tests(void)
{
	SBX_SUITE("base", { "buf cap", test_buf_cap }, { "buf overflow arithmetic", test_buf_overflow_arith },
		  { "yaml scalar types", test_yaml_types }, { "yaml errors", test_yaml_errors });
}
