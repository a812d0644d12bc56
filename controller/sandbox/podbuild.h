/* Builds the Pod of a claim (contract section 4). Everything reserved
 * (sandbox.dev/ labels and annotations) comes from the arguments, never from
 * the Sandbox's own metadata, and only name/value of env entries and the
 * resources object are taken from the spec. */
#ifndef SBX_SANDBOX_PODBUILD_H
#define SBX_SANDBOX_PODBUILD_H

#include <cjson/cJSON.h>

#include "sandbox/config.h"
#include "sandbox/scope.h"

/* Reserved label and annotation names, and the fixed labels. */
#define SBX_LABEL_DIGEST "sandbox.dev/scope-digest"
#define SBX_ANN_OWNER "sandbox.dev/workspace-owner"
#define SBX_ANN_FINGERPRINT "sandbox.dev/spec-fingerprint"
#define SBX_ANN_CLAIMED_AT "sandbox.dev/claimed-at"
#define SBX_ANN_SEAL "sandbox.dev/seal"
/* On the pod of a Sandbox naming allow profiles (sandbox/netprofile.h): the
 * label the profiles' NetworkPolicy selects (the set's hash) and the
 * annotation naming them (sbx_profiles_set). */
#define SBX_LABEL_NETPROFILES "sandbox.dev/network-profiles"
#define SBX_ANN_NETPROFILES "sandbox.dev/network-profiles"
/* On a pod whose name is not its claim name (a warm pod bound to a scope):
 * the claim name sbx-<digest>[-<n>] of its generation, covered by the seal
 * (sbx_seal_pod_name). */
#define SBX_ANN_CLAIM "sandbox.dev/claim"
#define SBX_LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define SBX_MANAGED_BY "sandbox-controller"
#define SBX_LABEL_NAME "app.kubernetes.io/name"
#define SBX_NAME "sandbox"
/* The single container's name, and the PVC volume's name. */
#define SBX_CONTAINER "sandbox"
#define SBX_PVC_VOLUME "workspaces"

struct sbx_pod_params {
	const char *ns;
	const char *pod_name;
	const char *sandbox_name; /* the creating Sandbox: the controller ownerReference */
	const char *sandbox_uid;
	const cJSON *spec; /* the Sandbox's stored spec (validated) */
	const struct sbx_scope *scope;
	const char *claimed_at; /* RFC 3339 */
	const char *seal;	/* 64 hex */
	const struct sbx_config *cfg;
	const char *claim; /* the claim name when it is not pod_name (SBX_ANN_CLAIM); NULL */
};

/* Decides the pod's runtime class: spec.runtimeClassName when it is in the
 * configured allow-list, or the configured default when the spec names none
 * (so a tenant cannot opt out of gVisor or Kata). Sets *out (borrowed from
 * spec or cfg; NULL = no class) and returns 0, or returns -1 with a message
 * for the Sandbox (msg may be NULL when msglen is 0) when the spec names a
 * class that is not allowed. */
int sbx_pod_runtime_class(const cJSON *spec, const struct sbx_config *cfg, const char **out,
			  char *msg, size_t msglen);

/* Returns the Pod as a new cJSON object (caller frees with cJSON_Delete), or
 * NULL when a parameter is missing, the spec has no image, names a runtime
 * class that is not allowed (sbx_pod_runtime_class), or the owner fails
 * sbx_owner_valid() (it becomes a path, so it is checked again here). The
 * owner is spec.workspaceOwner when that is a string member:
 *   PVC mode:      one volume "workspaces" (claim cfg->pvc_name), each mount
 *                  with subPath "<owner>/<subdir>";
 *   hostPath mode: one hostPath volume "ws-<i>" per mount at
 *                  "<host_root>/<namespace>/<owner>/<subdir>", type
 *                  DirectoryOrCreate (owners of two namespaces never share);
 *   no owner:      one emptyDir volume "ws-<i>" per mount, nothing shared.
 * Hardened (contract section 4): pod securityContext runAsNonRoot with the
 * configured uid/gid/fsGroup and seccomp RuntimeDefault; the container drops
 * ALL capabilities, allowPrivilegeEscalation false; no service account token,
 * no service links; the operator's nodeSelector, tolerations,
 * priorityClassName, imagePullSecrets, labels and annotations from cfg->pod. */
cJSON *sbx_pod_build(const struct sbx_pod_params *p);

/* The parts of sbx_pod_build another builder of the controller's pods shares
 * (sandbox/wsprep.h). */
/* Returns 1 iff cfg can be turned into volumes for owner (NULL: none). */
int sbx_pod_config_usable(const struct sbx_config *cfg, const char *owner);
/* Adds owner's workspace volumes (sbx_pod_build's) to pod spec ps and their
 * mounts to container c: at the configured mount paths, or with mount_root
 * at "<mount_root>/<i>" for the i-th configured mount. owner and cfg must
 * have passed sbx_owner_valid and sbx_pod_config_usable. */
void sbx_pod_add_workspace(cJSON *ps, cJSON *c, const struct sbx_config *cfg, const char *ns, const char *owner,
			   const char *mount_root);
/* A container of the controller's own image for a pod it runs for itself
 * (sandbox/wsprep.h, sandbox/netprobe.h): named name, running
 * "/sandbox-controller <subcommand>" (*cmd: the command, for its arguments),
 * requests of 10m CPU and 16Mi, limits of 100m and mem_limit, a failure's
 * stderr as its termination message, no privilege escalation, a read-only
 * root file system (*sc: its securityContext, for the rest). */
cJSON *sbx_pod_tool_container(const char *name, const char *image, const char *subcommand, const char *mem_limit,
			      cJSON **cmd, cJSON **sc);
/* Adds the operator's settings (labels and annotations to pod's metadata;
 * nodeSelector, tolerations, priorityClassName, imagePullSecrets to pod spec
 * ps), as validated when the config was loaded. */
void sbx_pod_add_operator_settings(cJSON *pod, cJSON *ps, const struct sbx_pod_settings *s);

#endif
