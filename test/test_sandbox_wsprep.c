/* Unit tests for the workspace preparation: controller/sandbox/wsprep (the
 * pod's name, shape and what its status means), podstate (a pod's status in
 * words), wsinit (handing a folder over) and the config's workspace.prepare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "sandbox/config.h"
#include "sandbox/netfloor.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/podstate.h"
#include "sandbox/scope.h"
#include "sandbox/status.h"
#include "sandbox/trim.h"
#include "sandbox/wsinit.h"
#include "sandbox/wsprep.h"
#include "test_suites.h"

void register_sandbox_wsprep_tests(void); /* called from test_sandbox_all.c */

/* Pinned with an independent implementation (Python hashlib) of the
 * encoding in wsprep.h: lp(tag) lp(ns) lp(owner) lp(mode) lp(root)
 * lp("uid:gid") lp(subdir)... */
#define NAME_PVC "sbx-init-6266c6170f6184df4ff80fb8e884c419"
#define NAME_HOST "sbx-init-06db8aae4d04ee83bbe5dfd0398611fb"

/* The Sandbox a preparation pod is made for. */
static const struct sbx_wsprep_for SB = { "sandbox.dev/v1alpha1", "Sandbox", "s1", "uid-1" };

static cJSON *get(const cJSON *o, const char *path)
{
	/* path: dot-separated members, [n] for array items, e.g. "spec.containers[0].name" */
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	const cJSON *cur = o;
	for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, ".")) {
		char *br = strchr(tok, '[');
		if (br)
			*br = '\0';
		if (*tok)
			cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
		while (br && cur) {
			cur = cJSON_GetArrayItem(cur, atoi(br + 1));
			br = strchr(br + 1, '[');
		}
	}
	return (cJSON *)cur;
}

static const char *str(const cJSON *o, const char *path)
{
	const cJSON *v = get(o, path);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static const char *jstr_of(const cJSON *o, const char *path)
{
	return str(o, path);
}

static void test_name(void)
{
	struct sbx_config cfg, other;
	sbx_config_init(&cfg);
	char a[64], b[64];
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", "alice", &cfg, a, sizeof a), 0);
	CU_ASSERT_STRING_EQUAL(a, NAME_PVC);
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", "alice", &cfg, b, sizeof b), 0);
	CU_ASSERT_STRING_EQUAL(a, b);
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-b", "alice", &cfg, b, sizeof b), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", "bob", &cfg, b, sizeof b), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	/* ("team-a", "alice") and ("team-al", "ice") are different inputs. */
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-al", "ice", &cfg, b, sizeof b), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	/* A changed uid, gid or folder list prepares again. */
	sbx_config_init(&other);
	other.pod.run_as_user = 1001;
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", "alice", &other, b, sizeof b), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	other.pod.run_as_user = 1000;
	other.pod.run_as_group = 1001;
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", "alice", &other, b, sizeof b), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	other.pod.run_as_group = 1000;
	other.nmounts = 3;
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", "alice", &other, b, sizeof b), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	other.nmounts = 4;
	other.ws_mode = SBX_WS_HOSTPATH;
	other.host_root = strdup("/srv/ws");
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", "alice", &other, b, sizeof b), 0);
	CU_ASSERT_STRING_EQUAL(b, NAME_HOST);
	/* Too small a buffer or a missing argument: nothing written. */
	char small[20] = "unchanged";
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", "alice", &cfg, small, sizeof small), -1);
	CU_ASSERT_STRING_EQUAL(small, "unchanged");
	CU_ASSERT_EQUAL(sbx_wsprep_name(NULL, "alice", &cfg, a, sizeof a), -1);
	CU_ASSERT_EQUAL(sbx_wsprep_name("team-a", NULL, &cfg, a, sizeof a), -1);
	sbx_config_release(&other);
	sbx_config_release(&cfg);
}

