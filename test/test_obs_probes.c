/* Unit tests for obs/probes: /readyz follows the process's readiness until
 * the shutdown starts, then answers 503 whatever the caches say. */
#include <stdio.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/buf.h"
#include "obs/probes.h"
#include "test_suites.h"

static int answer(void *arg)
{
	return *(int *)arg;
}

/* Calls /readyz on r; returns its status, its body in body (NUL-terminated). */
static int readyz(struct obs_readiness *r, char *body, size_t len)
{
	struct obs_http_req req = { .method = "GET", .path = "/readyz", .body = "" };
	struct obs_http_resp resp = { .status = 200 };
	buf_init(&resp.body, 4096);
	obs_serve_readyz(r, &req, &resp);
	snprintf(body, len, "%s", resp.body.data ? resp.body.data : "");
	buf_release(&resp.body);
	return resp.status;
}

static void test_readyz_follows_readiness(void)
{
	int synced = 0;
	struct obs_readiness r = { .ready = answer, .arg = &synced };
	char body[64];
	CU_ASSERT_EQUAL(readyz(&r, body, sizeof body), 503);
	CU_ASSERT_STRING_EQUAL(body, "not ready\n");
	synced = 1;
	CU_ASSERT_EQUAL(readyz(&r, body, sizeof body), 200);
	CU_ASSERT_STRING_EQUAL(body, "ok\n");
}

/* SIGTERM's drain: not ready at once, though the caches are current, and
 * for good (caches that turn unsynced and synced again change nothing). */
static void test_readyz_after_stop(void)
{
	int synced = 1;
	struct obs_readiness r = { .ready = answer, .arg = &synced };
	char body[64];
	obs_readiness_stop(&r);
	CU_ASSERT_EQUAL(readyz(&r, body, sizeof body), 503);
	CU_ASSERT_STRING_EQUAL(body, "shutting down\n");
	synced = 0;
	CU_ASSERT_EQUAL(readyz(&r, body, sizeof body), 503);
	synced = 1;
	CU_ASSERT_EQUAL(readyz(&r, body, sizeof body), 503);
	CU_ASSERT_STRING_EQUAL(body, "shutting down\n");
}

void register_obs_probes_tests(void)
{
	SBX_SUITE("obs/probes", { "readyz follows readiness", test_readyz_follows_readiness },
		  { "readyz after stop", test_readyz_after_stop });
}
