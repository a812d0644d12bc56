/* Unit tests for typed Kubernetes API errors decoded from HTTP answers. */
#include <string.h>
#include <time.h>

#include <CUnit/CUnit.h>
#include <curl/curl.h>

#include "kube/errors.h"
#include "test_suites.h"

void register_kube_errors_tests(void);

static struct kube_error decode(long http, const char *body, const char *retry_after)
{
	struct kube_error e;
	memset(&e, 0x5a, sizeof e); /* every field must be written */
	kube_error_from_response(http, body, body ? strlen(body) : 0, retry_after, &e);
	return e;
}

static void test_not_found(void)
{
	struct kube_error e =
	    decode(404,
		   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
		   "\"status\":\"Failure\",\"message\":\"pods \\\"x\\\" not found\","
		   "\"reason\":\"NotFound\",\"details\":{\"name\":\"x\",\"kind\":\"pods\"},"
		   "\"code\":404}",
		   NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_NOT_FOUND);
	CU_ASSERT_EQUAL(e.http_status, 404);
	CU_ASSERT_STRING_EQUAL(e.reason, "NotFound");
	CU_ASSERT_STRING_EQUAL(e.message, "pods \"x\" not found");
	CU_ASSERT_EQUAL(e.retry_after_s, 0);
	CU_ASSERT_FALSE(kube_err_retriable(e.code));
}

static void test_conflict_kinds(void)
{
	struct kube_error e =
	    decode(409,
		   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"AlreadyExists\","
		   "\"message\":\"pods \\\"sbx-1\\\" already exists\",\"code\":409}",
		   NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_ALREADY_EXISTS);
	CU_ASSERT_STRING_EQUAL(e.reason, "AlreadyExists");
	e = decode(
	    409,
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\",\"message\":"
	    "\"Operation cannot be fulfilled on sandboxes.sandbox.dev \\\"a\\\": the object has "
	    "been "
	    "modified; please apply your changes to the latest version and try "
	    "again\",\"code\":409}",
	    NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_CONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "the object has been modified"));
	/* Without a body, a 409 cannot be an AlreadyExists. */
	e = decode(409, NULL, NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_CONFLICT);
	CU_ASSERT_FALSE(kube_err_retriable(KUBE_ERR_CONFLICT));
	CU_ASSERT_FALSE(kube_err_retriable(KUBE_ERR_ALREADY_EXISTS));
}

static void test_gone_invalid_bad_request(void)
{
	struct kube_error e =
	    decode(410,
		   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Expired\","
		   "\"message\":\"too old resource version: 1 (2)\",\"code\":410}",
		   NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_GONE);
	CU_ASSERT_STRING_EQUAL(e.reason, "Expired");
	e = decode(
	    422,
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Invalid\",\"message\":"
	    "\"Sandbox.sandbox.dev \\\"a\\\" is invalid: spec.image: Required value\",\"details\":"
	    "{\"causes\":[{\"reason\":\"FieldValueRequired\",\"field\":\"spec.image\"}]},\"code\":"
	    "422}",
	    NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_INVALID);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "spec.image"));
	e = decode(400,
		   "{\"kind\":\"Status\",\"reason\":\"BadRequest\",\"message\":\"bad "
		   "patch\",\"code\":400}",
		   NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_BAD_REQUEST);
	CU_ASSERT_STRING_EQUAL(e.message, "bad patch");
}

static void test_too_many_requests(void)
{
	const char *body =
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"TooManyRequests\","
	    "\"message\":\"too many requests\",\"details\":{\"retryAfterSeconds\":3},\"code\":429}";
	struct kube_error e = decode(429, body, NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_TOO_MANY_REQUESTS);
	CU_ASSERT_EQUAL(e.retry_after_s, 3);
	CU_ASSERT_TRUE(kube_err_retriable(e.code));
	/* The header wins over the body. */
	e = decode(429, body, "7");
	CU_ASSERT_EQUAL(e.retry_after_s, 7);
	/* An HTTP date in the future. */
	char date[64];
	time_t t = time(NULL) + 120;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	e = decode(429, NULL, date);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_TOO_MANY_REQUESTS);
	CU_ASSERT(e.retry_after_s >= 115 && e.retry_after_s <= 120);
	/* Garbage in the header leaves the body's value. */
	e = decode(429, body, "soon");
	CU_ASSERT_EQUAL(e.retry_after_s, 3);
}