/* The sandbox pod of owner alice in team-a under cfg (for comparison). */
static cJSON *sandbox_pod(const struct sbx_config *cfg)
{
	cJSON *spec = cJSON_Parse("{\"image\":\"img\",\"workspaceOwner\":\"alice\"}");
	struct sbx_scope sc = { .digest = "0123456789abcdef0123456789abcdef" };
	memset(sc.fingerprint, 'a', 64);
	struct sbx_pod_params p = { .ns = "team-a", .pod_name = "sbx-x", .sandbox_name = "s", .sandbox_uid = "u", .spec = spec, .scope = &sc, .claimed_at = "2024-01-01T00:00:00Z", .seal = "00", .cfg = cfg };
	cJSON *pod = sbx_pod_build(&p);
	cJSON_Delete(spec);
	return pod;
}

static void test_pod_pvc(void)
{
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	char err[256];
	const char *y = "pod:\n  nodeSelector: {pool: sandboxes}\n"
			"  tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]\n"
			"  imagePullSecrets: [regcred]\n";
	CU_ASSERT_EQUAL_FATAL(sbx_config_parse(&cfg, y, strlen(y), err, sizeof err), 0);
	cJSON *pod = sbx_wsprep_pod("team-a", "alice", &cfg, "reg/sandbox-controller:1", &SB);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pod);
	CU_ASSERT_STRING_EQUAL(str(pod, "metadata.name"), NAME_PVC);
	CU_ASSERT_STRING_EQUAL(str(pod, "metadata.namespace"), "team-a");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(get(pod, "metadata.labels"), SBX_LABEL_WS_INIT)->valuestring,
			       NAME_PVC + strlen(SBX_WSPREP_NAME_PREFIX));
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(get(pod, "metadata.annotations"), SBX_ANN_OWNER)->valuestring,
			       "alice");
	/* Never a sandbox pod's labels: nothing can take it for one (managed
	 * by the controller, as its every pod, but named apart). */
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(get(pod, "metadata.labels"), SBX_LABEL_DIGEST));
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(get(pod, "metadata.labels"), SBX_LABEL_POOL));
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(get(pod, "metadata.labels"), SBX_LABEL_NAME)->valuestring,
			       SBX_WSPREP_APP_NAME);
	/* Owned by the Sandbox it was made for, as no controller: it goes with it. */
	char *ref = cJSON_PrintUnformatted(get(pod, "metadata.ownerReferences"));
	CU_ASSERT_STRING_EQUAL(ref, "[{\"apiVersion\":\"sandbox.dev/v1alpha1\",\"kind\":\"Sandbox\",\"name\":\"s1\",\"uid\":\"uid-1\"}]");
	free(ref);
	const struct sbx_wsprep_for half = { "sandbox.dev/v1alpha1", "Sandbox", "s1", NULL };
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", "alice", &cfg, "img", &half));
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", "alice", &cfg, "img", NULL));
	CU_ASSERT_STRING_EQUAL(str(pod, "spec.restartPolicy"), "Never");
	CU_ASSERT_TRUE(cJSON_IsFalse(get(pod, "spec.automountServiceAccountToken")));
	CU_ASSERT_EQUAL(get(pod, "spec.activeDeadlineSeconds")->valueint, SBX_WSPREP_DEADLINE_S);
	CU_ASSERT_STRING_EQUAL(str(pod, "spec.nodeSelector.pool"), "sandboxes");
	CU_ASSERT_STRING_EQUAL(str(pod, "spec.tolerations[0].key"), "dedicated");
	CU_ASSERT_STRING_EQUAL(str(pod, "spec.imagePullSecrets[0].name"), "regcred");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(get(pod, "spec.containers")), 1);
	CU_ASSERT_PTR_NULL(get(pod, "spec.initContainers"));
	const cJSON *c = get(pod, "spec.containers[0]");
	CU_ASSERT_STRING_EQUAL(str(c, "image"), "reg/sandbox-controller:1");
	char *cmd = cJSON_PrintUnformatted(get(c, "command"));
	CU_ASSERT_STRING_EQUAL(cmd, "[\"/sandbox-controller\",\"workspace-init\",\"--uid\",\"1000\",\"--gid\",\"1000\","
				    "\"/w/0\",\"/w/1\",\"/w/2\",\"/w/3\"]");
	free(cmd);
	/* Root with the three capabilities that hand a folder over, nothing else. */
	CU_ASSERT_EQUAL(get(c, "securityContext.runAsUser")->valueint, 0);
	CU_ASSERT_TRUE(cJSON_IsFalse(get(c, "securityContext.allowPrivilegeEscalation")));
	CU_ASSERT_TRUE(cJSON_IsTrue(get(c, "securityContext.readOnlyRootFilesystem")));
	char *caps = cJSON_PrintUnformatted(get(c, "securityContext.capabilities"));
	CU_ASSERT_STRING_EQUAL(caps, "{\"drop\":[\"ALL\"],\"add\":[\"CHOWN\",\"DAC_OVERRIDE\",\"FOWNER\"]}");
	free(caps);
	CU_ASSERT_PTR_NULL(get(c, "securityContext.privileged"));
	/* Exactly the folders alice's sandbox pod mounts: the same volume and subPaths. */
	cJSON *sp = sandbox_pod(&cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
	char *v1 = cJSON_PrintUnformatted(get(pod, "spec.volumes")), *v2 = cJSON_PrintUnformatted(get(sp, "spec.volumes"));
	CU_ASSERT_STRING_EQUAL(v1, v2);
	free(v1);
	free(v2);
	CU_ASSERT_EQUAL(cJSON_GetArraySize(get(c, "volumeMounts")), 4);
	for (int i = 0; i < 4; i++) {
		char path[64], want[16];
		snprintf(path, sizeof path, "volumeMounts[%d].subPath", i);
		CU_ASSERT_STRING_EQUAL(str(c, path), str(get(sp, "spec.containers[0]"), path));
		snprintf(path, sizeof path, "volumeMounts[%d].mountPath", i);
		snprintf(want, sizeof want, "/w/%d", i);
		CU_ASSERT_STRING_EQUAL(str(c, path), want);
	}
	CU_ASSERT_STRING_EQUAL(str(c, "volumeMounts[1].subPath"), "alice/claude");
	cJSON_Delete(sp);
	cJSON_Delete(pod);
	sbx_config_release(&cfg);
}

