/* The preparation of an owner's folders (issue 21): the kubelet makes a
 * missing subPath or DirectoryOrCreate folder as root, mode 0755, so the
 * sandbox's non-root user could not write its own /workspace. Before an
 * owner's first pod in a namespace the controller runs one pod of its own per
 * (namespace, owner): it mounts exactly the folders a sandbox pod of that
 * owner mounts (the same subPaths of the claim, or the same hostPaths), runs
 * the controller's `workspace-init` (sandbox/wsinit.h) as root with only
 * CHOWN, DAC_OVERRIDE and FOWNER, and gives each folder to the configured
 * uid/gid. Sandbox pods themselves stay restricted.
 *
 * Pure: the pod's name and shape, and what its status means. The controller
 * creates it, waits for it and remembers it (the gate in
 * reconcile/wsgate.c). */
#ifndef SBX_SANDBOX_WSPREP_H
#define SBX_SANDBOX_WSPREP_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"

/* The label every preparation pod carries (value: its digest), reserved to
 * the controller like the other sandbox.dev/ labels; the admission policy
 * sandbox-controller-confinement lets the controller create a pod with root
 * and those capabilities only in this shape. */
#define SBX_LABEL_WS_INIT "sandbox.dev/workspace-init"
#define SBX_WSPREP_NAME_PREFIX "sbx-init-"
#define SBX_WSPREP_CONTAINER "workspace-init"
/* Its app.kubernetes.io/name label (a sandbox pod's is SBX_NAME). */
#define SBX_WSPREP_APP_NAME "sandbox-workspace-init"
/* The pod's activeDeadlineSeconds; a pod neither done nor failed this long
 * after its creation (plus a minute) is deleted and made again. */
#define SBX_WSPREP_DEADLINE_S 300
/* The image when the configuration names none and the controller cannot
 * read its own (the name manifests/ and hack/image.sh use). */
#define SBX_WSPREP_DEFAULT_IMAGE "sandbox-controller:" SBX_VERSION
/* Where the folders are mounted in the pod: /w/0, /w/1, ... */
#define SBX_WSPREP_MOUNT_ROOT "/w"
/* The mode workspace-init gives a folder it hands over. */
#define SBX_WSPREP_MODE 0770

/* Writes the pod's name, "sbx-init-" + 32 lowercase hex, into out (outlen
 * >= 48): the first half of SHA-256 over the namespace, the owner, the
 * workspace root (claim or host path), the subdirectories, the uid and the
 * gid, so a changed configuration prepares again. Returns 0, or -1 (nothing
 * written) when an argument is missing or too long. */
int sbx_wsprep_name(const char *ns, const char *owner, const struct sbx_config *cfg, char *out, size_t outlen);

/* The object a preparation pod is made for (a Sandbox or a warm pool): its
 * owner reference (not a controller, blocking nothing), so the pod goes with
 * it; a later one makes the pod again when it needs the folders. */
struct sbx_wsprep_for {
	const char *api_version, *kind, *name, *uid;
};

/* Returns the preparation pod of owner's folders in ns (caller frees with
 * cJSON_Delete), or NULL when owner is not a valid owner, the workspace
 * config cannot serve it, image is empty or forobj lacks a field. It lands
 * where sandbox pods land (the operator's nodeSelector, tolerations,
 * priority class, pull secrets, default runtime class); restartPolicy Never;
 * no service account token; activeDeadlineSeconds SBX_WSPREP_DEADLINE_S;
 * owned by forobj. */
cJSON *sbx_wsprep_pod(const char *ns, const char *owner, const struct sbx_config *cfg, const char *image,
		      const struct sbx_wsprep_for *forobj);

enum sbx_wsprep_state {
	SBX_WSPREP_DONE,    /* Succeeded: the folders are the uid's */
	SBX_WSPREP_WAITING, /* not finished yet */
	SBX_WSPREP_FAILED,  /* Failed: delete it and make it again */
	SBX_WSPREP_FOREIGN, /* not a preparation pod of this owner: never trusted */
};

/* What the live pod means for owner's folders in ns under cfg; why (size
 * n >= 1, always terminated) says it in words for the Sandbox (the waiting
 * or exit reason, the scheduler's message). A pod is trusted only with the
 * name, the label and the owner annotation sbx_wsprep_pod gives it. */
enum sbx_wsprep_state sbx_wsprep_state(const cJSON *pod, const char *ns, const char *owner,
				       const struct sbx_config *cfg, char *why, size_t n);

/* The trimmed copy of a preparation pod a cache keeps (caller frees, never
 * NULL): name, namespace, uid, resourceVersion, timestamps, its
 * SBX_LABEL_WS_INIT label, its owner annotation (each at most 253 bytes),
 * the phase and what sbx_wsprep_state's words read of its container. */
cJSON *sbx_wsprep_trim(const cJSON *pod);

#endif
