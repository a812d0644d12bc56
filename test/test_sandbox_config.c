/* Unit tests for controller/sandbox/config: defaults, YAML schema, errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "sandbox/config.h"
#include "test_suites.h"

void register_sandbox_config_tests(void); /* called from test_sandbox_all.c */

static void assert_defaults(const struct sbx_config *c)
{
	CU_ASSERT_EQUAL(c->ws_mode, SBX_WS_PVC);
	CU_ASSERT_STRING_EQUAL(c->pvc_name, "sandbox-workspaces");
	CU_ASSERT_PTR_NULL(c->host_root);
	CU_ASSERT_PTR_NULL(c->seal_key_file);
	CU_ASSERT_EQUAL(c->key_lifetime_s, 86400);
	CU_ASSERT_EQUAL_FATAL(c->nmounts, 4);
	CU_ASSERT_STRING_EQUAL(c->mounts[0].subdir, "workspace");
	CU_ASSERT_STRING_EQUAL(c->mounts[0].path, "/workspace");
	CU_ASSERT_STRING_EQUAL(c->mounts[1].subdir, "claude");
	CU_ASSERT_STRING_EQUAL(c->mounts[1].path, "/home/agent/.claude");
	CU_ASSERT_STRING_EQUAL(c->mounts[2].subdir, "codex");
	CU_ASSERT_STRING_EQUAL(c->mounts[2].path, "/home/agent/.codex");
	CU_ASSERT_STRING_EQUAL(c->mounts[3].subdir, "gemini");
	CU_ASSERT_STRING_EQUAL(c->mounts[3].path, "/home/agent/.gemini");
}

static int parse(struct sbx_config *c, const char *yaml, char *err, size_t errlen)
{
	return sbx_config_parse(c, yaml, strlen(yaml), err, errlen);
}

static void test_config_defaults(void)
{
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	assert_defaults(&c);
	CU_ASSERT_EQUAL(parse(&c, "", err, sizeof err), 0);
	assert_defaults(&c);
	CU_ASSERT_EQUAL(parse(&c, "workspace:\nidempotency:\n", err, sizeof err), 0);
	assert_defaults(&c);
	sbx_config_release(&c);
}