/* Whether the label selector sel (matchLabels, matchExpressions with In,
 * NotIn, Exists, DoesNotExist) selects labels, as the API server reads it. */
static int selects(const cJSON *sel, const cJSON *labels)
{
	const cJSON *l, *e;
	cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(sel, "matchLabels"))
	{
		const cJSON *have = cJSON_GetObjectItemCaseSensitive(labels, l->string);
		if (!cJSON_IsString(have) || strcmp(have->valuestring, l->valuestring))
			return 0;
	}
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions"))
	{
		const char *op = cJSON_GetObjectItemCaseSensitive(e, "operator")->valuestring;
		const cJSON *have = cJSON_GetObjectItemCaseSensitive(labels, cJSON_GetObjectItemCaseSensitive(e, "key")->valuestring);
		int in = 0;
		const cJSON *v;
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(e, "values"))
		{
			in |= cJSON_IsString(have) && !strcmp(v->valuestring, have->valuestring);
		}
		if ((!strcmp(op, "In") && !in) || (!strcmp(op, "NotIn") && in) || (!strcmp(op, "Exists") && !have) ||
		    (!strcmp(op, "DoesNotExist") && have))
			return 0;
	}
	return 1;
}

/* The network floor (sandbox/netfloor.h) selects every pod the controller
 * runs for a sandbox: the preparation pod too, which runs as root over the
 * owner's folders. */
