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
};

/* Returns the Pod as a new cJSON object (caller frees with cJSON_Delete), or
 * NULL when a parameter is missing, the spec has no image, or the owner fails
 * sbx_owner_valid() (it becomes a path, so it is checked again here). The
 * owner is spec.workspaceOwner when that is a string member:
 *   PVC mode:      one volume "workspaces" (claim cfg->pvc_name), each mount
 *                  with subPath "<owner>/<subdir>";
 *   hostPath mode: one hostPath volume "ws-<i>" per mount at
 *                  "<host_root>/<owner>/<subdir>", type DirectoryOrCreate;
 *   no owner:      one emptyDir volume "ws-<i>" per mount, nothing shared. */
cJSON *sbx_pod_build(const struct sbx_pod_params *p);

#endif