static void test_auth(void)
{
	struct kube_error e =
	    decode(401,
		   "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Unauthorized\","
		   "\"reason\":\"Unauthorized\",\"code\":401}",
		   NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_UNAUTHORIZED);
	e = decode(
	    403,
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods is forbidden: User "
	    "\\\"system:serviceaccount:x:y\\\" cannot list resource \\\"pods\\\"\",\"reason\":"
	    "\"Forbidden\",\"code\":403}",
	    NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_FORBIDDEN);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "cannot list"));
	CU_ASSERT_FALSE(kube_err_retriable(KUBE_ERR_UNAUTHORIZED));
	CU_ASSERT_FALSE(kube_err_retriable(KUBE_ERR_FORBIDDEN));
}

static void test_server_errors(void)
{
	struct kube_error e =
	    decode(500,
		   "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"etcdserver: "
		   "request timed "
		   "out\",\"reason\":\"InternalError\",\"details\":{\"retryAfterSeconds\":1},"
		   "\"code\":500}",
		   NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_SERVER);
	CU_ASSERT_EQUAL(e.retry_after_s, 1);
	e = decode(
	    504,
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Timeout: request did not "
	    "complete within requested timeout\",\"reason\":\"Timeout\",\"code\":504}",
	    NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_SERVER);
	CU_ASSERT_STRING_EQUAL(e.reason, "Timeout");
	CU_ASSERT_TRUE(kube_err_retriable(e.code));
}

static void test_non_json_bodies(void)
{
	struct kube_error e = decode(502, "<html><body>\r\nBad Gateway</body></html>", NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_SERVER);
	CU_ASSERT_EQUAL(e.http_status, 502);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "Bad Gateway"));
	CU_ASSERT_PTR_NULL(strchr(e.message, '\n'));
	e = decode(404, "404 page not found\n", NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_NOT_FOUND);
	CU_ASSERT_STRING_EQUAL(e.reason, "NotFound");
	CU_ASSERT_STRING_EQUAL(e.message, "404 page not found");
	e = decode(403, "", NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_FORBIDDEN);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "403"));
	e = decode(418, "{\"unrelated\":true}", NULL);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_OTHER);
	/* A body longer than the message field is cut, not overflowed. */
	char big[2000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	e = decode(500, big, NULL);
	CU_ASSERT(strlen(e.message) < sizeof e.message);
}

static void test_status_object(void)
{
	cJSON *st = cJSON_Parse(
	    "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"old\"}");
	struct kube_error e;
	kube_error_from_status(st, &e);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_GONE);
	CU_ASSERT_EQUAL(e.http_status, 410);
	cJSON_Delete(st);
	st = cJSON_Parse("{\"kind\":\"Status\",\"reason\":\"Expired\"}");
	kube_error_from_status(st, &e);
	CU_ASSERT_EQUAL(e.code, KUBE_ERR_GONE);
	cJSON_Delete(st);
	CU_ASSERT_STRING_EQUAL(kube_err_str(KUBE_ERR_TOO_MANY_REQUESTS), "TooManyRequests");
	CU_ASSERT_STRING_EQUAL(kube_err_str((enum kube_err)999), "Unknown");
	CU_ASSERT_TRUE(kube_err_retriable(KUBE_ERR_TRANSPORT));
	CU_ASSERT_TRUE(kube_err_retriable(KUBE_ERR_DECODE));
	CU_ASSERT_FALSE(kube_err_retriable(KUBE_ERR_TOO_LARGE));
	CU_ASSERT_FALSE(kube_err_retriable(KUBE_OK));
}

void register_kube_errors_tests(void)
{
	SBX_SUITE("kube/errors", { "404 NotFound", test_not_found },
		  { "409 AlreadyExists vs Conflict", test_conflict_kinds },
		  { "410, 422, 400", test_gone_invalid_bad_request },
		  { "429 and Retry-After", test_too_many_requests }, { "401/403", test_auth },
		  { "500/504", test_server_errors }, { "non-JSON bodies", test_non_json_bodies },
		  { "Status objects and names", test_status_object });
}