static void test_pod_under_the_floor(void)
{
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	cJSON *floor = sbx_netfloor_policy("team-a", &cfg.net);
	const cJSON *sel = get(floor, "spec.podSelector");
	cJSON *prep = sbx_wsprep_pod("team-a", "alice", &cfg, "reg/sandbox-controller:1", &SB), *sb = sandbox_pod(&cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(prep);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sb);
	CU_ASSERT_TRUE(selects(sel, get(sb, "metadata.labels")));
	CU_ASSERT_TRUE(selects(sel, get(prep, "metadata.labels")));
	/* ... and only those: a pod of the namespace without the labels is not. */
	cJSON *other = cJSON_CreateObject();
	cJSON_AddStringToObject(other, "app", "web");
	CU_ASSERT_FALSE(selects(sel, other));
	cJSON_Delete(other);
	cJSON_Delete(prep);
	cJSON_Delete(sb);
	cJSON_Delete(floor);
	sbx_config_release(&cfg);
}

static void test_pod_hostpath_and_refusals(void)
{
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	char err[256];
	const char *y = "workspace: {mode: hostPath, hostPathRoot: /srv/ws}\n"
			"pod: {runtimeClasses: {allowed: [gvisor], default: gvisor}}\n";
	CU_ASSERT_EQUAL_FATAL(sbx_config_parse(&cfg, y, strlen(y), err, sizeof err), 0);
	cJSON *pod = sbx_wsprep_pod("team-a", "alice", &cfg, "img", &SB);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pod);
	CU_ASSERT_STRING_EQUAL(str(pod, "metadata.name"), NAME_HOST);
	CU_ASSERT_STRING_EQUAL(str(pod, "spec.volumes[0].hostPath.path"), "/srv/ws/team-a/alice/workspace");
	CU_ASSERT_STRING_EQUAL(str(pod, "spec.volumes[3].hostPath.path"), "/srv/ws/team-a/alice/gemini");
	CU_ASSERT_STRING_EQUAL(str(pod, "spec.volumes[0].hostPath.type"), "DirectoryOrCreate");
	CU_ASSERT_STRING_EQUAL(str(pod, "spec.runtimeClassName"), "gvisor");
	cJSON *sp = sandbox_pod(&cfg);
	char *v1 = cJSON_PrintUnformatted(get(pod, "spec.volumes")), *v2 = cJSON_PrintUnformatted(get(sp, "spec.volumes"));
	CU_ASSERT_STRING_EQUAL(v1, v2);
	free(v1);
	free(v2);
	cJSON_Delete(sp);
	cJSON_Delete(pod);
	/* An owner that is not one (it becomes a path), or no image: no pod. */
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", "", &cfg, "img", &SB));
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", "..", &cfg, "img", &SB));
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", "a/b", &cfg, "img", &SB));
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", "Alice", &cfg, "img", &SB));
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", NULL, &cfg, "img", &SB));
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", "alice", &cfg, "", &SB));
	free(cfg.host_root);
	cfg.host_root = NULL; /* hostPath mode without a root */
	CU_ASSERT_PTR_NULL(sbx_wsprep_pod("team-a", "alice", &cfg, "img", &SB));
	sbx_config_release(&cfg);
}

/* A preparation pod of alice in team-a with status (JSON) st. */
static cJSON *prep_pod(const struct sbx_config *cfg, const char *st)
{
	cJSON *pod = sbx_wsprep_pod("team-a", "alice", cfg, "img", &SB);
	cJSON_AddItemToObject(pod, "status", cJSON_Parse(st));
	return pod;
}