static void test_config_full(void)
{
	const char *y = "workspace:\n"
			"  mode: hostPath\n"
			"  pvcName: shared-ws\n"
			"  hostPathRoot: /srv/workspaces\n"
			"  mounts:\n"
			"    - subdir: workspace\n"
			"      mountPath: /workspace\n"
			"    - {subdir: .config, mountPath: /home/agent/.config}\n"
			"idempotency:\n"
			"  keyLifetime: 90m\n"
			"seal:\n"
			"  keyFile: /etc/sandbox-controller/seal.key\n";
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL_FATAL(parse(&c, y, err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.ws_mode, SBX_WS_HOSTPATH);
	CU_ASSERT_STRING_EQUAL(c.pvc_name, "shared-ws");
	CU_ASSERT_STRING_EQUAL(c.host_root, "/srv/workspaces");
	CU_ASSERT_EQUAL(c.key_lifetime_s, 5400);
	CU_ASSERT_STRING_EQUAL(c.seal_key_file, "/etc/sandbox-controller/seal.key");
	CU_ASSERT_EQUAL_FATAL(c.nmounts, 2);
	CU_ASSERT_STRING_EQUAL(c.mounts[1].subdir, ".config");
	CU_ASSERT_STRING_EQUAL(c.mounts[1].path, "/home/agent/.config");

	/* A later parse overlays: untouched fields keep their values. */
	CU_ASSERT_EQUAL(parse(&c, "workspace: {mode: pvc}\nidempotency: {keyLifetime: 7200}\n", err,
			      sizeof err),
			0);
	CU_ASSERT_EQUAL(c.ws_mode, SBX_WS_PVC);
	CU_ASSERT_STRING_EQUAL(c.pvc_name, "shared-ws");
	CU_ASSERT_EQUAL(c.key_lifetime_s, 7200);
	CU_ASSERT_EQUAL(c.nmounts, 2);
	sbx_config_release(&c);
}

/* Parses yaml over defaults, expects failure with want in the message and
 * the defaults intact. */
static void check_error(const char *yaml, const char *want)
{
	struct sbx_config c;
	char err[512];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL(parse(&c, yaml, err, sizeof err), -1);
	if (!strstr(err, want))
		fprintf(stderr, "\n  yaml %s\n  got  %s\n  want %s\n", yaml, err, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
	CU_ASSERT(strncmp(err, "config: ", 8) == 0);
	assert_defaults(&c);
	sbx_config_release(&c);
}

static void test_config_unknown_keys(void)
{
	check_error("workspaces: {}\n", "unknown key \"workspaces\" in the top level");
	check_error("workspace: {mod: pvc}\n", "unknown key \"mod\" in workspace");
	check_error("idempotency: {keylifetime: 1h}\n",
		    "unknown key \"keylifetime\" in idempotency");
	check_error("seal: {file: /k}\n", "unknown key \"file\" in seal");
	check_error("workspace:\n  mounts:\n    - {subdir: a, mountPath: /a, readOnly: true}\n",
		    "unknown key \"readOnly\" in workspace.mounts[0]");
	check_error("- a\n- b\n", "the document must be a mapping");
	check_error("workspace: pvc\n", "workspace must be a mapping");
	check_error("workspace: {mode: [\n", "YAML");
}

static void test_config_bad_values(void)
{
	check_error("workspace: {mode: nfs}\n", "workspace.mode \"nfs\" must be pvc or hostPath");
	check_error("workspace: {mode: hostPath}\n", "hostPathRoot is required");
	check_error("workspace: {mode: hostPath, hostPathRoot: srv/ws}\n",
		    "workspace.hostPathRoot");
	check_error("workspace: {hostPathRoot: /srv/../etc}\n", "workspace.hostPathRoot");
	check_error("workspace: {pvcName: Bad_Name}\n", "workspace.pvcName \"Bad_Name\"");
	check_error("workspace: {pvcName: \"\"}\n", "workspace.pvcName must be a non-empty string");
	check_error("seal: {keyFile: 5}\n", "seal.keyFile must be a non-empty string");

	static const char *const subdirs[] = { "a/b", ".", "..", "../etc", "/abs", "a b", "x\\\\y" };
	for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
		char y[256];
		snprintf(y, sizeof y,
			 "workspace:\n  mounts:\n    - {subdir: \"%s\", mountPath: /w}\n",
			 subdirs[i]);
		check_error(y, "workspace.mounts[0].subdir");
		check_error(y, "must be one path segment");
	}
	check_error("workspace:\n  mounts:\n    - {subdir: \"\", mountPath: /w}\n",
		    "workspace.mounts[0].subdir must be a non-empty string");
	check_error("workspace:\n  mounts:\n    - {subdir: a, mountPath: w}\n",
		    "workspace.mounts[0].mountPath \"w\" must be an absolute path");
	check_error("workspace:\n  mounts:\n    - {subdir: a, mountPath: /}\n", "mountPath \"/\"");
	check_error("workspace:\n  mounts:\n    - {subdir: a, mountPath: /w/../x}\n", "mountPath");
	check_error("workspace:\n  mounts:\n    - {subdir: a, mountPath: /w/}\n", "mountPath");
	check_error("workspace:\n  mounts:\n    - {subdir: a, mountPath: /w}\n"
		    "    - {subdir: b, mountPath: /w}\n",
		    "workspace.mounts[1].mountPath \"/w\" is used twice");
	check_error("workspace:\n  mounts:\n    - {subdir: a}\n",
		    "needs both subdir and mountPath");
	check_error("workspace:\n  mounts: []\n", "must have 1..32 entries");
	check_error("workspace:\n  mounts: {subdir: a}\n", "workspace.mounts must be a list");
	check_error("workspace:\n  mounts:\n    - a\n", "workspace.mounts[0] must be a mapping");
}

static void test_config_durations(void)
{
	static const struct {
		const char *s;
		long want; /* 0 = error */
	} t[] = {
		{ "24h", 86400 },
		{ "90m", 5400 },
		{ "3600s", 3600 },
		{ "3600", 3600 },
		{ "1h30m", 5400 },
		{ "1h0m5s", 3605 },
		{ "0", 0 },
		{ "0h", 0 },
		{ "-5", 0 },
		{ "5x", 0 },
		{ "h", 0 },
		{ "", 0 },
		{ "1.5h", 0 },
		{ "24 h", 0 },
		{ "99999999999999999999", 0 },
		{ "87840h", 87840L * 3600 },
		{ "87841h", 0 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		long secs = -1;
		int rc = sbx_parse_duration(t[i].s, &secs);
		CU_ASSERT_EQUAL(rc, t[i].want ? 0 : -1);
		if (t[i].want)
			CU_ASSERT_EQUAL(secs, t[i].want);
	}
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL(parse(&c, "idempotency: {keyLifetime: 24h}\n", err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.key_lifetime_s, 86400);
	CU_ASSERT_EQUAL(parse(&c, "idempotency: {keyLifetime: 3600s}\n", err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.key_lifetime_s, 3600);
	CU_ASSERT_EQUAL(parse(&c, "idempotency: {keyLifetime: 120}\n", err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.key_lifetime_s, 120);
	CU_ASSERT_EQUAL(parse(&c, "idempotency: {keyLifetime: \"600\"}\n", err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.key_lifetime_s, 600);
	sbx_config_release(&c);
	check_error("idempotency: {keyLifetime: 0}\n",
		    "idempotency.keyLifetime must be a positive whole");
	check_error("idempotency: {keyLifetime: 1.5}\n",
		    "idempotency.keyLifetime must be a positive whole");
	check_error("idempotency: {keyLifetime: -60}\n", "idempotency.keyLifetime");
	check_error("idempotency: {keyLifetime: 1d}\n",
		    "idempotency.keyLifetime must be a positive duration");
	check_error("idempotency: {keyLifetime: true}\n", "idempotency.keyLifetime");
}

static void test_config_load_file(void)
{
	char path[] = "/tmp/sbx-config-test-XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	FILE *f = fdopen(fd, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("workspace:\n  pvcName: team-ws\n", f);
	fclose(f);
	struct sbx_config c;
	char err[512];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL(sbx_config_load(&c, path, err, sizeof err), 0);
	CU_ASSERT_STRING_EQUAL(c.pvc_name, "team-ws");

	/* Past 1 MiB the file is refused, c unchanged. */
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("workspace:\n  pvcName: other\n", f);
	for (int i = 0; i < 70000; i++)
		fputs("# padding padding\n", f);
	fclose(f);
	CU_ASSERT_EQUAL(sbx_config_load(&c, path, err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "larger than 1 MiB"));
	CU_ASSERT_STRING_EQUAL(c.pvc_name, "team-ws");
	unlink(path);
	CU_ASSERT_EQUAL(sbx_config_load(&c, path, err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot read"));
	sbx_config_release(&c);
}

/* Item 7: the pod and adoption sections: values, refusals, caps. */
static void test_config_pod_settings(void)
{
	const char *y = "pod:\n"
			"  runAsUser: 2000\n"
			"  runAsGroup: 3000\n"
			"  fsGroup: 4000\n"
			"  runtimeClasses: {allowed: [gvisor, kata], default: gvisor}\n"
			"  nodeSelector: {pool: sandboxes, example.com/zone: a}\n"
			"  tolerations:\n"
			"    - {key: dedicated, operator: Equal, value: sandbox, effect: NoSchedule}\n"
			"    - {operator: Exists, effect: NoExecute, tolerationSeconds: 60}\n"
			"  priorityClassName: sandbox-low\n"
			"  imagePullSecrets: [regcred]\n"
			"  labels: {team: platform}\n"
			"  annotations: {example.com/note: \"free text: ok\"}\n"
			"adoption:\n"
			"  allowedMutations:\n"
			"    imageDigestPinning: true\n"
			"    injectedContainers:\n"
			"      - {name: istio-proxy, image: \"docker.io/istio/proxyv2:*\", volumes: [istio-envoy]}\n"
			"      - {name: istio-init, image: docker.io/istio/proxyv2:1.22, init: true}\n"
			"    labels: [security.istio.io/tlsMode]\n"
			"    resourceDefaults: [ephemeral-storage, hugepages-2Mi, example.com/foo]\n";
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL(c.pod.run_as_user, 1000);
	CU_ASSERT_EQUAL(c.pod.run_as_group, 1000);
	CU_ASSERT_EQUAL(c.pod.fs_group, 1000);
	CU_ASSERT_EQUAL(c.pod.nruntime_allowed, 0);
	CU_ASSERT_EQUAL_FATAL(parse(&c, y, err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.pod.run_as_user, 2000);
	CU_ASSERT_EQUAL(c.pod.run_as_group, 3000);
	CU_ASSERT_EQUAL(c.pod.fs_group, 4000);
	CU_ASSERT_EQUAL(c.pod.nruntime_allowed, 2);
	CU_ASSERT_STRING_EQUAL(c.pod.runtime_default, "gvisor");
	CU_ASSERT(sbx_runtime_allowed(&c, "kata"));
	CU_ASSERT(!sbx_runtime_allowed(&c, "runc"));
	CU_ASSERT_EQUAL(cJSON_GetArraySize(c.pod.node_selector), 2);
	CU_ASSERT_EQUAL(cJSON_GetArraySize(c.pod.tolerations), 2);
	CU_ASSERT_STRING_EQUAL(c.pod.priority_class, "sandbox-low");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(c.pod.pull_secrets), 1);
	CU_ASSERT_EQUAL(c.mutations.digest_pinning, 1);
	CU_ASSERT_EQUAL_FATAL(c.mutations.ninjected, 2);
	CU_ASSERT_STRING_EQUAL(c.mutations.injected[0].name, "istio-proxy");
	CU_ASSERT_EQUAL(c.mutations.injected[0].init, 0);
	CU_ASSERT_EQUAL(c.mutations.injected[0].nvolumes, 1);
	CU_ASSERT_EQUAL(c.mutations.injected[1].init, 1);
	CU_ASSERT_EQUAL(c.mutations.nlabels, 1);
	CU_ASSERT_EQUAL_FATAL(c.mutations.nresource_defaults, 3);
	CU_ASSERT_STRING_EQUAL(c.mutations.resource_defaults[0], "ephemeral-storage");
	CU_ASSERT_STRING_EQUAL(c.mutations.resource_defaults[1], "hugepages-2Mi");
	CU_ASSERT_STRING_EQUAL(c.mutations.resource_defaults[2], "example.com/foo");
	CU_ASSERT(sbx_image_pattern_match("docker.io/istio/proxyv2:*", "docker.io/istio/proxyv2:1.2"));
	CU_ASSERT(!sbx_image_pattern_match("docker.io/istio/proxyv2:*", "docker.io/istio/other:1"));
	CU_ASSERT(sbx_image_pattern_match("a:1", "a:1"));
	CU_ASSERT(!sbx_image_pattern_match("a:1", "a:10"));
	/* A failed overlay leaves everything as it was (deep copies). */
	CU_ASSERT_EQUAL(parse(&c, "pod: {runAsUser: 0}\n", err, sizeof err), -1);
	CU_ASSERT_EQUAL(c.pod.run_as_user, 2000);
	CU_ASSERT_EQUAL(c.mutations.ninjected, 2);
	CU_ASSERT_EQUAL_FATAL(c.mutations.nresource_defaults, 3);
	CU_ASSERT_STRING_EQUAL(c.mutations.resource_defaults[2], "example.com/foo");
	/* A later overlay replaces the list; an empty one declares nothing. */
	CU_ASSERT_EQUAL(parse(&c, "adoption: {allowedMutations: {resourceDefaults: [cpu]}}\n", err, sizeof err), 0);
	CU_ASSERT_EQUAL_FATAL(c.mutations.nresource_defaults, 1);
	CU_ASSERT_STRING_EQUAL(c.mutations.resource_defaults[0], "cpu");
	CU_ASSERT_EQUAL(parse(&c, "adoption: {allowedMutations: {resourceDefaults: []}}\n", err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.mutations.nresource_defaults, 0);
	sbx_config_release(&c);
}

static void test_config_pod_refusals(void)
{
	check_error("pod: {runAsUser: 0}\n", "pod.runAsUser must be a whole number 1..2147483647");
	check_error("pod: {fsGroup: -1}\n", "pod.fsGroup");
	check_error("pod: {runAsGroup: x}\n", "pod.runAsGroup");
	check_error("pod: {privileged: true}\n", "unknown key \"privileged\" in pod");
	check_error("pod: {runtimeClasses: {allowed: [gvisor], default: kata}}\n",
		    "pod.runtimeClasses.default \"kata\" must be one of");
	check_error("pod: {runtimeClasses: {default: kata}}\n", "must be one of");
	check_error("pod: {runtimeClasses: {allowed: [Bad_Name]}}\n", "invalid entry \"Bad_Name\"");
	check_error("pod: {runtimeClasses: {permitted: [x]}}\n", "unknown key \"permitted\"");
	check_error("pod: {labels: {sandbox.dev/scope-digest: x}}\n", "is reserved to the controller");
	check_error("pod: {labels: {a.sandbox.dev/x: y}}\n", "is reserved to the controller");
	check_error("pod: {labels: {app.kubernetes.io/managed-by: me}}\n", "is reserved");
	check_error("pod: {annotations: {sandbox.dev/seal: x}}\n", "is reserved to the controller");
	check_error("pod: {labels: {team: \"not a label value\"}}\n", "invalid value");
	check_error("pod: {labels: {\"bad key!\": x}}\n", "not a valid qualified name");
	check_error("pod: {nodeSelector: [a]}\n", "pod.nodeSelector must be a mapping");
	check_error("pod: {tolerations: [{key: a, operator: Sometimes}]}\n", "Exists or Equal");
	check_error("pod: {tolerations: [{key: a, effect: Never}]}\n", "effect must be");
	check_error("pod: {tolerations: [{key: a, colour: red}]}\n", "unknown key \"colour\"");
	check_error("pod: {tolerations: [a]}\n", "must be a mapping");
	check_error("pod: {imagePullSecrets: [\"\"]}\n", "pod.imagePullSecrets has an invalid entry");
	check_error("pod: {priorityClassName: \"A B\"}\n", "pod.priorityClassName");
	check_error("adoption: {allowedMutations: {imageDigestPinning: yes please}}\n",
		    "imageDigestPinning must be true or false");
	check_error("adoption: {allowedMutations: {injectedContainers: [{name: sandbox, image: x}]}}\n",
		    "not \"sandbox\"");
	check_error("adoption: {allowedMutations: {injectedContainers: [{name: s, image: \"*\"}]}}\n",
		    "needs a container name");
	check_error("adoption: {allowedMutations: {injectedContainers: [{name: s, image: \"a*b\"}]}}\n",
		    "needs a container name");
	check_error("adoption: {allowedMutations: {injectedContainers: [{name: s, image: x, "
		    "volumes: [workspaces]}]}}\n",
		    "invalid entry \"workspaces\"");
	check_error("adoption: {allowedMutations: {injectedContainers: [{name: s, image: x, "
		    "volumes: [ws-0]}]}}\n",
		    "invalid entry \"ws-0\"");
	check_error("adoption: {allowedMutations: {resourceDefaults: [\"ephemeral storage\"]}}\n",
		    "adoption.allowedMutations.resourceDefaults: \"ephemeral storage\" is not a resource name");
	check_error("adoption: {allowedMutations: {resourceDefaults: [ephemeral_storage]}}\n",
		    "\"ephemeral_storage\" is not a resource name (cpu, memory, ephemeral-storage, hugepages-<size>");
	check_error("adoption: {allowedMutations: {resourceDefaults: [example.com/a/b]}}\n",
		    "\"example.com/a/b\" is not a resource name");
	check_error("adoption: {allowedMutations: {resourceDefaults: [hugepages-]}}\n",
		    "\"hugepages-\" is not a resource name");
	check_error("adoption: {allowedMutations: {resourceDefaults: [\"\"]}}\n", "is not a resource name");
	check_error("adoption: {allowedMutations: {resourceDefaults: ephemeral-storage}}\n",
		    "adoption.allowedMutations.resourceDefaults must be a list of strings");
	check_error("adoption: {allowedMutations: {resourceDefaults: [{name: cpu}]}}\n",
		    "adoption.allowedMutations.resourceDefaults has an invalid entry");
	check_error("adoption: {allowedMutations: {sidecars: []}}\n", "unknown key \"sidecars\"");
	check_error("adoption: {trustEverything: true}\n", "unknown key \"trustEverything\"");
	/* Caps on sizes. */
	char y[4096];
	int n = snprintf(y, sizeof y, "pod:\n  labels:\n");
	for (int i = 0; i <= SBX_CONFIG_MAX_ITEMS; i++)
		n += snprintf(y + n, sizeof y - (size_t)n, "    l%d: v\n", i);
	check_error(y, "pod.labels has more than 32 entries");
	n = snprintf(y, sizeof y, "pod:\n  imagePullSecrets:\n");
	for (int i = 0; i <= SBX_CONFIG_MAX_ITEMS; i++)
		n += snprintf(y + n, sizeof y - (size_t)n, "    - s%d\n", i);
	check_error(y, "has more than 32 entries");
	n = snprintf(y, sizeof y, "adoption:\n  allowedMutations:\n    resourceDefaults:\n");
	for (int i = 0; i <= SBX_CONFIG_MAX_ITEMS; i++)
		n += snprintf(y + n, sizeof y - (size_t)n, "      - example.com/r%d\n", i);
	check_error(y, "adoption.allowedMutations.resourceDefaults has more than 32 entries");
}

/* The shipped manifest documents every key with its default: it must load
 * and equal the defaults. */
static void test_config_shipped_manifest(void)
{
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	int rc = sbx_config_load(&c, SBX_TEST_DATA "/../../manifests/manager/config.yaml", err, sizeof err);
	if (rc)
		fprintf(stderr, "\n  %s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL(c.pod.run_as_user, 1000);
	CU_ASSERT_EQUAL(c.pod.nruntime_allowed, 0);
	CU_ASSERT_EQUAL(c.mutations.digest_pinning, 0);
	CU_ASSERT_EQUAL(c.mutations.ninjected, 0);
	CU_ASSERT_EQUAL(c.mutations.nresource_defaults, 0);
	CU_ASSERT_STRING_EQUAL(c.seal_key_file, "/var/run/sandbox-controller/seal/key");
	CU_ASSERT_EQUAL(c.ask_every_name_first, 0);
	sbx_config_release(&c);
}

/* admission.askEveryNameFirst: off by default (contract section 2a: every
 * owner as the authorizer answers for its name), a boolean. */
static void test_config_admission(void)
{
	struct sbx_config c;
	char err[256];
	sbx_config_init(&c);
	CU_ASSERT_EQUAL(c.ask_every_name_first, 0);
	CU_ASSERT_EQUAL(parse(&c, "admission: {askEveryNameFirst: true}\n", err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.ask_every_name_first, 1);
	CU_ASSERT_EQUAL(parse(&c, "admission:\n  askEveryNameFirst: false\n", err, sizeof err), 0);
	CU_ASSERT_EQUAL(c.ask_every_name_first, 0);
	sbx_config_release(&c);
	check_error("admission: {askEveryNameFirst: yes please}\n", "admission.askEveryNameFirst must be true or false");
	check_error("admission: {askEveryOwnerFirst: true}\n", "unknown key \"askEveryOwnerFirst\" in admission");
	check_error("admission: true\n", "admission must be a mapping");
}

void register_sandbox_config_tests(void)
{
	SBX_SUITE("sandbox/config", { "defaults", test_config_defaults },
		  { "pod and adoption settings", test_config_pod_settings },
		  { "pod and adoption refusals", test_config_pod_refusals },
		  { "shipped manifest", test_config_shipped_manifest },
		  { "full YAML", test_config_full }, { "unknown keys", test_config_unknown_keys },
		  { "bad values", test_config_bad_values }, { "durations", test_config_durations },
		  { "load from file", test_config_load_file }, { "admission settings", test_config_admission });
}