static void test_state(void)
{
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	char why[512];
	cJSON *pod = prep_pod(&cfg, "{\"phase\":\"Succeeded\"}");
	CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-a", "alice", &cfg, why, sizeof why), SBX_WSPREP_DONE);
	/* The same pod for bob, in another namespace, or relabelled: not trusted. */
	CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-a", "bob", &cfg, why, sizeof why), SBX_WSPREP_FOREIGN);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "not the preparation pod of owner bob"));
	CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-b", "alice", &cfg, why, sizeof why), SBX_WSPREP_FOREIGN);
	cJSON *labels = get(pod, "metadata.labels");
	cJSON_ReplaceItemInObjectCaseSensitive(labels, SBX_LABEL_WS_INIT, cJSON_CreateString("0000"));
	CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-a", "alice", &cfg, why, sizeof why), SBX_WSPREP_FOREIGN);
	cJSON_Delete(pod);
	pod = prep_pod(&cfg, "{\"phase\":\"Pending\",\"containerStatuses\":[{\"name\":\"workspace-init\",\"state\":"
			     "{\"waiting\":{\"reason\":\"ErrImageNeverPull\",\"message\":\"Container image \\\"img\\\" is "
			     "not present with pull policy of Never\"}}}]}");
	CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-a", "alice", &cfg, why, sizeof why), SBX_WSPREP_WAITING);
	CU_ASSERT_STRING_EQUAL(why, "container workspace-init is waiting: ErrImageNeverPull: Container image \"img\" "
				    "is not present with pull policy of Never");
	cJSON_Delete(pod);
	pod = prep_pod(&cfg, "{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"workspace-init\",\"state\":"
			     "{\"terminated\":{\"exitCode\":1,\"reason\":\"Error\",\"message\":\"workspace-init: /w/0: "
			     "Operation not permitted\"}}}]}");
	CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-a", "alice", &cfg, why, sizeof why), SBX_WSPREP_FAILED);
	CU_ASSERT_STRING_EQUAL(why, "container workspace-init exited with code 1 (Error): workspace-init: /w/0: "
				    "Operation not permitted");
	cJSON_Delete(pod);
	pod = prep_pod(&cfg, "{\"phase\":\"Failed\",\"reason\":\"DeadlineExceeded\",\"message\":\"Pod was active on "
			     "the node longer than the specified deadline\"}");
	CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-a", "alice", &cfg, why, sizeof why), SBX_WSPREP_FAILED);
	CU_ASSERT_STRING_EQUAL(why, "DeadlineExceeded: Pod was active on the node longer than the specified deadline");
	cJSON_Delete(pod);
	pod = prep_pod(&cfg, "{}");
	CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-a", "alice", &cfg, why, sizeof why), SBX_WSPREP_WAITING);
	CU_ASSERT_STRING_EQUAL(why, "pending");
	cJSON_Delete(pod);
	/* The cache's trimmed copy means the same, in the same words. */
	static const char *const states[] = {
		"{\"phase\":\"Succeeded\"}",
		"{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"workspace-init\",\"state\":{\"terminated\":"
		"{\"exitCode\":1,\"reason\":\"Error\",\"message\":\"chown: EPERM\"}}}]}",
		"{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"False\",\"message\":"
		"\"0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.\"}]}",
	};
	for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
		pod = prep_pod(&cfg, states[i]);
		cJSON *t = sbx_wsprep_trim(pod);
		char w1[512], w2[512];
		CU_ASSERT_EQUAL(sbx_wsprep_state(pod, "team-a", "alice", &cfg, w1, sizeof w1),
				sbx_wsprep_state(t, "team-a", "alice", &cfg, w2, sizeof w2));
		CU_ASSERT_STRING_EQUAL(w1, w2);
		CU_ASSERT_PTR_NULL(get(t, "spec"));
		cJSON_Delete(t);
		cJSON_Delete(pod);
	}
	sbx_config_release(&cfg);
}

static void test_pod_finished(void)
{
	static const char *const cases[][2] = { { "{\"status\":{\"phase\":\"Succeeded\"}}", "1" },
						{ "{\"status\":{\"phase\":\"Failed\"}}", "1" },
						{ "{\"status\":{\"phase\":\"Running\"}}", "0" },
						{ "{\"status\":{\"phase\":\"Pending\"}}", "0" },
						{ "{\"status\":{\"phase\":7}}", "0" },
						{ "{\"status\":{}}", "0" },
						{ "{}", "0" } };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cJSON *pod = cJSON_Parse(cases[i][0]);
		CU_ASSERT_EQUAL(sbx_pod_finished(pod), cases[i][1][0] - '0');
		cJSON_Delete(pod);
	}
	CU_ASSERT_EQUAL(sbx_pod_finished(NULL), 0);
}

static void test_pod_why(void)
{
	char why[256];
	cJSON *pod = cJSON_Parse("{\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
				 "\"status\":\"False\",\"reason\":\"Unschedulable\",\"message\":\"0/3 nodes are "
				 "available: 3 Insufficient cpu.\"}]}}");
	CU_ASSERT_STRING_EQUAL(sbx_pod_why(pod, "sandbox", why, sizeof why),
			       "not scheduled: 0/3 nodes are available: 3 Insufficient cpu.");
	cJSON_Delete(pod);
	/* A container's state comes first; the named container is the one read. */
	pod = cJSON_Parse("{\"status\":{\"phase\":\"Running\",\"containerStatuses\":["
			  "{\"name\":\"sidecar\",\"state\":{\"running\":{}}},"
			  "{\"name\":\"sandbox\",\"state\":{\"terminated\":{\"exitCode\":3,\"reason\":\"Error\"}}}]}}");
	CU_ASSERT_STRING_EQUAL(sbx_pod_why(pod, "sandbox", why, sizeof why), "container sandbox exited with code 3 (Error)");
	CU_ASSERT_STRING_EQUAL(sbx_pod_why(pod, "sidecar", why, sizeof why), "");
	CU_ASSERT_STRING_EQUAL(sbx_pod_why(pod, NULL, why, sizeof why), "");
	cJSON_Delete(pod);
	/* What a tenant can make long is cut, and out is always terminated. */
	char big[5000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	pod = cJSON_CreateObject();
	cJSON *cs = cJSON_AddArrayToObject(cJSON_AddObjectToObject(pod, "status"), "containerStatuses");
	cJSON *c = cJSON_CreateObject();
	cJSON_AddItemToArray(cs, c);
	cJSON_AddStringToObject(c, "name", "sandbox");
	cJSON *w = cJSON_AddObjectToObject(cJSON_AddObjectToObject(c, "state"), "waiting");
	cJSON_AddStringToObject(w, "reason", big);
	cJSON_AddStringToObject(w, "message", big);
	char out[2048];
	sbx_pod_why(pod, "sandbox", out, sizeof out);
	CU_ASSERT(strlen(out) < 700);
	char tiny[8];
	CU_ASSERT_EQUAL(strlen(sbx_pod_why(pod, "sandbox", tiny, sizeof tiny)), 7);
	cJSON_Delete(pod);
	CU_ASSERT_STRING_EQUAL(sbx_pod_why(NULL, NULL, why, sizeof why), "");
}

/* The pod cache keeps what the phrase needs, cut, and nothing of a running pod. */
static void test_pod_why_kept_by_the_cache(void)
{
	static const char *const pods[] = {
		"{\"metadata\":{\"name\":\"sbx-a\"},\"status\":{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":"
		"\"sandbox\",\"image\":\"i\",\"ready\":false,\"state\":{\"terminated\":{\"exitCode\":3,\"reason\":\"Error\","
		"\"message\":\"bye\",\"startedAt\":\"x\"}}}]}}",
		"{\"metadata\":{\"name\":\"sbx-b\"},\"status\":{\"phase\":\"Pending\",\"containerStatuses\":[{\"name\":"
		"\"sandbox\",\"state\":{\"waiting\":{\"reason\":\"ImagePullBackOff\",\"message\":\"Back-off pulling "
		"image \\\"127.0.0.1:5/missing:1\\\"\"}}}]}}",
		"{\"metadata\":{\"name\":\"sbx-c\"},\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":"
		"\"PodScheduled\",\"status\":\"False\",\"reason\":\"Unschedulable\",\"message\":\"0/1 nodes\"}]}}",
		"{\"metadata\":{\"name\":\"sbx-d\"},\"status\":{\"phase\":\"Failed\",\"reason\":\"Evicted\",\"message\":"
		"\"The node was low on resource: memory.\"}}",
	};
	for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
		cJSON *pod = cJSON_Parse(pods[i]);
		cJSON *t = sbx_trim_pod(pod);
		char a[512], b[512];
		sbx_pod_why(pod, "sandbox", a, sizeof a);
		sbx_pod_why(t, "sandbox", b, sizeof b);
		CU_ASSERT(a[0] != '\0');
		CU_ASSERT_STRING_EQUAL(a, b);
		cJSON_Delete(t);
		cJSON_Delete(pod);
	}
	cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"sbx-r\"},\"status\":{\"phase\":\"Running\",\"conditions\":"
				 "[{\"type\":\"PodScheduled\",\"status\":\"True\"}],\"containerStatuses\":[{\"name\":"
				 "\"sandbox\",\"state\":{\"running\":{\"startedAt\":\"x\"}}}]}}");
	cJSON *t = sbx_trim_pod(pod);
	CU_ASSERT_PTR_NULL(get(t, "status.containerStatuses"));
	CU_ASSERT_PTR_NULL(get(t, "status.reason"));
	cJSON_Delete(t);
	cJSON_Delete(pod);
	/* A long message is cut on a character boundary. */
	char big[1200];
	memset(big, 'x', sizeof big);
	strcpy(big + 299, "\xc3\xa9 and more");
	pod = cJSON_CreateObject();
	cJSON *st = cJSON_AddObjectToObject(pod, "status");
	cJSON_AddStringToObject(st, "reason", "Evicted");
	cJSON_AddStringToObject(st, "message", big);
	t = sbx_trim_pod(pod);
	CU_ASSERT_EQUAL(strlen(jstr_of(t, "status.message")), 299);
	cJSON_Delete(t);
	cJSON_Delete(pod);
	CU_ASSERT_EQUAL(sbx_utf8_cut("ab\xc3\xa9", 3), 2);
	CU_ASSERT_EQUAL(sbx_utf8_cut("ab\xc3\xa9", 4), 4);
	CU_ASSERT_EQUAL(sbx_utf8_cut("ab", 10), 2);
}

/* Ready's message carries the why after the phase's words. */
static void test_status_ready_detail(void)
{
	struct sbx_status_in in = { .phase = "Failed", .bound = 1, .bound_reason = "PodCreated", .ready = 0, .ready_reason = "PodFailed", .ready_message = "the pod has failed" };
	snprintf(in.ready_detail, sizeof in.ready_detail, "container sandbox exited with code 3 (Error)");
	struct sbx_status_in copy = in; /* a copy carries the detail */
	cJSON *s = sbx_status_build(&copy, NULL, "2024-01-01T00:00:00Z");
	CU_ASSERT_STRING_EQUAL(str(s, "conditions[1].message"), "the pod has failed: container sandbox exited with code 3 (Error)");
	cJSON_Delete(s);
	in.ready_detail[0] = '\0';
	s = sbx_status_build(&in, NULL, "2024-01-01T00:00:00Z");
	CU_ASSERT_STRING_EQUAL(str(s, "conditions[1].message"), "the pod has failed");
	cJSON_Delete(s);
}

static void test_wsinit_dir(void)
{
	char dir[] = "/tmp/sbx-wsinit-XXXXXX";
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	char a[64], link[64], err[256];
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(link, sizeof link, "%s/l", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(a, 0755), 0);
	CU_ASSERT_EQUAL_FATAL(symlink(a, link), 0);
	/* As root it hands the folder to another uid; otherwise to our own (the
	 * mode path only). */
	long uid = getuid() == 0 ? 4321 : (long)getuid(), gid = getuid() == 0 ? 4322 : (long)getgid();
	int changed = -1;
	CU_ASSERT_EQUAL(sbx_wsinit_dir(a, uid, gid, &changed, err, sizeof err), 0);
	struct stat st;
	CU_ASSERT_EQUAL(stat(a, &st), 0);
	if (getuid() == 0) {
		CU_ASSERT_EQUAL(changed, 1);
		CU_ASSERT_EQUAL((long)st.st_uid, uid);
		CU_ASSERT_EQUAL((long)st.st_gid, gid);
		CU_ASSERT_EQUAL(st.st_mode & 07777, SBX_WSPREP_MODE);
	}
	/* Again: nothing more to do. */
	CU_ASSERT_EQUAL(sbx_wsinit_dir(a, uid, gid, &changed, err, sizeof err), 0);
	CU_ASSERT_EQUAL(changed, 0);
	/* Theirs but without owner rwx: only that is added. */
	CU_ASSERT_EQUAL(chmod(a, 0070), 0);
	CU_ASSERT_EQUAL(sbx_wsinit_dir(a, uid, gid, &changed, err, sizeof err), 0);
	CU_ASSERT_EQUAL(changed, 1);
	CU_ASSERT_EQUAL(stat(a, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0770);
	/* A link is never followed, a missing folder is an error. */
	CU_ASSERT_EQUAL(sbx_wsinit_dir(link, uid, gid, &changed, err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, link));
	char missing[80];
	snprintf(missing, sizeof missing, "%s/none", dir);
	CU_ASSERT_EQUAL(sbx_wsinit_dir(missing, uid, gid, &changed, err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file"));
	/* The subcommand: bad arguments are exit status 2. */
	char *bad1[] = { "workspace-init", "--uid", "0", "--gid", "1", a };
	char *bad2[] = { "workspace-init", "--uid", "1", "--gid", "1" };
	char *bad3[] = { "workspace-init", "--uid", "1x", "--gid", "1", a };
	CU_ASSERT_EQUAL(sbx_wsinit_main(6, bad1), 2);
	CU_ASSERT_EQUAL(sbx_wsinit_main(5, bad2), 2);
	CU_ASSERT_EQUAL(sbx_wsinit_main(6, bad3), 2);
	unlink(link);
	rmdir(a);
	rmdir(dir);
}

static void test_config_prepare(void)
{
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	char err[256];
	CU_ASSERT_EQUAL(cfg.prep_enabled, 1);
	CU_ASSERT_PTR_NULL(cfg.prep_image);
	const char *y = "workspace: {prepare: {enabled: false, image: reg.example/sandbox-controller:0.2.0}}\n";
	CU_ASSERT_EQUAL(sbx_config_parse(&cfg, y, strlen(y), err, sizeof err), 0);
	CU_ASSERT_EQUAL(cfg.prep_enabled, 0);
	CU_ASSERT_STRING_EQUAL(cfg.prep_image, "reg.example/sandbox-controller:0.2.0");
	static const char *const bad[] = {
		"workspace: {prepare: {enabled: yes please}}\n",
		"workspace: {prepare: {image: \"two words\"}}\n",
		"workspace: {prepare: {image: \"\"}}\n",
		"workspace: {prepare: {imgae: x}}\n",
		"workspace: {prepare: [x]}\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CU_ASSERT_EQUAL(sbx_config_parse(&cfg, bad[i], strlen(bad[i]), err, sizeof err), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "workspace.prepare"));
	}
	/* A refused config changes nothing. */
	CU_ASSERT_EQUAL(cfg.prep_enabled, 0);
	CU_ASSERT_STRING_EQUAL(cfg.prep_image, "reg.example/sandbox-controller:0.2.0");
	sbx_config_release(&cfg);
}

void register_sandbox_wsprep_tests(void)
{
	SBX_SUITE("sandbox/wsprep", { "name: pinned, covers what it prepares", test_name },
		  { "pod: pvc mode, the sandbox pod's folders, root with three capabilities", test_pod_pvc },
		  { "pod: hostPath mode, refusals", test_pod_hostpath_and_refusals },
		  { "pod: under the network floor, as sandbox pods are", test_pod_under_the_floor },
		  { "state: done, waiting, failed, foreign", test_state },
		  { "podstate: finished is Succeeded or Failed", test_pod_finished },
		  { "podstate: a pod's status in words, capped", test_pod_why },
		  { "podstate: the pod cache keeps the words' sources, cut", test_pod_why_kept_by_the_cache },
		  { "status: Ready's message carries the why", test_status_ready_detail },
		  { "wsinit: hands a folder over once, never through a link", test_wsinit_dir },
		  { "config: workspace.prepare", test_config_prepare });
}
